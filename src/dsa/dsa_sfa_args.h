/* What DSA sparse attention's forward and grad share about their arguments
 * (spattn/dsa.h): the inputs both take, the shape they determine, and the
 * rules that read no array contents, the sequence arrays and the indices. */
#ifndef SPA_DSA_SFA_ARGS_H
#define SPA_DSA_SFA_ARGS_H

#include <stdbool.h>
#include <stdint.h>

#include "dsa_kv.h"
#include "spattn/types.h"

/* The inputs of both directions; o is attention_out, the forward's output
 * and the grad's input. */
typedef struct spa_dsa_sfa_in {
    spa_tensor q, qr, k, kr, v, idx, table, o;
    spa_int_array sq, skv;
    double scale;
    int64_t sbs, mode;
    int32_t has_rope, has_table, has_sq, has_skv;
} spa_dsa_sfa_in;

/* What the arguments determine (derived again in phase 2). */
typedef struct spa_dsa_sfa_shape {
    spa_dsa_kv kv;         /* the key's layout and batches */
    int64_t t, n1, n2, g, d, dr, dv, kc, sbs, batches;
    int64_t dq, dp, dvp;   /* D + Dr; it and Dv rounded up to 16 */
    int64_t gu, groups;    /* heads per unit at most, groups of them per key head (the forward's) */
    int32_t dtype;
    bool v_in_k;           /* value is key's first Dv elements: no value rows of its own */
} spa_dsa_sfa_shape;

/* The rules that read no array contents; o_output: attention_out is
 * written (the forward) rather than read (the grad). */
spa_status spa_dsa_sfa_check(const spa_dsa_sfa_in *in, bool o_output, spa_dsa_sfa_shape *sh);

/* softmax_max / softmax_sum: [N2, T, G], FLOAT32 (FLOAT64 for f64). */
spa_status spa_dsa_sfa_check_stat(const spa_tensor *x, const spa_dsa_sfa_shape *sh, bool output);

/* The sequence arrays (spa_dsa_kv_check_seq): copies, or NULL. */
spa_status spa_dsa_sfa_check_seq(const spa_dsa_sfa_in *in, const spa_dsa_sfa_shape *sh, int64_t *sq_copy,
                                 int64_t *kv_copy, int64_t *start_copy);

/* Index x of batch b (L_b = len): -1 or a block of the sequence. */
static inline bool spa_dsa_sfa_index_ok(int64_t x, int64_t sbs, int64_t len)
{
    return x == -1 || (x >= 0 && x * sbs < len);
}

/* Every index, then the table entries of the pages the sequences' rows lie
 * on; sq / kv: the trusted copies (phase 2), or NULL to read the caller's
 * checked arrays. */
spa_status spa_dsa_sfa_check_indices(const spa_dsa_sfa_in *in, const spa_dsa_sfa_shape *sh, const int64_t *sq,
                                     const int64_t *kv);

#endif
