/* Staging of MultiScaleDeformableAttention samples (spec/msda.md 5, 6) on the
 * ISA layer: the location and attention weight of sixteen consecutive
 * (level, point) samples of one query give, SPA_VL lanes per instruction,
 * each sample's range check, corner rows, corner validity and bilinear
 * weights, stored as one chunk (structure of arrays) that the kernels'
 * combine reads. Every lane does the operations of spec 5 in its order with
 * its roundings: x = loc_x * W - 0.5 as a product then a difference (the
 * build's ISO C mode contracts nothing), floor, the fractions, the four
 * weight products; the corner bounds are exact integer compares.
 *
 * Location and attnWeight are read as vectors when their (level, point, xy)
 * and (level, point) dims are contiguous and the chunk is whole; otherwise
 * the chunk's coordinates are gathered one by one first (lanes past nl*np
 * get +Inf, which fails the range check and is not a NaN location). Keys are 32-bit lanes when
 * num_keys <= INT32_MAX and a row is under 4 GiB; beyond, each lane is
 * staged in 64-bit scalar code with the same float operations, so the chunk
 * holds the same values. */
#ifndef SPA_MSDA_STAGE_H
#define SPA_MSDA_STAGE_H

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif
#include <math.h>
#include <stdbool.h>

#include "msda_kernel.h"
#include "native_div.h"

#if SPA_VL > 16 || 16 % SPA_VL != 0
#error "the msda chunks hold 16 samples: SPA_VL must divide 16"
#endif

/* Level constants of the ceil(nl*np / 16) chunk positions. */
static inline void spa_msda_lanes_init(const spa_msda_level *lv, int64_t nl, int64_t np, spa_msda_lanes *out)
{
    const int64_t nlp = nl * np;
    for (int64_t j0 = 0; j0 < nlp; j0 += 16, out++)
        for (int i = 0; i < 16; i++) {
            const int64_t pos = j0 + i, l = pos < nlp ? spa_div_nat(pos, np) : 0;
            /* a lane past nl * np: a factor of -1 leaves no x with
             * -1 < x < -1, so its (finite) padding location is dead */
            out->fw[i] = pos < nlp ? lv[l].fw : -1.0f;
            out->fh[i] = pos < nlp ? lv[l].fh : -1.0f;
            out->w[i] = (int32_t)(lv[l].w < INT32_MAX ? lv[l].w : INT32_MAX); /* the wide path reads lv */
            out->h[i] = (int32_t)(lv[l].h < INT32_MAX ? lv[l].h : INT32_MAX);
            out->start[i] = (int32_t)(lv[l].start < INT32_MAX ? lv[l].start : INT32_MAX);
        }
}

/* SPA_VL elements of a float tensor at element offset off, widened. */
SPA_ISA_INLINE spa_vf spa_msda_vload(const void *p, int32_t dt, int64_t off)
{
    switch (dt) {
    case SPA_FLOAT16:
        return spa_vf_load_f16((const uint16_t *)p + off);
    case SPA_BFLOAT16:
        return spa_vf_load_bf16((const uint16_t *)p + off);
    default:
        return spa_vf_load((const float *)p + off);
    }
}

/* 2 * SPA_VL interleaved pairs at element offset off, widened and split:
 * even elements into *even, odd ones into *odd (f32: one deinterleaving
 * load). */
SPA_ISA_INLINE void spa_msda_vload_unzip(const void *p, int32_t dt, int64_t off, spa_vf *even, spa_vf *odd)
{
    if (dt == SPA_FLOAT16 || dt == SPA_BFLOAT16)
        spa_vf_unzip(spa_msda_vload(p, dt, off), spa_msda_vload(p, dt, off + SPA_VL), even, odd);
    else
        spa_vf_load_unzip((const float *)p + off, even, odd);
}

