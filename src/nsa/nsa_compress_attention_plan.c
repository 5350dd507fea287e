/* Shared planning of NsaCompressAttention and its grad. */
#include <string.h>

#include "f64.h"
#include "nsa_cattn_plan.h"
#include "nsa_select_pack.h"

spa_status spa_nsca_check_shapes(const spa_tensor *q, const spa_tensor *k, const spa_tensor *v,
                                 const spa_tensor *mask, const spa_int_array *sq,
                                 const spa_int_array *scmp, int64_t head_num, const char *layout,
                                 int64_t sparse_mode, int64_t l, int64_t st, int64_t ls,
                                 int64_t kc, spa_nsca_shape *sh)
{
    memset(sh, 0, sizeof *sh);
    SPA_REQUIRE(spa_layout_is_tnd(layout));
    SPA_REQUIRE(sparse_mode >= 0 && sparse_mode <= 2);
    SPA_REQUIRE(st >= 1);
    SPA_REQUIRE(l >= st);
    SPA_TRY(spa_tensor_check(q, 3));
    SPA_TRY(spa_tensor_check(k, 3));
    SPA_TRY(spa_tensor_check(v, 3));
    SPA_REQUIRE(spa_is_float_dtype(q->dtype) /* a float dtype, not one this build left out (DTYPES) */);
    SPA_REQUIRE(k->dtype == q->dtype);
    SPA_REQUIRE(v->dtype == q->dtype);
    SPA_REQUIRE(q->dtype != SPA_FLOAT64 || SPA_HAVE_F64);
    if (mask != NULL) {
        SPA_TRY(spa_tensor_check(mask, 2));
        SPA_REQUIRE(mask->dtype == SPA_BOOL || mask->dtype == SPA_UINT8);
    }
    const int64_t t1 = q->dims[0], n1 = q->dims[1], d = q->dims[2];
    const int64_t t2 = k->dims[0], n2 = k->dims[1], dv = v->dims[2];
    SPA_REQUIRE(n2 >= 1);
    SPA_REQUIRE(n1 >= 1);
    SPA_REQUIRE(n1 % n2 == 0);
    SPA_REQUIRE(head_num == n1);
    SPA_REQUIRE(d >= 1);
    SPA_REQUIRE(d <= 768);
    SPA_REQUIRE(dv >= 1);
    SPA_REQUIRE(dv <= 768);
    SPA_REQUIRE(k->dims[2] == d);
    SPA_REQUIRE(v->dims[0] == t2);
    SPA_REQUIRE(v->dims[1] == n2);
    SPA_TRY(spa_seq_check_size(sq));
    SPA_TRY(spa_seq_check_size(scmp));
    SPA_REQUIRE(sq->size == scmp->size);
    sh->t1 = t1, sh->t2 = t2, sh->n1 = n1, sh->n2 = n2, sh->g = n1 / n2;
    sh->d = d, sh->dv = dv;
    sh->dp = (d + 15) / 16 * 16;
    sh->dvp = (dv + 15) / 16 * 16;
    sh->l = l, sh->st = st, sh->ls = ls, sh->kc = kc;
    sh->msel = ls >= st ? ls / st : 1; /* l' is checked by the forward */
    sh->nn = l / st;
    sh->batches = (int64_t)sq->size;
    sh->hc = sh->g < 32 ? sh->g : 32;
    sh->tq = 32 / sh->hc;
    sh->gp = spa_nsas_lanes(sh->tq * sh->hc);
    sh->causal = sparse_mode == 2;
    sh->has_mask = mask != NULL;
    return SPA_OK;
}

