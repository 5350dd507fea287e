/* NsaSelectedAttentionGrad: phase 1 (validate, plan, size) and phase 2 (run).
 * Phase 2 runs the kv heads one after the other, each in two parallel steps
 * once its key and value rows are f32 (nsa_select_pack.h). Step 1: blocks =
 * ranges of query tokens; each writes dq of its tokens for the head and sums
 * the dK / dV rows its tokens select into its own f32 partial, which covers
 * the KV rows of the batches its tokens belong to. Step 2: each KV row of the
 * head sums the partials of the blocks that cover it in block order, scales
 * and rounds once. No atomics; the split depends on the shapes and lengths
 * only, so results do not depend on the runner. Rows no block covers (never
 * selectable) come out +0. The partials of one head are all the workspace
 * holds. The partials' rows are kernel rows (nsa_select_plan.h: a batch's
 * KV rounded up to whole blocks) of dp / dvp floats; the reduction maps each
 * KV row to its kernel row. */
#include <string.h>

#include "attn_plan.h"
#include "half.h"
#include "nsa_select_pack.h"
#include "nsa_select_plan.h"
#include "nsa_select_f64.h"
#include "f64.h"
#include "spa_kernels.h"
#include "spattn/nsa.h"

/* Token ranges per kv head: enough blocks for a few threads... */
#define NSASG_TARGET_RANGES 16
/* ...while the f32 partials of one head stay under this (unless one range
 * already needs more). A target with little memory lowers it with
 * -DSPA_SELECT_PARTIAL_BYTES in its target.mk. */
#ifndef SPA_SELECT_PARTIAL_BYTES
#define SPA_SELECT_PARTIAL_BYTES (512ull << 20)
#endif
#define NSASG_PARTIAL_BYTES ((uint64_t)SPA_SELECT_PARTIAL_BYTES)
/* KV rows per task of the final reduction. */
#define NSASG_ROWS_PER_TASK 64

/* What the arguments determine. Phase 2 derives it again from the arguments
 * and the trusted copies; it is never read from executor bytes. */
typedef struct nsasg_plan {
    spa_nsas_shape sh;
    int64_t ranges;    /* token ranges per kv head */
    int64_t per_range; /* tokens per range */
    uint64_t scratch_floats;
    uint64_t partial_floats; /* the partials of one head's ranges */
    uint64_t kpack_floats, vpack_floats; /* widened copies (0: read in place) */
} nsasg_plan;

/* The call's arguments, as phase 1 took them: all phase 2 reads of it. */
typedef struct nsasg_exec {
    spa_exec_head head;
    spa_tensor q, k, v, o, dy, mx, sm, topk, mask, dq, dk, dv;
    spa_int_array sq, skv;
    double scale;
    int64_t head_num, sparse_mode, bs, kc;
    int32_t has_mask;
} nsasg_exec;
_Static_assert(sizeof(nsasg_exec) <= SPA_EXECUTOR_BYTES, "executor too small");

typedef struct nsasg_kernel {
    spa_nsas_grad_kernel *fn;
    int64_t tk;
} nsasg_kernel;

static nsasg_kernel kernel_for(int32_t dtype)
{
    switch (dtype) {
    case SPA_FLOAT16:
        return (nsasg_kernel){SPA_K_NSA_SELECT_GRAD_F16, SPA_NSASG_TK_F16};
    case SPA_BFLOAT16:
        return (nsasg_kernel){SPA_K_NSA_SELECT_GRAD_BF16, SPA_NSASG_TK_BF16};
#if SPA_FLOAT64_NSA_SELECT_GRAD
    case SPA_FLOAT64: /* nsa_select_f64.c, called from phase 2 */
        return (nsasg_kernel){NULL, 1};
#endif
    default:
        return (nsasg_kernel){SPA_K_NSA_SELECT_GRAD_F32, SPA_NSASG_TK_F32};
    }
}

/* Kernel rows [lo, hi) of the batches holding tokens [t0, t1) (t0 < t1),
 * from checked sequence arrays. */
static void range_kv(const spa_int_array *sq, const spa_int_array *skv, int64_t bs, int64_t t0,
                     int64_t t1, int64_t *lo, int64_t *hi)
{
    const int64_t b0 = spa_nsas_batch_of(sq, t0), b1 = spa_nsas_batch_of(sq, t1 - 1);
    int64_t ks, ke;
    *lo = spa_nsas_kernel_start(skv, bs, b0);
    spa_nsas_batch(skv, b1, &ks, &ke);
    *hi = spa_nsas_kernel_start(skv, bs, b1) + spa_nsas_kernel_rows(ke - ks, bs);
}

