/* Sliding-window attention grad: phase 1 (validate, plan, size) and phase 2.
 * Phase 2 runs the kv heads one after the other, each in two parallel steps
 * once its key and value rows are f32 (swa_plan.h). Step 1: blocks = ranges
 * of query tokens; each writes dq of its tokens and sums the dK / dV rows of
 * their bands into its own partial (f32; float64: double), which covers key
 * rows [lo(first token), last token]. Step 2: each key row sums the partials
 * of the ranges that cover it in range order, scales dK and rounds once. No
 * atomics; the split depends on the shapes only, so results do not depend on
 * the runner. */
#include <string.h>

#include "attn_plan.h"
#include "half.h"
#include "swa_plan.h"
#include "spa_kernels.h"
#include "spattn/swa.h"

/* Token ranges per kv head: enough blocks for a few threads... */
#define SWAG_TARGET_RANGES 32
/* ...while the partials of one head stay under this (unless one range
 * already needs more). */
#ifndef SPA_SWA_PARTIAL_BYTES
#define SPA_SWA_PARTIAL_BYTES (512ull << 20)
#endif
/* Key rows per task of the reduction. */
#define SWAG_ROWS_PER_TASK 64

typedef struct swag_plan {
    spa_swa_shape sh;
    int64_t ranges, per_range;
    uint64_t scratch_bytes;   /* per range */
    uint64_t partial_bytes;   /* all ranges of one head */
    uint64_t kpack_floats, vpack_floats;
    uint64_t elem;            /* bytes per partial element: 4, or 8 for float64 */
    int64_t rk, rv;           /* elements per partial row: dp, dvp (float64: d, dv) */
} swag_plan;

typedef struct swag_exec {
    spa_exec_head head;
    spa_tensor q, k, v, o, dy, mx, sm, dq, dk, dv;
    spa_int_array seq;
    double scale;
    int64_t seq_type, head_num, window, window_type;
} swag_exec;
_Static_assert(sizeof(swag_exec) <= SPA_EXECUTOR_BYTES, "executor too small");

typedef struct swag_kernel {
    spa_swa_grad_kernel *fn;
    int64_t kt;
} swag_kernel;

static swag_kernel kernel_for(int32_t dtype)
{
    switch (dtype) {
    case SPA_FLOAT16:
        return (swag_kernel){SPA_K_SWA_GRAD_F16, SPA_SWAG_KT_F16};
    case SPA_BFLOAT16:
        return (swag_kernel){SPA_K_SWA_GRAD_BF16, SPA_SWAG_KT_BF16};
#if SPA_FLOAT64_SWA
    case SPA_FLOAT64:
        return (swag_kernel){SPA_K_SWA_GRAD_F64, 0};
#endif
    default:
        return (swag_kernel){SPA_K_SWA_GRAD_F32, SPA_SWAG_KT_F32};
    }
}

static spa_status check_args(const swag_exec *e, const char *layout, spa_swa_shape *sh)
{
    SPA_TRY(spa_swa_check_shapes(&e->q, &e->k, &e->v, &e->mx, &e->sm, false, &e->seq, e->seq_type,
                                 e->scale, e->head_num, layout, e->window, e->window_type, sh));
    /* the statistics were checked with q / k / v ([T, N1, 8] or [T, N1]) */
    const spa_attn_grad_tensors g = {&e->q, &e->k, &e->v, &e->o, &e->dy,
                                     NULL, NULL, &e->dq, &e->dk, &e->dv};
    SPA_TRY(spa_attn_grad_check_tensors(&g));
    SPA_TRY(spa_attn_grad_check_dims(&g, sh->t, sh->n1, sh->dv));
    return SPA_OK;
}

/* Key rows [lo, hi) range r covers, from checked cumulative ends. */
static void range_rows(const swag_plan *p, const int64_t *seq, int64_t r, int64_t *lo, int64_t *hi)
{
    int64_t t0, t1;
    spa_attn_range_tokens(r, p->per_range, p->sh.t, &t0, &t1);
    *lo = *hi = t0;
    if (t0 < t1) {
        const int64_t b = spa_swa_batch_of(seq, p->sh.batches, t0);
        *lo = spa_swa_lo(t0, spa_swa_batch_start(seq, b), p->sh.left);
        *hi = t1;
    }
}

