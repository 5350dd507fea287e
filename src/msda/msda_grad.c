/* MultiScaleDeformableAttentionGrad: phase 1 (validate, plan, size) and
 * phase 2 (run). Phase 2 has three parallel steps. Value is packed into f32
 * slices [nk][C], one per (b, h) pair, reading it key by key. Blocks then take
 * contiguous ranges of pairs; a pair's f32 gradValue slice belongs to the
 * block that runs it, so every accumulation happens in one fixed order
 * whatever the runner (the corners of a sample lie close together in these
 * slices, whatever the caller's layout). Last, the slices are stored into
 * gradValue key by key with one RNE rounding. */
#include <string.h>

#include "msda_plan.h"
#include "f64.h"
#include "msda_f64.h"
#include "spa_kernels.h"
#include "spattn/msda.h"

typedef struct msdag_plan {
    spa_msda_dims d;
    int64_t empty; /* some input has no element: outputs are zero-filled */
    int64_t tile_queries, pairs, per_block;
    uint64_t scratch_bytes; /* per block: descriptors and rows */
    uint64_t slice_floats;  /* nk * C */
    uint32_t blocks;
    int64_t key_units, key_per_block; /* packing and storing: (batch, run of keys) units */
    uint32_t key_blocks;
    int32_t f64;        /* some float tensor is float64: the float64 path (msda_f64.h) */
    uint64_t f64_bytes; /* its workspace */
} msdag_plan;

typedef struct msdag_exec {
    spa_exec_head head;
    spa_tensor value, spatial_shape, level_start, location, attn_weight, grad_output;
    spa_tensor grad_value, grad_location, grad_attn_weight;
    msdag_plan plan;
} msdag_exec;
_Static_assert(sizeof(msdag_exec) <= SPA_EXECUTOR_BYTES, "executor too small");

typedef struct msdag_kernel {
    spa_msda_grad_kernel *fn;
    int64_t ts;
} msdag_kernel;



static msdag_kernel kernel_for(int32_t dtype)
{
    switch (dtype) {
    case SPA_FLOAT16:
        return (msdag_kernel){SPA_K_MSDA_GRAD_F16, SPA_MSDAG_TS_F16};
    case SPA_BFLOAT16:
        return (msdag_kernel){SPA_K_MSDA_GRAD_BF16, SPA_MSDAG_TS_BF16};
    default:
        return (msdag_kernel){SPA_K_MSDA_GRAD_F32, SPA_MSDAG_TS_F32};
    }
}

/* spec/msda.md 8.2 in its order, plus the index contents of open point 6
 * (levels filled when non-empty). Float dtypes may differ tensor by tensor. */