/* SPA_VL lanes stored at element offset off, narrowed (RNE, as spa_msda_store). */
SPA_ISA_INLINE void spa_msda_vstore(void *p, int32_t dt, int64_t off, spa_vf v)
{
    switch (dt) {
    case SPA_FLOAT16:
        spa_vf_store_f16((uint16_t *)p + off, v);
        break;
    case SPA_BFLOAT16:
        spa_vf_store_bf16((uint16_t *)p + off, v);
        break;
    default:
        spa_vf_store((float *)p + off, v);
        break;
    }
}

/* Where one chunk writes (g, lx, ly only for the grad: gch != NULL). */
typedef struct spa_msda_stage_out {
    const float *vbase; /* the pair's value slice, rows row_bytes apart */
    const float *zero;  /* a zero row: outside corners read it */
    float *gbase;       /* grad: the pair's gradValue slice */
    const float *sink;  /* grad: outside corner k adds into sink + k * sink_step */
    int64_t sink_step;
    uint64_t row_bytes; /* the vector staging takes it as 32 bits: the wide path beyond */
    bool wide;          /* num_keys > INT32_MAX or row_bytes > UINT32_MAX (spa_msda_stage_wide) */
} spa_msda_stage_out;

/* Whether a call stages on the 64-bit path (see spa_msda_stage_out.wide). */
static inline bool spa_msda_wide(const spa_msda_args *a, uint64_t row_bytes)
{
    return a->nk > INT32_MAX || row_bytes > UINT32_MAX;
}

/* Lanes s .. s+SPA_VL-1 of a chunk from their coordinates; returns their live
 * bits and (unfolded) sets *suspect where a dead lane's coordinate is NaN
 * or infinite (spa_msda_nan_lanes then finds the NaN ones). seen != NULL (the forward where
 * the ISA folds): each corner weight is stored multiplied by the attention
 * weight (one product more, rounded), a is not stored, and *seen becomes NaN
 * in a lane where a or a coordinate is not finite (the caller then stages
 * the query again unfolded: Inf * 0 would differ, and the unfolded staging
 * finds the NaN locations). */
