/* Random NsaSelectedAttention problems shared by the forward and grad suites:
 * shapes, sequence arrays, indices, and the tensors with red zones. */
#ifndef SPA_TEST_NSAS_CASE_H
#define SPA_TEST_NSAS_CASE_H

#include "ref/ref_nsa_select.h"
#include "util.h"

#define NSAS_MAX_BATCHES 6

typedef struct nsas_case {
    spa_dtype dt;
    int64_t n1, n2, d, dv, bs, kc;
    int64_t batches;
    int64_t qstart[NSAS_MAX_BATCHES], qlen[NSAS_MAX_BATCHES];
    int64_t kstart[NSAS_MAX_BATCHES], klen[NSAS_MAX_BATCHES];
    int64_t sq_vals[NSAS_MAX_BATCHES], skv_vals[NSAS_MAX_BATCHES]; /* cumulative */
    spa_int_array sq, skv;
    int64_t t1, t2; /* t2 may exceed the last KV end */
    int64_t sparse_mode;
    bool has_mask, strided;
    double scale;
    int32_t *idx; /* [t1][n2][kc], malloc'd */
} nsas_case;

/* Case i of a sweep: dtypes every 3, the rest drawn from r (GQA ratios,
 * head dims, Dv < D, block sizes and counts, batches with Sq != Skv, empty
 * batches, causal or not, duplicates, strided views). */
void nsas_case_draw(nsas_case *c, int i, rng *r);
/* A fixed shape; lengths are (qlen, klen) pairs; indices drawn from r with
 * or without duplicates. */
void nsas_case_fixed(nsas_case *c, spa_dtype dt, int64_t n1, int64_t n2, int64_t d, int64_t dv,
                     int64_t bs, int64_t kc, int64_t batches, const int64_t *qlen,
                     const int64_t *klen, int64_t sparse_mode, bool has_mask, rng *r, bool dups);
/* The named features both suites check (GQA 12/4, 6/1 and 18/1, D 192 /
 * Dv 128, odd head dims, causal with Sq < Skv and Sq > Skv, duplicates, the
 * largest K, block and head dim; -1 padding, partial last blocks, head dims
 * 100 and 48, Dv != D, G 1 to 16 in each dtype): how many, and case i of them (every other
 * one on strided views). */
int nsas_feature_count(void);
void nsas_case_feature(nsas_case *c, int i, rng *r);
/* Turns random slots into -1 padding (some rows partly, some fully; the
 * last row always fully). */
void nsas_case_pad_indices(nsas_case *c, rng *r);
/* Redraws the indices (distinct blocks where the batch has enough; the last
 * block of a batch may be partial; -1 where a batch has no KV). */
void nsas_case_draw_indices(nsas_case *c, rng *r, bool dups);
void nsas_case_free(nsas_case *c);
bool nsas_case_causal(const nsas_case *c);
ref_nsas_problem nsas_case_problem(const nsas_case *c);
void nsas_case_describe(const nsas_case *c, char *buf, size_t size);

/* Every tensor of both ops. */
typedef struct nsas_io {
    ttensor q, k, v, topk, mask, mx, sm, o, dy, dq, dk, dv;
} nsas_io;
/* q, k, v, dy (and o for the grad) random in the dtype; topk from c->idx;
 * outputs filled with canaries. */
void nsas_io_make(nsas_io *io, const nsas_case *c, rng *r);
void nsas_io_free(nsas_io *io);
void nsas_io_set_indices(nsas_io *io, const nsas_case *c);
/* NaN / Inf in one or two elements of q, k or v. */
void nsas_io_poison(nsas_io *io, rng *r);
/* Writes a [t1][n1] statistic into all 8 lanes of an f32 [t1][n1][8] tensor. */
void nsas_io_set_stat(ttensor *tt, const double *val, int64_t count);

#endif
