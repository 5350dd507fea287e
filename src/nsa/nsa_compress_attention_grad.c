/* NsaCompressAttention backward: phase 1 (validate, plan, size) and phase 2.
 * Phase 2 runs the kv heads one after the other, each in two parallel steps
 * once its compressed key and value rows are f32 (float64: in place).
 * Step 1: blocks = ranges of query tokens; each writes dq of its tokens and
 * sums the dK / dV rows of its tokens into its own partial, which covers the
 * rows of the batches its tokens belong to. Step 2: each key row sums the
 * partials that cover it in block order, scales dK and rounds once. The
 * split depends on the shapes and lengths only: results do not depend on
 * the runner. Rows no query reaches come out +0. */
#include <string.h>

#include "attn_plan.h"
#include "f64.h"
#include "half.h"
#include "nsa_cattn_plan.h"
#include "spa_kernels.h"
#include "spattn/nsa_compress_attention.h"

#define NSCAG_TARGET_RANGES 16
#ifndef SPA_CATTN_PARTIAL_BYTES
#define SPA_CATTN_PARTIAL_BYTES (512ull << 20)
#endif
#define NSCAG_ROWS_PER_TASK 64

typedef struct nscag_plan {
    spa_nsca_shape sh;
    int64_t ranges, per_range;
    uint64_t scratch_floats, partial_floats, kpack_floats, vpack_floats;
    int64_t pk, pv; /* floats of a partial row: dk part, dv part */
    bool kv_rows;   /* float64: partial rows are rows of k / v (else kernel rows) */
} nscag_plan;

typedef struct nscag_exec {
    spa_exec_head head;
    spa_tensor q, k, v, o, dy, mx, sm, mask, dq, dk, dv;
    spa_int_array sq, scmp;
    double scale;
    int64_t head_num, sparse_mode, l, st;
    int32_t has_mask;
} nscag_exec;
_Static_assert(sizeof(nscag_exec) <= SPA_EXECUTOR_BYTES - SPA_REFUSAL_BYTES, "executor too small");

static spa_nsca_grad_kernel *kernel_for(int32_t dtype)
{
    switch (dtype) {
    case SPA_FLOAT16:
        return SPA_K_NSA_COMPRESS_ATTENTION_GRAD_F16;
    case SPA_BFLOAT16:
        return SPA_K_NSA_COMPRESS_ATTENTION_GRAD_BF16;
#if SPA_HAVE_F64
    case SPA_FLOAT64:
        return SPA_K_NSA_COMPRESS_ATTENTION_GRAD_F64;
#endif
    default:
        return SPA_K_NSA_COMPRESS_ATTENTION_GRAD_F32;
    }
}

static spa_status check_args(const nscag_exec *e, const char *layout, spa_nsca_shape *sh)
{
    SPA_TRY(spa_nsca_check_shapes(&e->q, &e->k, &e->v, e->has_mask ? &e->mask : NULL, &e->sq,
                                  &e->scmp, e->head_num, layout, e->sparse_mode, e->l, e->st, 0,
                                  0, sh));
    const spa_attn_grad_tensors g = {&e->q, &e->k, &e->v, &e->o, &e->dy,
                                     &e->mx, &e->sm, &e->dq, &e->dk, &e->dv};
    SPA_TRY(spa_attn_grad_check_tensors(&g));
    SPA_TRY(spa_attn_grad_check_dims(&g, sh->t1, sh->n1, sh->dv));
    return SPA_OK;
}

/* Rows [lo, hi) of the batches holding tokens [t0, t1): kernel rows, or
 * rows of k / v (kv_rows). sq, scmp checked. */
static void range_rows(const nscag_plan *p, const spa_int_array *sq, const spa_int_array *scmp,
                       int64_t t0, int64_t t1, int64_t *lo, int64_t *hi)
{
    const int64_t b0 = spa_nsca_batch_of(sq, t0), b1 = spa_nsca_batch_of(sq, t1 - 1);
    if (p->kv_rows) {
        int64_t unused;
        spa_nsca_batch(scmp, b0, lo, &unused);
        spa_nsca_batch(scmp, b1, &unused, hi);
        return;
    }
    int64_t rows = 0, prev = 0;
    for (int64_t b = 0; b <= b1; b++) {
        if (b == b0)
            *lo = rows;
        rows += spa_nsca_rows16(scmp->data[b] - prev);
        prev = scmp->data[b];
    }
    *hi = rows;
}