static spa_status plan(const spa_tensor *value, const spa_tensor *spatial_shape,
                       const spa_tensor *level_start, const spa_tensor *location,
                       const spa_tensor *attn_weight, const spa_tensor *grad_output,
                       const spa_tensor *grad_value, const spa_tensor *grad_location,
                       const spa_tensor *grad_attn_weight, msdag_plan *p)
{
    memset(p, 0, sizeof *p);
    /* rule 2: dtypes, no equality between the float tensors */
    SPA_REQUIRE(spa_is_float_dtype(value->dtype) /* a float dtype, not one this build left out (DTYPES) */);
    SPA_REQUIRE(spa_is_float_dtype(location->dtype) /* a float dtype, not one this build left out (DTYPES) */);
    SPA_REQUIRE(spa_is_float_dtype(attn_weight->dtype) /* a float dtype, not one this build left out (DTYPES) */);
    SPA_REQUIRE(spa_is_float_dtype(grad_output->dtype) /* a float dtype, not one this build left out (DTYPES) */);
    SPA_REQUIRE(spa_msda_is_index_dtype(spatial_shape->dtype));
    SPA_REQUIRE(spa_msda_is_index_dtype(level_start->dtype));
    SPA_REQUIRE(spa_is_float_dtype(grad_value->dtype) /* a float dtype, not one this build left out (DTYPES) */);
    SPA_REQUIRE(spa_is_float_dtype(grad_location->dtype) /* a float dtype, not one this build left out (DTYPES) */);
    SPA_REQUIRE(spa_is_float_dtype(grad_attn_weight->dtype) /* a float dtype, not one this build left out (DTYPES) */);
    const spa_tensor *floats[] = {value, location, attn_weight, grad_output,
                                  grad_value, grad_location, grad_attn_weight};
    SPA_REQUIRE(!spa_any_float64(floats, 7) || SPA_FLOAT64_MSDA_GRAD);
    /* rule 3 (FRACTAL_NZ): descriptors carry no format; everything is ND. */
    /* rule 4: ranks (and descriptor sanity) */
    SPA_TRY(spa_msda_check_ranks(value, spatial_shape, level_start, location, attn_weight,
                                 grad_output, false));
    /* rule 5 has no native counterpart: any sizes whose products fit */
    spa_msda_dims *d = &p->d;
    d->bs = value->dims[0];
    d->nk = value->dims[1];
    d->nh = value->dims[2];
    d->c = value->dims[3];
    d->nq = location->dims[1];
    d->nl = spatial_shape->dims[0];
    d->np = location->dims[4];
    int64_t gout_row, nlp;
    SPA_REQUIRE(spa_mul_ok(d->nh, d->c, &gout_row));
    SPA_REQUIRE(spa_mul_ok(d->nl, d->np, &nlp));
    /* rule 6 */
    const int64_t loc_dims[6] = {d->bs, d->nq, d->nh, d->nl, d->np, 2};
    const int64_t attn_dims[5] = {d->bs, d->nq, d->nh, d->nl, d->np};
    const int64_t gout_dims[3] = {d->bs, d->nq, gout_row};
    SPA_REQUIRE(level_start->dims[0] == d->nl);
    SPA_REQUIRE(spa_tensor_dims_are(location, 6, loc_dims));
    SPA_REQUIRE(spa_tensor_dims_are(attn_weight, 5, attn_dims));
    SPA_REQUIRE(spa_tensor_dims_are(grad_output, 3, gout_dims));
    /* rule 7: outputs shaped like their inputs */
    SPA_TRY(spa_tensor_check_output(grad_value, 4));
    SPA_TRY(spa_tensor_check_output(grad_location, 6));
    SPA_TRY(spa_tensor_check_output(grad_attn_weight, 5));
    SPA_REQUIRE(spa_tensor_dims_are(grad_value, 4, value->dims));
    SPA_REQUIRE(spa_tensor_dims_are(grad_location, 6, loc_dims));
    SPA_REQUIRE(spa_tensor_dims_are(grad_attn_weight, 5, attn_dims));
    /* rule 8: an empty input means nothing to sample */
    if (spa_tensor_numel(value) == 0 || spa_tensor_numel(location) == 0 ||
        spa_tensor_numel(spatial_shape) == 0) {
        p->empty = 1;
        return SPA_OK;
    }
    /* checked here; phase 2 reads them again into the workspace's table */
    SPA_TRY(spa_msda_levels_read(spatial_shape, level_start, d->nl, d->nk, NULL));
    if (spa_any_float64(floats, 7)) {
        p->f64 = 1;
        SPA_REQUIRE(spa_msda_f64_bytes(d->bs, d->nk, d->nh, d->c, d->nq, d->nl, d->np, true, &p->f64_bytes));
        return SPA_OK;
    }
    const msdag_kernel k = kernel_for(value->dtype);
    const int64_t ts = spa_msda_tile_samples(k.ts, d->c, SPA_MSDAG_DESC_BYTES, SPA_MSDAG_ROW_BYTES_F32,
                                             SPA_MSDAG_TILE_BUDGET);
    p->tile_queries = ts / nlp > 0 ? ts / nlp : 1;
    p->pairs = d->bs * d->nh; /* bounded by value's element count */
    p->per_block = spa_msda_split(p->pairs, &p->blocks);
    /* per block: the descriptor area, then 5 rows of C floats (value's numel
     * bounds C), rounded to a cache line */
    const int64_t desc = spa_msda_desc_bytes(p->tile_queries, nlp, true);
    SPA_REQUIRE(desc >= 0);
    SPA_REQUIRE(d->c <= (INT64_MAX / 2 - desc - 64) / 20);
    p->scratch_bytes = ((uint64_t)(desc + 20 * d->c) + 63) / 64 * 64;
    int64_t slice;
    SPA_REQUIRE(spa_mul_ok(d->nk, d->c, &slice));
    p->slice_floats = (uint64_t)slice;
    p->key_units = d->bs * ((d->nk + SPA_MSDA_PACK_KEYS - 1) / SPA_MSDA_PACK_KEYS);
    p->key_per_block = spa_msda_split(p->key_units, &p->key_blocks);
    return SPA_OK;
}

