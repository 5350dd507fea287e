/* A decode unit's row of attention split into parts (nsa_select_infer.c,
 * dsa_sparse_attention.c): a decode step has few units, so each unit's
 * selected rows are cut into parts that run as blocks of their own, and a
 * second pass merges each unit's parts in part order.
 *
 * The partial results of a round of units, per (round unit, part): the
 * output [g][dv], then the softmax max [g] and sum [g], in the kernels'
 * element (double for FLOAT64, else float).
 * - f32 and f64: a part's output is its own softmax's; the merge weighs
 *   part k by l_k exp(m_k - M) / L (the log-sum-exp rule, in double).
 * - f16 and bf16: P is rounded after dividing by the whole row's sum, so a
 *   part first gives its max and sum, then (spa_attn_parts_scale) runs
 *   again with exp(m_k - M) / L; its output is already normalised and the
 *   merge adds the parts in order (in double), rounding once. */
#ifndef SPA_ATTN_PARTS_H
#define SPA_ATTN_PARTS_H

#include <stdbool.h>
#include <stdint.h>

/* Parts per unit at most. */
#ifndef SPA_ATTN_PARTS_MAX
#define SPA_ATTN_PARTS_MAX 8
#endif

typedef struct spa_attn_parts {
    unsigned char *base;
    int64_t round, parts, g, dv; /* units per round, parts per unit, heads, value dim */
    int32_t dtype;               /* the operator's dtype */
} spa_attn_parts;

/* Elements of a round's partials (their element: spa_attn_parts_elem_bytes). */
uint64_t spa_attn_parts_elems(int64_t round, int64_t parts, int64_t g, int64_t dv);
uint64_t spa_attn_parts_elem_bytes(int32_t dtype);

/* Part `part` of round unit ru: its output (which 0), max (1) or sum (2). */
unsigned char *spa_attn_parts_at(const spa_attn_parts *ap, int64_t ru, int64_t part, int which);

/* f16 / bf16: per head l < heads (<= g) of round unit ru, exp(m_part - M)
 * / L for part `part` (0 where the row has no key), into pscale[l]. */
void spa_attn_parts_scale(const spa_attn_parts *ap, int64_t ru, int64_t part, int64_t heads, float *pscale);

/* Round unit ru's parts merged into its output rows, heads l < heads (<=
 * g): head l's element c at o + l * os_head + c * os_c (elements of the
 * dtype); where mx / sm are given, the row's max M at mx + l * mx_head and
 * its sum L at sm + l * sm_head (double for FLOAT64, else float). A NaN max
 * or sum makes the row NaN, as in one part; a row without keys gets O = 0,
 * M = -FLT_MAX, L = 0, as the kernels give. */
void spa_attn_parts_merge(const spa_attn_parts *ap, int64_t ru, int64_t heads, void *o, int64_t os_head,
                          int64_t os_c, void *mx, int64_t mx_head, void *sm, int64_t sm_head);

#endif
