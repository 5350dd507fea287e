/* NsaCompress: phase 1 (validate, plan, size) and phase 2 (run the blocks). */
#include <string.h>

#include "nsa_compress_plan.h"
#include "f64.h"
#include "spa_kernels.h"
#include "spattn/nsa.h"

typedef struct nsac_exec {
    spa_exec_head head;
    spa_tensor input, weight, output;
    spa_int_array seq;
    int64_t bs, st, seq_type;
    spa_nsac_shape shape;
    int64_t per_block; /* windows per block */
    int64_t slice;     /* channels per kernel call: heads wider than the tile run in slices */
    uint32_t blocks;
    uint32_t scratch_floats;
} nsac_exec;
_Static_assert(sizeof(nsac_exec) <= SPA_EXECUTOR_BYTES, "executor too small");

typedef struct nsac_kernel {
    spa_nsac_fwd_kernel *fn;
    int64_t tw, tc;
} nsac_kernel;

static nsac_kernel kernel_for(int32_t dtype)
{
    switch (dtype) {
    case SPA_FLOAT16:
        return (nsac_kernel){SPA_K_NSA_COMPRESS_F16, SPA_NSAC_TW_F16, SPA_NSAC_TC_F16};
    case SPA_BFLOAT16:
        return (nsac_kernel){SPA_K_NSA_COMPRESS_BF16, SPA_NSAC_TW_BF16, SPA_NSAC_TC_BF16};
#if SPA_FLOAT64_NSA_COMPRESS
    case SPA_FLOAT64: /* templates/nsa/f64/nsa_compress.c.m4: scratch of one window row */
        return (nsac_kernel){SPA_K_NSA_COMPRESS_F64, SPA_NSAC_TW_F64, 0};
#endif
    default:
        return (nsac_kernel){SPA_K_NSA_COMPRESS_F32, SPA_NSAC_TW_F32, SPA_NSAC_TC_F32};
    }
}

static spa_status plan(const spa_tensor *input, const spa_tensor *weight, const spa_int_array *seq,
                       const char *layout, int64_t bs, int64_t st, int64_t seq_type,
                       const spa_tensor *output, nsac_exec *e)
{
    memset(e, 0, sizeof *e);
    SPA_TRY(spa_nsac_check_common(input, weight, seq, layout, bs, st, seq_type, &e->shape));
    SPA_TRY(spa_tensor_check_output(output, 3));
    SPA_REQUIRE(output->dtype == input->dtype);
    SPA_REQUIRE(input->dtype != SPA_FLOAT64 || SPA_FLOAT64_NSA_COMPRESS);
    const int64_t want[3] = {e->shape.windows, e->shape.heads, e->shape.dim};
    SPA_REQUIRE(spa_tensor_dims_are(output, 3, want));
    const nsac_kernel k = kernel_for(input->dtype);
    e->input = *input;
    e->weight = *weight;
    e->output = *output;
    e->seq = *seq;
    e->bs = bs;
    e->st = st;
    e->seq_type = seq_type;
    e->per_block = spa_nsac_split(e->shape.windows, k.tw, &e->blocks);
    if (input->dtype == SPA_FLOAT64) { /* nsa_compress_f64.c: one double row of a token's heads */
        SPA_REQUIRE(e->shape.heads <= (int64_t)(UINT32_MAX / 4) / e->shape.dim);
        e->slice = e->shape.dim;
        e->scratch_floats = (uint32_t)(2 * e->shape.heads * e->shape.dim);
    } else {
        e->slice = e->shape.dim < k.tc ? e->shape.dim : k.tc;
        /* <= (TW + 1) * tc floats: the slice keeps it the tile's */
        e->scratch_floats = (uint32_t)spa_nsac_fwd_scratch(e->shape.heads, e->slice, k.tw, k.tc);
    }
    return SPA_OK;
}

/* The same carving in both phases: batch table, then one scratch per block. */
static void carve(spa_ws *ws, const nsac_exec *e, spa_nsac_table *tab, float **scratch)
{
    spa_nsac_table_take(ws, e->shape.batches, tab);
    *scratch = spa_ws_take(ws, (uint64_t)e->blocks * e->scratch_floats, sizeof(float));
}

static spa_status phase1(
    const spa_tensor *input, const spa_tensor *weight, const spa_int_array *act_seq_len,
    const char *layout, int64_t compress_block_size, int64_t compress_stride,
    int64_t act_seq_len_type, const spa_tensor *output, uint64_t *workspace_size,
    spa_executor *executor)
{
    if (input == NULL || weight == NULL || act_seq_len == NULL || output == NULL ||
        workspace_size == NULL || executor == NULL)
        return SPA_ERR_NULLPTR;
    nsac_exec e;
    SPA_TRY(plan(input, weight, act_seq_len, layout, compress_block_size, compress_stride,
                 act_seq_len_type, output, &e));
    spa_ws ws;
    spa_nsac_table tab;
    float *scratch;
    spa_ws_plan(&ws);
    if (e.shape.windows > 0)
        carve(&ws, &e, &tab, &scratch);
    SPA_REQUIRE(!ws.overflow);
    e.head.ws_size = spa_ws_planned_bytes(&ws);
    *workspace_size = e.head.ws_size;
    spa_exec_seal(executor, &e, sizeof e, SPA_OP_NSA_COMPRESS);
    return SPA_OK;
}

