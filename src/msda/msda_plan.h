/* What MultiScaleDeformableAttnFunction and its grad share (spec/msda.md):
 * the index-tensor checks and level table, the block split, zero-filling
 * outputs and the kernel arguments. */
#ifndef SPA_MSDA_PLAN_H
#define SPA_MSDA_PLAN_H

#include "internal.h"
#include "msda_kernel.h"

/* Blocks per call at most: the A2 vector-core count, the parallel grain. */
#define SPA_MSDA_MAX_BLOCKS 48

/* The dimensions of spec 1. */
typedef struct spa_msda_dims {
    int64_t bs, nk, nh, c, nq, nl, np;
} spa_msda_dims;

/* Field by field (the core imports no memcmp). */
/* spatialShape and levelStartIndex may be INT32 or INT64. */
static inline bool spa_msda_is_index_dtype(int32_t dt)
{
    return dt == SPA_INT32 || dt == SPA_INT64;
}

static inline bool spa_msda_same_dims(const spa_msda_dims *a, const spa_msda_dims *b)
{
    return a->bs == b->bs && a->nk == b->nk && a->nh == b->nh && a->c == b->c && a->nq == b->nq &&
           a->nl == b->nl && a->np == b->np;
}

/* The ranks both ops check first, in this order (descriptor sanity too:
 * dims, strides, spans, data): value [bs, nk, nh, C], spatialShape [nl, 2],
 * levelStartIndex [nl], location [bs, nq, nh, nl, np, 2], attnWeight
 * [bs, nq, nh, nl, np] and the op's [bs, nq, nh*C] tensor (the forward's
 * output, written; the grad's gradOutput, read); then the two trailing
 * dims of 2. */
spa_status spa_msda_check_ranks(const spa_tensor *value, const spa_tensor *spatial_shape,
                                const spa_tensor *level_start, const spa_tensor *location,
                                const spa_tensor *attn_weight, const spa_tensor *output,
                                bool written);

/* spatialShape [nl, 2] and levelStartIndex [nl] contents (INT32 or INT64,
 * any strides), untrusted: every level needs 1 <= H, W <= INT32_MAX,
 * 0 <= start <= INT32_MAX and start + H*W <= nk, computed without overflow.
 * Fills the level table the kernels use (nl records) when lv is not NULL;
 * a refused level may leave the earlier ones written. */
spa_status spa_msda_levels_read(const spa_tensor *spatial_shape, const spa_tensor *level_start,
                                int64_t nl, int64_t nk, spa_msda_level *lv);

/* The samples of a tile for C channels: ts (the kernel's, fitted for C up to
 * 256) halved while ts * desc_bytes + C * row_bytes exceeds the tile budget,
 * down to 16. */
int64_t spa_msda_tile_samples(int64_t ts, int64_t c, int64_t desc_bytes, int64_t row_bytes, int64_t budget);

/* Splits `units` into at most SPA_MSDA_MAX_BLOCKS contiguous ranges; returns
 * the units per block and sets the block count. */
int64_t spa_msda_split(int64_t units, uint32_t *blocks);

/* Writes +0 to every element of a float tensor (already checked). */
void spa_msda_zero_fill(const spa_tensor *t);

/* Kernel arguments of the inputs shared by both ops. */
void spa_msda_args_init(spa_msda_args *a, const spa_tensor *location, const spa_tensor *attn_weight,
                        const spa_msda_dims *d);

/* Keys per packing unit: the packing steps of both ops run over (batch, run
 * of SPA_MSDA_PACK_KEYS keys) units, batch-major, bs * ceil(nk / 256) in all. */
#define SPA_MSDA_PACK_KEYS 256
/* Units [u0, u1) of value widened into the pair slices: head h's row k of
 * batch b at pack + ((b * nh + h) * nk + k) * C (f32). */
void spa_msda_pack_units(const spa_tensor *value, int64_t u0, int64_t u1, float *pack);
/* Units [u0, u1) of the pair slices (laid out as spa_msda_pack_units's) into
 * grad_value, one RNE rounding. */
void spa_msda_unpack_units(const float *pack, const spa_tensor *grad_value, int64_t u0, int64_t u1);

#endif
