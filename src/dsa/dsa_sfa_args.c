/* DSA sparse attention's argument rules, shared by the forward and the grad
 * (dsa_sfa_args.h). */
#include "dsa_sfa_args.h"

#include <string.h>

#include "f64.h"
#include "internal.h"
#include "nsa_select_plan.h"

/* Whether value is a view of key's first Dv elements (same memory, same
 * strides): MLA-absorb, where the key rows hold the value rows. */
static bool value_in_key(const spa_tensor *kx, const spa_tensor *vx, int64_t dv)
{
    if (vx->data != kx->data || vx->dtype != kx->dtype || dv > kx->dims[3])
        return false;
    for (int32_t i = 0; i < 4; i++)
        if (vx->strides[i] != kx->strides[i] || (i < 3 && vx->dims[i] != kx->dims[i]))
            return false;
    return true;
}

/* A key-like tensor (key_rope, value) of the key's layout, n: its last dim. */
static spa_status check_like_key(const spa_tensor *x, const spa_dsa_sfa_shape *sh, int32_t dt, int64_t *n)
{
    SPA_TRY(spa_tensor_check(x, sh->kv.tnd ? 3 : 4));
    SPA_REQUIRE(x->dtype == dt /* key_rope / value: the dtype of query */);
    const spa_tensor v = spa_dsa_kv_view(x);
    for (int32_t i = 0; i < 3; i++)
        SPA_REQUIRE(v.dims[i] == sh->kv.kx.dims[i] /* key_rope / value: key's leading dims */);
    *n = v.dims[3];
    return SPA_OK;
}

spa_status spa_dsa_sfa_check_stat(const spa_tensor *x, const spa_dsa_sfa_shape *sh, bool output)
{
    SPA_TRY(output ? spa_tensor_check_output(x, 3) : spa_tensor_check(x, 3));
    SPA_REQUIRE(x->dtype == spa_nsas_stat_dtype(sh->dtype) /* softmax_max / softmax_sum: FLOAT32 (f64: FLOAT64) */);
    const int64_t dims[3] = {sh->n2, sh->t, sh->g};
    SPA_REQUIRE(spa_tensor_dims_are(x, 3, dims) /* softmax_max / softmax_sum: [N2, T, G] */);
    return SPA_OK;
}