static bool same_plan(const msdag_plan *a, const msdag_plan *b)
{
    return spa_msda_same_dims(&a->d, &b->d) && a->empty == b->empty &&
           a->slice_floats == b->slice_floats && a->tile_queries == b->tile_queries &&
           a->pairs == b->pairs && a->per_block == b->per_block &&
           a->scratch_bytes == b->scratch_bytes && a->blocks == b->blocks &&
           a->key_units == b->key_units && a->key_per_block == b->key_per_block &&
           a->key_blocks == b->key_blocks && a->f64 == b->f64 && a->f64_bytes == b->f64_bytes;
}

typedef struct msdag_slices {
    spa_msda_args *args;
    spa_msda_level *levels; /* [nl] */
    float *zero;            /* [C] */
    unsigned char *scratch; /* [blocks][scratch_bytes] */
    float *vpack;           /* [pairs][nk][C] */
    float *gacc;            /* [pairs][nk][C] */
    void *f64;              /* the float64 path's slice, in place of zero, scratch and the slices */
} msdag_slices;

static void carve(spa_ws *ws, const msdag_plan *p, msdag_slices *s)
{
    s->args = spa_ws_take(ws, 1, sizeof(spa_msda_args));
    s->levels = spa_ws_take(ws, (uint64_t)p->d.nl, sizeof(spa_msda_level));
    if (p->f64) {
        s->f64 = spa_ws_take(ws, p->f64_bytes, 1);
        return;
    }
    s->zero = spa_ws_take(ws, (uint64_t)p->d.c, sizeof(float));
    s->scratch = spa_ws_take(ws, p->blocks, p->scratch_bytes);
    s->vpack = NULL;
    s->gacc = NULL;
    if (p->slice_floats > UINT64_MAX / 4 / (uint64_t)p->pairs) {
        ws->overflow = true;
        return;
    }
    s->vpack = spa_ws_take(ws, (uint64_t)p->pairs * p->slice_floats, sizeof(float));
    s->gacc = spa_ws_take(ws, (uint64_t)p->pairs * p->slice_floats, sizeof(float));
}

