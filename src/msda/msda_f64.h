/* The float64 path of MultiScaleDeformableAttnFunction and its grad
 * (src/core/f64.h): the contract between the driver (src/msda/msda_f64.c) and the
 * kernels of templates/f64/msda*.c.m4, and the driver's entry points.
 *
 * The kernel dtype is float64 when any float tensor of the call is float64
 * (value, location, attnWeight, output; in the grad also gradOutput and the
 * three gradients): every element is then read in its own dtype and widened
 * exactly to double, every sum and product is double (spec/msda.md 5, 6 with
 * x = loc_x * W - 0.5 in double), and each result is stored once in its
 * tensor's dtype (a narrower one with one RNE rounding). Value is packed
 * into double slices [nk][C] per (batch, head) pair, as the f32 path packs
 * f32 ones, and the grad accumulates gradValue in double slices of the same
 * layout. */
#ifndef SPA_MSDA_F64_H
#define SPA_MSDA_F64_H

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "half.h"
#include "msda_kernel.h"
#include "spattn/runner.h"
#include "spattn/types.h"

/* Kernel arguments (in the workspace). Strides in elements; every float
 * tensor in its own dtype. */
typedef struct spa_msda_f64_args {
    const void *loc; /* [bs, nq, nh, nl, np, 2] */
    int32_t loc_dt;
    int64_t ls[6];
    const void *attn; /* [bs, nq, nh, nl, np] */
    int32_t attn_dt;
    int64_t as[5];
    void *out; /* forward: [bs, nq, nh*C] */
    int32_t out_dt;
    int64_t os[3];
    const void *gout; /* grad: gradOutput [bs, nq, nh*C] */
    int32_t gout_dt;
    int64_t gos[3];
    void *gloc; /* gradLocation, shaped like location */
    int32_t gloc_dt;
    int64_t gls[6];
    void *gattn; /* gradAttnWeight, shaped like attnWeight */
    int32_t gattn_dt;
    int64_t gas[5];
    int64_t nk, nq, nh, c, nl, np;
    const spa_msda_level *lv; /* [nl], the phase-2 validated copy in the workspace */
    const double *zero;       /* C zeros: the row an outside corner reads */
} spa_msda_f64_args;

/* A live forward sample of one query: its corner rows (the zero row for a
 * corner outside the map), bilinear weights and attention weight. */
typedef struct spa_msda_f64_sample {
    const double *v[4];
    double w[4];
    double a;
} spa_msda_f64_sample;

/* Forward: queries [q0, q1) of pair (b, h) (packed value slice vpair).
 * scratch: nl*np samples, then a row of C doubles. */
typedef void spa_msda_f64_fwd_kernel(const spa_msda_f64_args *a, int64_t b, int64_t h, const double *vpair,
                                     int64_t q0, int64_t q1, void *scratch);
/* Grad: every query of pair (b, h); adds into gpair (zero before), writes
 * gradLocation and gradAttnWeight. scratch: two rows of C doubles (the
 * gradOutput row, the sink row outside corners add into). */
typedef void spa_msda_f64_grad_kernel(const spa_msda_f64_args *a, int64_t b, int64_t h, const double *vpair,
                                      double *gpair, void *scratch);

/* Element off of a float tensor of dtype dt, widened exactly. */
static inline double spa_msda_f64_get(const void *p, int32_t dt, int64_t off)
{
    switch (dt) {
    case SPA_FLOAT64:
        return ((const double *)p)[off];
    case SPA_FLOAT16:
        return (double)spa_isa_f16_to_f32(((const uint16_t *)p)[off]);
    case SPA_BFLOAT16:
        return (double)spa_bf16_to_f32(((const uint16_t *)p)[off]);
    default:
        return (double)((const float *)p)[off];
    }
}