spa_status spa_dsa_sfa_check(const spa_dsa_sfa_in *in, bool o_output, spa_dsa_sfa_shape *sh)
{
    memset(sh, 0, sizeof *sh);
    SPA_TRY(spa_tensor_check(&in->q, 3));
    SPA_TRY(spa_dsa_kv_check(&in->k, in->has_table ? &in->table : NULL, in->has_sq ? &in->sq : NULL,
                             in->has_skv ? &in->skv : NULL, in->q.dims[0], &sh->kv));
    SPA_TRY(spa_tensor_check(&in->idx, 3));
    SPA_TRY(o_output ? spa_tensor_check_output(&in->o, 3) : spa_tensor_check(&in->o, 3));
    const int32_t dt = in->q.dtype;
    SPA_REQUIRE(spa_is_float_dtype(dt) /* a float dtype, not one this build left out (DTYPES) */);
    SPA_REQUIRE(dt != SPA_FLOAT64 || SPA_FLOAT64_NSA_SELECT);
    SPA_REQUIRE(in->k.dtype == dt /* key: the dtype of query */);
    SPA_REQUIRE(in->o.dtype == dt /* attention_out: the dtype of query */);
    SPA_REQUIRE(in->idx.dtype == SPA_INT32 /* sparse_indices: INT32 */);
    SPA_REQUIRE(in->mode == 0 || in->mode == 3 /* sparse_mode: 0 or 3 */);
    SPA_REQUIRE(in->sbs >= 1 && in->sbs <= 4096 /* sparse_block_size: 1 .. 4096 */);
    SPA_REQUIRE(in->scale == in->scale && in->scale - in->scale == 0.0 /* scale_value finite */);
    sh->t = in->q.dims[0], sh->n1 = in->q.dims[1], sh->d = in->q.dims[2];
    sh->n2 = sh->kv.kx.dims[2], sh->kc = in->idx.dims[2], sh->sbs = in->sbs;
    sh->batches = sh->kv.batches;
    sh->dtype = dt;
    SPA_REQUIRE(sh->n2 >= 1);
    SPA_REQUIRE(sh->n1 >= 1 && sh->n1 <= 128 /* query heads: 1 .. 128 */);
    SPA_REQUIRE(sh->n1 % sh->n2 == 0 /* query heads a multiple of key heads */);
    SPA_REQUIRE(sh->kv.kx.dims[3] == sh->d /* key head dim == query head dim */);
    SPA_REQUIRE(sh->kc >= 1 && sh->kc <= 65536 /* sparse_indices: K 1 .. 65536 */);
    SPA_REQUIRE(sh->kc * sh->sbs <= 1048576 /* sparse_indices: K * sparse_block_size at most 1048576 */);
    const int64_t id[3] = {sh->t, sh->n2, sh->kc};
    SPA_REQUIRE(spa_tensor_dims_are(&in->idx, 3, id) /* sparse_indices: [T, N2, K] */);
    SPA_TRY(check_like_key(&in->v, sh, dt, &sh->dv));
    if (in->has_rope) {
        SPA_TRY(spa_tensor_check(&in->qr, 3));
        SPA_REQUIRE(in->qr.dtype == dt /* query_rope: the dtype of query */);
        SPA_TRY(check_like_key(&in->kr, sh, dt, &sh->dr));
        const int64_t qd[3] = {sh->t, sh->n1, sh->dr};
        SPA_REQUIRE(spa_tensor_dims_are(&in->qr, 3, qd) /* query_rope: [T, N1, Dr], Dr of key_rope */);
    }
    sh->dq = sh->d + sh->dr;
    SPA_REQUIRE(sh->d >= 1 && sh->dq <= 768 /* head dim D + Dr: 1 .. 768 */);
    SPA_REQUIRE(sh->dv >= 1 && sh->dv <= 768 /* value head dim: 1 .. 768 */);
    const int64_t od[3] = {sh->t, sh->n1, sh->dv};
    SPA_REQUIRE(spa_tensor_dims_are(&in->o, 3, od) /* attention_out: [T, N1, Dv] */);
    sh->g = sh->n1 / sh->n2;
    int64_t units;
    SPA_REQUIRE(spa_mul_ok(sh->t, sh->n1, &units) /* T * N1 units at most */);
    sh->dp = (sh->dq + SPA_NSAS_DIM_STEP - 1) / SPA_NSAS_DIM_STEP * SPA_NSAS_DIM_STEP;
    sh->dvp = (sh->dv + SPA_NSAS_DIM_STEP - 1) / SPA_NSAS_DIM_STEP * SPA_NSAS_DIM_STEP;
    const spa_tensor vx = spa_dsa_kv_view(&in->v);
    sh->v_in_k = value_in_key(&sh->kv.kx, &vx, sh->dv);
    return SPA_OK;
}

spa_status spa_dsa_sfa_check_seq(const spa_dsa_sfa_in *in, const spa_dsa_sfa_shape *sh, int64_t *sq_copy,
                                 int64_t *kv_copy, int64_t *start_copy)
{
    int64_t lmax;
    return spa_dsa_kv_check_seq(&sh->kv, in->has_sq ? &in->sq : NULL, in->has_skv ? &in->skv : NULL, sh->t,
                                sq_copy, kv_copy, start_copy, &lmax);
}

spa_status spa_dsa_sfa_check_indices(const spa_dsa_sfa_in *in, const spa_dsa_sfa_shape *sh, const int64_t *sq,
                                     const int64_t *kv)
{
    const int32_t *idx = in->idx.data;
    for (int64_t b = 0, t = 0; b < sh->batches; b++) {
        const int64_t nq = sq != NULL ? sq[b] : in->has_sq ? in->sq.data[b] : sh->t / sh->batches;
        const int64_t len = kv != NULL ? kv[b] : in->has_skv ? in->skv.data[b] : sh->kv.page_size;
        for (int64_t i = 0; i < nq && t < sh->t; i++, t++)
            for (int64_t h = 0; h < sh->n2; h++)
                for (int64_t j = 0; j < sh->kc; j++) {
                    const int64_t x =
                        idx[t * in->idx.strides[0] + h * in->idx.strides[1] + j * in->idx.strides[2]];
                    SPA_REQUIRE(spa_dsa_sfa_index_ok(x, sh->sbs, len) /* sparse_indices: -1 or a block of the sequence */);
                }
    }
    return spa_dsa_kv_check_table(&sh->kv, &in->table, &in->skv, kv);
}
