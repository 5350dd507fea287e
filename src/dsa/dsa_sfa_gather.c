/* The gather of DSA sparse attention's units (dsa_sfa_gather.h). */
#include "dsa_sfa_gather.h"

#include "internal.h"
#include "nsa_cache_rows.h"

/* Token p of unit x's batch as gathered row n; zeros where its table
 * entry, read again, is no longer a page of the cache. */
static void gather_token(const spa_dsa_sfa_in *in, const spa_dsa_sfa_shape *sh, const spa_dsa_sfa_unit *x,
                         int64_t p, int64_t n, const spa_dsa_sfa_dest *d)
{
    const uint64_t es = spa_dsa_sfa_elem_bytes(sh);
    unsigned char *kd = d->kg + (uint64_t)(n * sh->dp) * es, *vd = d->vg + (uint64_t)(n * sh->dvp) * es;
    if (d->pos != NULL)
        d->pos[n] = p;
    const int64_t pg = spa_dsa_kv_page(&sh->kv, &in->table, x->b, p);
    if (pg < 0) {
        spa_nsa_zero_row(kd, sh->dp, sh->dtype);
        if (!sh->v_in_k)
            spa_nsa_zero_row(vd, sh->dvp, sh->dtype);
        return;
    }
    const int64_t row = spa_dsa_kv_row(&sh->kv, x->kstart, p);
    spa_nsa_cache_row(&sh->kv.kx, pg, row, x->n, sh->d, in->has_rope ? sh->d : sh->dp, kd);
    if (in->has_rope) {
        const spa_tensor krx = spa_dsa_kv_view(&in->kr);
        spa_nsa_cache_row(&krx, pg, row, x->n, sh->dr, sh->dp - sh->d, kd + (uint64_t)sh->d * es);
    }
    if (!sh->v_in_k) {
        const spa_tensor vx = spa_dsa_kv_view(&in->v);
        spa_nsa_cache_row(&vx, pg, row, x->n, sh->dv, sh->dvp, vd);
    }
}

int64_t spa_dsa_sfa_gather(const spa_dsa_sfa_in *in, const spa_dsa_sfa_shape *sh, const spa_dsa_sfa_unit *x,
                           int64_t j0, int64_t j1, const spa_dsa_sfa_dest *d)
{
    const uint64_t es = spa_dsa_sfa_elem_bytes(sh);
    const int32_t *idx = (const int32_t *)in->idx.data + x->t * in->idx.strides[0] + x->n * in->idx.strides[1];
    const int64_t room = d->vb * SPA_DSA_SFA_VB;
    int64_t n = 0;
    for (int64_t j = j0; j < j1; j++) {
        const int64_t s = idx[j * in->idx.strides[2]]; /* read once */
        /* padding, or (an array rewritten during the call) a value phase 2
         * did not check: nothing; a block past what the query sees: its
         * tokens up to there */
        if (s < 0 || s >= (x->seen + sh->sbs - 1) / sh->sbs)
            continue;
        for (int64_t p = s * sh->sbs; p < (s + 1) * sh->sbs && p < x->seen && n < room; p++)
            gather_token(in, sh, x, p, n++, d);
    }
    const int64_t used = (n + SPA_DSA_SFA_VB - 1) / SPA_DSA_SFA_VB;
    for (int64_t i = n; i < used * SPA_DSA_SFA_VB; i++) { /* finite rows under the kernel's mask */
        spa_nsa_zero_row(d->kg + (uint64_t)(i * sh->dp) * es, sh->dp, sh->dtype);
        if (!sh->v_in_k)
            spa_nsa_zero_row(d->vg + (uint64_t)(i * sh->dvp) * es, sh->dvp, sh->dtype);
    }
    for (int64_t i = 0; i < d->vb; i++)
        d->slots[i] = i < used ? (int32_t)i : -1;
    return n;
}