SPA_ISA_INLINE uint32_t spa_msda_stage_vec(const spa_msda_lanes *ln, int s, spa_vf xn, spa_vf yn, spa_vf an,
                                           const spa_msda_stage_out *o, spa_msda_chunk *ch,
                                           spa_msda_gchunk *gch, spa_vf *seen, bool *suspect)
{
    const spa_vf fw = spa_vf_load(ln->fw + s), fh = spa_vf_load(ln->fh + s);
    const spa_vf half = spa_vf_set1(0.5f), one = spa_vf_set1(1.0f), mone = spa_vf_set1(-1.0f);
    const spa_vf x = spa_vf_sub(spa_vf_mul(xn, fw), half), y = spa_vf_sub(spa_vf_mul(yn, fh), half);
    if (seen == NULL)
        spa_vf_store(ch->a + s, an);
    /* the range check; ordered compares, so NaN fails */
    const spa_vm live = spa_vm_and(spa_vm_and(spa_vf_gt(y, mone), spa_vf_gt(x, mone)),
                                   spa_vm_and(spa_vf_lt(y, fh), spa_vf_lt(x, fw)));
    const spa_vf x0f = spa_vf_floor(x), y0f = spa_vf_floor(y);
    const spa_vi x0 = spa_vi_from_vf(x0f), y0 = spa_vi_from_vf(y0f); /* live lanes: in [-1, 2^31) */
    const spa_vf lx = spa_vf_sub(x, x0f), ly = spa_vf_sub(y, y0f);
    const spa_vf hx = spa_vf_sub(one, lx), hy = spa_vf_sub(one, ly);
    spa_vf w00 = spa_vf_mul(hy, hx), w01 = spa_vf_mul(hy, lx), w10 = spa_vf_mul(ly, hx), w11 = spa_vf_mul(ly, lx);
    if (seen != NULL) {
        /* *seen turns NaN where a is not finite (0 * a, or Inf * 0), or a
         * coordinate is not (lx * ly is NaN exactly then): the query is
         * staged again unfolded, and that staging finds its NaN locations */
        w00 = spa_vf_mul(w00, an);
        w01 = spa_vf_mul(w01, an);
        w10 = spa_vf_mul(w10, an);
        w11 = spa_vf_mul(w11, an);
        *seen = spa_vf_fma(*seen, w11, spa_vf_zero()); /* 0 * (ly lx a): finite, or NaN */
    }
    spa_vf_store(ch->w[0] + s, w00);
    spa_vf_store(ch->w[1] + s, w01);
    spa_vf_store(ch->w[2] + s, w10);
    spa_vf_store(ch->w[3] + s, w11);
    /* both bounds of every corner, unsigned (-1 is huge); dead lanes have no
     * inside corner */
    const spa_vi w = spa_vi_load(ln->w + s), h = spa_vi_load(ln->h + s), ione = spa_vi_set1(1);
    const spa_vi x1 = spa_vi_add(x0, ione), y1 = spa_vi_add(y0, ione);
    const spa_vm in_x0 = spa_vi_ltu(x0, w), in_x1 = spa_vi_ltu(x1, w);
    const spa_vm in_y0 = spa_vm_and(live, spa_vi_ltu(y0, h)), in_y1 = spa_vm_and(live, spa_vi_ltu(y1, h));
    /* key of corner 00: start + y0 * W + x0 (exact for inside corners, which
     * are below num_keys; wraps harmlessly for the others) */
    const spa_vi k00 = spa_vi_add(spa_vi_load(ln->start + s), spa_vi_add(spa_vi_mul(y0, w), x0));
    const spa_vi k10 = spa_vi_add(k00, w);
    const spa_vm in00 = spa_vm_and(in_y0, in_x0), in01 = spa_vm_and(in_y0, in_x1);
    const spa_vm in10 = spa_vm_and(in_y1, in_x0), in11 = spa_vm_and(in_y1, in_x1);
    const uint32_t rb = (uint32_t)o->row_bytes; /* below 2^32 here (spa_msda_stage) */
    const spa_vi k01 = spa_vi_add(k00, ione), k11 = spa_vi_add(k10, ione);
    spa_vi_rows(ch->v[0] + s, k00, in00, o->vbase, rb, o->zero);
    spa_vi_rows(ch->v[1] + s, k01, in01, o->vbase, rb, o->zero);
    spa_vi_rows(ch->v[2] + s, k10, in10, o->vbase, rb, o->zero);
    spa_vi_rows(ch->v[3] + s, k11, in11, o->vbase, rb, o->zero);
    if (gch != NULL) {
        spa_vi_rows(gch->g[0] + s, k00, in00, o->gbase, rb, o->sink);
        spa_vi_rows(gch->g[1] + s, k01, in01, o->gbase, rb, o->sink + o->sink_step);
        spa_vi_rows(gch->g[2] + s, k10, in10, o->gbase, rb, o->sink + 2 * o->sink_step);
        spa_vi_rows(gch->g[3] + s, k11, in11, o->gbase, rb, o->sink + 3 * o->sink_step);
        spa_vf_store(gch->lx + s, lx);
        spa_vf_store(gch->ly + s, ly);
    }
    const uint32_t live_bits = spa_vm_bits(live), all = (uint32_t)(((uint64_t)1 << SPA_VL) - 1);
    if (live_bits != all && seen == NULL) {
        /* a dead lane: a location off the map, or a NaN one. Its weight
         * lx * ly is NaN exactly for a NaN or infinite coordinate (x minus
         * its floor), so one sum of the weights says whether the lanes need
         * the ordered compares: rarely, so the common case pays a few
         * instructions */
        const float any = spa_vf_hsum(w11); /* NaN where a coordinate is NaN or infinite */
        *suspect |= any != any;
    }
    return live_bits;
}