/* Bytes of one head's partials: per range, its rows times (rk + rv)
 * elements; UINT64_MAX where that overflows (the plan is then refused).
 * Without the checked array (phase 1 sizes before reading it), the bound
 * lo >= t0 - min(left, t0): the rows of a range are at most per_range +
 * min(left, t0). */
static uint64_t partial_bytes(const swag_plan *p, const int64_t *seq)
{
    int64_t total = 0, row_bytes;
    if (!spa_mul_ok(p->rk + p->rv, (int64_t)p->elem, &row_bytes))
        return UINT64_MAX;
    for (int64_t r = 0; r < p->ranges; r++) {
        int64_t t0, t1, lo, hi, bytes;
        spa_attn_range_tokens(r, p->per_range, p->sh.t, &t0, &t1);
        if (seq != NULL)
            range_rows(p, seq, r, &lo, &hi);
        else {
            lo = t0 - (p->sh.left < t0 ? p->sh.left : t0);
            hi = t1;
        }
        if (!spa_mul_ok(hi - lo, row_bytes, &bytes) || !spa_add_ok(total, bytes, &total))
            return UINT64_MAX;
    }
    return (uint64_t)total;
}

static void make_plan(const swag_exec *e, const spa_swa_shape *shape, swag_plan *p)
{
    const spa_swa_shape sh = *shape;
    memset(p, 0, sizeof *p);
    p->sh = sh;
    const bool f64 = e->q.dtype == SPA_FLOAT64;
    p->elem = f64 ? 8 : 4;
    p->rk = f64 ? sh.d : sh.dp;
    p->rv = f64 ? sh.dv : sh.dvp;
    int64_t ranges = SWAG_TARGET_RANGES;
    if (ranges > sh.t)
        ranges = sh.t > 0 ? sh.t : 1;
    /* sized from the shapes alone (the bound on each range's rows), so that
     * phase 2 finds the same plan whatever the array held */
    for (;; ranges--) {
        p->ranges = ranges;
        p->per_range = sh.t > 0 ? (sh.t + ranges - 1) / ranges : 1;
        p->partial_bytes = partial_bytes(p, NULL);
        if (ranges == 1 || p->partial_bytes <= SPA_SWA_PARTIAL_BYTES)
            break;
    }
    const uint64_t gp = (uint64_t)sh.gp, kt = (uint64_t)kernel_for(e->q.dtype).kt;
    const uint64_t sg = (uint64_t)(sh.g < SPA_SWA_SUBGROUP ? sh.g : SPA_SWA_SUBGROUP);
    const uint64_t dp = (uint64_t)sh.dp, dvp = (uint64_t)sh.dvp, dm = dp > dvp ? dp : dvp;
    /* qt, dqt [dp][gp]; qn [sg][dp]; dyt [dvp][gp]; dyn [sg][dvp]; P, dS [kt][gp];
     * three rows of gp; stages 16 x (dp + dvp + dm) */
    p->scratch_bytes = 4 * (2 * dp * gp + sg * dp + dvp * gp + sg * dvp + 2 * kt * gp + 3 * gp +
                            16 * (dp + dvp + dm));
    if (f64)
        p->scratch_bytes = 8 * (uint64_t)sh.d; /* one dq row */
    p->kpack_floats = spa_swa_pack_floats(&e->k, &sh);
    p->vpack_floats = spa_swa_pack_floats(&e->v, &sh);
}

typedef struct swag_slices {
    int64_t *seq;
    unsigned char *scratch;  /* [ranges][scratch_bytes] */
    unsigned char *partial;  /* the ranges' dK rows then dV rows, one head */
    uint64_t *offset;        /* [ranges] first byte of a range's partial */
    int64_t *lo, *hi;        /* [ranges] key rows a partial covers */
    float *kpack, *vpack;
} swag_slices;

