/* f16 / bf16 <-> f32 conversions, integer bit operations only, so that no
 * compiler half-precision support is needed on any target. Widening is exact;
 * narrowing rounds to nearest, ties to even (spec/nsa.md 0.3 allows RNE
 * everywhere). Written branch-free so that loops over them vectorise. */
#ifndef SPA_HALF_H
#define SPA_HALF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint32_t spa_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float spa_bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* bf16 is the upper half of an f32. */
static inline float spa_bf16_to_f32(uint16_t h)
{
    return spa_bits_f32((uint32_t)h << 16);
}

static inline uint16_t spa_f32_to_bf16(float f)
{
    uint32_t u = spa_f32_bits(f);
    uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    /* NaN must stay NaN (rounding could carry it into Inf): force a quiet bit. */
    uint32_t is_nan = (u & 0x7FFFFFFFu) > 0x7F800000u;
    return (uint16_t)(is_nan ? ((u >> 16) | 0x40u) : rounded);
}

/* f16 -> f32: place exponent and mantissa in an f32 and scale by 2^112, which
 * rebiases normals and turns subnormals into the right normal f32. Inf/NaN
 * (exponent 31) get the all-ones f32 exponent. */
static inline float spa_f16_to_f32(uint16_t h)
{
    uint32_t sign = ((uint32_t)h & 0x8000u) << 16;
    uint32_t em = (uint32_t)h & 0x7FFFu;
    float scaled = spa_bits_f32(em << 13) * 0x1p112f;
    uint32_t bits = spa_f32_bits(scaled) | (em >= 0x7C00u ? 0x7F800000u : 0u);
    return spa_bits_f32(bits | sign);
}

/* f32 -> f16, round to nearest even. */
static inline uint16_t spa_f32_to_f16(float f)
{
    uint32_t u = spa_f32_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7FFFFFFFu;
    /* Normal range: rebias the exponent (-112 << 23) and round on bit 13. */
    uint32_t normal = (a + 0xC8000FFFu + ((a >> 13) & 1u)) >> 13;
    /* Below 2^-14 the result is subnormal: adding 0.5 aligns the f32 mantissa so
     * that the FPU rounds to a multiple of 2^-24 (RNE); the low bits are it. */
    uint32_t sub = spa_f32_bits(spa_bits_f32(a) + 0.5f) - 0x3F000000u;
    uint32_t r = a < 0x38800000u ? sub : normal;
    r = a >= 0x477FF000u ? 0x7C00u : r;                  /* rounds to >= 65520: Inf */
    r = a > 0x7F800000u ? (0x7E00u | ((a >> 13) & 0x3FFu)) : r; /* NaN stays NaN */
    return (uint16_t)(sign | r);
}

/* The target's instruction set layer (src/isa/<isa>.h through the generated
 * spa_isa.h), which may use the scalar conversions above. */
#include "spa_isa.h"
/* Whether the kernels issue software prefetch hints: a layer sets 0 where
 * they only cost instructions (a core running from tightly coupled memory). */
#ifndef SPA_ISA_PREFETCH
#define SPA_ISA_PREFETCH 1
#endif
/* Whether the layer has the bf16 dot product (spa_vbp, spa_vf_dotb_bf16:
 * src/isa/avx512bf16.h) that the bf16 selected-attention forward runs on. */
#ifndef SPA_ISA_BF16_DOT
#define SPA_ISA_BF16_DOT 0
#endif
#if !SPA_ISA_BF16_DOT
/* The pairing of two rows of bf16 bits into words (lo[i] | hi[i] << 16),
 * which the dot-product layers have as vectors: here for the drivers that
 * name it in a branch such a layer alone takes. */
static inline void spa_vbp_zip_rows(uint32_t *dst, const uint16_t *lo, const uint16_t *hi, ptrdiff_t n)
{
    for (ptrdiff_t i = 0; i < n; i++)
        dst[i] = (uint32_t)lo[i] | (uint32_t)hi[i] << 16;
}
#endif

/* Runs of n contiguous elements, SPA_VL at a time through the ISA layer
 * (whose conversions are exact on widening and RNE with NaN kept NaN on
 * narrowing: the scalar functions' values bit for bit), then one by one.
 * The stream forms are copies whose destination will not be read again
 * soon: where the ISA has streaming stores (SPA_VF_STREAM_ALIGN > 0) the
 * aligned middle goes out with them, sparing the read of the destination
 * lines a plain store costs (on the other ISAs spa_vf_stream is a plain
 * store). Call spa_stream_fence() before the block returns, so the data is
 * visible to the thread that joins it. align: the destination alignment in
 * elements the vector stores need (0: none). */
#define SPA_RUN(name, dst_t, src_t, scalar, vload, vstore, align)                          \
    static inline void name(dst_t *restrict dst, const src_t *restrict src, int64_t n_)    \
    {                                                                                      \
        const ptrdiff_t n = (ptrdiff_t)n_; /* one register on 32-bit cores */              \
        ptrdiff_t i = 0;                                                                   \
        if ((align) > 0)                                                                   \
            for (; i < n && ((uintptr_t)(dst + i) & (uintptr_t)((align) - 1)) != 0; i++)   \
                dst[i] = scalar(src[i]);                                                   \
        for (; i + 2 * SPA_VL <= n; i += 2 * SPA_VL) { /* loop control over two vectors */ \
            vstore(dst + i, vload(src + i));                                               \
            vstore(dst + i + SPA_VL, vload(src + i + SPA_VL));                             \
        }                                                                                  \
        for (; i + SPA_VL <= n; i += SPA_VL)                                               \
            vstore(dst + i, vload(src + i));                                               \
        for (; i < n; i++)                                                                 \
            dst[i] = scalar(src[i]);                                                       \
    }