/* Floats of one head's partials: per range, its kernel rows times (dp + dvp). */
static uint64_t partial_floats(const spa_int_array *sq, const spa_int_array *skv,
                               const nsasg_plan *p)
{
    uint64_t total = 0;
    for (int64_t r = 0; r < p->ranges; r++) {
        int64_t t0, t1, lo, hi;
        spa_attn_range_tokens(r, p->per_range, p->sh.t1, &t0, &t1);
        if (t0 == t1)
            continue;
        range_kv(sq, skv, p->sh.bs, t0, t1, &lo, &hi);
        total += (uint64_t)(hi - lo) * (uint64_t)(p->sh.dp + p->sh.dvp);
    }
    return total;
}

/* The rules of spec/nsa.md 4.3 that read no array contents (cheap, so a call
 * that will be refused is refused at once). */
static spa_status check_args(const nsasg_exec *e, const char *layout, spa_nsas_shape *sh)
{
    SPA_TRY(spa_nsas_check_shapes(&e->q, &e->k, &e->v, &e->topk, e->has_mask ? &e->mask : NULL,
                                  &e->sq, &e->skv, e->head_num, layout, e->sparse_mode, e->bs,
                                  e->kc, sh));
    const spa_attn_grad_tensors g = {&e->q, &e->k, &e->v, &e->o, &e->dy,
                                     &e->mx, &e->sm, &e->dq, &e->dk, &e->dv};
    SPA_TRY(spa_attn_grad_check_tensors(&g));
    SPA_REQUIRE(e->q.dtype != SPA_FLOAT64 || SPA_FLOAT64_NSA_SELECT_GRAD);
    SPA_TRY(spa_attn_grad_check_dims(&g, sh->t1, sh->n1, sh->dv));
    return SPA_OK;
}

/* The plan of checked arguments and checked sequence arrays sq / skv (sh
 * complete). */
static void make_plan(const nsasg_exec *e, const spa_nsas_shape *sh, const spa_int_array *sq,
                      const spa_int_array *skv, nsasg_plan *p)
{
    const spa_nsas_shape shape = *sh; /* sh may be &p->sh */
    memset(p, 0, sizeof *p);
    p->sh = shape;
    sh = &p->sh;
    /* Token ranges: NSASG_TARGET_RANGES, fewer while the partials would
     * exceed NSASG_PARTIAL_BYTES. */
    int64_t ranges = NSASG_TARGET_RANGES;
    if (ranges > sh->t1)
        ranges = sh->t1 > 0 ? sh->t1 : 1;
    for (;; ranges--) {
        p->ranges = ranges;
        p->per_range = sh->t1 > 0 ? (sh->t1 + ranges - 1) / ranges : 1;
        p->partial_floats = partial_floats(sq, skv, p);
        if (ranges == 1 || p->partial_floats * 4u <= NSASG_PARTIAL_BYTES)
            break;
    }
    /* qt, dqt [dp][GP]; qn [HC][dp]; dyt [dvp][GP]; dyn [HC][dvp]; P and dS [TK][GP];
     * max, sum, D [GP] (HC: the heads of a chunk, at most 32) */
    const int64_t gp = sh->gp, tk = kernel_for(e->q.dtype).tk, hc = sh->g < 32 ? sh->g : 32;
    p->scratch_floats = (uint64_t)(2 * sh->dp * gp + hc * sh->dp + sh->dvp * gp +
                                   hc * sh->dvp + 2 * tk * gp + 3 * gp);
    p->kpack_floats = spa_nsas_pack_floats(&e->k, sh);
    p->vpack_floats = spa_nsas_pack_floats(&e->v, sh);
#if SPA_FLOAT64_NSA_SELECT_GRAD
    if (e->q.dtype == SPA_FLOAT64) { /* nsa_select_f64.c: double partials, k and v in place */
        p->partial_floats *= 2;
        p->scratch_floats = 2 * (uint64_t)SPA_NSAS_F64_GRAD_SCRATCH(sh->g, sh->d, sh->dv, sh->kc, sh->bs);
        p->kpack_floats = p->vpack_floats = 0;
    }
#endif
}