static void carve(spa_ws *ws, const swag_plan *p, swag_slices *s)
{
    const uint64_t ranges = (uint64_t)p->ranges;
    s->seq = spa_ws_take(ws, (uint64_t)p->sh.batches, sizeof(int64_t));
    s->scratch = spa_ws_take(ws, ranges, p->scratch_bytes);
    s->partial = spa_ws_take(ws, p->partial_bytes, 1);
    s->offset = spa_ws_take(ws, ranges, sizeof(uint64_t));
    s->lo = spa_ws_take(ws, ranges, sizeof(int64_t));
    s->hi = spa_ws_take(ws, ranges, sizeof(int64_t));
    s->kpack = spa_ws_take(ws, p->kpack_floats, sizeof(float));
    s->vpack = spa_ws_take(ws, p->vpack_floats, sizeof(float));
}

static uint64_t planned_bytes(const swag_plan *p)
{
    spa_ws ws;
    swag_slices sl;
    spa_ws_plan(&ws);
    carve(&ws, p, &sl);
    return ws.overflow ? 0 : spa_ws_planned_bytes(&ws);
}

static spa_status phase1(const spa_tensor *query, const spa_tensor *key, const spa_tensor *value,
                         const spa_tensor *attention_out, const spa_tensor *attention_out_grad,
                         const spa_tensor *softmax_max, const spa_tensor *softmax_sum,
                         const spa_int_array *seq_len, int64_t seq_len_type, double scale_value,
                         int64_t head_num, const char *input_layout, int64_t window,
                         int64_t window_type, const spa_tensor *dq_out, const spa_tensor *dk_out,
                         const spa_tensor *dv_out, uint64_t *workspace_size,
                         spa_executor *executor)
{
    if (query == NULL || key == NULL || value == NULL || attention_out == NULL ||
        attention_out_grad == NULL || softmax_max == NULL || softmax_sum == NULL ||
        seq_len == NULL || dq_out == NULL || dk_out == NULL || dv_out == NULL ||
        workspace_size == NULL || executor == NULL)
        return SPA_ERR_NULLPTR;
    swag_exec e;
    memset(&e, 0, sizeof e);
    e.q = *query, e.k = *key, e.v = *value, e.o = *attention_out, e.dy = *attention_out_grad;
    e.mx = *softmax_max, e.sm = *softmax_sum, e.dq = *dq_out, e.dk = *dk_out, e.dv = *dv_out;
    e.seq = *seq_len;
    e.scale = scale_value, e.seq_type = seq_len_type, e.head_num = head_num;
    e.window = window, e.window_type = window_type;
    spa_swa_shape sh;
    SPA_TRY(check_args(&e, input_layout, &sh));
    SPA_TRY(spa_swa_check_seq(&e.seq, &sh, NULL));
    e.head.ws_size = 0;
    if (sh.t > 0) {
        swag_plan p;
        make_plan(&e, &sh, &p);
        e.head.ws_size = planned_bytes(&p);
        SPA_REQUIRE(e.head.ws_size > 0);
    }
    *workspace_size = e.head.ws_size;
    spa_exec_seal(executor, &e, sizeof e, SPA_OP_SWA_GRAD);
    return SPA_OK;
}

typedef struct swag_run {
    const swag_exec *e;
    const swag_plan *p;
    swag_slices s;
    spa_swa_args args;
    spa_swa_grad_kernel *kernel;
    int64_t h2;
} swag_run;

/* Step 1, token range `range` of kv head r->h2. */
static void run_range(void *arg, uint32_t range)
{
    const swag_run *r = arg;
    const swag_plan *p = r->p;
    const int64_t lo = r->s.lo[range], nrows = r->s.hi[range] - lo;
    unsigned char *base = r->s.partial + r->s.offset[range];
    memset(base, 0, (size_t)((uint64_t)nrows * (uint64_t)(p->rk + p->rv) * p->elem));
    void *dkp = base, *dvp = base + (uint64_t)nrows * (uint64_t)p->rk * p->elem;
    void *scratch = r->s.scratch + (uint64_t)range * p->scratch_bytes;
    int64_t t, t1;
    spa_attn_range_tokens((int64_t)range, p->per_range, p->sh.t, &t, &t1);
    while (t < t1) {
        const int64_t b = spa_swa_batch_of(r->s.seq, p->sh.batches, t);
        const int64_t stop = r->s.seq[b] < t1 ? r->s.seq[b] : t1;
        r->kernel(&r->args, r->h2, t, stop, spa_swa_batch_start(r->s.seq, b), lo, dkp, dvp, scratch);
        t = stop;
    }
}