/* Bytes per element of a float dtype. */
static inline int64_t spa_msda_f64_esize(int32_t dt)
{
    return dt == SPA_FLOAT64 ? 8 : dt == SPA_FLOAT32 ? 4 : 2;
}

/* A pair reads one short row of location and attnWeight per query, nh rows
 * apart: too far for the hardware prefetchers to follow across pages, so
 * the kernels request the rows of query q + SPA_MSDA_F64_PFQ (of pair b, h)
 * while they work on query q. */
enum { SPA_MSDA_F64_PFQ = 8 };
static inline void spa_msda_f64_prefetch_rows(const spa_msda_f64_args *a, int64_t b, int64_t h, int64_t q)
{
    if (q + SPA_MSDA_F64_PFQ >= a->nq)
        return;
    q += SPA_MSDA_F64_PFQ;
    const char *lp = (const char *)a->loc + (b * a->ls[0] + q * a->ls[1] + h * a->ls[2]) * spa_msda_f64_esize(a->loc_dt);
    const char *ap = (const char *)a->attn + (b * a->as[0] + q * a->as[1] + h * a->as[2]) * spa_msda_f64_esize(a->attn_dt);
    for (int64_t off = 0; off < a->nl * a->ls[3] * spa_msda_f64_esize(a->loc_dt); off += 64)
        SPA_PREFETCH(lp + off);
    for (int64_t off = 0; off < a->nl * a->as[3] * spa_msda_f64_esize(a->attn_dt); off += 64)
        SPA_PREFETCH(ap + off);
}

/* d rounded to f32 by round-to-odd (truncate, then set the last bit when
 * inexact): rounding that again to a format of at most 22 significand bits
 * (f16, bf16) with RNE is one correct RNE rounding of d (no double
 * rounding). */
static inline float spa_msda_f64_to_f32_odd(double d)
{
    float f = (float)d;
    if (d != d || (double)f == d)
        return f;
    uint32_t u = spa_f32_bits(f);
    if (fabs((double)f) > fabs(d))
        u--; /* one step toward zero: the truncation (Inf becomes FLT_MAX) */
    return spa_bits_f32(u | 1u);
}

/* d stored into element off of a float tensor of dtype dt (one RNE rounding). */
static inline void spa_msda_f64_put(void *p, int32_t dt, int64_t off, double d)
{
    switch (dt) {
    case SPA_FLOAT64:
        ((double *)p)[off] = d;
        break;
    case SPA_FLOAT16:
        ((uint16_t *)p)[off] = spa_f32_to_f16(spa_msda_f64_to_f32_odd(d));
        break;
    case SPA_BFLOAT16:
        ((uint16_t *)p)[off] = spa_f32_to_bf16(spa_msda_f64_to_f32_odd(d));
        break;
    default:
        ((float *)p)[off] = (float)d;
        break;
    }
}

/* The driver (src/msda/msda_f64.c), called by src/msda/msda.c and src/msda/msda_grad.c
 * after phase 2 has checked everything again and filled the level table.
 * spa_msda_f64_bytes: the workspace bytes of the path for these dims
 * (false on overflow); phase 1 takes them in one slice, and phase 2 hands
 * that slice to the run functions. */
bool spa_msda_f64_bytes(int64_t bs, int64_t nk, int64_t nh, int64_t c, int64_t nq, int64_t nl, int64_t np,
                        bool grad, uint64_t *bytes);
void spa_msda_f64_forward(const spa_tensor *value, const spa_tensor *location, const spa_tensor *attn_weight,
                          const spa_tensor *output, const spa_msda_level *lv, void *ws, const spa_runner *rn);
void spa_msda_f64_backward(const spa_tensor *value, const spa_tensor *location, const spa_tensor *attn_weight,
                           const spa_tensor *grad_output, const spa_tensor *grad_value,
                           const spa_tensor *grad_location, const spa_tensor *grad_attn_weight,
                           const spa_msda_level *lv, void *ws, const spa_runner *rn);

#endif
