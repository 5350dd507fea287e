/* spattn: multi-scale deformable attention (spec/msda.md).
 * Two-stage like every spattn op; see spattn/nsa.h for the calling pattern. */
#ifndef SPATTN_MSDA_H
#define SPATTN_MSDA_H

#include "spattn/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* MultiScaleDeformableAttnFunction: value [bs,nk,nh,C], spatialShape [nl,2]
 * rows (H, W) and levelStartIndex [nl] (INT32 or INT64, untrusted: checked),
 * location [bs,nq,nh,nl,np,2] with last dim (x, y) normalised, attnWeight
 * [bs,nq,nh,nl,np]; output [bs,nq,nh*C].
 *
 * Rules (161002 unless noted): value, location, attnWeight and output share
 * one float dtype (F32, F16, BF16); C % 8 == 0, C <= 256, nq >= 32, nh, nl,
 * np <= 16; every dimension consistent; every level 1 <= H, W, start >= 0,
 * all <= INT32_MAX and start + H*W <= nk (read again in phase 2). NULL
 * pointers: 161001. An empty input: success, workspace 0, output zero-filled.
 * Workspace: an f32 copy of value laid out per (batch, head), plus a few KiB
 * per block (at most 48 blocks). Results do not depend on the runner. */
spa_status spa_msda_get_workspace_size(const spa_tensor *value, const spa_tensor *spatial_shape,
                                       const spa_tensor *level_start_index,
                                       const spa_tensor *location, const spa_tensor *attn_weight,
                                       const spa_tensor *output, uint64_t *workspace_size,
                                       spa_executor *executor);
spa_status spa_msda(void *workspace, uint64_t workspace_size, const spa_executor *executor,
                    const spa_runner *runner);

/* MultiScaleDeformableAttentionGrad: gradValue, gradLocation (d/dx, d/dy) and
 * gradAttnWeight from gradOutput [bs,nq,nh*C]. Every float tensor may have
 * its own dtype; nq < 500000 (no lower bound); otherwise the forward's rules,
 * and outputs shaped like value, location and attnWeight. Workspace: per
 * block (at most 48, each owning whole (batch, head) pairs) two f32 slices of
 * nk*C (value packed, gradValue accumulated), plus a few KiB. */
spa_status spa_msda_grad_get_workspace_size(
    const spa_tensor *value, const spa_tensor *spatial_shape, const spa_tensor *level_start_index,
    const spa_tensor *location, const spa_tensor *attn_weight, const spa_tensor *grad_output,
    const spa_tensor *grad_value, const spa_tensor *grad_location,
    const spa_tensor *grad_attn_weight, uint64_t *workspace_size, spa_executor *executor);
spa_status spa_msda_grad(void *workspace, uint64_t workspace_size, const spa_executor *executor,
                         const spa_runner *runner);

#ifdef __cplusplus
}
#endif
#endif
