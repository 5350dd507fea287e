/* NsaCompressGrad in float64: the kernel contract (templates/f64/
 * nsa_compress_grad.c.m4) and the phase-2 driver (nsa_compress_f64.c).
 * The forward's float64 kernel has the f32 kernels' type
 * (spa_nsac_fwd_kernel, scratch unused) and runs in their driver. */
#ifndef SPA_NSA_COMPRESS_F64_H
#define SPA_NSA_COMPRESS_F64_H

#include "nsa_compress_plan.h"

/* Tokens [t0, t1) of one batch (first token bstart, nwin windows whose
 * outputGrad rows start at row0): writes inputGrad for those tokens (+0
 * where no window covers one) and adds sum_d dY*x into wpart[j*n + h] for
 * every (window, j) landing on them, tokens ascending, then windows. */
typedef void spa_nsac_grad_f64_kernel(const spa_nsac_args *a, int64_t bstart, int64_t row0,
                                      int64_t nwin, int64_t t0, int64_t t1, double *wpart);

/* Phase 2 of NsaCompressGrad for float64 tensors, everything checked and the
 * batch table filled: token blocks (per_block tokens each) into inputGrad and
 * the per-block weightGrad partials wpart [blocks][bs * N], then each
 * weightGrad element the sum of its partials in block order. */
void spa_nsac_grad_f64_run(const spa_runner *rn, const spa_nsac_args *args,
                           const spa_nsac_table *tab, const spa_nsac_shape *sh, int64_t per_block,
                           uint32_t blocks, double *wpart, const spa_tensor *weight_grad);

#endif