spa_status spa_nsca_check_seq(const spa_tensor *mask, const spa_int_array *sq,
                              const spa_int_array *scmp, int64_t *sq_copy, int64_t *scmp_copy,
                              spa_nsca_shape *sh)
{
    int64_t tq, tc;
    SPA_TRY(spa_seq_check_copy(sq, 0, &tq, sq_copy));
    SPA_TRY(spa_seq_check_copy(scmp, 0, &tc, scmp_copy));
    SPA_REQUIRE(tq == sh->t1);
    SPA_REQUIRE(tc <= sh->t2);
    const int64_t *a = sq_copy != NULL ? sq_copy : sq->data;
    const int64_t *c = scmp_copy != NULL ? scmp_copy : scmp->data;
    int64_t max_sq = 0, max_cmp = 0, rows = 0, pq = 0, pc = 0;
    for (int64_t b = 0; b < sh->batches; b++) {
        const int64_t lq = a[b] - pq, lc = c[b] - pc;
        pq = a[b], pc = c[b];
        max_sq = lq > max_sq ? lq : max_sq;
        max_cmp = lc > max_cmp ? lc : max_cmp;
        rows += spa_nsca_rows16(lc); /* each <= T2, + 15: no overflow */
    }
    sh->max_sq = max_sq;
    sh->max_cmp = max_cmp;
    sh->max_sel = (max_cmp + sh->msel - 1) / sh->msel;
    sh->cmp_total = tc;
    sh->kv_rows = rows;
    if (mask != NULL) {
        SPA_REQUIRE(mask->dims[0] >= max_sq);
        SPA_REQUIRE(mask->dims[1] >= max_cmp);
    }
    return SPA_OK;
}

void spa_nsca_trusted_take(spa_ws *ws, const spa_nsca_shape *sh, spa_nsca_trusted *tr)
{
    const uint64_t batches = (uint64_t)sh->batches;
    tr->sq = spa_ws_take(ws, batches, sizeof(int64_t));
    tr->scmp = spa_ws_take(ws, batches, sizeof(int64_t));
    tr->kend = spa_ws_take(ws, batches, sizeof(int64_t));
    /* max_sq <= T1 and max_cmp, max_sel <= T2: products bounded by the masks'
     * element counts, which spa_tensor_check bounded */
    tr->mask = sh->has_mask ? spa_ws_take(ws, (uint64_t)sh->max_sq * (uint64_t)sh->max_cmp, 1) : NULL;
    tr->tmask = sh->has_tmask ? spa_ws_take(ws, (uint64_t)sh->max_sq * (uint64_t)sh->max_sel, 1) : NULL;
    tr->sqa = (spa_int_array){tr->sq, batches};
    tr->scmpa = (spa_int_array){tr->scmp, batches};
}

/* rows x cols of a checked 2-D BOOL / UINT8 mask into dst as 0 / 1, each
 * element read once. */
static void copy_mask(const spa_tensor *m, int64_t rows, int64_t cols, uint8_t *dst)
{
    const volatile uint8_t *src = m->data;
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++)
            dst[i * cols + j] = src[i * m->strides[0] + j * m->strides[1]] != 0;
}

spa_status spa_nsca_trusted_fill(const spa_tensor *mask, const spa_tensor *tmask,
                                 const spa_int_array *sq, const spa_int_array *scmp,
                                 const spa_nsca_shape *sh, spa_nsca_trusted *tr)
{
    spa_nsca_shape again = *sh;
    SPA_TRY(spa_nsca_check_seq(sh->has_mask ? mask : NULL, sq, scmp, tr->sq, tr->scmp, &again));
    /* the workspace and the masks' slices were sized from phase 1's reading */
    SPA_REQUIRE(again.max_sq == sh->max_sq && again.max_cmp == sh->max_cmp &&
                again.kv_rows == sh->kv_rows);
    int64_t rows = 0, prev = 0;
    for (int64_t b = 0; b < sh->batches; b++) {
        rows += spa_nsca_rows16(tr->scmp[b] - prev);
        prev = tr->scmp[b];
        tr->kend[b] = rows;
    }
    if (sh->has_mask)
        copy_mask(mask, sh->max_sq, sh->max_cmp, tr->mask);
    if (sh->has_tmask)
        copy_mask(tmask, sh->max_sq, sh->max_sel, tr->tmask);
    return SPA_OK;
}

/* The compressed rows as selected attention's packing sees them: blocks of
 * 16 rows, the lengths those of the compressed keys. */
static spa_nsas_shape pack_shape(const spa_nsca_shape *sh)
{
    spa_nsas_shape p;
    memset(&p, 0, sizeof p);
    p.t1 = sh->t1, p.t2 = sh->t2, p.n1 = sh->n1, p.n2 = sh->n2, p.g = sh->g;
    p.d = sh->d, p.dv = sh->dv, p.dp = sh->dp, p.dvp = sh->dvp;
    p.bs = 16;
    p.kc = 1;
    p.batches = sh->batches;
    p.kv_total = sh->cmp_total;
    p.kv_rows = sh->kv_rows;
    p.aligned = sh->kv_rows == sh->cmp_total;
    return p;
}

