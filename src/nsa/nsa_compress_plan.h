/* What NsaCompress and NsaCompressGrad share: argument rules (spec/nsa.md
 * 1.3, 2.3), the batch table built in the workspace, and the block split. */
#ifndef SPA_NSA_COMPRESS_PLAN_H
#define SPA_NSA_COMPRESS_PLAN_H

#include "internal.h"
#include "nsa_compress_kernel.h"

/* Blocks per call at most: the parallel grain, and the bound on the
 * per-block partials of the grad. */
#define SPA_NSAC_MAX_BLOCKS 256

typedef struct spa_nsac_shape {
    int64_t tokens;  /* T */
    int64_t heads;   /* N */
    int64_t dim;     /* D */
    int64_t windows; /* M = sum_b n_b */
    int64_t batches; /* B */
} spa_nsac_shape;

/* Rules shared by both ops on input, weight, the sequence array and the
 * attributes; fills *shape (windows included). Pointers already non-NULL. */
spa_status spa_nsac_check_common(const spa_tensor *input, const spa_tensor *weight,
                                 const spa_int_array *seq, const char *layout, int64_t bs,
                                 int64_t st, int64_t seq_type, spa_nsac_shape *shape);

/* Windows of a batch of len tokens. */
int64_t spa_nsac_windows(int64_t len, int64_t bs, int64_t st);

/* Batch table in the workspace: start[b] (first token) and row[b] (first
 * window) for b in [0, B], with start[B] = T and row[B] = M. */
typedef struct spa_nsac_table {
    int64_t *start;
    int64_t *row;
    int64_t batches;
} spa_nsac_table;
void spa_nsac_table_take(spa_ws *ws, int64_t batches, spa_nsac_table *tab);
/* Fills the table from the sequence array, reading each element once and
 * checking it as read: 161002 unless the batches are what the checked shape
 * says (the caller's array may have changed since it was checked). The
 * kernels then use only the table. */
spa_status spa_nsac_table_fill(const spa_int_array *seq, int64_t seq_type, int64_t bs, int64_t st,
                               const spa_nsac_shape *shape, spa_nsac_table *tab);
/* The batch holding item `at` of a non-decreasing end array ends[0..B)
 * (ends = start + 1 or row + 1): the number of batches ending at or before it. */
int64_t spa_nsac_batch_of(const int64_t *ends, int64_t batches, int64_t at);

/* Splits `units` into at most SPA_NSAC_MAX_BLOCKS blocks of a multiple of
 * `granule` units; returns the units per block and the block count. */
int64_t spa_nsac_split(int64_t units, int64_t granule, uint32_t *blocks);

spa_nsac_args spa_nsac_args_of(const spa_tensor *x, const spa_tensor *w, const spa_tensor *y,
                               const spa_tensor *dx, int64_t bs, int64_t st);

#endif
