/* Shared planning of NsaSelectedAttention and NsaSelectedAttentionGrad. */
#include <string.h>

#include "nsa_select_plan.h"

void spa_nsas_batch(const spa_int_array *a, int64_t b, int64_t *start, int64_t *end)
{
    *start = b == 0 ? 0 : a->data[b - 1];
    *end = a->data[b];
}

int64_t spa_nsas_batch_of(const spa_int_array *a, int64_t t)
{
    int64_t lo = 0, hi = (int64_t)a->size - 1; /* first b with a[b] > t */
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (a->data[mid] <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int64_t spa_nsas_kernel_rows(int64_t kv_len, int64_t bs)
{
    return (kv_len + bs - 1) / bs * bs;
}

int64_t spa_nsas_kernel_start(const spa_int_array *skv, int64_t bs, int64_t b)
{
    int64_t rows = 0;
    for (int64_t i = 0; i < b; i++) {
        int64_t ks, ke;
        spa_nsas_batch(skv, i, &ks, &ke);
        rows += spa_nsas_kernel_rows(ke - ks, bs);
    }
    return rows;
}

int64_t spa_nsas_lanes(int64_t g)
{
    return g <= SPA_NSAS_GP_MIN ? SPA_NSAS_GP_MIN : g <= 16 ? 16 : 32;
}

spa_status spa_nsas_check_indices(const spa_tensor *topk, const spa_int_array *sq,
                                  const spa_int_array *skv, const spa_nsas_shape *sh,
                                  int32_t *idx_copy)
{
    /* one read per index, whatever the compiler: the value checked is the value copied */
    const volatile int32_t *idx = topk->data;
    const int64_t s0 = topk->strides[0], s1 = topk->strides[1], s2 = topk->strides[2];
    const int64_t n2 = sh->n2, kc = sh->kc, bs = sh->bs;
    for (int64_t b = 0; b < sh->batches; b++) {
        int64_t qs, qe, ks, ke;
        spa_nsas_batch(sq, b, &qs, &qe);
        spa_nsas_batch(skv, b, &ks, &ke);
        /* blocks starting inside the batch's KV, the last one possibly partial */
        const int64_t blocks = (ke - ks + bs - 1) / bs;
        for (int64_t t = qs; t < qe; t++)
            for (int64_t h = 0; h < n2; h++) {
                int32_t *dst = idx_copy != NULL ? idx_copy + (t * n2 + h) * kc : NULL;
                for (int64_t i = 0; i < kc; i++) {
                    const int32_t x = idx[t * s0 + h * s1 + i * s2];
                    SPA_REQUIRE(x >= -1); /* -1: a padding slot */
                    SPA_REQUIRE(x < blocks);
                    if (dst != NULL)
                        dst[i] = x;
                }
            }
    }
    return SPA_OK;
}

spa_status spa_nsas_check_shapes(const spa_tensor *q, const spa_tensor *k, const spa_tensor *v,
                                 const spa_tensor *topk, const spa_tensor *mask,
                                 const spa_int_array *sq, const spa_int_array *skv,
                                 int64_t head_num, const char *layout, int64_t sparse_mode,
                                 int64_t bs, int64_t kc, spa_nsas_shape *sh)
{
    memset(sh, 0, sizeof *sh);
    SPA_REQUIRE(spa_layout_is_tnd(layout));
    SPA_REQUIRE(sparse_mode == 0 || sparse_mode == 2);
    /* block sizes: multiples of the micro-kernels' 16-row tiles */
    SPA_REQUIRE(bs >= 16);
    SPA_REQUIRE(bs <= 128);
    SPA_REQUIRE(bs % 16 == 0);
    SPA_REQUIRE(kc >= 1);
    /* any number of slots (CANN takes 32; the aclnn layer keeps that): the
     * bound only keeps the scratch of K * bs rows far from overflow */
    SPA_REQUIRE(kc <= (1 << 24));
    SPA_TRY(spa_tensor_check(q, 3));
    SPA_TRY(spa_tensor_check(k, 3));
    SPA_TRY(spa_tensor_check(v, 3));
    SPA_TRY(spa_tensor_check(topk, 3));
    SPA_REQUIRE(spa_is_float_dtype(q->dtype) /* a float dtype, not one this build left out (DTYPES) */);
    SPA_REQUIRE(k->dtype == q->dtype);
    SPA_REQUIRE(v->dtype == q->dtype);
    SPA_REQUIRE(topk->dtype == SPA_INT32);
    if (mask != NULL) {
        SPA_TRY(spa_tensor_check(mask, 2));
        SPA_REQUIRE(mask->dtype == SPA_BOOL || mask->dtype == SPA_UINT8);
    }
    const int64_t t1 = q->dims[0], n1 = q->dims[1], d = q->dims[2];
    const int64_t t2 = k->dims[0], n2 = k->dims[1], dv = v->dims[2];
    SPA_REQUIRE(n2 >= 1);
    SPA_REQUIRE(n1 >= 1);
    SPA_REQUIRE(n1 <= 128);
    SPA_REQUIRE(n1 % n2 == 0);
    /* any group: the kernels run a group of more than 32 heads (the
     * micro-kernels' lanes) in chunks of 32 */
    SPA_REQUIRE(head_num == n1);
    /* any head dims up to 768, Dv independent of D (tails: nsa_select_pack.h) */
    SPA_REQUIRE(d >= 1);
    SPA_REQUIRE(d <= 768);
    SPA_REQUIRE(dv >= 1);
    SPA_REQUIRE(dv <= 768);
    SPA_REQUIRE(k->dims[2] == d);
    SPA_REQUIRE(v->dims[0] == t2);
    SPA_REQUIRE(v->dims[1] == n2);
    const int64_t topk_dims[3] = {t1, n2, kc};
    SPA_REQUIRE(spa_tensor_dims_are(topk, 3, topk_dims));
    SPA_TRY(spa_seq_check_size(sq));
    SPA_TRY(spa_seq_check_size(skv));
    SPA_REQUIRE(sq->size == skv->size);
    SPA_REQUIRE(sq->size <= 1024);
    sh->t1 = t1;
    sh->t2 = t2;
    sh->n1 = n1;
    sh->n2 = n2;
    sh->g = n1 / n2;
    sh->gp = spa_nsas_lanes(sh->g);
    sh->d = d;
    sh->dv = dv;
    sh->dp = (d + SPA_NSAS_DIM_STEP - 1) / SPA_NSAS_DIM_STEP * SPA_NSAS_DIM_STEP;
    sh->dvp = (dv + SPA_NSAS_DIM_STEP - 1) / SPA_NSAS_DIM_STEP * SPA_NSAS_DIM_STEP;
    sh->bs = bs;
    sh->kc = kc;
    sh->batches = (int64_t)sq->size;
    sh->causal = sparse_mode == 2 && mask != NULL;
    return SPA_OK;
}

spa_status spa_nsas_check_seq(const spa_int_array *sq, const spa_int_array *skv,
                              int64_t *sq_copy, int64_t *skv_copy, spa_nsas_shape *sh)
{
    int64_t tq, tkv;
    SPA_TRY(spa_seq_check_copy(sq, 0, &tq, sq_copy));
    SPA_TRY(spa_seq_check_copy(skv, 0, &tkv, skv_copy));
    SPA_REQUIRE(tq == sh->t1);
    SPA_REQUIRE(tkv <= sh->t2);
    sh->kv_total = tkv;
    /* each length <= T2, each rounding adds < bs: no overflow in int64 */
    const spa_int_array *kv = skv_copy != NULL ? &(spa_int_array){skv_copy, skv->size} : skv;
    sh->kv_rows = spa_nsas_kernel_start(kv, sh->bs, sh->batches);
    sh->aligned = sh->kv_rows == tkv;
    return SPA_OK;
}

void spa_nsas_trusted_take(spa_ws *ws, const spa_nsas_shape *sh, spa_nsas_trusted *tr)
{
    const uint64_t batches = (uint64_t)sh->batches;
    tr->sq = spa_ws_take(ws, batches, sizeof(int64_t));
    tr->skv = spa_ws_take(ws, batches, sizeof(int64_t));
    tr->kend = spa_ws_take(ws, batches, sizeof(int64_t));
    uint64_t n = 0;
    /* t1 * n2 * kc int32: topk's dims, whose element count spa_tensor_check bounded */
    n = (uint64_t)sh->t1 * (uint64_t)sh->n2 * (uint64_t)sh->kc;
    tr->idx = spa_ws_take(ws, n, sizeof(int32_t));
    tr->sqa = (spa_int_array){tr->sq, batches};
    tr->skva = (spa_int_array){tr->skv, batches};
}

spa_status spa_nsas_trusted_fill(const spa_tensor *topk, const spa_int_array *sq,
                                 const spa_int_array *skv, spa_nsas_shape *sh,
                                 spa_nsas_trusted *tr)
{
    SPA_TRY(spa_nsas_check_seq(sq, skv, tr->sq, tr->skv, sh));
    int64_t rows = 0;
    for (int64_t b = 0; b < sh->batches; b++) {
        int64_t ks, ke;
        spa_nsas_batch(&tr->skva, b, &ks, &ke);
        rows += spa_nsas_kernel_rows(ke - ks, sh->bs);
        tr->kend[b] = rows;
    }
    return spa_nsas_check_indices(topk, &tr->sqa, &tr->skva, sh, tr->idx);
}

void spa_nsas_args_fill(spa_nsas_args *out, const spa_nsas_shape *sh, const spa_tensor *q,
                        const int32_t *idx, const spa_tensor *o, const spa_tensor *mx,
                        const spa_tensor *sm, const spa_tensor *dy, const spa_tensor *dq,
                        double scale)
{
    spa_nsas_args *const a = out;
    memset(a, 0, sizeof *a);
    a->q = q->data;
    a->qs0 = q->strides[0], a->qs1 = q->strides[1], a->qs2 = q->strides[2];
    a->idx = idx; /* the trusted copy, [t1][n2][kc] */
    a->is0 = sh->n2 * sh->kc, a->is1 = sh->kc, a->is2 = 1;
    a->o = o->data;
    a->os0 = o->strides[0], a->os1 = o->strides[1], a->os2 = o->strides[2];
    a->mx = mx->data;
    a->ms0 = mx->strides[0], a->ms1 = mx->strides[1], a->ms2 = mx->strides[2];
    a->sm = sm->data;
    a->ss0 = sm->strides[0], a->ss1 = sm->strides[1], a->ss2 = sm->strides[2];
    if (dy != NULL) {
        a->dy = dy->data;
        a->dys0 = dy->strides[0], a->dys1 = dy->strides[1], a->dys2 = dy->strides[2];
    }
    if (dq != NULL) {
        a->dq = dq->data;
        a->dqs0 = dq->strides[0], a->dqs1 = dq->strides[1], a->dqs2 = dq->strides[2];
    }
    a->n2 = sh->n2;
    a->g = sh->g;
    a->gp = sh->gp;
    a->d = sh->d;
    a->dv = sh->dv;
    a->dp = sh->dp;
    a->dvp = sh->dvp;
    a->bs = sh->bs;
    a->kc = sh->kc;
    a->scale = (float)scale;
    a->causal = sh->causal;
}

spa_nsas_args spa_nsas_args_of(const spa_nsas_shape *sh, const spa_tensor *q,
                               const int32_t *idx, const spa_tensor *o,
                               const spa_tensor *mx, const spa_tensor *sm, const spa_tensor *dy,
                               const spa_tensor *dq, double scale)
{
    spa_nsas_args a;
    spa_nsas_args_fill(&a, sh, q, idx, o, mx, sm, dy, dq, scale);
    return a;
}
