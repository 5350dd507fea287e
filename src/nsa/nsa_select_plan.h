/* What NsaSelectedAttention and its grad share: the argument rules of
 * spec/nsa.md 3.3 / 4.3, the untrusted-index check, batch lookup and the
 * kernel argument block. */
#ifndef SPA_NSA_SELECT_PLAN_H
#define SPA_NSA_SELECT_PLAN_H

#include "internal.h"
#include "nsa_select_kernel.h"

/* The rows the kernels read (nsa_select_pack.h): each batch's KV rows rounded
 * up to whole blocks ("kernel rows"), dp / dvp floats apart, dp and dvp the
 * head dims rounded up to 16 (the micro-kernels' step). With every KV length
 * a multiple of bs, kernel row = KV row. */
#define SPA_NSAS_DIM_STEP 16

typedef struct spa_nsas_shape {
    int64_t t1, t2, n1, n2, g, gp, d, dv, bs, kc;
    int64_t dp, dvp; /* d, dv rounded up to SPA_NSAS_DIM_STEP */
    int64_t batches;
    int64_t kv_total; /* a_kv[B-1]: KV rows any index can reach */
    int64_t kv_rows;  /* kernel rows: sum over batches of Skv_b rounded up to bs */
    bool aligned;     /* every Skv_b a multiple of bs (kv_rows == kv_total) */
    int causal;
} spa_nsas_shape;

/* The rules that read no array contents, so they answer at once: query, key,
 * value, topkIndices and mask descriptors, the sequence arrays' sizes and the
 * attributes (every pointer already non-NULL except mask). Fills *sh but for
 * kv_total. */
spa_status spa_nsas_check_shapes(const spa_tensor *q, const spa_tensor *k, const spa_tensor *v,
                                 const spa_tensor *topk, const spa_tensor *mask,
                                 const spa_int_array *sq, const spa_int_array *skv,
                                 int64_t head_num, const char *layout, int64_t sparse_mode,
                                 int64_t bs, int64_t kc, spa_nsas_shape *sh);

/* Contents of both sequence arrays against the shapes; sets sh->kv_total,
 * kv_rows and aligned.
 * With copies (phase 2: [batches] each), each element is read once and
 * written to its copy as it is checked. */
spa_status spa_nsas_check_seq(const spa_int_array *sq, const spa_int_array *skv,
                              int64_t *sq_copy, int64_t *skv_copy, spa_nsas_shape *sh);

/* spec/nsa.md 0.3b: every index is -1 (a padding slot, selecting nothing) or
 * names a block starting inside its batch's KV (the last block of a batch
 * may be partial). sq / skv are checked arrays (the copies in phase 2). With a copy
 * (phase 2: [t1][n2][kc]), each index is read once and written to it as it is
 * checked; the kernels read only the copy. */
spa_status spa_nsas_check_indices(const spa_tensor *topk, const spa_int_array *sq,
                                  const spa_int_array *skv, const spa_nsas_shape *sh,
                                  int32_t *idx_copy);

/* What phase 2 trusts, in the workspace (carved first, sized by shapes only). */
typedef struct spa_nsas_trusted {
    int64_t *sq, *skv; /* [batches] cumulative ends */
    int64_t *kend;     /* [batches] cumulative ends of the batches' kernel rows */
    int32_t *idx;      /* [t1][n2][kc] topkIndices (-1: padding) */
    spa_int_array sqa, skva; /* views of the copies */
} spa_nsas_trusted;
void spa_nsas_trusted_take(spa_ws *ws, const spa_nsas_shape *sh, spa_nsas_trusted *tr);
/* Fills tr (carved on real memory) from the caller's arrays, checking as it
 * copies; sets sh->kv_total. */
spa_status spa_nsas_trusted_fill(const spa_tensor *topk, const spa_int_array *sq,
                                 const spa_int_array *skv, spa_nsas_shape *sh,
                                 spa_nsas_trusted *tr);

/* Skv_b rounded up to whole blocks of bs: the kernel rows of a batch. */
int64_t spa_nsas_kernel_rows(int64_t kv_len, int64_t bs);
/* First kernel row of batch b (checked skv; O(b)). */
int64_t spa_nsas_kernel_start(const spa_int_array *skv, int64_t bs, int64_t b);

/* Batch b of a checked cumulative array: [start, end). */
void spa_nsas_batch(const spa_int_array *a, int64_t b, int64_t *start, int64_t *end);
/* The batch holding token t of a checked cumulative array (t < a[B-1]). */
int64_t spa_nsas_batch_of(const spa_int_array *a, int64_t t);

/* Lanes of the micro-kernels for a group of g heads: SPA_NSAS_GP_MIN (8 on ISAs of
 * at most 8 f32 lanes), 16 or 32. */
int64_t spa_nsas_lanes(int64_t g);

/* Kernel argument block from the checked tensors (grad ones may be NULL) and
 * the trusted index copy; the key / value rows are attached by
 * spa_nsas_attach_head. */
spa_nsas_args spa_nsas_args_of(const spa_nsas_shape *sh, const spa_tensor *q,
                               const int32_t *idx, const spa_tensor *o,
                               const spa_tensor *mx, const spa_tensor *sm, const spa_tensor *dy,
                               const spa_tensor *dq, double scale);
/* The same written into *out (no struct temporary: phase 2 of the grad
 * fills its run context so, under the 4 KiB Cortex-M stack). */
void spa_nsas_args_fill(spa_nsas_args *out, const spa_nsas_shape *sh, const spa_tensor *q,
                        const int32_t *idx, const spa_tensor *o, const spa_tensor *mx,
                        const spa_tensor *sm, const spa_tensor *dy, const spa_tensor *dq,
                        double scale);

#endif