/* The slices (lo / hi: the kernel rows a range's partial covers). */
static void carve(spa_ws *ws, const nsasg_plan *p, spa_attn_grad_slices *s)
{
    spa_attn_grad_carve(ws, (uint64_t)p->ranges, p->scratch_floats, p->partial_floats,
                        p->kpack_floats, p->vpack_floats, s);
}

/* Workspace bytes of a plan (0 on overflow: no plan needs 0). */
static uint64_t planned_bytes(const nsasg_plan *p)
{
    spa_ws ws;
    spa_nsas_trusted tr;
    spa_attn_grad_slices sl;
    spa_ws_plan(&ws);
    spa_nsas_trusted_take(&ws, &p->sh, &tr);
    carve(&ws, p, &sl);
    return ws.overflow ? 0 : spa_ws_planned_bytes(&ws);
}

/* Where each token range's partial lies and which rows it covers: kernel
 * rows of dp + dvp floats for the f32 kernels; for the float64 path
 * (nsa_select_f64.c, which reads key and value in place) KV rows of d + dv
 * doubles, which the plan's partial (kernel rows, doubled) always holds. */
static void fill_table(const nsasg_plan *p, const spa_nsas_trusted *tr, bool kv_rows,
                       spa_attn_grad_slices *s)
{
    uint64_t off = 0;
    for (int64_t b = 0; b < p->ranges; b++) {
        int64_t t0, t1, lo = 0, hi = 0;
        spa_attn_range_tokens(b, p->per_range, p->sh.t1, &t0, &t1);
#if SPA_FLOAT64_NSA_SELECT_GRAD /* (compiled out, the table costs no stack where f64 is not built) */
        if (t0 < t1 && kv_rows) {
            int64_t unused;
            spa_nsas_batch(&tr->skva, spa_nsas_batch_of(&tr->sqa, t0), &lo, &unused);
            spa_nsas_batch(&tr->skva, spa_nsas_batch_of(&tr->sqa, t1 - 1), &unused, &hi);
        } else
#endif
            if (t0 < t1)
            range_kv(&tr->sqa, &tr->skva, p->sh.bs, t0, t1, &lo, &hi);
        s->offset[b] = off;
        s->lo[b] = lo;
        s->hi[b] = hi;
        off += (uint64_t)(hi - lo) *
               (uint64_t)(kv_rows ? p->sh.d + p->sh.dv : p->sh.dp + p->sh.dvp);
    }
}

static spa_status phase1(
    const spa_tensor *query, const spa_tensor *key, const spa_tensor *value,
    const spa_tensor *attention_out, const spa_tensor *attention_out_grad,
    const spa_tensor *softmax_max, const spa_tensor *softmax_sum, const spa_tensor *topk_indices,
    const spa_int_array *actual_seq_q_len, const spa_int_array *actual_seq_kv_len,
    const spa_tensor *atten_mask, double scale_value, int64_t selected_block_size,
    int64_t selected_block_count, int64_t head_num, const char *input_layout, int64_t sparse_mode,
    const spa_tensor *dq_out, const spa_tensor *dk_out, const spa_tensor *dv_out,
    uint64_t *workspace_size, spa_executor *executor)
{
    if (query == NULL || key == NULL || value == NULL || attention_out == NULL ||
        attention_out_grad == NULL || softmax_max == NULL || softmax_sum == NULL ||
        topk_indices == NULL || actual_seq_q_len == NULL || actual_seq_kv_len == NULL ||
        input_layout == NULL || dq_out == NULL || dk_out == NULL || dv_out == NULL ||
        workspace_size == NULL || executor == NULL)
        return SPA_ERR_NULLPTR;
    nsasg_exec e;
    memset(&e, 0, sizeof e);
    e.q = *query, e.k = *key, e.v = *value, e.o = *attention_out, e.dy = *attention_out_grad;
    e.mx = *softmax_max, e.sm = *softmax_sum, e.topk = *topk_indices;
    e.dq = *dq_out, e.dk = *dk_out, e.dv = *dv_out;
    if (atten_mask != NULL)
        e.mask = *atten_mask, e.has_mask = 1;
    e.sq = *actual_seq_q_len, e.skv = *actual_seq_kv_len;
    e.scale = scale_value, e.head_num = head_num, e.sparse_mode = sparse_mode;
    e.bs = selected_block_size, e.kc = selected_block_count;
    spa_nsas_shape sh;
    nsasg_plan p;
    SPA_TRY(check_args(&e, input_layout, &sh));
    SPA_TRY(spa_nsas_check_seq(&e.sq, &e.skv, NULL, NULL, &sh));
    make_plan(&e, &sh, &e.sq, &e.skv, &p);
    e.head.ws_size = planned_bytes(&p);
    SPA_REQUIRE(e.head.ws_size > 0);
    /* last: the one rule whose cost grows with T1 */
    SPA_TRY(spa_nsas_check_indices(&e.topk, &e.sq, &e.skv, &sh, NULL));
    *workspace_size = e.head.ws_size;
    spa_exec_seal(executor, &e, sizeof e, SPA_OP_NSA_SELECT_GRAD);
    return SPA_OK;
}

