/* float64 (SPA_FLOAT64) in this build: which ops have their float64 path.
 *
 * SPA_HAVE_F64 (the generated spa_dtypes.h) is 1 when the target's DTYPES
 * lists f64 (the Makefile's default; the Cortex-M targets leave it out). An
 * op's flag below is SPA_HAVE_F64 once its float64 path is written, 0 before;
 * an op given float64 tensors where its flag is 0 refuses in phase 1 with
 * 161002, by
 *     SPA_REQUIRE(dt != SPA_FLOAT64 || SPA_FLOAT64_<OP>);
 * so that the reason (spa_executor_reason) names the flag, never a silently
 * wrong result from an f32 kernel.
 *
 * An op's float64 path: f64 in, every sum and product in double, f64 out
 * (the op's f32 statistics tensors become f64 too). It is
 *   templates/f64/<op>.c.m4   the kernels, expanded per ISA against the
 *                             layer's spa_vd part (src/isa/f64_*.h), symbols
 *                             spa_k_<op>_f64_<isa>_<tile> (SPA_KSYM);
 *   gen/tiles/f64/<op>.m4     their declarations (SPA_ADD_DECL), which land in
 *                             the generated spa_kernels_f64.h;
 *   src/<op>_f64.c            the phase-2 driver where one is needed;
 * called from src/<op>.c by a short dispatch after phase 2 has checked
 * everything again and copied the untrusted index arrays into the workspace,
 * with the float64 workspace sized in phase 1. */
#ifndef SPA_F64_H
#define SPA_F64_H

#include <stdbool.h>

#include "spa_dtypes.h"
#include "spattn/types.h"

#define SPA_FLOAT64_NSA_COMPRESS SPA_HAVE_F64
#define SPA_FLOAT64_NSA_COMPRESS_GRAD SPA_HAVE_F64
#define SPA_FLOAT64_NSA_SELECT SPA_HAVE_F64
#define SPA_FLOAT64_NSA_SELECT_GRAD SPA_HAVE_F64
#define SPA_FLOAT64_MSDA SPA_HAVE_F64
#define SPA_FLOAT64_MSDA_GRAD SPA_HAVE_F64
/* the lightning indexer's f64 path is its driver's own double code */
#define SPA_FLOAT64_DSA_LIGHTNING_INDEXER SPA_HAVE_F64

/* The dtype of selected attention's softmax statistics (max, sum) for
 * query dtype dt: float64 with float64 tensors (the grad recomputes P from
 * them, which f32 statistics would limit to f32 accuracy), else float32. */
static inline int32_t spa_nsas_stat_dtype(int32_t dt)
{
    return dt == SPA_FLOAT64 ? SPA_FLOAT64 : SPA_FLOAT32;
}

/* Whether any of the n tensors is float64 (ops whose float dtypes may
 * differ tensor by tensor). */
static inline bool spa_any_float64(const spa_tensor *const *t, int n)
{
    for (int i = 0; i < n; i++)
        if (t[i]->dtype == SPA_FLOAT64)
            return true;
    return false;
}

#endif
