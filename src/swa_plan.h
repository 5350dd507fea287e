/* What sliding-window attention and its grad share: the argument rules of
 * docs/sliding_window_attention.md 5, the trusted copy of the sequence
 * array, the f32 key / value rows of one kv head and the kernel arguments. */
#ifndef SPA_SWA_PLAN_H
#define SPA_SWA_PLAN_H

#include "internal.h"
#include "spattn/swa.h"
#include "swa_kernel.h"

/* (the public constants, as int64 values) */
#define SPA_SWA_WINDOW_KEYS_ ((int64_t)SPA_SWA_WINDOW_KEYS)
#define SPA_SWA_WINDOW_LEFT_ ((int64_t)SPA_SWA_WINDOW_LEFT)

#define SPA_SWA_DIM_STEP 16
/* Head dims beyond this are refused: no attention head is this wide, and the
 * bound keeps the per-block scratch sizes in range (docs/sliding_window_attention.md 5,
 * rule 8). */
#define SPA_SWA_DIM_MAX ((int64_t)1 << 24)

typedef struct spa_swa_shape {
    int64_t t, n1, n2, g, gp, d, dv, dp, dvp;
    int64_t batches;
    int64_t seq_type;
    int64_t left;  /* keys before a query in its band; INT64_MAX: unbounded */
    int64_t lanes; /* statistics' copies per row: 8 ([T,N1,8]) or 1 ([T,N1]) */
    double scale;  /* the scale used (the default resolved) */
} spa_swa_shape;

/* The rules that read no array contents: attributes, q / k / v and the
 * statistics (as outputs when stats_out), the sequence array's size. */
spa_status spa_swa_check_shapes(const spa_tensor *q, const spa_tensor *k, const spa_tensor *v,
                                const spa_tensor *mx, const spa_tensor *sm, bool stats_out,
                                const spa_int_array *seq, int64_t seq_type, double scale,
                                int64_t head_num, const char *layout, int64_t window,
                                int64_t window_type, spa_swa_shape *sh);

/* The sequence array's contents: total == T. With copy (phase 2, [batches]),
 * each element is read once and its cumulative end written there. */
spa_status spa_swa_check_seq(const spa_int_array *seq, const spa_swa_shape *sh, int64_t *copy);

/* The batch holding token t (t < T) of checked cumulative ends end[0..n). */
int64_t spa_swa_batch_of(const int64_t *end, int64_t n, int64_t t);
static inline int64_t spa_swa_batch_start(const int64_t *end, int64_t b)
{
    return b == 0 ? 0 : end[b - 1];
}

/* Floats of the f32 copy of one kv head of t (k or v): 0 when its rows are
 * read in place (dense f32 rows of a multiple of 16 elements). */
uint64_t spa_swa_pack_floats(const spa_tensor *t, const spa_swa_shape *sh);
/* Points a->kf / a->vf at the f32 rows of kv head h2, widening them first
 * into kpack / vpack where needed, on the runner. */
void spa_swa_attach_head(spa_swa_args *a, const spa_swa_shape *sh, const spa_tensor *k,
                         const spa_tensor *v, float *kpack, float *vpack, int64_t h2,
                         const spa_runner *runner);

/* Kernel arguments from checked tensors (grad ones may be NULL). */
spa_swa_args spa_swa_args_of(const spa_swa_shape *sh, const spa_tensor *q, const spa_tensor *k,
                             const spa_tensor *v, const spa_tensor *o, const spa_tensor *mx,
                             const spa_tensor *sm, const spa_tensor *dy, const spa_tensor *dq);

#endif
