/* MultiScaleDeformableAttnFunction: phase 1 (validate, plan, size) and
 * phase 2 (run). Phase 2 has two parallel steps: value is packed pair by pair
 * (pair = (b, h)) into f32 slices [nk][C] in the workspace, so that the
 * corners one sample reads lie close together whatever the caller's layout;
 * then work units (pair, tile of queries) run in contiguous ranges per block,
 * each output row written exactly once. */
#include <string.h>

#include "msda_plan.h"
#include "native_div.h"
#include "f64.h"
#include "msda_f64.h"
#include "spa_kernels.h"
#include "spattn/msda.h"

typedef struct msda_plan {
    spa_msda_dims d;
    int32_t empty; /* some input has no element: outputs are zero-filled */
    int64_t tile_queries, tiles, units, per_block;
    uint32_t blocks;
    uint64_t scratch_bytes; /* per block */
    int64_t pairs;
    int64_t pack_units, pack_per_block; /* the packing step: (batch, run of keys) units */
    uint32_t pack_blocks;
    int32_t f64;        /* some float tensor is float64: the float64 path (msda_f64.h) */
    uint64_t f64_bytes; /* its workspace */
} msda_plan;

typedef struct msda_exec {
    spa_exec_head head;
    spa_tensor value, spatial_shape, level_start, location, attn_weight, output;
    msda_plan plan;
} msda_exec;
_Static_assert(sizeof(msda_exec) <= SPA_EXECUTOR_BYTES, "executor too small");

typedef struct msda_kernel {
    spa_msda_fwd_kernel *fn;
    int64_t ts, row_bytes;
} msda_kernel;

/* The kernel of the output's dtype (value, location and attnWeight are
 * widened whatever theirs). */
static msda_kernel kernel_for(int32_t dtype)
{
    switch (dtype) {
    case SPA_FLOAT16:
        return (msda_kernel){SPA_K_MSDA_F16, SPA_MSDA_TS_F16, SPA_MSDA_ROW_BYTES_F16};
    case SPA_BFLOAT16:
        return (msda_kernel){SPA_K_MSDA_BF16, SPA_MSDA_TS_BF16, SPA_MSDA_ROW_BYTES_BF16};
    default:
        return (msda_kernel){SPA_K_MSDA_F32, SPA_MSDA_TS_F32, SPA_MSDA_ROW_BYTES_F32};
    }
}

/* spec/msda.md 8.1 in its order, without the NPU's limits (rule 5 and the
 * single dtype of rule 2: the aclnn layer checks those), plus the
 * consistency checks of open point 7 and the index contents of open point 6. */