static void store_row(const spa_tensor *out, int64_t row, int64_t h2, int64_t c0, const double *acc,
                      int64_t n)
{
    const int64_t base = row * out->strides[0] + h2 * out->strides[1], s2 = out->strides[2];
    for (int64_t i = 0; i < n; i++) {
        const int64_t at = base + (c0 + i) * s2;
        switch (out->dtype) {
        case SPA_FLOAT16:
            ((uint16_t *)out->data)[at] = spa_f32_to_f16((float)acc[i]);
            break;
        case SPA_BFLOAT16:
            ((uint16_t *)out->data)[at] = spa_f32_to_bf16((float)acc[i]);
            break;
        case SPA_FLOAT64:
            ((double *)out->data)[at] = acc[i];
            break;
        default:
            ((float *)out->data)[at] = (float)acc[i];
            break;
        }
    }
}

/* Step 2: SWAG_ROWS_PER_TASK key rows of kv head r->h2. f32 partials are
 * summed in f32 (each sum held in a double, exactly: every step is rounded
 * to f32), float64 ones in double. */
static void run_reduce(void *arg, uint32_t task)
{
    const swag_run *r = arg;
    const swag_plan *p = r->p;
    const int64_t t = p->sh.t, h2 = r->h2;
    const int64_t row0 = (int64_t)task * SWAG_ROWS_PER_TASK;
    const int64_t row1 = row0 + SWAG_ROWS_PER_TASK < t ? row0 + SWAG_ROWS_PER_TASK : t;
    const bool f64 = p->elem == 8;
    enum { CHUNK = 32 }; /* (a small frame: phase 2 runs on a 4 KiB stack on Cortex-M) */
    double acc[CHUNK];
    for (int64_t row = row0; row < row1; row++)
        for (int part = 0; part < 2; part++) {
            const int64_t n = part == 0 ? p->sh.d : p->sh.dv;
            for (int64_t c0 = 0; c0 < n; c0 += CHUNK) {
                const int64_t cn = n - c0 < CHUNK ? n - c0 : CHUNK;
                for (int64_t i = 0; i < cn; i++)
                    acc[i] = 0.0;
                for (int64_t rg = 0; rg < p->ranges; rg++) {
                    const int64_t lo = r->s.lo[rg], hi = r->s.hi[rg];
                    if (row < lo || row >= hi)
                        continue;
                    const uint64_t el = (part == 0 ? (uint64_t)(row - lo) * (uint64_t)p->rk
                                                   : (uint64_t)(hi - lo) * (uint64_t)p->rk +
                                                         (uint64_t)(row - lo) * (uint64_t)p->rv) +
                                        (uint64_t)c0;
                    const unsigned char *src = r->s.partial + r->s.offset[rg] + el * p->elem;
                    if (f64)
                        for (int64_t i = 0; i < cn; i++)
                            acc[i] += ((const double *)(const void *)src)[i];
                    else
                        for (int64_t i = 0; i < cn; i++)
                            acc[i] = (double)((float)acc[i] + ((const float *)(const void *)src)[i]);
                }
                if (part == 0)
                    for (int64_t i = 0; i < cn; i++)
                        acc[i] = f64 ? p->sh.scale * acc[i] + 0.0
                                     : (double)((float)p->sh.scale * (float)acc[i] + 0.0f);
                store_row(part == 0 ? &r->e->dk : &r->e->dv, row, h2, c0, acc, cn);
            }
        }
}

