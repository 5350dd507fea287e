/* NsaSelectedAttention(+Grad) in float64: the kernel contract (templates/f64/
 * nsa_select*.c.m4) and the phase-2 drivers (nsa_select_f64.c). Key and
 * value are read in place through their strides (no f32 packing); the
 * softmax statistics are float64 [T1, N1, 8]. */
#ifndef SPA_NSA_SELECT_F64_H
#define SPA_NSA_SELECT_F64_H

#include <float.h>

#include "nsa_select_plan.h"

typedef struct spa_nsas_f64_args {
    spa_nsas_args a; /* q, idx (the trusted copy), o, mx, sm, dy, dq and the shape */
    const double *k; /* key [T2, N2, D] */
    int64_t ks0, ks1, ks2;
    const double *v; /* value [T2, N2, Dv] */
    int64_t vs0, vs1, vs2;
    double scale; /* scaleValue itself: no f32 rounding */
} spa_nsas_f64_args;

/* A selected block of query token t (in-batch position s = t - qstart) with
 * kv head n2: its len rows from the absolute KV row `row`, the first `valid`
 * of them visible (the causal mask hides the positions > s, a suffix of the
 * block). Slots in topk order; a slot < 0 selects nothing and a block is
 * clipped to the batch's klen KV rows. A block's rows are distinct, so a
 * register tile over rows of one block never holds one row twice (topk may
 * repeat a block). */
typedef struct spa_nsas_f64_seg {
    int64_t row, len, valid;
} spa_nsas_f64_seg;

/* The blocks of (t, n2) into seg[0..kc); returns their count, *cnt the
 * positions (the sum of len, at most kc * bs). */
static inline int64_t spa_nsas_f64_segments(const spa_nsas_args *a, int64_t n2, int64_t t,
                                            int64_t qstart, int64_t kstart, int64_t klen,
                                            spa_nsas_f64_seg *seg, int64_t *cnt)
{
    const int32_t *idx = a->idx + t * a->is0 + n2 * a->is1;
    const int64_t s = t - qstart;
    int64_t ns = 0, c = 0;
    for (int64_t i = 0; i < a->kc; i++) {
        const int64_t blk = idx[i * a->is2];
        if (blk < 0)
            continue;
        const int64_t p0 = blk * a->bs;
        const int64_t len = klen - p0 < a->bs ? klen - p0 : a->bs;
        if (len <= 0) /* a checked index never points past klen; nothing to read if it did */
            continue;
        const int64_t vis = !a->causal ? len : s - p0 + 1 < 0 ? 0 : s - p0 + 1;
        seg[ns].row = a->gathered ? ns * a->bs : kstart + p0; /* gathered: slot ns's copy */
        seg[ns].len = len, seg[ns].valid = vis < len ? vis : len;
        c += len, ns++;
    }
    *cnt = c;
    return ns;
}

/* Head lanes the kernels pad a group to (a multiple of the layer's double
 * lanes, at most 8): scratch is sized for the widest. */
#define SPA_NSAS_F64_GP(g) (((g) + 7) / 8 * 8)

/* The score of a masked position, in the scaled domain (spec/nsa.md 3.2). */
#define SPA_NSAS_F64_MASKED (-(double)FLT_MAX)

/* Forward: query tokens [t0, t1) of kv head n2, in the batch whose queries
 * start at qstart and whose klen KV rows start at kstart; scratch:
 * SPA_NSAS_F64_FWD_SCRATCH doubles. Writes attentionOut, softmaxMax and
 * softmaxSum of those tokens. */
typedef void spa_nsas_fwd_f64_kernel(const spa_nsas_f64_args *f, int64_t n2, int64_t t0, int64_t t1,
                                     int64_t qstart, int64_t kstart, int64_t klen, double *scratch);

/* Grad: the same tokens; writes dq and adds sum dS*q (unscaled) and P*dY into
 * the partial rows dkp [rows][d], dvp [rows][dv] (row 0: KV row kvlo);
 * scratch: SPA_NSAS_F64_GRAD_SCRATCH doubles. */
typedef void spa_nsas_grad_f64_kernel(const spa_nsas_f64_args *f, int64_t n2, int64_t t0,
                                      int64_t t1, int64_t qstart, int64_t kstart, int64_t klen,
                                      int64_t kvlo, double *dkp, double *dvp, double *scratch);

/* 8-byte words of scratch per block (g <= 32, d, dv <= 768, kc <= 2^24: no
 * overflow). Forward: qt [d][GP], scores then P [kc*bs][GP], out [dv][GP],
 * max, sum [GP], the blocks [kc]. Grad: qt, dqt [d][GP], dyt [dv][GP],
 * qn [g][d], dyn [g][dv], P and dP then dS [kc*bs][GP], max, sum, D [GP],
 * the blocks [kc]. */
#define SPA_NSAS_F64_FWD_SCRATCH(g, d, dv, kc, bs)                                              \
    (SPA_NSAS_F64_GP(g) * ((d) + (kc) * (bs) + (dv) + 2) + 3 * (kc))
#define SPA_NSAS_F64_GRAD_SCRATCH(g, d, dv, kc, bs)                                             \
    (SPA_NSAS_F64_GP(g) * (2 * (d) + (dv) + 2 * (kc) * (bs) + 3) + (g) * ((d) + (dv)) + 3 * (kc))

spa_nsas_f64_args spa_nsas_f64_args_of(const spa_nsas_args *a, const spa_tensor *k,
                                       const spa_tensor *v, double scale);

/* Forward phase 2, everything checked and copied (tr): blocks of per_block
 * query tokens, each over every kv head; scratch [blocks][FWD_SCRATCH]. */
void spa_nsas_f64_forward(const spa_runner *rn, const spa_nsas_f64_args *f,
                          const spa_nsas_trusted *tr, int64_t t1, int64_t per_block,
                          uint32_t blocks, double *scratch);

/* A gradient output (dK or dV, [T2, N2, dim], checked) as the reductions
 * store it: its data, dtype and strides only (phase 2 of the grad keeps
 * these under the kernels instead of whole descriptors: Cortex-M stack). */
typedef struct spa_nsas_grad_out {
    void *data;
    int64_t s0, s1, s2;
    int32_t dtype;
} spa_nsas_grad_out;

/* Grad phase 2: the token ranges and partial table of nsa_select_grad.c
 * (offsets in doubles), per kv head step 1 (ranges into their partials) then
 * step 2 (each KV row sums the partials covering it in range order; dk
 * scaled), as the f32 driver does. */
typedef struct spa_nsas_f64_grad_plan {
    int64_t ranges, per_range, t1, t2;
    const uint64_t *offset;
    const int64_t *kvlo, *kvhi;
    double *partial, *scratch; /* scratch [ranges][GRAD_SCRATCH] */
    const spa_nsas_grad_out *dk, *dv;
} spa_nsas_f64_grad_plan;
void spa_nsas_f64_grad(const spa_runner *rn, const spa_nsas_f64_args *f,
                       const spa_nsas_trusted *tr, const spa_nsas_f64_grad_plan *gp);

#endif
