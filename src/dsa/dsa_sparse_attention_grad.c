/* SparseFlashAttentionGrad, native (spattn/dsa.h): the gradient of DSA
 * sparse attention, on selected attention's generated grad kernel.
 *
 * A unit is one (query token, key head) with all G heads of the group. It
 * gathers the tokens its slots select and it sees as the forward does
 * (dsa_sfa_gather.h: key rows with their rope part after them, widened,
 * and value rows unless value is the key), with the token of each row,
 * and runs the grad kernel in its gathered mode on them: dq of the unit,
 * and dK / dV of each gathered row into the unit's own f32 rows (double
 * for FLOAT64). The query and its rope part are packed per token as one
 * row [D | Dr], and dq unpacked the same way.
 *
 * Step 1 runs token ranges as parallel blocks. A range adds each of its
 * units' gathered dK / dV rows, in token order and then row order, into
 * its own partial, which covers the key rows of the batches its tokens
 * lie in. Step 2 gives each output row the sum of the partials covering
 * it, in range order, scales dK and rounds once (dk[:Dv] += dv there when
 * value is the key and no dvalue is asked for). The ranges depend on the
 * shapes and lengths only, so the results do not depend on the runner; no
 * atomics.
 *
 * What the kernels read that the caller could change is a copy made in
 * phase 2 (the lengths, the gathered rows); the indices are read once per
 * use and used only if still valid (dsa_sfa_gather.h); query,
 * attention_out, its grad and the statistics are read as values only. */
#include <string.h>

#include "attn_plan.h"
#include "dsa_grad_rows.h"
#include "dsa_kv.h"
#include "dsa_sfa_args.h"
#include "dsa_sfa_gather.h"
#include "f64.h"
#include "half.h"
#include "internal.h"
#include "nsa_cache_rows.h"
#include "nsa_select_f64.h"
#include "nsa_select_kernel.h"
#include "nsa_select_plan.h"
#include "spa_kernels.h"
#include "spattn/dsa.h"

#define SPA_FLOAT64_DSA_SPARSE_ATTENTION_GRAD SPA_FLOAT64_NSA_SELECT_GRAD

/* The call's arguments as phase 1 took them: all phase 2 reads of it. */
typedef struct dssg_exec {
    spa_exec_head head;
    spa_dsa_sfa_in in;
    spa_tensor dy, mx, sm, dq, dqr, dk, dkr, dv;
    int32_t has_dqr, has_dkr, has_dv;
} dssg_exec;
_Static_assert(sizeof(dssg_exec) <= SPA_EXECUTOR_BYTES, "executor too small");

/* A range's scratch, 64-byte aligned parts after the kernel's own: the
 * packed query and dq [G][D + Dr] (the query's dtype), the gathered key
 * rows [rows][dp] and value rows [rows][dvp] (none when value is in key),
 * their dK and dV [rows][pk], [rows][pv], the virtual slots [vb] and each
 * row's token [rows]. */
typedef struct dssg_layout {
    uint64_t q, dq, kg, vg, gk, gv, slots, pos, bytes;
} dssg_layout;

/* What the arguments and lengths determine (derived again in phase 2). */
typedef struct dssg_plan {
    spa_dsa_sfa_shape sh;
    spa_dsa_ranges rg; /* partial rows of pk + pv elements: the key part, then the value part */
    int64_t pk, pv;    /* dp, dvp (f64: D + Dr, Dv) */
    int64_t vb;        /* a unit's virtual blocks: vb * 16 gathered rows at most */
    uint64_t es;       /* the kernels' element: 4 (float) or 8 (double) */
    dssg_layout lay;
} dssg_plan;

static bool is_f64(const spa_dsa_sfa_shape *sh)
{
    return sh->dtype == SPA_FLOAT64;
}

/* x: a float output of dims like `like` (n: its last dim instead, -1 to keep it). */
static spa_status check_out(const spa_tensor *x, const spa_tensor *like, int64_t n, int32_t dt)
{
    SPA_TRY(spa_tensor_check_output(x, like->rank));
    SPA_REQUIRE(x->dtype == dt /* gradient outputs: the dtype of query */);
    int64_t dims[SPA_MAX_RANK];
    for (int32_t i = 0; i < like->rank; i++)
        dims[i] = like->dims[i];
    if (n >= 0)
        dims[like->rank - 1] = n;
    SPA_REQUIRE(spa_tensor_dims_are(x, like->rank, dims) /* gradient outputs: the dims of their input */);
    return SPA_OK;
}

