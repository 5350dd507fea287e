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

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "half.h"
#include "spattn/types.h"

/* One level of the level table, copied out of spatialShape /
 * levelStartIndex after the checks (1 <= H, W; start + H*W <= num_keys):
 * kernels use only this copy, which phase 2 writes into the workspace (nl
 * records, so the level count is bounded by the workspace alone). */
typedef struct spa_msda_level {
    int64_t h, w, start;
    float fh, fw; /* (float)H and (float)W, the factors of spec 5 */
} spa_msda_level;

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
    void *out; /* [bs, nq, nh*C], dtype of the kernel (location and attnWeight: any float dtype) */
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
    int64_t tq;               /* queries per tile (phase 1's plan; sizes the descriptor area) */
    const spa_msda_level *lv; /* [nl], in the workspace */
    const float *zero;        /* C zeros, in the workspace: outside corners read them */
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

/* Level constants of the 16 lanes of one chunk position of the staging
 * (msda_stage.h; lanes past nl*np: level 0's, never live). */
typedef struct spa_msda_lanes {
    float fw[16], fh[16];
    int32_t w[16], h[16], start[16];
} spa_msda_lanes;

/* A staged forward chunk of 16 samples: per lane the corner rows 00, 01, 10,
 * 11 (the zero row for corners outside the map), their bilinear weights and
 * the attention weight; bit i of live: lane i passed the range check; bit i
 * of nanloc: lane i's location has a NaN coordinate (a sample of the map at
 * NaN, which makes the query's output row and the sample's location and
 * weight gradients NaN, spec/msda.md 5 as the math reads it). */
typedef struct spa_msda_chunk {
    uintptr_t v[4][16];
    float w[4][16];
    float a[16];
    uint32_t live, nanloc;
} spa_msda_chunk;

/* A staged grad chunk: the forward's, plus the gradValue rows (a sink row
 * per corner outside the map) and the fractions. */
typedef struct spa_msda_gchunk {
    spa_msda_chunk f;
    uintptr_t g[4][16];
    float lx[16], ly[16];
} spa_msda_gchunk;

/* The gathered coordinates of one chunk: x[16], y[16], a[16]. */
enum { SPA_MSDA_GATHER_FLOATS = 48 };
/* The grad's 16-lane sums of d/dx, d/dy, d/da of the 16 samples of a chunk. */
enum { SPA_MSDA_FOLD_FLOATS = 3 * 256 };

/* The descriptor area of a tile (the front of a block's scratch): tile_queries
 * * nl*np sample records, and never less than what the kernels lay over it
 * for one query (forward: its chunks, the lane constants and the gathered
 * coordinates; grad: one chunk, the fold rows, the lane constants and the
 * gathered coordinates), whatever nl*np. Phase 1 and the kernels both size
 * it here; -1 when the size overflows. */
static inline int64_t spa_msda_desc_bytes(int64_t tq, int64_t nlp, bool grad)
{
    const int64_t nch = nlp / 16 + 1; /* chunk positions, at least ceil(nlp / 16) */
    const int64_t rec = grad ? (int64_t)sizeof(spa_msda_grad_sample) : (int64_t)sizeof(spa_msda_fwd_sample);
    const int64_t per_nch = (int64_t)sizeof(spa_msda_lanes) + (grad ? 0 : (int64_t)sizeof(spa_msda_chunk));
    const int64_t fixed = SPA_MSDA_GATHER_FLOATS * (int64_t)sizeof(float) +
                          (grad ? (int64_t)(sizeof(spa_msda_gchunk) + SPA_MSDA_FOLD_FLOATS * sizeof(float)) : 0);
    if (nlp < 0 || tq < 1 || nch > (INT64_MAX / 2 - fixed) / per_nch || nlp > INT64_MAX / 2 / rec / tq)
        return -1;
    const int64_t want = tq * nlp * rec, least = nch * per_nch + fixed;
    return want > least ? want : least;
}

/* Forward: queries [q0, q1) of pair (b, h), whose packed value slice starts
 * at vpair. scratch: the tile's descriptors (spa_msda_desc_bytes), then one
 * row of C f32 (the accumulator). */
typedef void spa_msda_fwd_kernel(const spa_msda_args *a, int64_t b, int64_t h, const float *vpair,
                                 int64_t q0, int64_t q1, void *scratch);

/* Grad: every query of pair (b, h); vpair is its packed value slice and
 * gpair its f32 gradValue slice, already zero. Adds into gpair, writes
 * gradLocation and gradAttnWeight. scratch: the tile's descriptors
 * (spa_msda_desc_bytes), then 5 rows of C f32 (gradOutput row, four sink
 * rows). */
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

/* Rare paths (other dtypes, channel tails) kept out of line, so that the
 * common one keeps its code and registers. */
#if defined(__GNUC__) || defined(__clang__)
#define SPA_MSDA_COLD __attribute__((noinline, cold))
#define SPA_MSDA_NOINLINE __attribute__((noinline))
#else
#define SPA_MSDA_COLD
#define SPA_MSDA_NOINLINE
#endif

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
