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
 * workspace, one head's rows at a time (rows x (D + Dv) floats in all). */
#ifndef SPA_NSA_SELECT_PACK_H
#define SPA_NSA_SELECT_PACK_H

#include "internal.h"
#include "nsa_select_kernel.h"

/* Whether t (a checked [rows, n2, dim] float tensor) has to be widened. */
bool spa_nsas_pack_needed(const spa_tensor *t);

/* Floats of the packed copy of the first `rows` rows of one head of t (0 if
 * t is read in place). */
uint64_t spa_nsas_pack_floats(const spa_tensor *t, int64_t rows);

/* Points a->kf / a->vf at the f32 rows of kv head h2 of k and v (the first
 * kv_total rows, all any index reaches), widening them first into kpack /
 * vpack (sized by spa_nsas_pack_floats) when needed, on the caller's runner.
 * The kernels of that head may run once it returns. */
void spa_nsas_attach_head(spa_nsas_args *a, int64_t kv_total, const spa_tensor *k,
                          const spa_tensor *v, float *kpack, float *vpack, int64_t h2,
                          const spa_runner *runner);

#endif