/* The rules that read no array contents. */
static spa_status check_args(const dssg_exec *e, spa_dsa_sfa_shape *sh)
{
    SPA_TRY(spa_dsa_sfa_check(&e->in, false, sh));
    const int32_t dt = sh->dtype;
    SPA_REQUIRE(dt != SPA_FLOAT64 || SPA_FLOAT64_DSA_SPARSE_ATTENTION_GRAD);
    SPA_TRY(spa_tensor_check(&e->dy, 3));
    SPA_REQUIRE(e->dy.dtype == dt /* attention_out_grad: the dtype of query */);
    const int64_t od[3] = {sh->t, sh->n1, sh->dv};
    SPA_REQUIRE(spa_tensor_dims_are(&e->dy, 3, od) /* attention_out_grad: [T, N1, Dv] */);
    SPA_TRY(spa_dsa_sfa_check_stat(&e->mx, sh, false));
    SPA_TRY(spa_dsa_sfa_check_stat(&e->sm, sh, false));
    SPA_TRY(check_out(&e->dq, &e->in.q, -1, dt));
    if (e->has_dqr) {
        SPA_REQUIRE(e->in.has_rope /* dquery_rope_out: only with query_rope */);
        SPA_TRY(check_out(&e->dqr, &e->in.qr, -1, dt));
    }
    SPA_TRY(check_out(&e->dk, &e->in.k, -1, dt));
    if (e->has_dkr) {
        SPA_REQUIRE(e->in.has_rope /* dkey_rope_out: only with key_rope */);
        SPA_TRY(check_out(&e->dkr, &e->in.kr, -1, dt));
    }
    if (e->has_dv)
        SPA_TRY(check_out(&e->dv, &e->in.v, -1, dt));
    else
        SPA_REQUIRE(sh->v_in_k /* dvalue_out: NULL only when value is key or a view of its first Dv elements */);
    sh->gu = sh->g, sh->groups = 1;
    return SPA_OK;
}

/* The lengths: the trusted copies sq / kv, or NULL (phase 1) for the
 * caller's checked arrays. */
static spa_dsa_lens lens_of(const dssg_exec *e, const spa_dsa_sfa_shape *sh, const int64_t *sq, const int64_t *kv)
{
    const spa_dsa_lens l = {sq, kv, e->in.has_sq ? &e->in.sq : NULL, e->in.has_skv ? &e->in.skv : NULL,
                            sh->batches, sh->t, sh->kv.page_size};
    return l;
}

static uint64_t round64(uint64_t x)
{
    return (x + 63u) / 64u * 64u;
}

/* The plan of p->sh (checked, set by the caller; every other field is
 * set here, no copy of the shape on the stack). */