static void make_plan(const nscag_exec *e, const spa_nsca_shape *shape, const spa_int_array *sq,
                      const spa_int_array *scmp, nscag_plan *p)
{
    const spa_nsca_shape sh = *shape; /* shape may be &p->sh */
    memset(p, 0, sizeof *p);
    p->sh = sh;
    p->kv_rows = e->q.dtype == SPA_FLOAT64;
    p->pk = p->kv_rows ? 2 * sh.d : sh.dp;
    p->pv = p->kv_rows ? 2 * sh.dv : sh.dvp;
    int64_t ranges = NSCAG_TARGET_RANGES;
    if (ranges > sh.t1)
        ranges = sh.t1 > 0 ? sh.t1 : 1;
    for (;; ranges--) {
        p->ranges = ranges;
        p->per_range = sh.t1 > 0 ? (sh.t1 + ranges - 1) / ranges : 1;
        uint64_t total = 0;
        for (int64_t r = 0; r < ranges; r++) {
            int64_t t0, t1, lo, hi;
            spa_attn_range_tokens(r, p->per_range, p->sh.t1, &t0, &t1);
            if (t0 == t1)
                continue;
            range_rows(p, sq, scmp, t0, t1, &lo, &hi);
            total += (uint64_t)(hi - lo) * (uint64_t)(p->pk + p->pv);
        }
        p->partial_floats = total;
        if (ranges == 1 || total * 4u <= SPA_CATTN_PARTIAL_BYTES)
            break;
    }
    const uint64_t rmax = (uint64_t)spa_nsca_rows16(sh.max_cmp), gp = (uint64_t)sh.gp;
    /* qt, qn, dqt [dp][gp]; dyt, dyn [dvp][gp]; st, dst [rmax][gp]; 4 x [gp] */
    p->scratch_floats = 3 * (uint64_t)sh.dp * gp + 2 * (uint64_t)sh.dvp * gp + 2 * rmax * gp + 4 * gp;
    p->kpack_floats = spa_nsca_pack_floats(&e->k, &sh);
    p->vpack_floats = spa_nsca_pack_floats(&e->v, &sh);
    if (p->kv_rows) { /* float64: P and dP of one head [max_cmp], dq row [d], dy.o */
        p->scratch_floats = 2 * (2 * rmax + (uint64_t)sh.d + 1);
        p->kpack_floats = p->vpack_floats = 0;
    }
    /* each range's scratch 64-byte aligned: its doubles and vectors stay aligned */
    p->scratch_floats = (p->scratch_floats + 15) / 16 * 16;
}

/* The slices (lo / hi: kernel rows, or rows of k / v with kv_rows). */
static void carve(spa_ws *ws, const nscag_plan *p, spa_attn_grad_slices *s)
{
    spa_attn_grad_carve(ws, (uint64_t)p->ranges, p->scratch_floats, p->partial_floats,
                        p->kpack_floats, p->vpack_floats, s);
}

static uint64_t planned_bytes(const nscag_plan *p)
{
    spa_ws ws;
    spa_nsca_trusted tr;
    spa_attn_grad_slices sl;
    spa_ws_plan(&ws);
    spa_nsca_trusted_take(&ws, &p->sh, &tr);
    carve(&ws, p, &sl);
    return ws.overflow ? 0 : spa_ws_planned_bytes(&ws);
}