typedef struct nsac_run {
    const nsac_exec *e;
    spa_nsac_args args;
    spa_nsac_table tab;
    float *scratch;
    spa_nsac_fwd_kernel *kernel;
    int64_t elem; /* bytes per element */
} nsac_run;

/* One block: its windows, split where they cross a batch boundary. */
static void run_block(void *arg, uint32_t blk)
{
    const nsac_run *r = arg;
    const nsac_exec *e = r->e;
    float *scratch = r->scratch + (uint64_t)blk * e->scratch_floats;
    int64_t k = (int64_t)blk * e->per_block;
    const int64_t end = k + e->per_block < e->shape.windows ? k + e->per_block : e->shape.windows;
    int64_t b = spa_nsac_batch_of(r->tab.row + 1, e->shape.batches, k);
    while (k < end) {
        const int64_t batch_end = r->tab.row[b + 1] < end ? r->tab.row[b + 1] : end;
        if (batch_end > k) {
            const int64_t tok0 = r->tab.start[b] + (k - r->tab.row[b]) * e->st;
            if (e->slice == e->shape.dim)
                r->kernel(&r->args, tok0, k, batch_end - k, scratch);
            else
                for (int64_t c0 = 0; c0 < e->shape.dim; c0 += e->slice) {
                    spa_nsac_args sl = r->args;
                    spa_nsac_slice(&sl, c0, e->shape.dim - c0 < e->slice ? e->shape.dim - c0 : e->slice, r->elem);
                    r->kernel(&sl, tok0, k, batch_end - k, scratch);
                }
        }
        k = batch_end;
        b++;
    }
}

spa_status spa_nsa_compress_phase2(void *workspace, uint64_t workspace_size,
                                   const spa_executor *executor, const spa_runner *runner)
{
    const spa_runner rn = spa_runner_copy(runner);
    nsac_exec saved, e;
    SPA_TRY(spa_exec_open(executor, &saved, sizeof saved, SPA_OP_NSA_COMPRESS));
    SPA_TRY(spa_ws_check_args(workspace, workspace_size, saved.head.ws_size));
    /* The caller's tensors and lengths may have changed since phase 1: check again. */
    SPA_TRY(plan(&saved.input, &saved.weight, &saved.seq, "TND", saved.bs, saved.st,
                 saved.seq_type, &saved.output, &e));
    SPA_REQUIRE(e.blocks == saved.blocks);
    SPA_REQUIRE(e.per_block == saved.per_block);
    if (e.shape.windows == 0)
        return SPA_OK;
    nsac_run r;
    spa_ws ws;
    const spa_tensor *tensors[] = {&e.input, &e.weight, &e.output};
    const spa_int_array *arrays[] = {&e.seq};
    SPA_TRY(spa_ws_check_disjoint(workspace, saved.head.ws_size, tensors, 3, arrays, 1));
    spa_ws_attach(&ws, workspace, saved.head.ws_size);
    carve(&ws, &e, &r.tab, &r.scratch);
    SPA_REQUIRE(!ws.overflow);
    SPA_TRY(spa_nsac_table_fill(&e.seq, e.seq_type, e.bs, e.st, &e.shape, &r.tab));
    r.e = &e;
    r.args = spa_nsac_args_of(&e.input, &e.weight, &e.output, NULL, e.bs, e.st);
    r.kernel = kernel_for(e.input.dtype).fn;
    r.elem = (int64_t)spa_dtype_size(e.input.dtype);
    spa_run_blocks(&rn, run_block, &r, e.blocks);
    return SPA_OK;
}

/* The public entry points: the internal status made public, and phase 1's
 * refusal recorded in the executor (spa_executor_reason). */
spa_status spa_nsa_compress_get_workspace_size(const spa_tensor *input, const spa_tensor *weight,
                                               const spa_int_array *act_seq_len, const char *layout,
                                               int64_t compress_block_size, int64_t compress_stride,
                                               int64_t act_seq_len_type, const spa_tensor *output,
                                               uint64_t *workspace_size, spa_executor *executor)
{
    return spa_refusal_record(phase1(input, weight, act_seq_len, layout, compress_block_size,
                                     compress_stride, act_seq_len_type, output, workspace_size,
                                     executor),
                              executor, SPA_OP_NSA_COMPRESS, 1);
}

spa_status spa_nsa_compress(void *workspace, uint64_t workspace_size, const spa_executor *executor,
                            const spa_runner *runner)
{
    return spa_public_status(spa_nsa_compress_phase2(workspace, workspace_size, executor, runner));
}
