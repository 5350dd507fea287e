/* The LightningIndexer score kernel (generated per ISA from
 * templates/dsa/dsa_lightning_indexer.c.m4, f32 only): the scores
 * I[r] = sum_g w[g] * ReLU(q[g] . k[r]) of `rows` gathered key rows against
 * one token's heads of one key head. */
#ifndef SPA_DSA_LI_KERNEL_H
#define SPA_DSA_LI_KERNEL_H

#include <stdint.h>

typedef struct spa_dsli_args {
    const float *qt; /* [chunks][dp][gp]: the heads transposed, lanes past G zero */
    const float *w;  /* [chunks][gp]: their weights, lanes past G zero */
    int64_t chunks;  /* ceil(G / 32) chunks of heads */
    int64_t g;       /* G: the lanes past it (of the last chunk) are padding */
    int64_t gp;      /* lanes per chunk: 8, 16 or 32 (spa_nsas_lanes) */
    int64_t dp;      /* the head dim padded to 16 (rows of k, of qt) */
} spa_dsli_args;

/* k [rows][dp] (rows a multiple of 16, at most SPA_DSLI_TK), s a scratch of
 * rows * gp floats; out[r] for r < rows. Per row the chunks' terms are
 * summed in a fixed order: the result does not depend on who calls. */
typedef void spa_dsli_kernel(const spa_dsli_args *a, const float *k, int64_t rows, float *s, float *out);

/* The grad (templates/dsa/dsa_lightning_indexer_grad.c.m4): per chunk of
 * heads S = K Qᵀ again, then for each of the valid rows r (dy[r] the
 * gradient of its score) dw[l] += dy[r] ReLU(s) and
 * C[r][l] = [s > 0] dy[r] w[l]; dq += Kᵀ C (transposed, as qt) and the
 * rows' dk += C Q. Rows past valid (zero rows of a whole tile) add
 * nothing. */
typedef struct spa_dsli_grad_args {
    spa_dsli_args f; /* qt, w and the shape of the heads */
    const float *qn; /* [chunks][gp][dp]: the heads as rows, rows past G zero */
    float *dqt;      /* [chunks][dp][gp]: dq accumulators (added to) */
    float *dw;       /* [chunks][gp]: dweights accumulators (added to) */
} spa_dsli_grad_args;

/* k [rows][dp] (rows a multiple of 16, within the tile's buffer: see
 * tile_rows in src/dsa/dsa_lightning_indexer_grad.c), dy
 * [valid], s a scratch of rows * gp floats; dk [rows][dp] added to. */
typedef void spa_dsli_grad_kernel(const spa_dsli_grad_args *a, const float *k, const float *dy, int64_t rows,
                                  int64_t valid, float *s, float *dk);

#endif