/* What the steps read of the call once phase 2 has checked it: key and
 * value (attached per head), the gradients the reduction stores, the scale.
 * Copied out of the executor copy, which then leaves the stack before the
 * kernels run (its twelve tensors were most of phase 2's frame under them:
 * the Cortex-M limit is 4 KiB). */
typedef struct nsasg_kv {
    spa_tensor k, v;
    spa_nsas_grad_out dk, dv;
    double scale;
    int32_t dtype;
} nsasg_kv;

typedef struct nsasg_run {
    const nsasg_kv *kv;
    const nsasg_plan *p;        /* derived in phase 2 */
    const spa_nsas_trusted *tr; /* sequence arrays and indices, checked copies */
    spa_nsas_args args;
    spa_attn_grad_slices s;
    spa_nsas_grad_kernel *kernel;
    int64_t h2; /* step 1: the kv head being run */
} nsasg_run;

/* Step 1, token range `range` of kv head r->h2: zero the block's partial,
 * then its tokens batch by batch. */
static void run_token_block(void *arg, uint32_t range)
{
    const nsasg_run *r = arg;
    const nsasg_plan *p = r->p;
    const int64_t h2 = r->h2, d = p->sh.dp, dvd = p->sh.dvp;
    const int64_t lo = r->s.lo[range], nrows = r->s.hi[range] - lo;
    float *dkp = r->s.partial + r->s.offset[range], *dvp = dkp + nrows * d;
    for (int64_t i = 0; i < nrows * (d + dvd); i++)
        dkp[i] = 0.0f;
    float *scratch = r->s.scratch + (uint64_t)range * p->scratch_floats;
    int64_t t, t1;
    spa_attn_range_tokens((int64_t)range, p->per_range, p->sh.t1, &t, &t1);
    while (t < t1) {
        const int64_t b = spa_nsas_batch_of(&r->tr->sqa, t);
        int64_t qs, qe, ks, ke;
        spa_nsas_batch(&r->tr->sqa, b, &qs, &qe);
        spa_nsas_batch(&r->tr->skva, b, &ks, &ke);
        const int64_t kernel_start = b == 0 ? 0 : r->tr->kend[b - 1];
        const int64_t stop = qe < t1 ? qe : t1;
        r->kernel(&r->args, h2, t, stop, qs, kernel_start, ke - ks, lo, dkp, dvp, scratch);
        t = stop;
    }
}

static void store_row(const spa_nsas_grad_out *out, int64_t row, int64_t h2, const float *acc, int64_t n)
{
    const int64_t base = row * out->s0 + h2 * out->s1, s2 = out->s2;
    switch (out->dtype) {
    case SPA_FLOAT16:
        for (int64_t i = 0; i < n; i++)
            ((uint16_t *)out->data)[base + i * s2] = spa_f32_to_f16(acc[i]);
        break;
    case SPA_BFLOAT16:
        for (int64_t i = 0; i < n; i++)
            ((uint16_t *)out->data)[base + i * s2] = spa_f32_to_bf16(acc[i]);
        break;
    default:
        for (int64_t i = 0; i < n; i++)
            ((float *)out->data)[base + i * s2] = acc[i];
        break;
    }
}

/* Step 2: NSASG_ROWS_PER_TASK KV rows of kv head r->h2; each row's sums
 * (from its kernel row in the partials) go through a small stack buffer,
 * one head-dim chunk at a time. */
