/* What the DSA grads share about the gradient of the key rows (spattn/dsa.h):
 * the queries are cut into token ranges, run as parallel blocks; a range
 * adds its tokens' contributions, in token order, into its own partial,
 * which covers the key rows of the batches its tokens lie in (the batches'
 * L_b rows one after the other: "partial rows"); the reduction then gives
 * each output row the sum of the partials covering it, in range order. The
 * ranges depend on the shapes and lengths only, so the sums do not depend
 * on the runner; no atomics. */
#ifndef SPA_DSA_GRAD_ROWS_H
#define SPA_DSA_GRAD_ROWS_H

#include <stdint.h>

#include "dsa_kv.h"
#include "internal.h"
#include "spattn/types.h"

/* The per-batch lengths: the trusted copies (phase 2), or else the
 * caller's checked arrays (phase 1), or else the defaults (T / B queries,
 * page_size keys). */
typedef struct spa_dsa_lens {
    const int64_t *sq, *kv;
    const spa_int_array *sqa, *kva;
    int64_t batches, t, page_size;
} spa_dsa_lens;

static inline int64_t spa_dsa_lens_nq(const spa_dsa_lens *l, int64_t b)
{
    return l->sq != NULL ? l->sq[b] : l->sqa != NULL ? l->sqa->data[b] : l->t / l->batches;
}

static inline int64_t spa_dsa_lens_kv(const spa_dsa_lens *l, int64_t b)
{
    return l->kv != NULL ? l->kv[b] : l->kva != NULL ? l->kva->data[b] : l->page_size;
}

/* The ranges of a grad: their count and size, and the partials' row pitch
 * (elements) and total. */
typedef struct spa_dsa_ranges {
    int64_t ranges, per_range, pitch;
    uint64_t es, elems;
} spa_dsa_ranges;

/* Up to 16 ranges (at most T), fewer where a range's partial (zeroed,
 * then read by the reduction) would cost more than a 64th of the work
 * (multiply-adds of one key head; in float, whose conversions every
 * target has without a runtime helper), and while the partials of one key head
 * would pass SPA_DSA_PARTIAL_BYTES (unless one range alone needs more). */
void spa_dsa_ranges_plan(const spa_dsa_lens *l, float work, int64_t pitch, uint64_t es, spa_dsa_ranges *rg);

/* Each range's partial rows [lo, hi) and first element. */
void spa_dsa_ranges_table(const spa_dsa_lens *l, const spa_dsa_ranges *rg, int64_t *lo, int64_t *hi,
                          uint64_t *offset);

/* The partials in the workspace, as phase 2 carved and filled them. */
typedef struct spa_dsa_partials {
    unsigned char *base;
    const int64_t *lo, *hi;
    const uint64_t *offset;
    spa_dsa_ranges rg;
} spa_dsa_partials;

/* Range r's partial (rows lo .. hi - 1, pitch elements each). */
static inline unsigned char *spa_dsa_partial_of(const spa_dsa_partials *p, int64_t r)
{
    return p->base + p->offset[r] * p->rg.es;
}

/* Elements [c0, c0 + n) (n <= SPA_DSA_SUM_MAX) of partial row `row` summed over the
 * ranges covering it, in range order, in the partials' element (f32 sums
 * held exactly in acc); row -1: zeros. */
enum { SPA_DSA_SUM_MAX = 32 }; /* elements per sum: the callers' buffers are on the stack */
void spa_dsa_partials_sum(const spa_dsa_partials *p, int64_t row, int64_t c0, int64_t n, double *acc);

/* The partial row of the key's row `row` of page pg (spa_dsa_kv's view),
 * or -1: a row past L_b, or past every TND batch (its gradient is 0). ks,
 * kv, first: per batch its first key row (TND), L_b, its first partial
 * row. */
int64_t spa_dsa_partial_row(const spa_dsa_kv *kv, const int64_t *ks, const int64_t *len, const int64_t *first,
                            int64_t pg, int64_t row);

/* n sums stored into elements of an output run (base, stride apart),
 * rounded once to dtype. */
void spa_dsa_store_run(int32_t dtype, void *base, int64_t stride, const double *acc, int64_t n);

/* A grad's workspace: the copy of its executor's record that phase 2 runs
 * from (off the stack: the Cortex-M limit is 4 KiB); per batch S_b, L_b,
 * its first token, its first key row (TND) and its first partial row; per
 * range its partial rows [lo, hi) and its first element; a scratch per
 * range; the partials. The record and the per-batch slices come first,
 * their places independent of the lengths (spa_dsa_grad_head: phase 2
 * copies the lengths there before it plans). */
typedef struct spa_dsa_grad_slices {
    void *exec;
    int64_t *sq, *kv, *qs, *ks, *kf;
    int64_t *lo, *hi;
    uint64_t *offset;
    unsigned char *scratch, *partial;
} spa_dsa_grad_slices;

void spa_dsa_grad_head(spa_ws *ws, uint64_t exec_bytes, int64_t batches, spa_dsa_grad_slices *s);
void spa_dsa_grad_carve(spa_ws *ws, uint64_t exec_bytes, int64_t batches, const spa_dsa_ranges *rg,
                        uint64_t scratch_bytes, spa_dsa_grad_slices *s);

/* The per-batch firsts (qs, kf) from the copied lengths, the range table,
 * and the view of the partials. */
void spa_dsa_grad_tables(const spa_dsa_lens *l, const spa_dsa_ranges *rg, spa_dsa_grad_slices *s,
                         spa_dsa_partials *part);

/* Output rows per task of the reductions, and their task count for key
 * view kx ([pages, page_size, ..]). */
enum { SPA_DSA_REDUCE_ROWS = 64 };
static inline int64_t spa_dsa_reduce_tasks(const spa_dsa_kv *kv)
{
    return kv->pages * ((kv->page_size + SPA_DSA_REDUCE_ROWS - 1) / SPA_DSA_REDUCE_ROWS);
}

#endif