static spa_status phase1(const spa_tensor *query, const spa_tensor *key, const spa_tensor *value,
                         const spa_tensor *attention_out, const spa_tensor *attention_out_grad,
                         const spa_tensor *softmax_max, const spa_tensor *softmax_sum,
                         const spa_tensor *atten_mask, const spa_int_array *sq,
                         const spa_int_array *scmp, double scale_value, int64_t head_num,
                         const char *input_layout, int64_t sparse_mode, int64_t l, int64_t st,
                         const spa_tensor *dq, const spa_tensor *dk, const spa_tensor *dv,
                         uint64_t *workspace_size, spa_executor *executor)
{
    if (query == NULL || key == NULL || value == NULL || attention_out == NULL ||
        attention_out_grad == NULL || softmax_max == NULL || softmax_sum == NULL || sq == NULL ||
        scmp == NULL || input_layout == NULL || dq == NULL || dk == NULL || dv == NULL ||
        workspace_size == NULL || executor == NULL)
        return SPA_ERR_NULLPTR;
    nscag_exec e;
    memset(&e, 0, sizeof e);
    e.q = *query, e.k = *key, e.v = *value, e.o = *attention_out, e.dy = *attention_out_grad;
    e.mx = *softmax_max, e.sm = *softmax_sum, e.dq = *dq, e.dk = *dk, e.dv = *dv;
    if (atten_mask != NULL)
        e.mask = *atten_mask, e.has_mask = 1;
    e.sq = *sq, e.scmp = *scmp;
    e.scale = scale_value, e.head_num = head_num, e.sparse_mode = sparse_mode;
    e.l = l, e.st = st;
    spa_nsca_shape sh;
    nscag_plan p;
    SPA_TRY(check_args(&e, input_layout, &sh));
    SPA_TRY(spa_nsca_check_seq(e.has_mask ? &e.mask : NULL, &e.sq, &e.scmp, NULL, NULL, &sh));
    make_plan(&e, &sh, &e.sq, &e.scmp, &p);
    e.head.ws_size = planned_bytes(&p);
    SPA_REQUIRE(e.head.ws_size > 0);
    *workspace_size = e.head.ws_size;
    spa_exec_seal(executor, &e, sizeof e, SPA_OP_NSA_CATTN_GRAD);
    return SPA_OK;
}

#if defined(__GNUC__)
#define NSCAG_NOINLINE __attribute__((noinline))
#else
#define NSCAG_NOINLINE
#endif

/* An output the reduction writes: its data, dtype and strides only. */
typedef struct nscag_out {
    void *data;
    int64_t s0, s1, s2;
    int32_t dtype;
} nscag_out;

static nscag_out out_of(const spa_tensor *t)
{
    const nscag_out o = {t->data, t->strides[0], t->strides[1], t->strides[2], t->dtype};
    return o;
}

/* What the blocks of phase 2 read, derived there from the checked
 * arguments; the executor's record stays in prepare()'s frame, gone before
 * any kernel runs (the Cortex-M phase-2 stack budget). */
typedef struct nscag_run {
    nscag_plan p;
    spa_nsca_trusted tr;
    spa_nsca_args args;
    spa_attn_grad_slices s;
    spa_tensor k, v;
    nscag_out dk, dv; /* where the reduction stores */
    double scale;
    spa_nsca_grad_kernel *kernel;
    int64_t h2;
} nscag_run;

static void run_token_block(void *arg, uint32_t range)
{
    const nscag_run *r = arg;
    const nscag_plan *p = &r->p;
    const int64_t lo = r->s.lo[range], nrows = r->s.hi[range] - lo;
    float *dkp = r->s.partial + r->s.offset[range], *dvp = dkp + nrows * p->pk;
    for (int64_t i = 0; i < nrows * (p->pk + p->pv); i++)
        dkp[i] = 0.0f;
    float *scratch = r->s.scratch + (uint64_t)range * p->scratch_floats;
    int64_t t, t1;
    spa_attn_range_tokens((int64_t)range, p->per_range, p->sh.t1, &t, &t1);
    while (t < t1) {
        const int64_t b = spa_nsca_batch_of(&r->tr.sqa, t);
        int64_t qs, qe, cs, ce;
        spa_nsca_batch(&r->tr.sqa, b, &qs, &qe);
        spa_nsca_batch(&r->tr.scmpa, b, &cs, &ce);
        const int64_t kstart = p->kv_rows ? cs : b == 0 ? 0 : r->tr.kend[b - 1];
        const int64_t stop = qe < t1 ? qe : t1;
        r->kernel(&r->args, r->h2, t, stop, qs, kstart, ce - cs, lo, dkp, dvp, scratch);
        t = stop;
    }
}
static void store_elem(const nscag_out *out, int64_t at, double x)
{
    switch (out->dtype) {
    case SPA_FLOAT16:
        ((uint16_t *)out->data)[at] = spa_f32_to_f16((float)x);
        break;
    case SPA_BFLOAT16:
        ((uint16_t *)out->data)[at] = spa_f32_to_bf16((float)x);
        break;
    case SPA_FLOAT64:
        ((double *)out->data)[at] = x;
        break;
    default:
        ((float *)out->data)[at] = (float)x;
        break;
    }
}