static spa_status plan(const spa_tensor *value, const spa_tensor *spatial_shape,
                       const spa_tensor *level_start, const spa_tensor *location,
                       const spa_tensor *attn_weight, const spa_tensor *output, msda_plan *p)
{
    memset(p, 0, sizeof *p);
    /* rule 2: dtypes, each float tensor in its own */
    SPA_REQUIRE(spa_is_float_dtype(value->dtype) /* a float dtype, not one this build left out (DTYPES) */);
    SPA_REQUIRE(spa_msda_is_index_dtype(spatial_shape->dtype));
    SPA_REQUIRE(spa_msda_is_index_dtype(level_start->dtype));
    SPA_REQUIRE(spa_is_float_dtype(location->dtype) /* a float dtype, not one this build left out (DTYPES) */);
    SPA_REQUIRE(spa_is_float_dtype(attn_weight->dtype) /* a float dtype, not one this build left out (DTYPES) */);
    SPA_REQUIRE(spa_is_float_dtype(output->dtype) /* a float dtype, not one this build left out (DTYPES) */);
    const spa_tensor *floats[] = {value, location, attn_weight, output};
    SPA_REQUIRE(!spa_any_float64(floats, 4) || SPA_FLOAT64_MSDA);
    /* rule 3: ranks (and descriptor sanity), then rule 4 */
    SPA_TRY(spa_msda_check_ranks(value, spatial_shape, level_start, location, attn_weight, output,
                                 true));
    /* rule 5 has no native counterpart: any sizes whose products fit */
    spa_msda_dims *d = &p->d;
    d->bs = value->dims[0];
    d->nk = value->dims[1];
    d->nh = location->dims[2];
    d->c = value->dims[3];
    d->nq = location->dims[1];
    d->nl = location->dims[3];
    d->np = location->dims[4];
    int64_t out_row, nlp;
    SPA_REQUIRE(spa_mul_ok(d->nh, d->c, &out_row));
    SPA_REQUIRE(spa_mul_ok(d->nl, d->np, &nlp));
    /* rule 6 */
    SPA_REQUIRE(spatial_shape->dims[0] == d->nl);
    SPA_REQUIRE(attn_weight->dims[3] == d->nl);
    /* open point 7: every other dimension agrees, output is [bs, nq, nh*C] */
    SPA_REQUIRE(level_start->dims[0] == d->nl);
    SPA_REQUIRE(value->dims[2] == d->nh);
    const int64_t loc_dims[6] = {d->bs, d->nq, d->nh, d->nl, d->np, 2};
    const int64_t attn_dims[5] = {d->bs, d->nq, d->nh, d->nl, d->np};
    const int64_t out_dims[3] = {d->bs, d->nq, out_row};
    SPA_REQUIRE(spa_tensor_dims_are(location, 6, loc_dims));
    SPA_REQUIRE(spa_tensor_dims_are(attn_weight, 5, attn_dims));
    SPA_REQUIRE(spa_tensor_dims_are(output, 3, out_dims));
    /* rule 7: an empty input means nothing to sample */
    if (spa_tensor_numel(value) == 0 || spa_tensor_numel(location) == 0 ||
        spa_tensor_numel(spatial_shape) == 0) {
        p->empty = 1;
        return SPA_OK;
    }
    /* checked here; phase 2 reads them again into the workspace's table */
    SPA_TRY(spa_msda_levels_read(spatial_shape, level_start, d->nl, d->nk, NULL));
    if (spa_any_float64(floats, 4)) {
        p->f64 = 1;
        SPA_REQUIRE(spa_msda_f64_bytes(d->bs, d->nk, d->nh, d->c, d->nq, d->nl, d->np, false, &p->f64_bytes));
        return SPA_OK;
    }
    const msda_kernel k = kernel_for(output->dtype);
    const int64_t ts = spa_msda_tile_samples(k.ts, d->c, SPA_MSDA_DESC_BYTES, k.row_bytes, SPA_MSDA_TILE_BUDGET);
    p->tile_queries = ts / nlp > 0 ? ts / nlp : 1;
    p->tiles = (d->nq + p->tile_queries - 1) / p->tile_queries;
    SPA_REQUIRE(spa_mul_ok(d->bs * d->nh, p->tiles, &p->units)); /* bs*nh: value's numel bounds it */
    p->per_block = spa_msda_split(p->units, &p->blocks);
    /* per block: the descriptor area, the accumulator row (C floats; value's
     * numel bounds C), rounded to a cache line */
    const int64_t desc = spa_msda_desc_bytes(p->tile_queries, nlp, false);
    SPA_REQUIRE(desc >= 0);
    SPA_REQUIRE(desc <= INT64_MAX / 2 - 4 * d->c - 64);
    p->scratch_bytes = ((uint64_t)(desc + 4 * d->c) + 63) / 64 * 64;
    p->pairs = d->bs * d->nh;
    p->pack_units = d->bs * ((d->nk + SPA_MSDA_PACK_KEYS - 1) / SPA_MSDA_PACK_KEYS);
    p->pack_per_block = spa_msda_split(p->pack_units, &p->pack_blocks);
    return SPA_OK;
}