static void make_plan(const dssg_exec *e, const int64_t *sq, const int64_t *kv, dssg_plan *p)
{
    const spa_dsa_sfa_shape *sh = &p->sh;
    const bool f64 = is_f64(sh);
    p->es = f64 ? 8u : 4u;
    p->pk = f64 ? sh->dq : sh->dp, p->pv = f64 ? sh->dv : sh->dvp;
    p->vb = spa_dsa_sfa_vblocks(sh, sh->kc);
    const spa_dsa_lens l = lens_of(e, sh, sq, kv);
    const float work = (float)sh->t * (float)sh->g * (float)sh->kc * (float)sh->sbs *
                       (float)(3 * sh->dp + 2 * sh->dvp);
    spa_dsa_ranges_plan(&l, work, p->pk + p->pv, p->es, &p->rg);
    /* the range's scratch; dims bounded (dp, dvp <= 768, G <= 128, rows
     * <= 2^20 + 16): no overflow */
    const uint64_t gp = (uint64_t)spa_nsas_lanes(sh->g), hc = (uint64_t)(sh->g < 32 ? sh->g : 32);
    const uint64_t rows = (uint64_t)p->vb * SPA_DSA_SFA_VB, es = p->es;
    uint64_t kernel;
    if (f64)
        kernel = 8u * (uint64_t)SPA_NSAS_F64_GRAD_SCRATCH((uint64_t)sh->g, (uint64_t)sh->dq, (uint64_t)sh->dv,
                                                         (uint64_t)p->vb, (uint64_t)SPA_DSA_SFA_VB);
    else {
        const uint64_t tk = (uint64_t)(sh->dtype == SPA_FLOAT16    ? SPA_NSASG_TK_F16
                                       : sh->dtype == SPA_BFLOAT16 ? SPA_NSASG_TK_BF16
                                                                   : SPA_NSASG_TK_F32);
        const uint64_t dp = (uint64_t)sh->dp, dvp = (uint64_t)sh->dvp;
        /* qt, dqt [dp][gp]; qn [hc][dp]; dyt [dvp][gp]; dyn [hc][dvp]; P, dS [tk][gp]; 3 [gp] */
        kernel = 4u * (2u * dp * gp + hc * dp + dvp * gp + hc * dvp + 2u * tk * gp + 3u * gp);
    }
    dssg_layout *y = &p->lay;
    y->q = round64(kernel);
    y->dq = y->q + round64((uint64_t)(sh->g * sh->dq) * spa_dtype_size(sh->dtype));
    y->kg = y->dq + (y->dq - y->q);
    y->vg = y->kg + round64(rows * (uint64_t)sh->dp * es);
    y->gk = y->vg + (sh->v_in_k ? 0u : round64(rows * (uint64_t)sh->dvp * es));
    y->gv = y->gk + round64(rows * (uint64_t)p->pk * es);
    y->slots = y->gv + round64(rows * (uint64_t)p->pv * es);
    y->pos = y->slots + round64(4u * (uint64_t)p->vb);
    y->bytes = y->pos + round64(8u * rows);
}

static void carve(spa_ws *ws, const dssg_plan *p, spa_dsa_grad_slices *s)
{
    spa_dsa_grad_carve(ws, sizeof(dssg_exec), p->sh.batches, &p->rg, p->lay.bytes, s);
}

static uint64_t planned_bytes(const dssg_plan *p)
{
    spa_ws ws;
    spa_dsa_grad_slices s;
    spa_ws_plan(&ws);
    carve(&ws, p, &s);
    return ws.overflow ? 0 : spa_ws_planned_bytes(&ws);
}

static spa_status phase1(const spa_tensor *query, const spa_tensor *query_rope, const spa_tensor *key,
                         const spa_tensor *key_rope, const spa_tensor *value, const spa_tensor *sparse_indices,
                         const spa_int_array *actual_seq_q_len, const spa_int_array *actual_seq_kv_len,
                         const spa_tensor *attention_out, const spa_tensor *attention_out_grad,
                         const spa_tensor *softmax_max, const spa_tensor *softmax_sum, double scale_value,
                         int64_t sparse_block_size, int64_t sparse_mode, const spa_tensor *dquery_out,
                         const spa_tensor *dquery_rope_out, const spa_tensor *dkey_out,
                         const spa_tensor *dkey_rope_out, const spa_tensor *dvalue_out, uint64_t *workspace_size,
                         spa_executor *executor)
{
    if (query == NULL || key == NULL || value == NULL || sparse_indices == NULL || attention_out == NULL ||
        attention_out_grad == NULL || softmax_max == NULL || softmax_sum == NULL || dquery_out == NULL ||
        dkey_out == NULL || workspace_size == NULL || executor == NULL)
        return SPA_ERR_NULLPTR;
    if (key->rank == 3 && actual_seq_kv_len == NULL)
        return SPA_ERR_NULLPTR; /* a TND key has no lengths of its own */
    SPA_REQUIRE((query_rope == NULL) == (key_rope == NULL) /* query_rope and key_rope: both or neither */);
    dssg_exec e;
    memset(&e, 0, sizeof e);
    e.in.q = *query, e.in.k = *key, e.in.v = *value, e.in.idx = *sparse_indices, e.in.o = *attention_out;
    if (query_rope != NULL)
        e.in.qr = *query_rope, e.in.kr = *key_rope, e.in.has_rope = 1;
    if (actual_seq_q_len != NULL)
        e.in.sq = *actual_seq_q_len, e.in.has_sq = 1;
    if (actual_seq_kv_len != NULL)
        e.in.skv = *actual_seq_kv_len, e.in.has_skv = 1;
    e.in.scale = scale_value, e.in.sbs = sparse_block_size, e.in.mode = sparse_mode;
    e.dy = *attention_out_grad, e.mx = *softmax_max, e.sm = *softmax_sum;
    e.dq = *dquery_out, e.dk = *dkey_out;
    if (dquery_rope_out != NULL)
        e.dqr = *dquery_rope_out, e.has_dqr = 1;
    if (dkey_rope_out != NULL)
        e.dkr = *dkey_rope_out, e.has_dkr = 1;
    if (dvalue_out != NULL)
        e.dv = *dvalue_out, e.has_dv = 1;
    dssg_plan p;
    SPA_TRY(check_args(&e, &p.sh));
    SPA_TRY(spa_dsa_sfa_check_seq(&e.in, &p.sh, NULL, NULL, NULL));
    make_plan(&e, NULL, NULL, &p);
    e.head.ws_size = planned_bytes(&p);
    SPA_REQUIRE(e.head.ws_size > 0);
    SPA_TRY(spa_dsa_sfa_check_indices(&e.in, &p.sh, NULL, NULL)); /* last: its cost grows with T * K */
    *workspace_size = e.head.ws_size;
    spa_exec_seal(executor, &e, sizeof e, SPA_OP_DSA_SPARSE_ATTENTION_GRAD);
    return SPA_OK;
}