static spa_status phase1(
    const spa_tensor *value, const spa_tensor *spatial_shape, const spa_tensor *level_start_index,
    const spa_tensor *location, const spa_tensor *attn_weight, const spa_tensor *grad_output,
    const spa_tensor *grad_value, const spa_tensor *grad_location,
    const spa_tensor *grad_attn_weight, uint64_t *workspace_size, spa_executor *executor)
{
    /* rule 1, plus workspaceSize and executor (open point 10) */
    if (value == NULL || spatial_shape == NULL || level_start_index == NULL || location == NULL ||
        attn_weight == NULL || grad_output == NULL || grad_value == NULL ||
        grad_location == NULL || grad_attn_weight == NULL || workspace_size == NULL ||
        executor == NULL)
        return SPA_ERR_NULLPTR;
    msdag_exec e;
    memset(&e, 0, sizeof e);
    SPA_TRY(plan(value, spatial_shape, level_start_index, location, attn_weight, grad_output,
                 grad_value, grad_location, grad_attn_weight, &e.plan));
    spa_ws ws;
    msdag_slices s;
    spa_ws_plan(&ws);
    if (!e.plan.empty)
        carve(&ws, &e.plan, &s);
    SPA_REQUIRE(!ws.overflow);
    e.value = *value;
    e.spatial_shape = *spatial_shape;
    e.level_start = *level_start_index;
    e.location = *location;
    e.attn_weight = *attn_weight;
    e.grad_output = *grad_output;
    e.grad_value = *grad_value;
    e.grad_location = *grad_location;
    e.grad_attn_weight = *grad_attn_weight;
    e.head.ws_size = spa_ws_planned_bytes(&ws);
    *workspace_size = e.head.ws_size;
    spa_exec_seal(executor, &e, sizeof e, SPA_OP_MSDA_GRAD);
    return SPA_OK;
}

typedef struct msdag_run {
    const msdag_plan *p;
    const spa_tensor *value, *grad_value;
    spa_msda_args *args; /* in the workspace (keeps phase 2 stack small), which no tensor of
                          * the call may overlap (spa_ws_check_disjoint) */
    msdag_slices s;
    spa_msda_grad_kernel *kernel;
} msdag_run;

/* Steps 1 and 3: the (batch, key run) units of one block. */
static void key_range(const msdag_plan *p, uint32_t blk, int64_t *first, int64_t *end)
{
    *first = (int64_t)blk * p->key_per_block;
    *end = *first + p->key_per_block < p->key_units ? *first + p->key_per_block : p->key_units;
}

static void run_pack(void *arg, uint32_t blk)
{
    const msdag_run *r = arg;
    int64_t u, end;
    key_range(r->p, blk, &u, &end);
    spa_msda_pack_units(r->value, u, end, r->s.vpack);
}

static void run_unpack(void *arg, uint32_t blk)
{
    const msdag_run *r = arg;
    int64_t u, end;
    key_range(r->p, blk, &u, &end);
    spa_msda_unpack_units(r->s.gacc, r->grad_value, u, end);
}

/* Step 2: the pairs of one block. */
static void run_block(void *arg, uint32_t blk)
{
    const msdag_run *r = arg;
    const msdag_plan *p = r->p;
    void *scratch = r->s.scratch + (uint64_t)blk * p->scratch_bytes;
    const int64_t first = (int64_t)blk * p->per_block;
    const int64_t end = first + p->per_block < p->pairs ? first + p->per_block : p->pairs;
    for (int64_t pair = first; pair < end; pair++) {
        float *gacc = r->s.gacc + (uint64_t)pair * p->slice_floats;
        memset(gacc, 0, (size_t)(p->slice_floats * sizeof(float)));
        r->kernel(r->args, pair / p->d.nh, pair % p->d.nh, r->s.vpack + (uint64_t)pair * p->slice_floats,
                  gacc, scratch);
    }
}

