/* What NsaSelectedAttention and its grad share: the argument rules of
 * spec/nsa.md 3.3 / 4.3, the untrusted-index check, batch lookup and the
 * kernel argument block. */
#ifndef SPA_NSA_SELECT_PLAN_H
#define SPA_NSA_SELECT_PLAN_H

#include "internal.h"
#include "nsa_select_kernel.h"

typedef struct spa_nsas_shape {
    int64_t t1, t2, n1, n2, g, gp, d, dv, bs, kc;
    int64_t batches;
    int64_t kv_total; /* a_kv[B-1]: KV rows any index can reach */
    int causal;
} spa_nsas_shape;

/* Rules on query, key, value, topkIndices, the mask, both sequence arrays and
 * the attributes (every pointer already non-NULL except mask), including the
 * check of every index against its batch. Fills *sh. */
spa_status spa_nsas_check_common(const spa_tensor *q, const spa_tensor *k, const spa_tensor *v,
                                 const spa_tensor *topk, const spa_tensor *mask,
                                 const spa_int_array *sq, const spa_int_array *skv,
                                 int64_t head_num, const char *layout, int64_t sparse_mode,
                                 int64_t bs, int64_t kc, spa_nsas_shape *sh);

/* Batch b of a checked cumulative array: [start, end). */
void spa_nsas_batch(const spa_int_array *a, int64_t b, int64_t *start, int64_t *end);
/* The batch holding token t of a checked cumulative array (t < a[B-1]). */
int64_t spa_nsas_batch_of(const spa_int_array *a, int64_t t);

/* Lanes of the micro-kernels for a group of g heads: 16 or 32. */
int64_t spa_nsas_lanes(int64_t g);

/* Kernel argument block from the checked tensors (grad ones may be NULL); the
 * key / value rows are attached by spa_nsas_attach_rows. */
spa_nsas_args spa_nsas_args_of(const spa_nsas_shape *sh, const spa_tensor *q,
                               const spa_tensor *topk, const spa_tensor *o,
                               const spa_tensor *mx, const spa_tensor *sm, const spa_tensor *dy,
                               const spa_tensor *dq, double scale);

#endif