typedef struct dssg_run {
    const dssg_exec *e;
    const dssg_plan *p;
    spa_dsa_grad_slices s;
    spa_dsa_partials part;
    int64_t n; /* the key head being run */
} dssg_run;

/* Element offset of tensor x at (i, j, k) as a pointer. */
static void *at3(const spa_tensor *x, int64_t i, int64_t j, int64_t k)
{
    return (unsigned char *)x->data +
           (uint64_t)(i * x->strides[0] + j * x->strides[1] + k * x->strides[2]) * spa_dtype_size(x->dtype);
}

/* n elements (elem bytes each) between a strided tensor run and a dense row. */
static void copy_run(unsigned char *dst, int64_t ds, const unsigned char *src, int64_t ss, int64_t n, size_t elem)
{
    if (ds == 1 && ss == 1) {
        memcpy(dst, src, (size_t)n * elem);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        memcpy(dst + (size_t)(i * ds) * elem, src + (size_t)(i * ss) * elem, elem);
}

/* Token t's query heads of key head n as rows [G][D + Dr] (pack), or
 * the packed dq rows back into dquery_out / dquery_rope_out (unpack). */
static void move_query(const dssg_run *r, int64_t t, unsigned char *rows, bool pack)
{
    const dssg_exec *e = r->e;
    const spa_dsa_sfa_shape *sh = &r->p->sh;
    const size_t es = spa_dtype_size(sh->dtype);
    const spa_tensor *a = pack ? &e->in.q : &e->dq, *b = pack ? &e->in.qr : &e->dqr;
    const bool has_b = pack ? e->in.has_rope : e->has_dqr;
    for (int64_t g = 0; g < sh->g; g++) {
        const int64_t h = r->n * sh->g + g;
        unsigned char *row = rows + (size_t)(g * sh->dq) * es;
        unsigned char *pa = at3(a, t, h, 0), *pb = has_b ? at3(b, t, h, 0) : NULL;
        if (pack) {
            copy_run(row, 1, pa, a->strides[2], sh->d, es);
            if (has_b)
                copy_run(row + (size_t)sh->d * es, 1, pb, b->strides[2], sh->dr, es);
        } else {
            copy_run(pa, a->strides[2], row, 1, sh->d, es);
            if (has_b)
                copy_run(pb, b->strides[2], row + (size_t)sh->d * es, 1, sh->dr, es);
        }
    }
}

/* Unit x's kernel arguments: its gathered rows (count of them attended,
 * virtual blocks of 16), its packed query and dq rows, its outputs' grad
 * and statistics. */
static void unit_args(const dssg_run *r, const spa_dsa_sfa_unit *x, unsigned char *scratch, spa_nsas_args *a)
{
    const dssg_exec *e = r->e;
    const dssg_plan *p = r->p;
    const spa_dsa_sfa_shape *sh = &p->sh;
    const int64_t h0 = x->n * sh->g;
    memset(a, 0, sizeof *a);
    a->q = scratch + p->lay.q, a->qs1 = sh->dq, a->qs2 = 1;
    a->dq = scratch + p->lay.dq, a->dqs1 = sh->dq, a->dqs2 = 1;
    a->idx = (const int32_t *)(const void *)(scratch + p->lay.slots), a->is2 = 1;
    a->o = at3(&e->in.o, x->t, h0, 0), a->os1 = e->in.o.strides[1], a->os2 = e->in.o.strides[2];
    a->dy = at3(&e->dy, x->t, h0, 0), a->dys1 = e->dy.strides[1], a->dys2 = e->dy.strides[2];
    a->mx = at3(&e->mx, x->n, x->t, 0), a->ms1 = e->mx.strides[2];
    a->sm = at3(&e->sm, x->n, x->t, 0), a->ss1 = e->sm.strides[2];
    a->n2 = 1, a->g = sh->g, a->gp = spa_nsas_lanes(sh->g);
    a->d = sh->dq, a->dv = sh->dv, a->dp = sh->dp, a->dvp = sh->dvp;
    a->bs = SPA_DSA_SFA_VB, a->kc = p->vb;
    a->scale = (float)e->in.scale;
    a->causal = 0, a->gathered = 1; /* the gather applied every rule of which token is seen */
    a->kf = (const float *)(const void *)(scratch + p->lay.kg), a->kfr = sh->dp;
    if (sh->v_in_k)
        a->vf = a->kf, a->vfr = sh->dp;
    else
        a->vf = (const float *)(const void *)(scratch + p->lay.vg), a->vfr = sh->dvp;
}

/* The grad kernel on a unit's count gathered rows: dq into its packed
 * rows, dK / dV into its gathered partial rows (row 0: gathered row 0). */
static void run_kernel(const dssg_run *r, const spa_nsas_args *a, int64_t count, unsigned char *scratch)
{
    const int32_t dt = r->p->sh.dtype;
    unsigned char *gk = scratch + r->p->lay.gk, *gv = scratch + r->p->lay.gv;
#if SPA_FLOAT64_DSA_SPARSE_ATTENTION_GRAD
    if (dt == SPA_FLOAT64) {
        spa_nsas_f64_args f;
        memset(&f, 0, sizeof f);
        f.a = *a;
        f.k = (const double *)(const void *)a->kf, f.ks0 = a->kfr, f.ks2 = 1;
        f.v = (const double *)(const void *)a->vf, f.vs0 = a->vfr, f.vs2 = 1;
        f.scale = r->e->in.scale;
        SPA_K_NSA_SELECT_GRAD_F64(&f, 0, 0, 1, 0, 0, count, 0, (double *)(void *)gk, (double *)(void *)gv,
                                  (double *)(void *)scratch);
        return;
    }
#endif
    /* direct calls: the stack bound (tools/stack.awk) follows them */
    float *k = (float *)(void *)gk, *v = (float *)(void *)gv, *sc = (float *)(void *)scratch;
    if (dt == SPA_FLOAT16)
        SPA_K_NSA_SELECT_GRAD_F16(a, 0, 0, 1, 0, 0, count, 0, k, v, sc);
    else if (dt == SPA_BFLOAT16)
        SPA_K_NSA_SELECT_GRAD_BF16(a, 0, 0, 1, 0, 0, count, 0, k, v, sc);
    else
        SPA_K_NSA_SELECT_GRAD_F32(a, 0, 0, 1, 0, 0, count, 0, k, v, sc);
}

/* n elements of src added into dst, in the kernels' element; src then
 * zeroed for the next unit (while it is still in cache). */
static void add_row(unsigned char *dst, unsigned char *src, int64_t n, bool f64)
{
    if (f64) {
        double *d = (double *)(void *)dst, *s = (double *)(void *)src;
        for (int64_t i = 0; i < n; i++)
            d[i] += s[i], s[i] = 0.0;
    } else {
        float *d = (float *)(void *)dst, *s = (float *)(void *)src;
        for (int64_t i = 0; i < n; i++)
            d[i] += s[i], s[i] = 0.0f;
    }
}

/* Step 1, token range `range` of key head r->n: its partial zeroed, then
 * its units in token order: gathered, the kernel, dq out, and the
 * gathered rows' dK / dV added into the partial in row order. */
static void run_range(void *arg, uint32_t range)
{
    const dssg_run *r = arg;
    const dssg_plan *p = r->p;
    const spa_dsa_sfa_shape *sh = &p->sh;
    const bool f64 = is_f64(sh);
    const int64_t lo = r->s.lo[range], nrows = r->s.hi[range] - lo, pitch = p->rg.pitch;
    unsigned char *part = spa_dsa_partial_of(&r->part, range);
    memset(part, 0, (size_t)((uint64_t)(nrows * pitch) * p->es)); /* all-zero bits: +0 */
    unsigned char *scratch = r->s.scratch + (uint64_t)range * p->lay.bytes;
    unsigned char *gk = scratch + p->lay.gk, *gv = scratch + p->lay.gv;
    int64_t *pos = (int64_t *)(void *)(scratch + p->lay.pos);
    spa_dsa_sfa_dest d;
    d.kg = scratch + p->lay.kg, d.vg = sh->v_in_k ? d.kg : scratch + p->lay.vg;
    d.slots = (int32_t *)(void *)(scratch + p->lay.slots), d.pos = pos, d.vb = p->vb;
    /* the gathered dK / dV rows start zero; each unit's scatter zeroes the
     * rows of its virtual blocks after reading them (those past its count
     * get 0 * q from the kernel: NaN where q is not finite) */
    memset(gk, 0, (size_t)((uint64_t)(p->vb * SPA_DSA_SFA_VB * p->pk) * p->es));
    memset(gv, 0, (size_t)((uint64_t)(p->vb * SPA_DSA_SFA_VB * p->pv) * p->es));
    int64_t t0, t1;
    spa_attn_range_tokens((int64_t)range, p->rg.per_range, sh->t, &t0, &t1);
    for (int64_t t = t0; t < t1; t++) {
        spa_dsa_sfa_unit x;
        x.t = t, x.n = r->n, x.b = spa_nsa_cache_batch_of(r->s.qs, sh->batches, t);
        x.seen = spa_dsa_seen(r->e->in.mode, r->s.kv[x.b], r->s.sq[x.b], t - r->s.qs[x.b]);
        x.kstart = r->s.ks[x.b];
        const int64_t count = spa_dsa_sfa_gather(&r->e->in, sh, &x, 0, sh->kc, &d);
        move_query(r, t, scratch + p->lay.q, true);
        spa_nsas_args a;
        unit_args(r, &x, scratch, &a);
        run_kernel(r, &a, count, scratch);
        move_query(r, t, scratch + p->lay.dq, false);
        const int64_t first = r->s.kf[x.b] - lo; /* the batch's row 0 in the partial */
        for (int64_t i = 0; i < count; i++) {
            /* pos[i] < seen <= L_b: inside the range's rows */
            unsigned char *row = part + (uint64_t)((first + pos[i]) * pitch) * p->es;
            add_row(row, gk + (uint64_t)(i * p->pk) * p->es, p->pk, f64);
            add_row(row + (uint64_t)p->pk * p->es, gv + (uint64_t)(i * p->pv) * p->es, p->pv, f64);
        }
        const int64_t used = (count + SPA_DSA_SFA_VB - 1) / SPA_DSA_SFA_VB * SPA_DSA_SFA_VB;
        memset(gk + (uint64_t)(count * p->pk) * p->es, 0, (size_t)((uint64_t)((used - count) * p->pk) * p->es));
        memset(gv + (uint64_t)(count * p->pv) * p->es, 0, (size_t)((uint64_t)((used - count) * p->pv) * p->es));
    }
}

/* Step 2: SPA_DSA_REDUCE_ROWS output rows (over pages, then rows) of key
 * head r->n, one head-dim chunk at a time through a stack buffer. */
static void run_reduce(void *arg, uint32_t task)
{
    const dssg_run *r = arg;
    const dssg_exec *e = r->e;
    const spa_dsa_sfa_shape *sh = &r->p->sh;
    const int64_t per_page = (sh->kv.page_size + SPA_DSA_REDUCE_ROWS - 1) / SPA_DSA_REDUCE_ROWS;
    const int64_t pg = (int64_t)task / per_page, row0 = ((int64_t)task % per_page) * SPA_DSA_REDUCE_ROWS;
    const int64_t row1 = row0 + SPA_DSA_REDUCE_ROWS < sh->kv.page_size ? row0 + SPA_DSA_REDUCE_ROWS : sh->kv.page_size;
    const spa_tensor dkx = spa_dsa_kv_view(&e->dk), dkrx = spa_dsa_kv_view(&e->dkr), dvx = spa_dsa_kv_view(&e->dv);
    const bool merge = !e->has_dv; /* value is key: dk[:Dv] += dv */
    const float scale = (float)e->in.scale;
    enum { CHUNK = SPA_DSA_SUM_MAX };
    double acc[CHUNK], accv[CHUNK];
    for (int64_t row = row0; row < row1; row++) {
        const int64_t krow = spa_dsa_partial_row(&sh->kv, r->s.ks, r->s.kv, r->s.kf, pg, row);
        const size_t es = spa_dtype_size(sh->dtype);
        /* the key part (D, then Dr into dkey_rope_out) */
        for (int64_t c0 = 0; c0 < sh->dq; c0 += CHUNK) {
            const int64_t cn = sh->dq - c0 < CHUNK ? sh->dq - c0 : CHUNK;
            spa_dsa_partials_sum(&r->part, krow, c0, cn, acc);
            int64_t vn = 0; /* merged value elements in the chunk */
            if (merge && c0 < sh->dv) {
                vn = sh->dv - c0 < cn ? sh->dv - c0 : cn;
                spa_dsa_partials_sum(&r->part, krow, r->p->pk + c0, vn, accv);
            }
            for (int64_t i = 0; i < cn; i++) {
                double x;
                if (sh->dtype == SPA_FLOAT64)
                    x = e->in.scale * acc[i] + (i < vn ? accv[i] : 0.0);
                else { /* in f32, as the kernels' sums */
                    float y = scale * (float)acc[i];
                    if (i < vn)
                        y += (float)accv[i];
                    x = (double)y;
                }
                acc[i] = x + 0.0; /* -0 sums to +0, as every op stores */
            }
            /* elements [c0, c0 + cn) of [D | Dr]: split at D */
            const int64_t nk = c0 < sh->d ? (sh->d - c0 < cn ? sh->d - c0 : cn) : 0;
            if (nk > 0)
                spa_dsa_store_run(e->dk.dtype, (unsigned char *)dkx.data +
                                      (size_t)(pg * dkx.strides[0] + row * dkx.strides[1] + r->n * dkx.strides[2] +
                                               c0 * dkx.strides[3]) * es,
                          dkx.strides[3], acc, nk);
            if (e->has_dkr && cn > nk) {
                const int64_t e0 = c0 + nk - sh->d;
                spa_dsa_store_run(e->dkr.dtype, (unsigned char *)dkrx.data +
                                       (size_t)(pg * dkrx.strides[0] + row * dkrx.strides[1] +
                                                r->n * dkrx.strides[2] + e0 * dkrx.strides[3]) * es,
                          dkrx.strides[3], acc + nk, cn - nk);
            }
        }
        if (merge)
            continue;
        for (int64_t c0 = 0; c0 < sh->dv; c0 += CHUNK) {
            const int64_t cn = sh->dv - c0 < CHUNK ? sh->dv - c0 : CHUNK;
            spa_dsa_partials_sum(&r->part, krow, r->p->pk + c0, cn, accv);
            for (int64_t i = 0; i < cn; i++)
                accv[i] += 0.0;
            spa_dsa_store_run(e->dv.dtype, (unsigned char *)dvx.data +
                                  (size_t)(pg * dvx.strides[0] + row * dvx.strides[1] + r->n * dvx.strides[2] +
                                           c0 * dvx.strides[3]) * es,
                      dvx.strides[3], accv, cn);
        }
    }
}

/* Phase 2 up to the kernels: every argument checked again, the lengths
 * copied and the plan derived again from the copies, the indices checked,
 * the range table filled. Out of line, so that its locals are off the
 * stack when the kernels run. */
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static spa_status prepare(void *workspace, uint64_t workspace_size, const spa_executor *executor,
                          dssg_plan *p, spa_dsa_grad_slices *s, spa_dsa_partials *part)
{
    dssg_exec ex, *e = &ex;
    SPA_TRY(spa_exec_open(executor, e, sizeof *e, SPA_OP_DSA_SPARSE_ATTENTION_GRAD));
    SPA_TRY(check_args(e, &p->sh));
    SPA_TRY(spa_ws_check_args(workspace, workspace_size, e->head.ws_size));
    const spa_tensor *tensors[] = {&e->in.q, &e->in.k, &e->in.v, &e->in.idx, &e->in.o,
                                   e->in.has_rope ? &e->in.qr : NULL, e->in.has_rope ? &e->in.kr : NULL,
                                   &e->dy, &e->mx, &e->sm, &e->dq, e->has_dqr ? &e->dqr : NULL, &e->dk,
                                   e->has_dkr ? &e->dkr : NULL, e->has_dv ? &e->dv : NULL};
    const spa_int_array *arrays[] = {e->in.has_skv ? &e->in.skv : NULL, e->in.has_sq ? &e->in.sq : NULL};
    SPA_TRY(spa_ws_check_disjoint(workspace, e->head.ws_size, tensors, 15, arrays, 2));
    /* the lengths first (their slices, carve's first four, do not depend
     * on them), then the plan from the copies */
    spa_ws ws;
    spa_ws_attach(&ws, workspace, e->head.ws_size);
    spa_dsa_grad_head(&ws, sizeof *e, p->sh.batches, s);
    SPA_REQUIRE(!ws.overflow);
    int64_t *sq = s->sq, *kv = s->kv, *ks = s->ks;
    SPA_TRY(spa_dsa_sfa_check_seq(&e->in, &p->sh, sq, kv, ks));
    make_plan(e, sq, kv, p);
    SPA_REQUIRE(planned_bytes(p) == e->head.ws_size);
    spa_ws_attach(&ws, workspace, e->head.ws_size);
    carve(&ws, p, s);
    SPA_REQUIRE(!ws.overflow && s->sq == sq && s->kv == kv && s->ks == ks);
    memcpy(s->exec, e, sizeof *e); /* what phase 2 runs from, off the stack */
    SPA_TRY(spa_dsa_sfa_check_indices(&e->in, &p->sh, s->sq, s->kv));
    const spa_dsa_lens l = lens_of(e, &p->sh, s->sq, s->kv);
    spa_dsa_grad_tables(&l, &p->rg, s, part);
    return SPA_OK;
}

spa_status spa_dsa_sparse_attention_grad_phase2(void *workspace, uint64_t workspace_size,
                                                const spa_executor *executor, const spa_runner *runner)
{
    const spa_runner rn = spa_runner_copy(runner);
    dssg_plan p;
    dssg_run r;
    SPA_TRY(prepare(workspace, workspace_size, executor, &p, &r.s, &r.part));
    r.e = r.s.exec, r.p = &p;
    const spa_dsa_sfa_shape *sh = &p.sh;
    const int64_t reduce_tasks = spa_dsa_reduce_tasks(&sh->kv);
    for (r.n = 0; r.n < sh->n2; r.n++) {
        if (sh->t > 0)
            spa_run_blocks(&rn, run_range, &r, (uint32_t)p.rg.ranges);
        spa_run_blocks(&rn, run_reduce, &r, (uint32_t)reduce_tasks);
    }
    return SPA_OK;
}

spa_status spa_dsa_sparse_attention_grad_get_workspace_size(
    const spa_tensor *query, const spa_tensor *query_rope, const spa_tensor *key, const spa_tensor *key_rope,
    const spa_tensor *value, const spa_tensor *sparse_indices, const spa_int_array *actual_seq_q_len,
    const spa_int_array *actual_seq_kv_len, const spa_tensor *attention_out, const spa_tensor *attention_out_grad,
    const spa_tensor *softmax_max, const spa_tensor *softmax_sum, double scale_value, int64_t sparse_block_size,
    int64_t sparse_mode, const spa_tensor *dquery_out, const spa_tensor *dquery_rope_out,
    const spa_tensor *dkey_out, const spa_tensor *dkey_rope_out, const spa_tensor *dvalue_out,
    uint64_t *workspace_size, spa_executor *executor)
{
    return spa_refusal_record(phase1(query, query_rope, key, key_rope, value, sparse_indices, actual_seq_q_len,
                                     actual_seq_kv_len, attention_out, attention_out_grad, softmax_max,
                                     softmax_sum, scale_value, sparse_block_size, sparse_mode, dquery_out,
                                     dquery_rope_out, dkey_out, dkey_rope_out, dvalue_out, workspace_size,
                                     executor),
                              executor, SPA_OP_DSA_SPARSE_ATTENTION_GRAD, 1);
}

spa_status spa_dsa_sparse_attention_grad(void *workspace, uint64_t workspace_size, const spa_executor *executor,
                                         const spa_runner *runner)
{
    return spa_public_status(spa_dsa_sparse_attention_grad_phase2(workspace, workspace_size, executor, runner));
}
