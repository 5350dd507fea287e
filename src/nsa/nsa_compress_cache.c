/* NsaCompressWithCache, native (spattn/nsa_infer.h): the newest window of
 * each batch that closes one, compressed into its row of the cache.
 *
 * A unit is one batch. Its window's rows are copied (in the input's dtype,
 * through the block table) into the block's scratch as a dense [l, N, D]
 * window, and the NsaCompress forward kernel computes it, so the row equals
 * what spa_nsa_compress gives for that window, bit for bit. Validation
 * (phase 1 and again phase 2, before anything is written): the shapes, the
 * lengths, the table entries of every window read, and the slots (inside
 * the cache, distinct among the batches that write: two writes of one row
 * would race). The units read each page number and slot once more as they
 * run and skip a value that is no longer valid (an array rewritten during
 * the call): never an access outside the cache. */
#include <string.h>

#include "f64.h"
#include "internal.h"
#include "nsa_compress_kernel.h"
#include "nsa_compress_plan.h"
#include "spa_kernels.h"
#include "spattn/nsa_infer.h"

#ifndef SPA_COMPRESS_CACHE_BLOCKS_MAX
#define SPA_COMPRESS_CACHE_BLOCKS_MAX 64
#endif

typedef struct nsacc_exec {
    spa_exec_head head;
    spa_tensor input, weight, slots, table, out;
    spa_int_array len;
    int64_t l, d;
    int32_t has_table;
} nsacc_exec;
_Static_assert(sizeof(nsacc_exec) <= SPA_EXECUTOR_BYTES, "executor too small");

typedef struct nsacc_shape {
    int64_t batches, pages, page_size, heads, dim, rows, kv_cap;
    int32_t dtype;
    bool tnd; /* input [T, N, D]: the batches' rows one after the other */
    spa_tensor x; /* input as [pages, page_size, N, D] ([1, T, N, D] for TND) */
} nsacc_shape;

typedef struct nsacc_kernel {
    spa_nsac_fwd_kernel *fn;
    int64_t tw, tc; /* the kernel's tile: windows, channels per call (0: every channel, f64) */
} nsacc_kernel;

static nsacc_kernel kernel_for(int32_t dtype)
{
    switch (dtype) {
    case SPA_FLOAT16:
        return (nsacc_kernel){SPA_K_NSA_COMPRESS_F16, SPA_NSAC_TW_F16, SPA_NSAC_TC_F16};
    case SPA_BFLOAT16:
        return (nsacc_kernel){SPA_K_NSA_COMPRESS_BF16, SPA_NSAC_TW_BF16, SPA_NSAC_TC_BF16};
#if SPA_FLOAT64_NSA_COMPRESS
    case SPA_FLOAT64:
        return (nsacc_kernel){SPA_K_NSA_COMPRESS_F64, SPA_NSAC_TW_F64, 0};
#endif
    default:
        return (nsacc_kernel){SPA_K_NSA_COMPRESS_F32, SPA_NSAC_TW_F32, SPA_NSAC_TC_F32};
    }
}

static spa_status check_args(const nsacc_exec *e, nsacc_shape *sh)
{
    memset(sh, 0, sizeof *sh);
    sh->tnd = e->input.rank == 3;
    SPA_TRY(spa_tensor_check(&e->input, sh->tnd ? 3 : 4));
    sh->x = e->input;
    if (sh->tnd) { /* the same elements as one page of T rows */
        SPA_REQUIRE(!e->has_table /* a TND input takes no block_table */);
        for (int32_t k = 3; k > 0; k--)
            sh->x.dims[k] = e->input.dims[k - 1], sh->x.strides[k] = e->input.strides[k - 1];
        sh->x.dims[0] = 1, sh->x.strides[0] = e->input.dims[0] * e->input.strides[0];
        sh->x.rank = 4;
    }
    SPA_TRY(spa_tensor_check(&e->weight, 2));
    SPA_TRY(spa_tensor_check(&e->slots, 1));
    SPA_TRY(spa_tensor_check_output(&e->out, 3));
    SPA_TRY(spa_seq_check_size(&e->len));
    const int32_t dt = e->input.dtype;
    SPA_REQUIRE(spa_is_float_dtype(dt) /* a float dtype, not one this build left out (DTYPES) */);
    SPA_REQUIRE(dt != SPA_FLOAT64 || SPA_FLOAT64_NSA_COMPRESS);
    SPA_REQUIRE(e->weight.dtype == dt /* weight: the dtype of input */);
    SPA_REQUIRE(e->out.dtype == dt /* output_cache: the dtype of input */);
    SPA_REQUIRE(e->slots.dtype == SPA_INT32);
    sh->batches = (int64_t)e->len.size;
    SPA_REQUIRE(sh->batches <= 4096 /* actual_seq_len: at most 4096 batches */);
    SPA_REQUIRE(e->slots.dims[0] == sh->batches /* slot_mapping: one slot per batch */);
    sh->pages = sh->x.dims[0], sh->page_size = sh->x.dims[1];
    sh->heads = sh->x.dims[2], sh->dim = sh->x.dims[3];
    SPA_REQUIRE(sh->heads >= 1 && sh->dim >= 1);
    SPA_REQUIRE(e->l >= 1 && e->d >= 1 && e->l >= e->d /* compress_block_size >= compress_stride >= 1 */);
    SPA_REQUIRE(e->l <= 4096 /* compress_block_size <= 4096 */);
    const int64_t wd[2] = {e->l, sh->heads};
    SPA_REQUIRE(spa_tensor_dims_are(&e->weight, 2, wd));
    SPA_REQUIRE(e->out.dims[1] == sh->heads && e->out.dims[2] == sh->dim /* output_cache [R, N, D] */);
    sh->rows = e->out.dims[0];
    if (e->has_table) {
        SPA_TRY(spa_tensor_check(&e->table, 2));
        SPA_REQUIRE(e->table.dtype == SPA_INT32);
        SPA_REQUIRE(e->table.dims[0] == sh->batches /* block_table: a row per batch */);
        SPA_REQUIRE(spa_mul_ok(e->table.dims[1], sh->page_size, &sh->kv_cap));
    } else if (sh->tnd) {
        sh->kv_cap = sh->page_size; /* every batch's rows inside the T rows (check_contents) */
    } else {
        SPA_REQUIRE(sh->pages >= sh->batches /* contiguous input: input[b] per batch */);
        sh->kv_cap = sh->page_size;
    }
    sh->dtype = dt;
    return SPA_OK;
}