static bool same_plan(const msda_plan *a, const msda_plan *b)
{
    return spa_msda_same_dims(&a->d, &b->d) && a->empty == b->empty &&
           a->tile_queries == b->tile_queries && a->tiles == b->tiles && a->units == b->units &&
           a->per_block == b->per_block && a->blocks == b->blocks &&
           a->scratch_bytes == b->scratch_bytes && a->pairs == b->pairs &&
           a->pack_units == b->pack_units && a->pack_per_block == b->pack_per_block &&
           a->pack_blocks == b->pack_blocks && a->f64 == b->f64 && a->f64_bytes == b->f64_bytes;
}

typedef struct msda_slices {
    spa_msda_args *args;
    spa_msda_level *levels; /* [nl] */
    float *zero;            /* [C] */
    unsigned char *scratch; /* [blocks][scratch_bytes] */
    float *vpack;           /* [pairs][nk][C] */
    void *f64;              /* the float64 path's slice, in place of zero, scratch and vpack */
} msda_slices;

static void carve(spa_ws *ws, const msda_plan *p, msda_slices *s)
{
    int64_t n = 0;
    s->args = spa_ws_take(ws, 1, sizeof(spa_msda_args));
    s->levels = spa_ws_take(ws, (uint64_t)p->d.nl, sizeof(spa_msda_level));
    if (p->f64) {
        s->f64 = spa_ws_take(ws, p->f64_bytes, 1);
        return;
    }
    s->zero = spa_ws_take(ws, (uint64_t)p->d.c, sizeof(float));
    s->scratch = spa_ws_take(ws, p->blocks, p->scratch_bytes);
    s->vpack = NULL;
    if (!spa_mul_ok(p->pairs, p->d.nk, &n) || !spa_mul_ok(n, p->d.c, &n)) {
        ws->overflow = true;
        return;
    }
    s->vpack = spa_ws_take(ws, (uint64_t)n, sizeof(float));
}

static spa_status phase1(const spa_tensor *value, const spa_tensor *spatial_shape,
                         const spa_tensor *level_start_index,
                         const spa_tensor *location, const spa_tensor *attn_weight,
                         const spa_tensor *output, uint64_t *workspace_size,
                         spa_executor *executor)
{
    if (value == NULL || spatial_shape == NULL || level_start_index == NULL || location == NULL ||
        attn_weight == NULL || output == NULL || workspace_size == NULL || executor == NULL)
        return SPA_ERR_NULLPTR;
    msda_exec e;
    memset(&e, 0, sizeof e);
    SPA_TRY(plan(value, spatial_shape, level_start_index, location, attn_weight, output, &e.plan));
    spa_ws ws;
    msda_slices sl;
    spa_ws_plan(&ws);
    if (!e.plan.empty)
        carve(&ws, &e.plan, &sl);
    SPA_REQUIRE(!ws.overflow);
    e.value = *value;
    e.spatial_shape = *spatial_shape;
    e.level_start = *level_start_index;
    e.location = *location;
    e.attn_weight = *attn_weight;
    e.output = *output;
    e.head.ws_size = spa_ws_planned_bytes(&ws);
    *workspace_size = e.head.ws_size;
    spa_exec_seal(executor, &e, sizeof e, SPA_OP_MSDA);
    return SPA_OK;
}

typedef struct msda_run {
    const msda_plan *p;
    const spa_tensor *value;
    spa_msda_args *args; /* in the workspace (keeps phase 2 stack small), which no tensor of
                          * the call may overlap (spa_ws_check_disjoint) */
    msda_slices s;
    spa_msda_fwd_kernel *kernel;
} msda_run;

/* Step 1: the key runs of one block, packed (every head of a key at once,
 * so that value is read front to back). */
static void run_pack(void *arg, uint32_t blk)
{
    const msda_run *r = arg;
    const msda_plan *p = r->p;
    const int64_t first = (int64_t)blk * p->pack_per_block;
    const int64_t end = first + p->pack_per_block < p->pack_units ? first + p->pack_per_block : p->pack_units;
    spa_msda_pack_units(r->value, first, end, r->s.vpack);
}