spa_status spa_swa_grad_phase2(void *workspace, uint64_t workspace_size,
                               const spa_executor *executor, const spa_runner *runner)
{
    const spa_runner rn = spa_runner_copy(runner);
    swag_exec e;
    SPA_TRY(spa_exec_open(executor, &e, sizeof e, SPA_OP_SWA_GRAD));
    swag_plan p;
    SPA_TRY(check_args(&e, "TND", &p.sh));
    SPA_TRY(spa_ws_check_args(workspace, workspace_size, e.head.ws_size));
    if (e.head.ws_size == 0) {
        SPA_TRY(spa_swa_check_seq(&e.seq, &p.sh, NULL));
        SPA_REQUIRE(p.sh.t == 0);
        return SPA_OK;
    }
    const spa_tensor *tensors[] = {&e.q, &e.k, &e.v, &e.o, &e.dy, &e.mx, &e.sm, &e.dq, &e.dk, &e.dv};
    const spa_int_array *arrays[] = {&e.seq};
    SPA_TRY(spa_ws_check_disjoint(workspace, e.head.ws_size, tensors, 10, arrays, 1));
    make_plan(&e, &p.sh, &p); /* the shape lives in the plan only: less stack under the kernels */
    SPA_REQUIRE(planned_bytes(&p) == e.head.ws_size);
    spa_ws ws;
    swag_run r;
    spa_ws_attach(&ws, workspace, e.head.ws_size);
    carve(&ws, &p, &r.s);
    SPA_REQUIRE(!ws.overflow);
    SPA_TRY(spa_swa_check_seq(&e.seq, &p.sh, r.s.seq));
    /* each range's partial from the checked copy: never more than the plan's bound */
    uint64_t off = 0;
    for (int64_t rg = 0; rg < p.ranges; rg++) {
        range_rows(&p, r.s.seq, rg, &r.s.lo[rg], &r.s.hi[rg]);
        r.s.offset[rg] = off;
        off += (uint64_t)(r.s.hi[rg] - r.s.lo[rg]) * (uint64_t)(p.rk + p.rv) * p.elem;
    }
    SPA_REQUIRE(off <= p.partial_bytes);
    r.e = &e;
    r.p = &p;
    r.args = spa_swa_args_of(&p.sh, &e.q, &e.k, &e.v, &e.o, &e.mx, &e.sm, &e.dy, &e.dq);
    r.kernel = kernel_for(e.q.dtype).fn;
    const int64_t tasks = (p.sh.t + SWAG_ROWS_PER_TASK - 1) / SWAG_ROWS_PER_TASK;
    for (r.h2 = 0; r.h2 < p.sh.n2; r.h2++) {
        if (e.q.dtype != SPA_FLOAT64)
            spa_swa_attach_head(&r.args, &p.sh, &e.k, &e.v, r.s.kpack, r.s.vpack, r.h2, &rn);
        spa_run_blocks(&rn, run_range, &r, (uint32_t)p.ranges);
        spa_run_blocks(&rn, run_reduce, &r, (uint32_t)tasks);
    }
    return SPA_OK;
}

spa_status spa_swa_grad_get_workspace_size(
    const spa_tensor *query, const spa_tensor *key, const spa_tensor *value,
    const spa_tensor *attention_out, const spa_tensor *attention_out_grad,
    const spa_tensor *softmax_max, const spa_tensor *softmax_sum, const spa_int_array *seq_len,
    int64_t seq_len_type, double scale_value, int64_t head_num, const char *input_layout,
    int64_t window, int64_t window_type, const spa_tensor *dq_out, const spa_tensor *dk_out,
    const spa_tensor *dv_out, uint64_t *workspace_size, spa_executor *executor)
{
    return spa_refusal_record(
        phase1(query, key, value, attention_out, attention_out_grad, softmax_max, softmax_sum,
               seq_len, seq_len_type, scale_value, head_num, input_layout, window, window_type,
               dq_out, dk_out, dv_out, workspace_size, executor),
        executor, SPA_OP_SWA_GRAD, 1);
}

spa_status spa_swa_grad(void *workspace, uint64_t workspace_size, const spa_executor *executor,
                        const spa_runner *runner)
{
    return spa_public_status(spa_swa_grad_phase2(workspace, workspace_size, executor, runner));
}