/* The page holding row p of batch b, or -1 when a table entry is not a
 * page of the cache (TND: the one page; contiguous: page b). */
static int64_t page_of(const nsacc_exec *e, const nsacc_shape *sh, int64_t b, int64_t p)
{
    if (!e->has_table)
        return sh->tnd ? 0 : b;
    const int32_t *row = (const int32_t *)e->table.data + b * e->table.strides[0];
    const int64_t pg = row[(p / sh->page_size) * e->table.strides[1]]; /* read once */
    return pg >= 0 && pg < sh->pages ? pg : -1;
}

/* The window a batch of length len writes (its first row), or -1: none. */
static int64_t window_start(const nsacc_exec *e, int64_t len)
{
    return len >= e->l && (len - e->l) % e->d == 0 ? len - e->l : -1;
}

/* Lengths, slots (inside the cache and distinct where they write) and the
 * table entries of every window read; len_copy / slot_copy: phase 2's
 * trusted copies (NULL in phase 1). */
static spa_status check_contents(const nsacc_exec *e, const nsacc_shape *sh, int64_t *len_copy,
                                 int32_t *slot_copy, int64_t *start_copy)
{
    const int32_t *slots = e->slots.data;
    int64_t start = 0; /* TND: the batch's first row */
    for (int64_t b = 0; b < sh->batches; b++) {
        const int64_t len = e->len.data[b], slot = slots[b * e->slots.strides[0]];
        SPA_REQUIRE(len >= 0 && len <= sh->kv_cap /* actual_seq_len: 0..the cache of the batch */);
        if (sh->tnd)
            SPA_REQUIRE(len <= sh->kv_cap - start /* actual_seq_len: the batches' rows inside input's T */);
        if (start_copy != NULL)
            start_copy[b] = sh->tnd ? start : 0;
        start += sh->tnd ? len : 0;
        const int64_t w0 = window_start(e, len);
        SPA_REQUIRE(slot >= -1 && slot < sh->rows /* slot_mapping: -1 or a row of output_cache */);
        if (w0 >= 0 && slot >= 0) {
            for (int64_t p = w0; p < len; p += sh->page_size - p % sh->page_size)
                SPA_REQUIRE(page_of(e, sh, b, p) >= 0 /* block_table: pages of the cache */);
            for (int64_t c = 0; c < b; c++) {
                const int64_t other = len_copy != NULL ? len_copy[c] : e->len.data[c];
                SPA_REQUIRE(!(window_start(e, other) >= 0 && (slot_copy != NULL ? slot_copy[c] : slots[c * e->slots.strides[0]]) == slot)
                            /* slot_mapping: distinct rows for the batches that write */);
            }
        }
        if (len_copy != NULL)
            len_copy[b] = len, slot_copy[b] = (int32_t)slot;
    }
    return SPA_OK;
}

typedef struct nsacc_plan {
    int64_t per_block;
    uint32_t blocks;
    uint64_t window_bytes, scratch_floats;
} nsacc_plan;