/* One block: its units, tile-major (the heads of one batch and query tile
 * one after another, so their location, weight and output rows are read and
 * written while in cache). */
static void run_block(void *arg, uint32_t blk)
{
    const msda_run *r = arg;
    const msda_plan *p = r->p;
    void *scratch = r->s.scratch + (uint64_t)blk * p->scratch_bytes;
    int64_t u = (int64_t)blk * p->per_block;
    const int64_t end = u + p->per_block < p->units ? u + p->per_block : p->units;
    for (; u < end; u++) {
        const int64_t h = spa_mod_nat(u, p->d.nh), bt = spa_div_nat(u, p->d.nh);
        const int64_t b = spa_div_nat(bt, p->tiles), tile = spa_mod_nat(bt, p->tiles);
        const int64_t pair = b * p->d.nh + h;
        const int64_t q0 = tile * p->tile_queries, q1 = q0 + p->tile_queries;
        r->kernel(r->args, b, h, r->s.vpack + pair * p->d.nk * p->d.c, q0, q1 < p->d.nq ? q1 : p->d.nq,
                  scratch);
    }
}

spa_status spa_msda_phase2(void *workspace, uint64_t workspace_size, const spa_executor *executor,
                           const spa_runner *runner)
{
    const spa_runner rn = spa_runner_copy(runner);
    msda_exec e;
    msda_plan p;
    msda_run r;
    SPA_TRY(spa_exec_open(executor, &e, sizeof e, SPA_OP_MSDA));
    SPA_TRY(spa_ws_check_args(workspace, workspace_size, e.head.ws_size));
    /* The caller's tensors and index data may have changed since phase 1: check again. */
    SPA_TRY(plan(&e.value, &e.spatial_shape, &e.level_start, &e.location, &e.attn_weight,
                 &e.output, &p));
    SPA_REQUIRE(same_plan(&p, &e.plan));
    if (p.empty) {
        spa_msda_zero_fill(&e.output);
        return SPA_OK;
    }
    const spa_tensor *tensors[] = {&e.value, &e.spatial_shape, &e.level_start, &e.location, &e.attn_weight, &e.output};
    SPA_TRY(spa_ws_check_disjoint(workspace, e.head.ws_size, tensors, 6, NULL, 0));
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
        spa_msda_f64_forward(&e.value, &e.location, &e.attn_weight, &e.output, r.s.levels, r.s.f64, &rn);
        return SPA_OK;
    }
    r.args->lv = r.s.levels;
    memset(r.s.zero, 0, (size_t)p.d.c * sizeof(float));
    r.args->zero = r.s.zero;
    r.args->tq = p.tile_queries;
    r.args->out = e.output.data;
    memcpy(r.args->os, e.output.strides, sizeof r.args->os);
    r.p = &p;
    r.value = &e.value;
    r.kernel = kernel_for(e.output.dtype).fn;
    spa_run_blocks(&rn, run_pack, &r, p.pack_blocks);
    spa_run_blocks(&rn, run_block, &r, p.blocks);
    return SPA_OK;
}

/* The public entry points: the internal status made public, and phase 1's
 * refusal recorded in the executor (spa_executor_reason). */
spa_status spa_msda_get_workspace_size(const spa_tensor *value, const spa_tensor *spatial_shape,
                                       const spa_tensor *level_start_index,
                                       const spa_tensor *location, const spa_tensor *attn_weight,
                                       const spa_tensor *output, uint64_t *workspace_size,
                                       spa_executor *executor)
{
    return spa_refusal_record(phase1(value, spatial_shape, level_start_index, location, attn_weight,
                                     output, workspace_size, executor),
                              executor, SPA_OP_MSDA, 1);
}

spa_status spa_msda(void *workspace, uint64_t workspace_size, const spa_executor *executor,
                    const spa_runner *runner)
{
    return spa_public_status(spa_msda_phase2(workspace, workspace_size, executor, runner));
}