/* The coordinates of samples j0 .. j0+15 one by one (any strides and dtypes):
 * x into g[0..16), y into g[16..32), the attention weight into g[32..48). */
static inline void spa_msda_gather(const spa_msda_args *a, int64_t j0, int64_t lq, int64_t aq, float *g)
{
    const int64_t nlp = a->nl * a->np;
    for (int i = 0; i < 16; i++) {
        const int64_t j = j0 + i;
        if (j >= nlp) { /* finite padding, dead by its lane's factors */
            g[i] = g[16 + i] = 0.0f;
            g[32 + i] = 0.0f;
            continue;
        }
        const int64_t l = spa_div_nat(j, a->np), p = j - l * a->np;
        const int64_t lo = lq + l * a->ls[3] + p * a->ls[4];
        g[i] = spa_msda_load(a->loc, a->loc_dt, lo);
        g[16 + i] = spa_msda_load(a->loc, a->loc_dt, lo + a->ls[5]);
        g[32 + i] = spa_msda_load(a->attn, a->attn_dt, aq + l * a->as[3] + p * a->as[4]);
    }
}

/* The 64-bit form, lane by lane, for num_keys > INT32_MAX: the float
 * operations of spa_msda_stage_vec, int64 keys. */
static inline void spa_msda_stage_wide(const spa_msda_args *a, int64_t j0, const float *g,
                                       const spa_msda_stage_out *o, spa_msda_chunk *ch, spa_msda_gchunk *gch,
                                       spa_vf *seen)
{
    const int64_t nlp = a->nl * a->np;
    const int64_t cl = (int64_t)(o->row_bytes / sizeof(float));
    uint32_t live = 0, nanloc = 0;
    for (int i = 0; i < 16; i++) {
        const int64_t j = j0 + i, l = j < nlp ? spa_div_nat(j, a->np) : 0;
        const int64_t ww = a->lv[l].w, hh = a->lv[l].h;
        const float fw = a->lv[l].fw, fh = a->lv[l].fh;
        const float xs = g[i] * fw, ys = g[16 + i] * fh;
        const float x = xs - 0.5f, y = ys - 0.5f;
        const float av = g[32 + i], fold = seen != NULL ? av : 1.0f;
        ch->a[i] = av;
        if (seen != NULL) /* NaN for a non-finite a or coordinate, as the vector form */
            *seen = spa_vf_add(*seen, spa_vf_set1(av * 0.0f + g[i] * 0.0f + g[16 + i] * 0.0f));
        if (j >= nlp || !(y > -1.0f && x > -1.0f && y < fh && x < fw)) {
            if (g[i] != g[i] || g[16 + i] != g[16 + i])
                nanloc |= 1u << i;
            continue;
        }
        live |= 1u << i;
        const float x0f = floorf(x), y0f = floorf(y);
        const int64_t x0 = (int64_t)x0f, y0 = (int64_t)y0f; /* in [-1, 2^31] here */
        const float lx = x - x0f, ly = y - y0f, hx = 1.0f - lx, hy = 1.0f - ly;
        ch->w[0][i] = hy * hx * fold; /* (hy * hx) * a: the vector form's two products */
        ch->w[1][i] = hy * lx * fold;
        ch->w[2][i] = ly * hx * fold;
        ch->w[3][i] = ly * lx * fold;
        const bool in_x0 = (uint64_t)x0 < (uint64_t)ww, in_x1 = (uint64_t)(x0 + 1) < (uint64_t)ww;
        const bool in_y0 = (uint64_t)y0 < (uint64_t)hh, in_y1 = (uint64_t)(y0 + 1) < (uint64_t)hh;
        const bool in[4] = {in_y0 && in_x0, in_y0 && in_x1, in_y1 && in_x0, in_y1 && in_x1};
        const int64_t k00 = a->lv[l].start + y0 * ww + x0;
        const int64_t key[4] = {k00, k00 + 1, k00 + ww, k00 + ww + 1};
        for (int k = 0; k < 4; k++) {
            ch->v[k][i] = in[k] ? (uintptr_t)(o->vbase + key[k] * cl) : (uintptr_t)o->zero;
            if (gch != NULL)
                gch->g[k][i] = in[k] ? (uintptr_t)(o->gbase + key[k] * cl) : (uintptr_t)(o->sink + k * o->sink_step);
        }
        if (gch != NULL) {
            gch->lx[i] = lx;
            gch->ly[i] = ly;
        }
    }
    ch->live = live;
    ch->nanloc = nanloc;
}