static void make_plan(const nsacc_exec *e, const nsacc_shape *sh, nsacc_plan *p)
{
    memset(p, 0, sizeof *p);
    p->per_block = (sh->batches + SPA_COMPRESS_CACHE_BLOCKS_MAX - 1) / SPA_COMPRESS_CACHE_BLOCKS_MAX;
    p->blocks = (uint32_t)((sh->batches + p->per_block - 1) / p->per_block);
    /* l <= 4096 rows of N * D elements: N * D bounded by input's span */
    p->window_bytes = (uint64_t)e->l * (uint64_t)sh->heads * (uint64_t)sh->dim * spa_dtype_size(sh->dtype);
    const nsacc_kernel k = kernel_for(sh->dtype);
    if (k.tc == 0) /* the f64 kernel: one double row of a token's heads */
        p->scratch_floats = (uint64_t)(2 * sh->heads * sh->dim);
    else {
        const int64_t slice = sh->dim < k.tc ? sh->dim : k.tc;
        p->scratch_floats = (uint64_t)spa_nsac_fwd_scratch(sh->heads, slice, k.tw, k.tc);
    }
}

static void carve(spa_ws *ws, const nsacc_shape *sh, const nsacc_plan *p, int64_t **len, int64_t **start,
                  int32_t **slot, unsigned char **window, float **scratch)
{
    *len = spa_ws_take(ws, (uint64_t)sh->batches, sizeof(int64_t));
    *start = spa_ws_take(ws, (uint64_t)sh->batches, sizeof(int64_t));
    *slot = spa_ws_take(ws, (uint64_t)sh->batches, sizeof(int32_t));
    *window = spa_ws_take(ws, (uint64_t)p->blocks, (p->window_bytes + 63u) / 64u * 64u);
    *scratch = spa_ws_take(ws, (uint64_t)p->blocks * p->scratch_floats, sizeof(float));
}

static uint64_t planned_bytes(const nsacc_shape *sh, const nsacc_plan *p)
{
    spa_ws ws;
    int64_t *a, *a2;
    int32_t *b;
    unsigned char *c;
    float *d;
    spa_ws_plan(&ws);
    carve(&ws, sh, p, &a, &a2, &b, &c, &d);
    return ws.overflow ? 0 : spa_ws_planned_bytes(&ws);
}

static spa_status phase1(const spa_tensor *input, const spa_tensor *weight, const spa_tensor *slot_mapping,
                         const spa_tensor *block_table, const spa_int_array *actual_seq_len, int64_t l, int64_t d,
                         const spa_tensor *output_cache, uint64_t *workspace_size, spa_executor *executor)
{
    if (input == NULL || weight == NULL || slot_mapping == NULL || actual_seq_len == NULL ||
        output_cache == NULL || workspace_size == NULL || executor == NULL)
        return SPA_ERR_NULLPTR;
    nsacc_exec e;
    memset(&e, 0, sizeof e);
    e.input = *input, e.weight = *weight, e.slots = *slot_mapping, e.out = *output_cache;
    if (block_table != NULL)
        e.table = *block_table, e.has_table = 1;
    e.len = *actual_seq_len, e.l = l, e.d = d;
    nsacc_shape sh;
    SPA_TRY(check_args(&e, &sh));
    SPA_TRY(check_contents(&e, &sh, NULL, NULL, NULL));
    nsacc_plan p;
    make_plan(&e, &sh, &p);
    e.head.ws_size = planned_bytes(&sh, &p);
    SPA_REQUIRE(e.head.ws_size > 0);
    *workspace_size = e.head.ws_size;
    spa_exec_seal(executor, &e, sizeof e, SPA_OP_NSA_COMPRESS_CACHE);
    return SPA_OK;
}

typedef struct nsacc_run {
    const nsacc_exec *e;
    const nsacc_shape *sh;
    const nsacc_plan *p;
    const int64_t *len, *start;
    const int32_t *slot;
    unsigned char *window;
    float *scratch;
    nsacc_kernel kernel;
} nsacc_run;

/* Batch b: its window's rows into win (dense [l, N, D]), then the kernel
 * writes output_cache row slot. */
