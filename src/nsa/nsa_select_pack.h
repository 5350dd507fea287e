/* The key and value rows the selected-attention kernels read, as f32.
 *
 * Every query token of a unit reads K*bs gathered rows of one kv head; were
 * each unit to widen (or copy) its rows into a staging buffer, the copies
 * would cost as much as a quarter of the products. So the rows are made f32
 * once per call and kv head, just before the units of that head run: the
 * rows of the head contiguous and dim floats apart, a pitch the
 * micro-kernels can take as a constant for the common head dims
 * (nsa_select_mk.h). An f32 tensor already laid out so (one kv head, dense
 * rows) is read in place; any other is widened or copied into the
 * workspace, one head's rows at a time (rows x (D + Dv) floats in all).
 *
 * The copy is also what lets the kernels' loops stay whole: its rows are
 * the "kernel rows" of nsa_select_plan.h, each batch's KV rounded up to
 * whole blocks (the rows past a partial last block are zeros, never
 * attended), and each row is padded with zeros to dp / dvp floats (the head
 * dim rounded up to 16). A zero key column adds nothing to a score, a zero
 * value column only feeds output columns that are not stored. So any tensor
 * with a head-dim tail or a partial block is copied; the in-place path is
 * for aligned shapes only. */
#ifndef SPA_NSA_SELECT_PACK_H
#define SPA_NSA_SELECT_PACK_H

#include "internal.h"
#include "nsa_select_kernel.h"
#include "nsa_select_plan.h"

/* Whether t (a checked [rows, n2, dim] float tensor, k or v of a call of
 * shape sh, sequence arrays checked) has to be copied. */
bool spa_nsas_pack_needed(const spa_tensor *t, const spa_nsas_shape *sh);

/* Floats of the packed copy of one head of t: sh->kv_rows rows of the head
 * dim rounded up to 16 (0 if t is read in place). */
uint64_t spa_nsas_pack_floats(const spa_tensor *t, const spa_nsas_shape *sh);

/* Points a->kf / a->vf at the f32 kernel rows of kv head h2 of k and v (all
 * any index reaches), copying them first into kpack / vpack (sized by
 * spa_nsas_pack_floats) when needed, on the caller's runner. tr: the trusted
 * sequence arrays. The kernels of that head may run once it returns. */
void spa_nsas_attach_head(spa_nsas_args *a, const spa_nsas_shape *sh, const spa_nsas_trusted *tr,
                          const spa_tensor *k, const spa_tensor *v, float *kpack, float *vpack,
                          int64_t h2, const spa_runner *runner);

/* The same for the bf16 forward on a layer with the bf16 dot product
 * (SPA_ISA_BF16_DOT): a->kb / a->vp at kv head h2's rows of bf16 k and v,
 * always copied (the key rows padded to dp, the value rows interleaved in
 * pairs: spa_nsas_args), into kpack / vpack sized by spa_nsas_pack_floats,
 * which holds them in half the floats. a->kf / a->vf NULL. */
void spa_nsas_attach_head_bf16(spa_nsas_args *a, const spa_nsas_shape *sh,
                               const spa_nsas_trusted *tr, const spa_tensor *k,
                               const spa_tensor *v, float *kpack, float *vpack, int64_t h2,
                               const spa_runner *runner);

#endif