/* Step 2: NSCAG_ROWS_PER_TASK rows of k / v of kv head r->h2. */
static void run_reduce(void *arg, uint32_t task)
{
    const nscag_run *r = arg;
    const nscag_plan *p = &r->p;
    const int64_t t2 = p->sh.t2, h2 = r->h2;
    const int64_t row0 = (int64_t)task * NSCAG_ROWS_PER_TASK;
    const int64_t row1 = row0 + NSCAG_ROWS_PER_TASK < t2 ? row0 + NSCAG_ROWS_PER_TASK : t2;
    const bool f64 = p->kv_rows;
    int64_t b = row0 < p->sh.cmp_total ? spa_nsca_batch_of(&r->tr.scmpa, row0) : 0;
    for (int64_t row = row0; row < row1; row++) {
        int64_t prow = -1; /* its partial row; -1 past a_cmp[B-1] */
        if (row < p->sh.cmp_total) {
            while (r->tr.scmp[b] <= row)
                b++;
            int64_t cs, ce;
            spa_nsca_batch(&r->tr.scmpa, b, &cs, &ce);
            prow = f64 ? row : (b == 0 ? 0 : r->tr.kend[b - 1]) + row - cs;
        }
        for (int part = 0; part < 2; part++) {
            const int64_t n = part == 0 ? p->sh.d : p->sh.dv;
            const nscag_out *out = part == 0 ? &r->dk : &r->dv;
            for (int64_t c = 0; c < n; c++) {
                double acc;
                if (f64) {
                    double a = 0.0;
                    for (int64_t rg = 0; rg < p->ranges; rg++) {
                        const int64_t lo = r->s.lo[rg], hi = r->s.hi[rg];
                        if (prow < lo || prow >= hi)
                            continue;
                        const double *src = (const double *)(const void *)(r->s.partial + r->s.offset[rg]) +
                                            (part == 0 ? (prow - lo) * p->sh.d
                                                       : (hi - lo) * p->sh.d + (prow - lo) * p->sh.dv);
                        a += src[c];
                    }
                    acc = part == 0 ? r->scale * a + 0.0 : a;
                } else {
                    float a = 0.0f;
                    for (int64_t rg = 0; rg < p->ranges; rg++) {
                        const int64_t lo = r->s.lo[rg], hi = r->s.hi[rg];
                        if (prow < lo || prow >= hi)
                            continue;
                        const float *src = r->s.partial + r->s.offset[rg] +
                                           (part == 0 ? (prow - lo) * p->pk
                                                      : (hi - lo) * p->pk + (prow - lo) * p->pv);
                        a += src[c];
                    }
                    acc = part == 0 ? (double)((float)r->scale * a + 0.0f) : (double)a;
                }
                store_elem(out, row * out->s0 + h2 * out->s1 + c * out->s2, acc);
            }
        }
    }
}

/* Phase 2 up to the kernels: the executor opened, every argument checked
 * again, the trusted copies made, the plan and the partial table derived
 * again, the kernel arguments filled in r. */