static void run_batch(const nsacc_run *r, int64_t b, unsigned char *win, float *scratch)
{
    const nsacc_exec *e = r->e;
    const nsacc_shape *sh = r->sh;
    const int64_t w0 = window_start(e, r->len[b]), slot = r->slot[b];
    if (w0 < 0 || slot < 0)
        return;
    const size_t es = spa_dtype_size(sh->dtype);
    const int64_t rowel = sh->heads * sh->dim;
    for (int64_t j = 0; j < e->l; j++) {
        const int64_t p = w0 + j, pg = page_of(e, sh, b, p);
        if (pg < 0) /* a table entry rewritten during the call: this batch writes nothing */
            return;
        const int64_t in_page = e->has_table ? p % sh->page_size : r->start[b] + p;
        const unsigned char *src = (const unsigned char *)sh->x.data +
                                   (size_t)(pg * sh->x.strides[0] + in_page * sh->x.strides[1]) * es;
        unsigned char *dst = win + (size_t)(j * rowel) * es;
        for (int64_t n = 0; n < sh->heads; n++)
            for (int64_t c = 0; c < sh->dim; c++)
                memcpy(dst + (size_t)(n * sh->dim + c) * es,
                       src + (size_t)(n * sh->x.strides[2] + c * sh->x.strides[3]) * es, es);
    }
    spa_tensor x, y;
    const int64_t xd[3] = {e->l, sh->heads, sh->dim};
    spa_tensor_init(&x, (spa_dtype)sh->dtype, 3, xd, win);
    y = e->out;
    y.dims[0] = 1;
    y.data = (unsigned char *)e->out.data + (size_t)(slot * e->out.strides[0]) * es;
    spa_nsac_args args = spa_nsac_args_of(&x, &e->weight, &y, NULL, e->l, e->d);
    if (r->kernel.tc == 0 || sh->dim <= r->kernel.tc) {
        r->kernel.fn(&args, 0, 0, 1, scratch);
        return;
    }
    for (int64_t c0 = 0; c0 < sh->dim; c0 += r->kernel.tc) {
        spa_nsac_args sl = args;
        spa_nsac_slice(&sl, c0, sh->dim - c0 < r->kernel.tc ? sh->dim - c0 : r->kernel.tc, (int64_t)es);
        r->kernel.fn(&sl, 0, 0, 1, scratch);
    }
}

static void run_block(void *arg, uint32_t blk)
{
    const nsacc_run *r = arg;
    unsigned char *win = r->window + (uint64_t)blk * ((r->p->window_bytes + 63u) / 64u * 64u);
    float *scratch = r->scratch + (uint64_t)blk * r->p->scratch_floats;
    const int64_t b0 = (int64_t)blk * r->p->per_block;
    const int64_t b1 = b0 + r->p->per_block < r->sh->batches ? b0 + r->p->per_block : r->sh->batches;
    for (int64_t b = b0; b < b1; b++)
        run_batch(r, b, win, scratch);
}

spa_status spa_nsa_compress_cache_phase2(void *workspace, uint64_t workspace_size, const spa_executor *executor,
                                         const spa_runner *runner)
{
    const spa_runner rn = spa_runner_copy(runner);
    nsacc_exec e;
    SPA_TRY(spa_exec_open(executor, &e, sizeof e, SPA_OP_NSA_COMPRESS_CACHE));
    nsacc_shape sh;
    SPA_TRY(check_args(&e, &sh));
    SPA_TRY(spa_ws_check_args(workspace, workspace_size, e.head.ws_size));
    const spa_tensor *tensors[] = {&e.input, &e.weight, &e.slots, &e.out, e.has_table ? &e.table : NULL};
    const spa_int_array *arrays[] = {&e.len};
    SPA_TRY(spa_ws_check_disjoint(workspace, e.head.ws_size, tensors, 5, arrays, 1));
    nsacc_plan p;
    make_plan(&e, &sh, &p);
    SPA_REQUIRE(planned_bytes(&sh, &p) == e.head.ws_size);
    spa_ws ws;
    nsacc_run r;
    int64_t *len, *start;
    int32_t *slot;
    spa_ws_attach(&ws, workspace, e.head.ws_size);
    carve(&ws, &sh, &p, &len, &start, &slot, &r.window, &r.scratch);
    SPA_REQUIRE(!ws.overflow);
    SPA_TRY(check_contents(&e, &sh, len, slot, start));
    r.e = &e, r.sh = &sh, r.p = &p, r.len = len, r.start = start, r.slot = slot;
    r.kernel = kernel_for(sh.dtype);
    spa_run_blocks(&rn, run_block, &r, p.blocks);
    return SPA_OK;
}

spa_status spa_nsa_compress_with_cache_get_workspace_size(
    const spa_tensor *input, const spa_tensor *weight, const spa_tensor *slot_mapping,
    const spa_tensor *block_table, const spa_int_array *actual_seq_len, int64_t compress_block_size,
    int64_t compress_stride, const spa_tensor *output_cache, uint64_t *workspace_size, spa_executor *executor)
{
    return spa_refusal_record(phase1(input, weight, slot_mapping, block_table, actual_seq_len, compress_block_size,
                                     compress_stride, output_cache, workspace_size, executor),
                              executor, SPA_OP_NSA_COMPRESS_CACHE, 1);
}

spa_status spa_nsa_compress_with_cache(void *workspace, uint64_t workspace_size, const spa_executor *executor,
                                       const spa_runner *runner)
{
    return spa_public_status(spa_nsa_compress_cache_phase2(workspace, workspace_size, executor, runner));
}
