/* What NsaCompressAttention and its grad share: the argument rules of
 * docs/nsa_compress_attention.md 4, the trusted copies phase 2 runs on
 * (lengths, masks), the lane grouping of the kernels and the kernel
 * argument block. */
#ifndef SPA_NSA_CATTN_PLAN_H
#define SPA_NSA_CATTN_PLAN_H

#include "internal.h"
#include "nsa_cattn_kernel.h"
#include "nsa_select_plan.h"

typedef struct spa_nsca_shape {
    int64_t t1, t2, n1, n2, g, d, dv, dp, dvp;
    int64_t l, st, ls, kc, msel, nn; /* l, d, l', K, l'/d, l/d */
    int64_t batches;
    int64_t hc, tq, gp; /* lane grouping (spa_nsca_args) */
    int causal, has_mask, has_tmask;
    /* from the length arrays (spa_nsca_check_seq) */
    int64_t max_sq, max_cmp, max_sel, cmp_total;
    int64_t kv_rows; /* sum over batches of C_b rounded up to 16 */
} spa_nsca_shape;

/* The rules that read no array contents: q, k, v, the atten mask, the two
 * required arrays' sizes, head_num, layout, sparse_mode, l and d (l' and K
 * are the forward's to check; the grad passes 0). Fills *sh but for the
 * array facts. */
spa_status spa_nsca_check_shapes(const spa_tensor *q, const spa_tensor *k, const spa_tensor *v,
                                 const spa_tensor *mask, const spa_int_array *sq,
                                 const spa_int_array *scmp, int64_t head_num, const char *layout,
                                 int64_t sparse_mode, int64_t l, int64_t st, int64_t ls,
                                 int64_t kc, spa_nsca_shape *sh);

/* Contents of both arrays (copies written as read when given), the atten
 * mask's dims against them; sets the array facts of sh. */
spa_status spa_nsca_check_seq(const spa_tensor *mask, const spa_int_array *sq,
                              const spa_int_array *scmp, int64_t *sq_copy, int64_t *scmp_copy,
                              spa_nsca_shape *sh);

/* What phase 2 trusts, in the workspace. */
typedef struct spa_nsca_trusted {
    int64_t *sq, *scmp; /* [batches] cumulative ends */
    int64_t *kend;      /* [batches] cumulative ends of the batches' kernel rows */
    uint8_t *mask;      /* [max_sq][max_cmp] 0/1, when sh->has_mask */
    uint8_t *tmask;     /* [max_sq][max_sel] 0/1, when sh->has_tmask */
    spa_int_array sqa, scmpa;
} spa_nsca_trusted;
void spa_nsca_trusted_take(spa_ws *ws, const spa_nsca_shape *sh, spa_nsca_trusted *tr);
/* Fills tr from the caller's arrays and masks (tmask may be NULL), checking
 * as it copies; the array facts of sh must come out as in phase 1. */
spa_status spa_nsca_trusted_fill(const spa_tensor *mask, const spa_tensor *tmask,
                                 const spa_int_array *sq, const spa_int_array *scmp,
                                 const spa_nsca_shape *sh, spa_nsca_trusted *tr);

/* Batch b of a checked cumulative array: [start, end); the batch of token t. */
#define spa_nsca_batch spa_nsas_batch
#define spa_nsca_batch_of spa_nsas_batch_of
/* C rounded up to 16: a batch's kernel rows. */
static inline int64_t spa_nsca_rows16(int64_t c)
{
    return (c + 15) / 16 * 16;
}

/* The f32 key / value rows of kv head h2 (nsa_select_pack.c's packing, on
 * the compressed rows in batches of 16: a->kf / a->vf), or with pairs the
 * same rows as bf16 pairs for the forward on a layer with the bf16 dot
 * product (spa_nsas_attach_head_bf16: a->kb / a->vp, kf / vf NULL), in the
 * same pack slices. */
void spa_nsca_attach_head(spa_nsca_args *a, const spa_nsca_shape *sh,
                          const spa_nsca_trusted *tr, const spa_tensor *k, const spa_tensor *v,
                          float *kpack, float *vpack, int64_t h2, bool pairs, const spa_runner *runner);
uint64_t spa_nsca_pack_floats(const spa_tensor *t, const spa_nsca_shape *sh);

/* Kernel argument block into *out (grad tensors may be NULL, forward ones
 * too); filled in place, so no copy of it lands on the phase-2 stack. */
void spa_nsca_args_fill(spa_nsca_args *out, const spa_nsca_shape *sh, const spa_nsca_trusted *tr,
                        const spa_tensor *q, const spa_tensor *k, const spa_tensor *v,
                        const spa_tensor *o, const spa_tensor *mx, const spa_tensor *sm,
                        const spa_tensor *topk, const spa_tensor *dy, const spa_tensor *dq,
                        double scale);

#endif