static void run_reduce(void *arg, uint32_t task)
{
    const nsasg_run *r = arg;
    const nsasg_kv *e = r->kv;
    const nsasg_plan *p = r->p;
    const int64_t t2 = p->sh.t2, h2 = r->h2;
    const int64_t row0 = (int64_t)task * NSASG_ROWS_PER_TASK;
    const int64_t row1 = row0 + NSASG_ROWS_PER_TASK < t2 ? row0 + NSASG_ROWS_PER_TASK : t2;
    const int64_t d = p->sh.d, dvd = p->sh.dv, dp = p->sh.dp, dvp = p->sh.dvp;
    const float scale = (float)e->scale;
    enum { CHUNK = 128 };
    float acc[CHUNK];
    int64_t b = row0 < p->sh.kv_total ? spa_nsas_batch_of(&r->tr->skva, row0) : 0;
    for (int64_t row = row0; row < row1; row++) {
        /* its kernel row; -1 past a_kv[B-1] (no range covers it: +0) */
        int64_t krow = -1;
        if (row < p->sh.kv_total) {
            while (r->tr->skv[b] <= row)
                b++;
            int64_t ks, ke;
            spa_nsas_batch(&r->tr->skva, b, &ks, &ke);
            krow = (b == 0 ? 0 : r->tr->kend[b - 1]) + row - ks;
        }
        for (int part = 0; part < 2; part++) {
            const int64_t n = part == 0 ? d : dvd;
            for (int64_t c0 = 0; c0 < n; c0 += CHUNK) {
                const int64_t cn = n - c0 < CHUNK ? n - c0 : CHUNK;
                for (int64_t i = 0; i < cn; i++)
                    acc[i] = 0.0f;
                for (int64_t rg = 0; rg < p->ranges; rg++) {
                    const int64_t lo = r->s.lo[rg], hi = r->s.hi[rg];
                    if (krow < lo || krow >= hi)
                        continue;
                    const float *src = r->s.partial + r->s.offset[rg] +
                                       (part == 0 ? (krow - lo) * dp : (hi - lo) * dp + (krow - lo) * dvp) + c0;
                    for (int64_t i = 0; i < cn; i++)
                        acc[i] += src[i];
                }
                if (part == 0)
                    for (int64_t i = 0; i < cn; i++)
                        acc[i] = scale * acc[i] + 0.0f;
                const spa_nsas_grad_out *out = part == 0 ? &e->dk : &e->dv;
                spa_nsas_grad_out view = *out;
                view.data = (unsigned char *)out->data + (size_t)(c0 * out->s2) * spa_dtype_size(out->dtype);
                store_row(&view, row, h2, acc, cn);
            }
        }
    }
}

#if defined(__GNUC__)
#define NSASG_NOINLINE __attribute__((noinline))
#else
#define NSASG_NOINLINE
#endif

/* Phase 2 up to the kernels: every argument again (the caller's may have
 * changed since phase 1) and the plan derived again, no executor byte
 * trusted but the arguments; the trusted copies made, the workspace carved,
 * the kernel arguments built (r but its kv). Out of line, so that its copy
 * of the executor is off the stack when the kernels run. */
static NSASG_NOINLINE spa_status prepare(void *workspace, uint64_t workspace_size,
                                         const spa_executor *executor, nsasg_plan *p,
                                         spa_nsas_trusted *tr, nsasg_run *r, nsasg_kv *kv)
{
    nsasg_exec e;
    SPA_TRY(spa_exec_open(executor, &e, sizeof e, SPA_OP_NSA_SELECT_GRAD));
    spa_nsas_shape *const sh = &p->sh;
    SPA_TRY(check_args(&e, "TND", sh));
    SPA_TRY(spa_ws_check_args(workspace, workspace_size, e.head.ws_size));
    const spa_tensor *tensors[] = {&e.q, &e.k, &e.v, &e.o, &e.dy, &e.mx, &e.sm, &e.topk,
                                   &e.dq, &e.dk, &e.dv, e.has_mask ? &e.mask : NULL};
    const spa_int_array *arrays[] = {&e.sq, &e.skv};
    SPA_TRY(spa_ws_check_disjoint(workspace, e.head.ws_size, tensors, 12, arrays, 2));
    spa_ws ws;
    spa_ws_attach(&ws, workspace, e.head.ws_size);
    spa_nsas_trusted_take(&ws, sh, tr);
    SPA_REQUIRE(!ws.overflow);
    SPA_TRY(spa_nsas_trusted_fill(&e.topk, &e.sq, &e.skv, sh, tr));
    make_plan(&e, sh, &tr->sqa, &tr->skva, p);
    SPA_REQUIRE(planned_bytes(p) == e.head.ws_size);
    carve(&ws, p, &r->s);
    SPA_REQUIRE(!ws.overflow);
    fill_table(p, tr, SPA_FLOAT64_NSA_SELECT_GRAD && e.q.dtype == SPA_FLOAT64, &r->s);
    r->p = p;
    r->tr = tr;
    spa_nsas_args_fill(&r->args, sh, &e.q, tr->idx, &e.o, &e.mx, &e.sm, &e.dy, &e.dq, e.scale);
    r->kernel = kernel_for(e.q.dtype).fn;
    kv->k = e.k, kv->v = e.v;
    const spa_tensor *const outs[2] = {&e.dk, &e.dv};
    spa_nsas_grad_out *const views[2] = {&kv->dk, &kv->dv};
    for (int i = 0; i < 2; i++) {
        views[i]->data = outs[i]->data, views[i]->dtype = outs[i]->dtype;
        views[i]->s0 = outs[i]->strides[0], views[i]->s1 = outs[i]->strides[1], views[i]->s2 = outs[i]->strides[2];
    }
    kv->scale = e.scale;
    kv->dtype = e.q.dtype;
    return SPA_OK;
}