spa_status spa_msda_grad_phase2(void *workspace, uint64_t workspace_size,
                                const spa_executor *executor, const spa_runner *runner)
{
    const spa_runner rn = spa_runner_copy(runner);
    msdag_exec e;
    msdag_plan p;
    msdag_run r;
    SPA_TRY(spa_exec_open(executor, &e, sizeof e, SPA_OP_MSDA_GRAD));
    SPA_TRY(spa_ws_check_args(workspace, workspace_size, e.head.ws_size));
    /* The caller's tensors and index data may have changed since phase 1: check again. */
    SPA_TRY(plan(&e.value, &e.spatial_shape, &e.level_start, &e.location, &e.attn_weight,
                 &e.grad_output, &e.grad_value, &e.grad_location, &e.grad_attn_weight, &p));
    SPA_REQUIRE(same_plan(&p, &e.plan));
    if (p.empty) {
        spa_msda_zero_fill(&e.grad_value);
        spa_msda_zero_fill(&e.grad_location);
        spa_msda_zero_fill(&e.grad_attn_weight);
        return SPA_OK;
    }
    const spa_tensor *tensors[] = {&e.value, &e.spatial_shape, &e.level_start, &e.location, &e.attn_weight,
                                   &e.grad_output, &e.grad_value, &e.grad_location, &e.grad_attn_weight};
    SPA_TRY(spa_ws_check_disjoint(workspace, e.head.ws_size, tensors, 9, NULL, 0));
    spa_ws ws;
    spa_ws_attach(&ws, workspace, e.head.ws_size);
    carve(&ws, &p, &r.s);
    SPA_REQUIRE(!ws.overflow);
    r.args = r.s.args;
    spa_msda_args_init(r.args, &e.location, &e.attn_weight, &p.d);
    /* The levels were checked by plan(); read (and check) them once more
     * into the copy the kernels use. The workspace copies (table, zero row,
     * arguments) are the caller's to leave alone until phase 2 returns. */
    SPA_TRY(spa_msda_levels_read(&e.spatial_shape, &e.level_start, p.d.nl, p.d.nk, r.s.levels));
    if (p.f64) {
        spa_msda_f64_backward(&e.value, &e.location, &e.attn_weight, &e.grad_output, &e.grad_value,
                              &e.grad_location, &e.grad_attn_weight, r.s.levels, r.s.f64, &rn);
        return SPA_OK;
    }
    r.args->lv = r.s.levels;
    memset(r.s.zero, 0, (size_t)p.d.c * sizeof(float));
    r.args->zero = r.s.zero;
    r.args->tq = p.tile_queries;
    r.args->gout = e.grad_output.data;
    r.args->gout_dt = e.grad_output.dtype;
    memcpy(r.args->gos, e.grad_output.strides, sizeof r.args->gos);
    r.args->gloc = e.grad_location.data;
    r.args->gloc_dt = e.grad_location.dtype;
    memcpy(r.args->gls, e.grad_location.strides, sizeof r.args->gls);
    r.args->gattn = e.grad_attn_weight.data;
    r.args->gattn_dt = e.grad_attn_weight.dtype;
    memcpy(r.args->gas, e.grad_attn_weight.strides, sizeof r.args->gas);
    r.p = &p;
    r.value = &e.value;
    r.grad_value = &e.grad_value;
    r.kernel = kernel_for(e.value.dtype).fn;
    spa_run_blocks(&rn, run_pack, &r, p.key_blocks);
    spa_run_blocks(&rn, run_block, &r, p.blocks);
    spa_run_blocks(&rn, run_unpack, &r, p.key_blocks);
    return SPA_OK;
}

/* The public entry points: the internal status made public, and phase 1's
 * refusal recorded in the executor (spa_executor_reason). */
spa_status spa_msda_grad_get_workspace_size(
    const spa_tensor *value, const spa_tensor *spatial_shape, const spa_tensor *level_start_index,
    const spa_tensor *location, const spa_tensor *attn_weight, const spa_tensor *grad_output,
    const spa_tensor *grad_value, const spa_tensor *grad_location,
    const spa_tensor *grad_attn_weight, uint64_t *workspace_size, spa_executor *executor)
{
    return spa_refusal_record(phase1(value, spatial_shape, level_start_index, location, attn_weight,
                                     grad_output, grad_value, grad_location, grad_attn_weight,
                                     workspace_size, executor),
                              executor, SPA_OP_MSDA_GRAD, 1);
}

spa_status spa_msda_grad(void *workspace, uint64_t workspace_size, const spa_executor *executor,
                         const spa_runner *runner)
{
    return spa_public_status(spa_msda_grad_phase2(workspace, workspace_size, executor, runner));
}