/* The bits of samples j0 .. j0+15 whose location has a NaN coordinate, read
 * again from location (a chunk whose staging saw a NaN or infinite
 * coordinate: rare). Out of line, with the coordinates read in scalar code,
 * so that it takes no registers from the kernels' loops (constants held
 * across them cost the AVX-512 grad a spill per sample). */
SPA_MSDA_COLD static uint32_t spa_msda_nan_lanes(const spa_msda_args *a, int64_t j0, int64_t lq, int64_t aq)
{
    float g[48];
    spa_msda_gather(a, j0, lq, aq, g);
    uint32_t bits = 0;
    for (int i = 0; i < 16; i++)
        if (g[i] != g[i] || g[16 + i] != g[16 + i])
            bits |= 1u << i;
    return bits;
}

/* Stages samples j0 .. j0+15 of one query (lq, aq: the element offsets of
 * location[b, q, h, 0, 0, 0] and attnWeight[b, q, h, 0, 0], of dtypes ldt
 * and adt); packed: the layouts spa_msda_packed accepts. g:
 * SPA_MSDA_GATHER_FLOATS of scratch. seen: NULL, or the forward's folding
 * of the attention weight into the corner weights (spa_msda_stage_vec). */
SPA_ISA_INLINE void spa_msda_stage(const spa_msda_args *a, const spa_msda_lanes *ln, int64_t j0, int64_t lq,
                                   int32_t ldt, int64_t aq, int32_t adt, bool packed, const spa_msda_stage_out *o,
                                   spa_msda_chunk *ch, spa_msda_gchunk *gch, float *g, spa_vf *seen)
{
    uint32_t live = 0;
    bool suspect = false;
    if (o->wide) {
        spa_msda_gather(a, j0, lq, aq, g);
        spa_msda_stage_wide(a, j0, g, o, ch, gch, seen);
        return;
    }
    if (packed && j0 + 16 <= a->nl * a->np) {
        for (int s = 0; s < 16; s += SPA_VL) {
            const int64_t off = lq + 2 * (j0 + s);
            spa_vf xn, yn;
            spa_msda_vload_unzip(a->loc, ldt, off, &xn, &yn);
            const spa_vf an = spa_msda_vload(a->attn, adt, aq + j0 + s);
            live |= spa_msda_stage_vec(ln, s, xn, yn, an, o, ch, gch, seen, &suspect) << s;
        }
    } else {
        spa_msda_gather(a, j0, lq, aq, g);
        for (int s = 0; s < 16; s += SPA_VL)
            live |= spa_msda_stage_vec(ln, s, spa_vf_load(g + s), spa_vf_load(g + 16 + s), spa_vf_load(g + 32 + s),
                                       o, ch, gch, seen, &suspect)
                    << s;
    }
    ch->live = live;
    ch->nanloc = suspect ? spa_msda_nan_lanes(a, j0, lq, aq) : 0;
}

/* Location [.., nl, np, 2] and attnWeight [.., nl, np] contiguous in their
 * sample dims: chunks read them as vectors. */
static inline bool spa_msda_packed(const spa_msda_args *a)
{
    return a->ls[5] == 1 && a->ls[4] == 2 && a->ls[3] == 2 * a->np && a->as[4] == 1 && a->as[3] == a->np;
}

#endif