static NSCAG_NOINLINE spa_status prepare(void *workspace, uint64_t workspace_size,
                                         const spa_executor *executor, nscag_run *r)
{
    nscag_exec e;
    SPA_TRY(spa_exec_open(executor, &e, sizeof e, SPA_OP_NSA_CATTN_GRAD));
    spa_nsca_shape *const sh = &r->p.sh;
    SPA_TRY(check_args(&e, "TND", sh));
    SPA_TRY(spa_ws_check_args(workspace, workspace_size, e.head.ws_size));
    SPA_TRY(spa_nsca_check_seq(e.has_mask ? &e.mask : NULL, &e.sq, &e.scmp, NULL, NULL, sh));
    const spa_tensor *tensors[] = {&e.q, &e.k, &e.v, &e.o, &e.dy, &e.mx, &e.sm,
                                   &e.dq, &e.dk, &e.dv, e.has_mask ? &e.mask : NULL};
    const spa_int_array *arrays[] = {&e.sq, &e.scmp};
    SPA_TRY(spa_ws_check_disjoint(workspace, e.head.ws_size, tensors, 11, arrays, 2));
    spa_ws ws;
    spa_ws_attach(&ws, workspace, e.head.ws_size);
    spa_nsca_trusted_take(&ws, sh, &r->tr);
    SPA_REQUIRE(!ws.overflow);
    SPA_TRY(spa_nsca_trusted_fill(e.has_mask ? &e.mask : NULL, NULL, &e.sq, &e.scmp, sh, &r->tr));
    make_plan(&e, sh, &r->tr.sqa, &r->tr.scmpa, &r->p);
    SPA_REQUIRE(planned_bytes(&r->p) == e.head.ws_size);
    carve(&ws, &r->p, &r->s);
    SPA_REQUIRE(!ws.overflow);
    uint64_t off = 0;
    for (int64_t g = 0; g < r->p.ranges; g++) {
        int64_t t0, t1, lo = 0, hi = 0;
        spa_attn_range_tokens(g, r->p.per_range, r->p.sh.t1, &t0, &t1);
        if (t0 < t1)
            range_rows(&r->p, &r->tr.sqa, &r->tr.scmpa, t0, t1, &lo, &hi);
        r->s.offset[g] = off;
        r->s.lo[g] = lo;
        r->s.hi[g] = hi;
        off += (uint64_t)(hi - lo) * (uint64_t)(r->p.pk + r->p.pv);
    }
    spa_nsca_args_fill(&r->args, sh, &r->tr, &e.q, &e.k, &e.v, &e.o, &e.mx, &e.sm, NULL, &e.dy,
                       &e.dq, e.scale);
    r->kernel = kernel_for(e.q.dtype);
    r->k = e.k, r->v = e.v, r->dk = out_of(&e.dk), r->dv = out_of(&e.dv);
    r->scale = e.scale;
    return SPA_OK;
}

spa_status spa_nsa_cattn_grad_phase2(void *workspace, uint64_t workspace_size,
                                     const spa_executor *executor, const spa_runner *runner)
{
    const spa_runner rn = spa_runner_copy(runner);
    nscag_run r;
    SPA_TRY(prepare(workspace, workspace_size, executor, &r));
    const nscag_plan *p = &r.p;
    const int64_t tasks = (p->sh.t2 + NSCAG_ROWS_PER_TASK - 1) / NSCAG_ROWS_PER_TASK;
    for (r.h2 = 0; r.h2 < p->sh.n2; r.h2++) {
        if (p->sh.t1 > 0) {
            if (!p->kv_rows)
                spa_nsca_attach_head(&r.args, &p->sh, &r.tr, &r.k, &r.v, r.s.kpack, r.s.vpack,
                                     r.h2, false, &rn);
            spa_run_blocks(&rn, run_token_block, &r, (uint32_t)p->ranges);
        }
        spa_run_blocks(&rn, run_reduce, &r, (uint32_t)tasks);
    }
    return SPA_OK;
}

spa_status spa_nsa_compress_attention_grad_get_workspace_size(
    const spa_tensor *query, const spa_tensor *key, const spa_tensor *value,
    const spa_tensor *attention_out, const spa_tensor *attention_out_grad,
    const spa_tensor *softmax_max, const spa_tensor *softmax_sum, const spa_tensor *atten_mask,
    const spa_int_array *actual_seq_q_len, const spa_int_array *actual_cmp_seq_kv_len,
    double scale_value, int64_t head_num, const char *input_layout, int64_t sparse_mode,
    int64_t compress_block_size, int64_t compress_stride, const spa_tensor *dq_out,
    const spa_tensor *dk_out, const spa_tensor *dv_out, uint64_t *workspace_size,
    spa_executor *executor)
{
    return spa_refusal_record(
        phase1(query, key, value, attention_out, attention_out_grad, softmax_max, softmax_sum,
               atten_mask, actual_seq_q_len, actual_cmp_seq_kv_len, scale_value, head_num,
               input_layout, sparse_mode, compress_block_size, compress_stride, dq_out, dk_out,
               dv_out, workspace_size, executor),
        executor, SPA_OP_NSA_CATTN_GRAD, 1);
}

spa_status spa_nsa_compress_attention_grad(void *workspace, uint64_t workspace_size,
                                           const spa_executor *executor,
                                           const spa_runner *runner)
{
    return spa_public_status(
        spa_nsa_cattn_grad_phase2(workspace, workspace_size, executor, runner));
}
