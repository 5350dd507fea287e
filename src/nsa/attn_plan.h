/* What the attention ops of the NSA layer share (selected, compressed and
 * sliding-window attention, forward and grad): the rules of the grads'
 * tensors beside q / k / v, the grads' token ranges, and the workspace
 * slices that both phases carve in the same order after the trusted copies. */
#ifndef SPA_ATTN_PLAN_H
#define SPA_ATTN_PLAN_H

#include "internal.h"

/* A grad's tensors: q / k / v (checked by the op), the forward's output o and
 * its gradient dy, the statistics mx / sm (NULL where the op checks them
 * with q / k / v) and the gradients dq / dk / dv. */
typedef struct spa_attn_grad_tensors {
    const spa_tensor *q, *k, *v, *o, *dy, *mx, *sm, *dq, *dk, *dv;
} spa_attn_grad_tensors;

/* Descriptors (o, dy, mx, sm read; dq, dk, dv written), then dtypes: q's
 * for o, dy, dq, dk and dv, the statistics dtype of q's for mx and sm. */
spa_status spa_attn_grad_check_tensors(const spa_attn_grad_tensors *g);
/* Shapes: o and dy [t, n1, dv], mx and sm [t, n1, 8], dq / dk / dv those of
 * q / k / v. */
spa_status spa_attn_grad_check_dims(const spa_attn_grad_tensors *g, int64_t t, int64_t n1,
                                    int64_t dv);

/* Tokens [t0, t1) of the grads' token range r: per tokens each, t in all
 * (empty past the last token). */
static inline void spa_attn_range_tokens(int64_t r, int64_t per, int64_t t, int64_t *t0,
                                         int64_t *t1)
{
    *t0 = r * per;
    *t1 = *t0 + per < t ? *t0 + per : t;
    if (*t0 > *t1)
        *t0 = *t1;
}

/* The forward's slices: a scratch per block, the widened key / value rows of
 * one kv head (0 floats: read in place). */
typedef struct spa_attn_slices {
    float *scratch; /* [blocks][scratch_floats] */
    float *kpack, *vpack;
} spa_attn_slices;
void spa_attn_carve(spa_ws *ws, uint64_t blocks, uint64_t scratch_floats, uint64_t kpack_floats,
                    uint64_t vpack_floats, spa_attn_slices *s);

/* The grad's slices: a scratch per token range, the partials of one kv head
 * (each range's dK rows then dV rows), where each range's partial lies and
 * the rows it covers, and the widened key / value rows. */
typedef struct spa_attn_grad_slices {
    float *scratch;       /* [ranges][scratch_floats] */
    float *partial;       /* every range's partial, for the head being run */
    uint64_t *offset;     /* [ranges]: first float of a range's partial */
    int64_t *lo, *hi;     /* [ranges]: rows a range's partial covers */
    float *kpack, *vpack; /* widened key / value rows */
} spa_attn_grad_slices;
void spa_attn_grad_carve(spa_ws *ws, uint64_t ranges, uint64_t scratch_floats,
                         uint64_t partial_floats, uint64_t kpack_floats, uint64_t vpack_floats,
                         spa_attn_grad_slices *s);

#endif