uint64_t spa_nsca_pack_floats(const spa_tensor *t, const spa_nsca_shape *sh)
{
    const spa_nsas_shape p = pack_shape(sh);
    return spa_nsas_pack_floats(t, &p);
}

/* The compressed rows' trusted arrays as selected attention's packing reads
 * them. */
static spa_nsas_trusted pack_trusted(const spa_nsca_trusted *tr)
{
    spa_nsas_trusted t;
    memset(&t, 0, sizeof t);
    t.sq = tr->sq, t.skv = tr->scmp, t.kend = tr->kend;
    t.sqa = tr->sqa, t.skva = tr->scmpa;
    return t;
}

void spa_nsca_attach_head(spa_nsca_args *a, const spa_nsca_shape *sh,
                          const spa_nsca_trusted *tr, const spa_tensor *k, const spa_tensor *v,
                          float *kpack, float *vpack, int64_t h2, bool pairs, const spa_runner *runner)
{
    const spa_nsas_shape p = pack_shape(sh);
    const spa_nsas_trusted t = pack_trusted(tr);
    spa_nsas_args s; /* the rows the packing does not make stay NULL */
    memset(&s, 0, sizeof s);
    if (pairs)
        spa_nsas_attach_head_bf16(&s, &p, &t, k, v, kpack, vpack, h2, runner);
    else
        spa_nsas_attach_head(&s, &p, &t, k, v, kpack, vpack, h2, runner);
    a->kf = s.kf, a->kfr = s.kfr, a->vf = s.vf, a->vfr = s.vfr;
    a->kb = s.kb, a->kbr = s.kbr, a->vp = s.vp, a->vpr = s.vpr;
}

void spa_nsca_args_fill(spa_nsca_args *out, const spa_nsca_shape *sh, const spa_nsca_trusted *tr,
                        const spa_tensor *q, const spa_tensor *k, const spa_tensor *v,
                        const spa_tensor *o, const spa_tensor *mx, const spa_tensor *sm,
                        const spa_tensor *topk, const spa_tensor *dy, const spa_tensor *dq,
                        double scale)
{
    spa_nsca_args *const ap = out;
#define a (*ap)
    memset(ap, 0, sizeof *ap);
    a.q = q->data, a.qs0 = q->strides[0], a.qs1 = q->strides[1], a.qs2 = q->strides[2];
    a.k = k->data, a.ks0 = k->strides[0], a.ks1 = k->strides[1], a.ks2 = k->strides[2];
    a.v = v->data, a.vs0 = v->strides[0], a.vs1 = v->strides[1], a.vs2 = v->strides[2];
    a.o = o->data, a.os0 = o->strides[0], a.os1 = o->strides[1], a.os2 = o->strides[2];
    a.mx = mx->data, a.ms0 = mx->strides[0], a.ms1 = mx->strides[1], a.ms2 = mx->strides[2];
    a.sm = sm->data, a.ss0 = sm->strides[0], a.ss1 = sm->strides[1], a.ss2 = sm->strides[2];
    if (topk != NULL) {
        a.topk = topk->data;
        a.ts0 = topk->strides[0], a.ts1 = topk->strides[1], a.ts2 = topk->strides[2];
    }
    if (dy != NULL) {
        a.dy = dy->data;
        a.dys0 = dy->strides[0], a.dys1 = dy->strides[1], a.dys2 = dy->strides[2];
    }
    if (dq != NULL) {
        a.dq = dq->data;
        a.dqs0 = dq->strides[0], a.dqs1 = dq->strides[1], a.dqs2 = dq->strides[2];
    }
    a.mask = tr->mask, a.mask_cols = sh->max_cmp;
    a.tmask = tr->tmask, a.tmask_cols = sh->max_sel;
    a.g = sh->g, a.hc = sh->hc, a.tq = sh->tq, a.gp = sh->gp;
    a.d = sh->d, a.dv = sh->dv, a.dp = sh->dp, a.dvp = sh->dvp;
    a.cmp_block = sh->l, a.cmp_stride = sh->st, a.msel = sh->msel, a.nn = sh->nn;
    a.kc = sh->kc;
    a.rows_max = spa_nsca_rows16(sh->max_cmp);
    a.sel_max = sh->max_sel;
    a.n1 = sh->n1;
    a.causal = sh->causal;
    a.scale = (float)scale;
    a.scale64 = scale;
#undef a
}
