/* The key and value rows the selected-attention kernels read, as f32.
 *
 * Every query token of a unit reads K*bs gathered rows of one kv head; were
 * each unit to widen (or copy) its rows into a staging buffer, the copies
 * would cost as much as a quarter of the products. So the rows are made f32
 * once per call, laid out [n2][rows][dim]: the rows of one head contiguous
 * and dim floats apart, a pitch the micro-kernels can take as a constant for
 * the common head dims (nsa_select_mk.h). An f32 tensor already laid out so
 * (one kv head, dense rows) is read in place; any other is widened or copied
 * into the workspace first. */
#ifndef SPA_NSA_SELECT_PACK_H
#define SPA_NSA_SELECT_PACK_H

#include "internal.h"
#include "nsa_select_kernel.h"

/* Row r of kv head h is base + h * head + r * row (floats). */
typedef struct spa_nsas_f32rows {
    const float *base;
    int64_t row, head;
} spa_nsas_f32rows;

/* Whether t (a checked [rows, n2, dim] float tensor) has to be widened. */
bool spa_nsas_pack_needed(const spa_tensor *t);

/* Floats of the packed copy of the first `rows` rows of t (0 if read in place). */
uint64_t spa_nsas_pack_floats(const spa_tensor *t, int64_t rows);

/* The rows of t, packed into dst (spa_nsas_pack_floats of them) or in place. */
spa_nsas_f32rows spa_nsas_rows_of(const spa_tensor *t, int64_t rows, float *dst);

/* Pack tasks: rows [0, rows) of every head in chunks; run them (any runner)
 * before the kernels read the rows. */
typedef struct spa_nsas_pack {
    const spa_tensor *t;
    int64_t rows;
    float *dst;
} spa_nsas_pack;

uint32_t spa_nsas_pack_tasks(const spa_nsas_pack *p);
void spa_nsas_pack_task(void *arg, uint32_t task);

/* Points a->kf / a->vf at the f32 rows of k and v (the first kv_total rows,
 * all any index reaches), widening them first into kpack / vpack (sized by
 * spa_nsas_pack_floats) when needed, on the caller's runner. */
void spa_nsas_attach_rows(spa_nsas_args *a, int64_t kv_total, const spa_tensor *k,
                          const spa_tensor *v, float *kpack, float *vpack,
                          const spa_runner *runner);

#endif
