/* Random DSA sparse attention problems shared by the forward and grad suites
 * (spattn/dsa.h): shapes, sequence arrays, indices, the tensors with red
 * zones, and each sequence's logical rows for the fp64 references. */
#ifndef SPA_TEST_DSA_CASE_H
#define SPA_TEST_DSA_CASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ref/ref_dsa_sparse_attention.h"
#include "spa_dtypes.h"
#include "util.h"

enum { DSA_MAX_B = 4 };

typedef struct dsa_case {
    spa_dtype dt;
    int64_t b, n1, n2, d, dr, dv, kc, bs, page, t, mode; /* dr 0: no rope part; bs: sparse_block_size */
    int64_t sq[DSA_MAX_B], len[DSA_MAX_B];
    bool paged, tnd, strided, sq_null, kv_null; /* kv_null: [B, S, N2, D], every L_b = S */
    bool absorb;             /* value: the key itself (Dv = D) or a view of its first Dv elements */
    bool want_max, want_sum; /* the softmax outputs given */
    double scale;
} dsa_case;

/* The forward's tensors (the grad reads them all: attention_out, softmax_max
 * and softmax_sum are its inputs). */
typedef struct dsa_io {
    ttensor q, qr, k, kr, v, idx, table, o, mx, sm;
    spa_tensor vview;                /* absorb with Dv < D: key's first Dv elements */
    int64_t pages, table_cols, lmax; /* lmax: the longest sequence */
    int64_t srows;                   /* contiguous key: dim 1; TND: T2 */
    int64_t rows_per;                /* rows per page (paged) or per batch (contiguous) */
    int64_t start[DSA_MAX_B];        /* TND: batch b's first row */
    int64_t *page_of;                /* [b][table_cols]: the test's own copy of the table */
    spa_int_array sq, len;
} dsa_io;

/* f32, f16, bf16 and, where built, f64: case i of a sweep gets dts[i % N]. */
extern const spa_dtype dsa_dts[4];
#define DSA_N_DTS (SPA_HAVE_F64 ? 4 : 3)

int64_t dsa_max_len(const dsa_case *c);
void dsa_case_sum(dsa_case *c); /* T from the S_b */
spa_dtype dsa_stat_dtype(spa_dtype dt);
double dsa_draw_scale(int64_t d, int64_t dr, rng *r);

/* What a draw is for: the forward (paged keys half the time), or the grad
 * (contiguous and TND keys only, and a smaller budget: the grad's reference
 * and kernels do about three times the forward's work per row). */
enum { DSA_DRAW_FORWARD = 0, DSA_DRAW_GRAD = 1 };
/* Case i of a sweep: dtype dts[i % N], the rest drawn from r (G 1 .. 128,
 * head dims up to 768, value separate or the key, blocks 1 .. 64, both
 * modes, the key's layouts, short, empty and causal-before-the-keys
 * batches, K from 1 past the blocks), cut to the case set's budget. */
void dsa_case_draw(dsa_case *c, int i, rng *r, int purpose);
void dsa_case_describe(const dsa_case *c, char *buf, size_t n);
/* f32, two batches (40 and 20 keys, 2 and 1 queries), N1 4, N2 2, D 32 +
 * Dr 16, Dv 24, S 4, K 6, causal; layout 0 paged (16-row pages), 1
 * contiguous, 2 TND. */
void dsa_refusal_case(dsa_case *c, int layout);

/* The last token query i of batch b sees (negative: none). */
int64_t dsa_last_seen(const dsa_case *c, int64_t b, int64_t i);

/* Every input tensor of the forward drawn from r (random in [-1, 1), exact
 * in the dtype; the indices with -1, duplicates, blocks past the query's
 * position and partial last blocks), its outputs canary-filled. */
void dsa_io_make(dsa_io *io, const dsa_case *c, rng *r);
void dsa_io_free(dsa_io *io);
/* What a call gets as value: a tensor of its own, the key's very descriptor
 * (Dv = D), or the view of its first Dv elements. */
const spa_tensor *dsa_value_of(const dsa_case *c, const dsa_io *io);

/* The flat index of element e of row p of batch b, head n, in a key-shaped
 * tensor whose last dim is dim. */
int64_t dsa_row_flat(const dsa_case *c, const dsa_io *io, int64_t b, int64_t p, int64_t n, int64_t dim, int64_t e);

enum { DSA_PART_KEY, DSA_PART_ROPE, DSA_PART_VALUE };
/* A part (the key, its rope part, the value: absorb, the key's first Dv) as
 * each sequence's logical rows [b][lmax][n2][dim], read through the test's
 * copy of the table; rows past L_b 0. malloc'd. */
double *dsa_logical_rows(const dsa_case *c, const dsa_io *io, int part);
/* The indices as int32 [t][n2][kc] (malloc'd). */
int32_t *dsa_indices_of(const dsa_case *c, const dsa_io *io);
/* The reference's problem of the case (idx from dsa_indices_of). */
ref_dsa_sa_problem dsa_problem_of(const dsa_case *c, const dsa_io *io, const int32_t *idx);

#endif