#define SPA_F32_SAME(x) (x)
SPA_RUN(spa_f16_widen_run, float, uint16_t, spa_f16_to_f32, spa_vf_load_f16, spa_vf_store, 0)
SPA_RUN(spa_f16_narrow_run, uint16_t, float, spa_f32_to_f16, spa_vf_load, spa_vf_store_f16, 0)
SPA_RUN(spa_bf16_widen_run, float, uint16_t, spa_bf16_to_f32, spa_vf_load_bf16, spa_vf_store, 0)
SPA_RUN(spa_bf16_narrow_exact_run, uint16_t, float, spa_f32_to_bf16, spa_vf_load, spa_vf_store_bf16, 0)
SPA_RUN(spa_f32_copy_run, float, float, SPA_F32_SAME, spa_vf_load, spa_vf_store, 0)
SPA_RUN(spa_f32_stream_run, float, float, SPA_F32_SAME, spa_vf_load, spa_vf_stream, SPA_VF_STREAM_ALIGN)
SPA_RUN(spa_f16_narrow_stream_run, uint16_t, float, spa_f32_to_f16, spa_vf_load, spa_vf_stream_f16,
        SPA_VF_STREAM_ALIGN / 2)
SPA_RUN(spa_bf16_narrow_stream_run, uint16_t, float, spa_f32_to_bf16, spa_vf_load, spa_vf_stream_bf16,
        SPA_VF_STREAM_ALIGN / 2)

/* 16-bit widening runs that also say whether every element was finite (no
 * NaN, no infinity): each vector enters v * 0 + seen (NaN from a NaN or an
 * infinity), tested once at the end, an FMA per vector beside the conversion. */
#define SPA_FINITE_RUN(name, scalar, vload)                                                \
    static inline bool name(float *restrict dst, const uint16_t *restrict src, int64_t n_) \
    {                                                                                      \
        const ptrdiff_t n = (ptrdiff_t)n_; /* one register on 32-bit cores */              \
        const spa_vb zero = spa_vb_set(0.0f);                                              \
        spa_vf seen = spa_vf_zero();                                                       \
        float tail = 0.0f;                                                                 \
        ptrdiff_t i = 0;                                                                   \
        for (; i + 2 * SPA_VL <= n; i += 2 * SPA_VL) {                                     \
            const spa_vf lo = vload(src + i), hi = vload(src + i + SPA_VL);                \
            spa_vf_store(dst + i, lo);                                                     \
            spa_vf_store(dst + i + SPA_VL, hi);                                            \
            seen = spa_vf_fmab(spa_vf_fmab(seen, lo, zero), hi, zero);                     \
        }                                                                                  \
        for (; i + SPA_VL <= n; i += SPA_VL) {                                             \
            const spa_vf v = vload(src + i);                                               \
            spa_vf_store(dst + i, v);                                                      \
            seen = spa_vf_fmab(seen, v, zero);                                             \
        }                                                                                  \
        for (; i < n; i++) {                                                               \
            dst[i] = scalar(src[i]);                                                       \
            tail += dst[i] * 0.0f;                                                         \
        }                                                                                  \
        const float all = spa_vf_hsum(seen) + tail;                                        \
        return all == all;                                                                 \
    }
SPA_FINITE_RUN(spa_f16_widen_finite_run, spa_f16_to_f32, spa_vf_load_f16)
SPA_FINITE_RUN(spa_bf16_widen_finite_run, spa_bf16_to_f32, spa_vf_load_bf16)
#undef SPA_FINITE_RUN
#undef SPA_RUN
#undef SPA_F32_SAME

/* f32 -> bf16 run: the layer's narrowing for numbers with NaN lanes tracked;
 * a run that met a NaN narrows its vectors again with the exact form, so
 * every element equals spa_f32_to_bf16 of it (on layers whose exact form
 * costs the same nothing is tracked and the second pass is dead code). */
static inline void spa_bf16_narrow_run(uint16_t *restrict dst, const float *restrict src, int64_t n_)
{
    const ptrdiff_t n = (ptrdiff_t)n_; /* one register on 32-bit cores */
    ptrdiff_t i = 0;
    spa_vf seen = spa_vf_zero();
    for (; i + 2 * SPA_VL <= n; i += 2 * SPA_VL) {
        spa_vf lo, hi;
        spa_vf_load2(src + i, &lo, &hi);
        seen = spa_vf_nan_seen(seen, spa_vf_nan_seen(lo, hi));
        spa_vf_store2_bf16_num(dst + i, lo, hi);
    }
    for (; i + SPA_VL <= n; i += SPA_VL) {
        const spa_vf v = spa_vf_load(src + i);
        seen = spa_vf_nan_seen(seen, v);
        spa_vf_store_bf16_num(dst + i, v);
    }
    if (spa_vf_any_nan(seen))
        spa_bf16_narrow_exact_run(dst, src, i);
    for (; i < n; i++)
        dst[i] = spa_f32_to_bf16(src[i]);
}

static inline void spa_stream_fence(void)
{
    spa_isa_stream_fence();
}

#endif
