/* Contract between src/msda*.c and the generated kernels of
 * templates/msda*.c.m4 (spec/msda.md 5, 6). All strides are in elements.
 *
 * A kernel works on whole (batch, head) pairs, which keeps every value read
 * and every gradValue write of one pair inside that pair's slice. It walks
 * the queries in tiles: first it stages one descriptor per sample of the tile
 * (corner rows and bilinear weights; the A2 kernels stage the same data in
 * the unified buffer), then it combines the corner rows channel by channel,
 * with register accumulators. The staging and the combine are written on the
 * ISA layer (msda_stage.h, templates/msda*.c.m4): sixteen samples per chunk,
 * SPA_VL lanes per instruction. */
#ifndef SPA_MSDA_KERNEL_H
#define SPA_MSDA_KERNEL_H

#include <stdint.h>
#include <string.h>

#include "half.h"
#include "spattn/types.h"

#define SPA_MSDA_MAX_LEVELS 16
#define SPA_MSDA_MAX_POINTS 16
#define SPA_MSDA_MAX_HEADS 16
#define SPA_MSDA_MAX_C 256

/* The level table, copied out of spatialShape / levelStartIndex after the
 * checks (1 <= H, W; start + H*W <= num_keys): kernels use only this copy. */
typedef struct spa_msda_levels {
    int64_t h[SPA_MSDA_MAX_LEVELS];
    int64_t w[SPA_MSDA_MAX_LEVELS];
    int64_t start[SPA_MSDA_MAX_LEVELS];
    float fh[SPA_MSDA_MAX_LEVELS]; /* (float)H and (float)W, the factors of spec 5 */
    float fw[SPA_MSDA_MAX_LEVELS];
} spa_msda_levels;

/* Kernels read value from a packed f32 copy: the slice of pair (b, h) is
 * [nk][C] contiguous (row k at k*C), so the corners of a sample lie in one
 * small region and adjacent keys in adjacent rows. gradValue is accumulated in
 * an f32 slice of the same layout. */
typedef struct spa_msda_args {
    const void *loc; /* [bs, nq, nh, nl, np, 2] */
    int32_t loc_dt;
    int64_t ls[6];
    const void *attn; /* [bs, nq, nh, nl, np] */
    int32_t attn_dt;
    int64_t as[5];
    /* forward */
    void *out; /* [bs, nq, nh*C], dtype of the kernel */
    int64_t os[3];
    /* grad */
    const void *gout; /* gradOutput [bs, nq, nh*C] */
    int32_t gout_dt;
    int64_t gos[3];
    void *gloc; /* gradLocation, shaped like location */
    int32_t gloc_dt;
    int64_t gls[6];
    void *gattn; /* gradAttnWeight, shaped like attnWeight */
    int32_t gattn_dt;
    int64_t gas[5];
    /* shape */
    int64_t nk, nq, nh, c, nl, np;
    spa_msda_levels lv;
} spa_msda_args;

/* The per-sample records below size the kernels' scratch (phase 1 reserves
 * tile_queries * nl * np of them); the kernels lay their staged chunks
 * (msda_stage.h) over that area. Forward: corner rows 00, 01, 10, 11, their
 * bilinear weights, the attention weight. */
typedef struct spa_msda_fwd_sample {
    const float *v[4];
    float w[4];
    float a;
    int32_t live;
} spa_msda_fwd_sample;

/* Grad: as above, plus the gradValue rows, the fractions and the level's W, H. */
typedef struct spa_msda_grad_sample {
    const float *v[4];
    float *g[4];
    float w[4];
    float a, lx, ly, fw, fh;
    int32_t live;
} spa_msda_grad_sample;

/* Forward: queries [q0, q1) of pair (b, h), whose packed value slice starts
 * at vpair. scratch: the tile's descriptors (tile_queries * nl * np of them),
 * then one row of C_MAX f32 (the accumulator). */
typedef void spa_msda_fwd_kernel(const spa_msda_args *a, int64_t b, int64_t h, const float *vpair,
                                 int64_t q0, int64_t q1, void *scratch);

/* Grad: every query of pair (b, h); vpair is its packed value slice and
 * gpair its f32 gradValue slice, already zero. Adds into gpair, writes
 * gradLocation and gradAttnWeight. scratch: the tile's descriptors, then 5
 * rows of C_MAX f32 (gradOutput row, four sink rows). */
typedef void spa_msda_grad_kernel(const spa_msda_args *a, int64_t b, int64_t h, const float *vpair,
                                  float *gpair, void *scratch);

/* f16 -> f32, exact: the ISA layer's fastest exact way. */
static inline float spa_msda_f16(uint16_t h)
{
    return spa_isa_f16_to_f32(h);
}

/* Element access for tensors whose float dtype is not the kernel's. */
static inline float spa_msda_load(const void *p, int32_t dt, int64_t off)
{
    switch (dt) {
    case SPA_FLOAT16:
        return spa_msda_f16(((const uint16_t *)p)[off]);
    case SPA_BFLOAT16:
        return spa_bf16_to_f32(((const uint16_t *)p)[off]);
    default:
        return ((const float *)p)[off];
    }
}

static inline void spa_msda_store(void *p, int32_t dt, int64_t off, float v)
{
    switch (dt) {
    case SPA_FLOAT16:
        ((uint16_t *)p)[off] = spa_f32_to_f16(v);
        break;
    case SPA_BFLOAT16:
        ((uint16_t *)p)[off] = spa_f32_to_bf16(v);
        break;
    default:
        ((float *)p)[off] = v;
        break;
    }
}

/* Prefetch hint for the corner rows of a later sample (no-op elsewhere,
 * and where the ISA layer takes no hints, SPA_ISA_PREFETCH 0). */
#if (defined(__GNUC__) || defined(__clang__)) && SPA_ISA_PREFETCH
#define SPA_PREFETCH(p) __builtin_prefetch((p), 0, 3)
#define SPA_PREFETCH_W(p) __builtin_prefetch((p), 1, 3)
#else
#define SPA_PREFETCH(p) ((void)(p))
#define SPA_PREFETCH_W(p) ((void)(p))
#endif

#endif