spa_status spa_nsa_select_grad_phase2(void *workspace, uint64_t workspace_size,
                                      const spa_executor *executor, const spa_runner *runner)
{
    const spa_runner rn = spa_runner_copy(runner);
    nsasg_plan p;
    spa_nsas_trusted tr;
    nsasg_run r;
    nsasg_kv kv;
    SPA_TRY(prepare(workspace, workspace_size, executor, &p, &tr, &r, &kv));
    r.kv = &kv;
#if SPA_FLOAT64_NSA_SELECT_GRAD
    if (kv.dtype == SPA_FLOAT64) {
        const spa_nsas_f64_args f = spa_nsas_f64_args_of(&r.args, &kv.k, &kv.v, kv.scale);
        const spa_nsas_f64_grad_plan gp = {p.ranges, p.per_range, p.sh.t1, p.sh.t2, r.s.offset,
                                           r.s.lo, r.s.hi, (double *)(void *)r.s.partial,
                                           (double *)(void *)r.s.scratch, &kv.dk, &kv.dv};
        spa_nsas_f64_grad(&rn, &f, &tr, &gp);
        return SPA_OK;
    }
#endif
    const int64_t tasks = (p.sh.t2 + NSASG_ROWS_PER_TASK - 1) / NSASG_ROWS_PER_TASK;
    for (r.h2 = 0; r.h2 < p.sh.n2; r.h2++) {
        if (p.sh.t1 > 0) {
            spa_nsas_attach_head(&r.args, &p.sh, &tr, &kv.k, &kv.v, r.s.kpack, r.s.vpack, r.h2, &rn);
            spa_run_blocks(&rn, run_token_block, &r, (uint32_t)p.ranges);
        }
        spa_run_blocks(&rn, run_reduce, &r, (uint32_t)tasks);
    }
    return SPA_OK;
}

/* The public entry points: the internal status made public, and phase 1's
 * refusal recorded in the executor (spa_executor_reason). */
spa_status spa_nsa_select_grad_get_workspace_size(
    const spa_tensor *query, const spa_tensor *key, const spa_tensor *value,
    const spa_tensor *attention_out, const spa_tensor *attention_out_grad,
    const spa_tensor *softmax_max, const spa_tensor *softmax_sum, const spa_tensor *topk_indices,
    const spa_int_array *actual_seq_q_len, const spa_int_array *actual_seq_kv_len,
    const spa_tensor *atten_mask, double scale_value, int64_t selected_block_size,
    int64_t selected_block_count, int64_t head_num, const char *input_layout, int64_t sparse_mode,
    const spa_tensor *dq_out, const spa_tensor *dk_out, const spa_tensor *dv_out,
    uint64_t *workspace_size, spa_executor *executor)
{
    return spa_refusal_record(
        phase1(query, key, value, attention_out, attention_out_grad, softmax_max, softmax_sum,
               topk_indices, actual_seq_q_len, actual_seq_kv_len, atten_mask, scale_value,
               selected_block_size, selected_block_count, head_num, input_layout, sparse_mode,
               dq_out, dk_out, dv_out, workspace_size, executor),
        executor, SPA_OP_NSA_SELECT_GRAD, 1);
}

spa_status spa_nsa_select_grad(void *workspace, uint64_t workspace_size,
                               const spa_executor *executor, const spa_runner *runner)
{
    return spa_public_status(
        spa_nsa_select_grad_phase2(workspace, workspace_size, executor, runner));
}
