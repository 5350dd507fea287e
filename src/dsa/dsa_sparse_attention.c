/* SparseFlashAttention, native (spattn/dsa.h): each query token attends to
 * the tokens its row of sparse_indices selects.
 *
 * A unit is one (query token, key head, group of heads). It gathers the
 * tokens its slots select and it sees, in slot order then token order,
 * widened to the kernels' element: row n of the key scratch is token n's
 * key with its rope part after it ([D | Dr], zero-padded), and of the value
 * scratch its value (none where value is the key, MLA-absorb: the value
 * rows are then the key rows' first Dv elements). The gathered rows are
 * then virtual blocks of 16 rows, numbered 0, 1, ..., and the unit runs
 * selected attention's kernel in its gathered mode on them
 * (spa_nsas_args.gathered, no causal rule: every rule of which token is
 * seen was applied by the gather, and the rows past the gathered count
 * fall outside the kernel's kvlen). The query's heads, with their rope
 * part after them, are packed the same way in the unit's scratch. So a
 * call costs O(T * N1 * K * S * (D + Dr + Dv)) whatever L_b is.
 *
 * Groups of heads: f16 and bf16 round P after dividing by the whole row's
 * sum, which parts of a row know only with the split kernel's two passes,
 * and those run one chunk of at most 32 heads; so f16 and bf16 units hold
 * at most 32 heads (the kernel runs heads in chunks of 32 anyway, so the
 * bits are those of one unit of all the heads). f32 and f64 units hold all
 * G heads.
 *
 * Parts: a decode step has few units, so a unit's slots are split into
 * parts of about SPA_DSSA_PART_ROWS selected tokens (from K and S alone,
 * never T or the runner), each run as its own block, and merged in part
 * order (attn_parts.h). Results do not depend on the runner or its threads.
 *
 * Validation: phase 1 and phase 2 both check every argument, the sequence
 * arrays (copied in phase 2), every index and every block-table entry of the
 * pages the sequences' rows lie on, before anything is written. The gather
 * reads each index and page number once more and uses only what that read
 * gives if it is still valid (an array rewritten during the call loses
 * those tokens, never reads outside the cache). */
#include <string.h>

#include "attn_parts.h"
#include "dsa_kv.h"
#include "dsa_sfa_args.h"
#include "dsa_sfa_gather.h"
#include "f64.h"
#include "half.h"
#include "internal.h"
#include "nsa_cache_rows.h"
#include "nsa_select_f64.h"
#include "nsa_select_kernel.h"
#include "nsa_select_plan.h"
#include "spa_kernels.h"
#include "spattn/dsa.h"

/* float64: selected attention's f64 kernel */
#define SPA_FLOAT64_DSA_SPARSE_ATTENTION SPA_FLOAT64_NSA_SELECT

/* Blocks per call at most (each owns a scratch in the workspace). */
#ifndef SPA_DSSA_BLOCKS_MAX
#define SPA_DSSA_BLOCKS_MAX 64
#endif
/* Selected tokens per part at least, and parts per unit at most: each part
 * transposes the unit's query heads and its output again, which at 128
 * heads and D 576 costs as much as about a thousand rows' products (a
 * decode step of DeepSeek's shape: 2 parts, 1.35x faster than 8 of 256). */
#ifndef SPA_DSSA_PART_ROWS
#define SPA_DSSA_PART_ROWS 1024
#endif
#ifndef SPA_DSSA_PARTS_MAX
#define SPA_DSSA_PARTS_MAX 8
#endif
_Static_assert(SPA_DSSA_PARTS_MAX <= SPA_ATTN_PARTS_MAX, "parts beyond the merge's");

enum { DSSA_VB = SPA_DSA_SFA_VB, DSSA_HALF_HEADS = 32 }; /* virtual block rows; heads per f16 / bf16 unit */

/* The call's arguments as phase 1 took them: all phase 2 reads of it. */
typedef struct dssa_exec {
    spa_exec_head head;
    spa_dsa_sfa_in in;
    spa_tensor mx, sm;
    int32_t has_mx, has_sm;
} dssa_exec;
_Static_assert(sizeof(dssa_exec) <= SPA_EXECUTOR_BYTES, "executor too small");

typedef spa_dsa_sfa_shape dssa_shape;

typedef struct dssa_plan {
    const dssa_shape *sh; /* a pointer: the Cortex-M stack holds one shape */
    int64_t units, per_block;  /* units: (token, key head, group) */
    int64_t parts, kcp, round; /* parts per unit, slots per part; units per round (parts > 1) */
    uint32_t blocks;
    uint64_t scratch_bytes;    /* per block */
} dssa_plan;

static bool is_half(const dssa_shape *sh)
{
    return sh->dtype != SPA_FLOAT32 && sh->dtype != SPA_FLOAT64;
}

/* The rules that read no array contents: the shared ones, the statistics,
 * then the units (f16 / bf16: at most 32 heads). */
static spa_status check_args(const dssa_exec *e, dssa_shape *sh)
{
    SPA_TRY(spa_dsa_sfa_check(&e->in, true, sh));
    if (e->has_mx)
        SPA_TRY(spa_dsa_sfa_check_stat(&e->mx, sh, true));
    if (e->has_sm)
        SPA_TRY(spa_dsa_sfa_check_stat(&e->sm, sh, true));
    sh->gu = is_half(sh) && sh->g > DSSA_HALF_HEADS ? DSSA_HALF_HEADS : sh->g;
    sh->groups = (sh->g + sh->gu - 1) / sh->gu;
    return SPA_OK;
}

static uint64_t round64(uint64_t x)
{
    return (x + 63u) / 64u * 64u;
}


/* A block's scratch, 64-byte aligned parts: the kernel's own scratch, the
 * packed query heads [gu][dq] (the query's dtype), the gathered key rows
 * [vb * 16][dp] and value rows [vb * 16][dvp] (none when value is in key),
 * the virtual slots [vb], the gathered count and a sink for the statistics
 * nobody asked for. */
typedef struct dssa_layout {
    uint64_t q, kg, vg, slots, count, sink, bytes; /* offsets, and the whole */
} dssa_layout;

/* The scratch of a block gathering at most vb virtual blocks. Dims are
 * bounded (dp, dvp <= 768, gu <= 128, vb * 16 <= 2^20 + 16): no overflow. */
static dssa_layout layout_of(const dssa_shape *sh, int64_t vb)
{
    const uint64_t rows = (uint64_t)vb * DSSA_VB, es = spa_dsa_sfa_elem_bytes(sh), gp = (uint64_t)spa_nsas_lanes(sh->gu);
    uint64_t kernel;
    if (sh->dtype == SPA_FLOAT64)
        kernel = 8u * (uint64_t)SPA_NSAS_F64_FWD_SCRATCH(sh->gu, sh->dq, sh->dv, vb, DSSA_VB);
    else /* qt [dp][gp], scores [rows][gp], out [dvp][gp], max and sum [gp] */
        kernel = 4u * ((uint64_t)sh->dp * gp + rows * gp + (uint64_t)sh->dvp * gp + 2u * gp);
    dssa_layout l;
    l.q = round64(kernel);
    l.kg = l.q + round64((uint64_t)(sh->gu * sh->dq) * spa_dtype_size(sh->dtype));
    l.vg = l.kg + round64(rows * (uint64_t)sh->dp * es);
    l.slots = l.vg + (sh->v_in_k ? 0u : round64(rows * (uint64_t)sh->dvp * es));
    l.count = l.slots + round64(4u * (uint64_t)vb);
    l.sink = l.count + 64u;
    l.bytes = l.sink + 64u;
    return l;
}


/* Every block's scratch: sized for the slots of a part (or of the unit). */
static dssa_layout block_layout(const dssa_plan *p)
{
    return layout_of(p->sh, spa_dsa_sfa_vblocks(p->sh, p->kcp));
}

static void make_plan(const dssa_shape *sh, dssa_plan *p)
{
    memset(p, 0, sizeof *p);
    p->sh = sh;
    p->units = sh->t * sh->n2 * sh->groups; /* <= T * N1: no overflow */
    int64_t parts = sh->kc * sh->sbs / SPA_DSSA_PART_ROWS;
    parts = parts < SPA_DSSA_PARTS_MAX ? parts : SPA_DSSA_PARTS_MAX;
    parts = parts < sh->kc ? parts : sh->kc;
    p->parts = parts > 1 ? parts : 1;
    if (p->parts > 1) {
        p->kcp = (sh->kc + p->parts - 1) / p->parts;
        p->parts = (sh->kc + p->kcp - 1) / p->kcp; /* no empty last part */
        p->scratch_bytes = layout_of(sh, spa_dsa_sfa_vblocks(sh, p->kcp)).bytes;
        p->round = SPA_DSSA_BLOCKS_MAX / p->parts;
        p->round = p->round < p->units ? p->round : p->units;
        p->round = p->round > 0 ? p->round : 1;
        p->per_block = 1;
        p->blocks = (uint32_t)(p->round * p->parts);
        return;
    }
    p->kcp = sh->kc;
    p->scratch_bytes = layout_of(sh, spa_dsa_sfa_vblocks(sh, sh->kc)).bytes;
    p->per_block = (p->units + SPA_DSSA_BLOCKS_MAX - 1) / SPA_DSSA_BLOCKS_MAX;
    p->per_block = p->per_block > 0 ? p->per_block : 1;
    p->blocks = (uint32_t)((p->units + p->per_block - 1) / p->per_block);
}

/* The workspace: the sequence copies, a scratch per block, the partials. */
static void carve(spa_ws *ws, const dssa_plan *p, int64_t **sq, int64_t **kv, int64_t **qs, int64_t **ks,
                  unsigned char **scratch, unsigned char **partial)
{
    *sq = spa_ws_take(ws, (uint64_t)p->sh->batches, sizeof(int64_t));
    *kv = spa_ws_take(ws, (uint64_t)p->sh->batches, sizeof(int64_t));
    *qs = spa_ws_take(ws, (uint64_t)p->sh->batches, sizeof(int64_t));
    *ks = spa_ws_take(ws, (uint64_t)p->sh->batches, sizeof(int64_t));
    *scratch = spa_ws_take(ws, p->blocks > 0 ? (uint64_t)p->blocks : 1u, p->scratch_bytes);
    *partial = p->parts > 1 ? spa_ws_take(ws, spa_attn_parts_elems(p->round, p->parts, p->sh->gu, p->sh->dv),
                                          spa_attn_parts_elem_bytes(p->sh->dtype))
                            : NULL;
}

static uint64_t planned_bytes(const dssa_plan *p)
{
    spa_ws ws;
    int64_t *a, *b, *c, *d;
    unsigned char *s, *part;
    spa_ws_plan(&ws);
    carve(&ws, p, &a, &b, &c, &d, &s, &part);
    return ws.overflow ? 0 : spa_ws_planned_bytes(&ws);
}

static spa_status phase1(const spa_tensor *query, const spa_tensor *query_rope, const spa_tensor *key,
                         const spa_tensor *key_rope, const spa_tensor *value, const spa_tensor *sparse_indices,
                         const spa_tensor *block_table, const spa_int_array *actual_seq_q_len,
                         const spa_int_array *actual_seq_kv_len, double scale_value, int64_t sparse_block_size,
                         int64_t sparse_mode, const spa_tensor *attention_out, const spa_tensor *softmax_max_out,
                         const spa_tensor *softmax_sum_out, uint64_t *workspace_size, spa_executor *executor)
{
    if (query == NULL || key == NULL || value == NULL || sparse_indices == NULL || attention_out == NULL ||
        workspace_size == NULL || executor == NULL)
        return SPA_ERR_NULLPTR;
    if ((block_table != NULL || key->rank == 3) && actual_seq_kv_len == NULL)
        return SPA_ERR_NULLPTR; /* a paged or TND key has no lengths of its own */
    dssa_exec e;
    memset(&e, 0, sizeof e);
    SPA_REQUIRE((query_rope == NULL) == (key_rope == NULL) /* query_rope and key_rope: both or neither */);
    e.in.q = *query, e.in.k = *key, e.in.v = *value, e.in.idx = *sparse_indices, e.in.o = *attention_out;
    if (query_rope != NULL)
        e.in.qr = *query_rope, e.in.kr = *key_rope, e.in.has_rope = 1;
    if (block_table != NULL)
        e.in.table = *block_table, e.in.has_table = 1;
    if (actual_seq_q_len != NULL)
        e.in.sq = *actual_seq_q_len, e.in.has_sq = 1;
    if (actual_seq_kv_len != NULL)
        e.in.skv = *actual_seq_kv_len, e.in.has_skv = 1;
    if (softmax_max_out != NULL)
        e.mx = *softmax_max_out, e.has_mx = 1;
    if (softmax_sum_out != NULL)
        e.sm = *softmax_sum_out, e.has_sm = 1;
    e.in.scale = scale_value, e.in.sbs = sparse_block_size, e.in.mode = sparse_mode;
    dssa_shape sh;
    SPA_TRY(check_args(&e, &sh));
    SPA_TRY(spa_dsa_sfa_check_seq(&e.in, &sh, NULL, NULL, NULL));
    dssa_plan p;
    make_plan(&sh, &p);
    e.head.ws_size = planned_bytes(&p);
    SPA_REQUIRE(e.head.ws_size > 0);
    SPA_TRY(spa_dsa_sfa_check_indices(&e.in, &sh, NULL, NULL)); /* last: its cost grows with T * K */
    *workspace_size = e.head.ws_size;
    spa_exec_seal(executor, &e, sizeof e, SPA_OP_DSA_SPARSE_ATTENTION);
    return SPA_OK;
}

typedef struct dssa_run {
    const dssa_exec *e;
    const dssa_plan *p;
    const int64_t *sq, *kv, *qs, *ks; /* trusted: per-batch counts, lengths, first query, first key row (TND) */
    unsigned char *scratch;
    spa_attn_parts partial; /* parts > 1: the round's partials */
    int64_t u0;             /* parts > 1: the round's first unit */
} dssa_run;

/* Unit u: its token, key head, first query head and head count, batch. */
typedef struct dssa_unit {
    int64_t t, n, h0, g, b;
} dssa_unit;

static dssa_unit unit_of(const dssa_run *r, int64_t u)
{
    const dssa_shape *sh = r->p->sh;
    dssa_unit x;
    const int64_t grp = u % sh->groups, tn = u / sh->groups;
    x.t = tn / sh->n2, x.n = tn - x.t * sh->n2;
    x.h0 = x.n * sh->g + grp * sh->gu;
    x.g = sh->g - grp * sh->gu < sh->gu ? sh->g - grp * sh->gu : sh->gu;
    x.b = spa_nsa_cache_batch_of(r->qs, sh->batches, x.t);
    return x;
}

/* The tokens unit x sees: 0 .. seen - 1. */
static int64_t seen_of(const dssa_run *r, const dssa_unit *x)
{
    return spa_dsa_seen(r->e->in.mode, r->kv[x->b], r->sq[x->b], x->t - r->qs[x->b]);
}

/* n elements of x from element base on, stride apart, copied to dst (one
 * copy where they are adjacent, as a query row usually is). */
static void copy_elems(unsigned char *dst, const spa_tensor *x, int64_t base, int64_t n, int64_t stride)
{
    const size_t es = spa_dtype_size(x->dtype);
    const unsigned char *src = (const unsigned char *)x->data + (size_t)base * es;
    if (stride == 1) {
        memcpy(dst, src, (size_t)n * es);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        memcpy(dst + (size_t)i * es, src + (size_t)(i * stride) * es, es);
}

/* Unit x's query heads with their rope part after them, [g][dq] in the
 * query's dtype, at q. */
static void pack_query(const dssa_run *r, const dssa_unit *x, unsigned char *q)
{
    const dssa_exec *e = r->e;
    const dssa_shape *sh = r->p->sh;
    const size_t es = spa_dtype_size(sh->dtype);
    for (int64_t l = 0; l < x->g; l++) {
        unsigned char *row = q + (size_t)(l * sh->dq) * es;
        const int64_t h = x->h0 + l;
        copy_elems(row, &e->in.q, x->t * e->in.q.strides[0] + h * e->in.q.strides[1], sh->d, e->in.q.strides[2]);
        if (e->in.has_rope)
            copy_elems(row + (size_t)sh->d * es, &e->in.qr, x->t * e->in.qr.strides[0] + h * e->in.qr.strides[1], sh->dr,
                       e->in.qr.strides[2]);
    }
}

/* Slots j0 .. j1-1 of unit x gathered into scratch (dsa_sfa_gather.h),
 * and the gathered count. */
static void gather_slots(const dssa_run *r, const dssa_unit *x, int64_t j0, int64_t j1, unsigned char *scratch)
{
    const dssa_shape *sh = r->p->sh;
    const dssa_layout lay = block_layout(r->p);
    const spa_dsa_sfa_unit u = {x->t, x->n, x->b, seen_of(r, x), r->ks[x->b]};
    spa_dsa_sfa_dest d;
    d.kg = scratch + lay.kg, d.vg = sh->v_in_k ? d.kg : scratch + lay.vg;
    d.slots = (int32_t *)(void *)(scratch + lay.slots), d.pos = NULL;
    d.vb = spa_dsa_sfa_vblocks(sh, j1 - j0);
    *(int64_t *)(void *)(scratch + lay.count) = spa_dsa_sfa_gather(&r->e->in, sh, &u, j0, j1, &d);
}

/* The kernel arguments for unit x's rows in scratch (gather_slots) and for
 * vb virtual slots: its packed query, its outputs (o, mx, sm as set by the
 * caller stay). */
static void unit_args(const dssa_run *r, const dssa_unit *x, int64_t vb, unsigned char *scratch, spa_nsas_args *a)
{
    const dssa_shape *sh = r->p->sh;
    const dssa_layout lay = block_layout(r->p);
    memset(a, 0, sizeof *a);
    a->q = scratch + lay.q, a->qs0 = 0, a->qs1 = sh->dq, a->qs2 = 1;
    a->idx = (const int32_t *)(const void *)(scratch + lay.slots), a->is0 = 0, a->is1 = 0, a->is2 = 1;
    a->mx = scratch + lay.sink, a->sm = scratch + lay.sink; /* strides 0 */
    a->n2 = 1, a->g = x->g, a->gp = spa_nsas_lanes(x->g);
    a->d = sh->dq, a->dv = sh->dv, a->dp = sh->dp, a->dvp = sh->dvp;
    a->bs = DSSA_VB, a->kc = vb;
    a->scale = (float)r->e->in.scale;
    a->causal = 0, a->gathered = 1;
    a->kf = (const float *)(const void *)(scratch + lay.kg), a->kfr = sh->dp;
    if (sh->v_in_k)
        a->vf = a->kf, a->vfr = sh->dp;
    else
        a->vf = (const float *)(const void *)(scratch + lay.vg), a->vfr = sh->dvp;
}

/* The gathered count gather_slots left (bounded by the scratch's rows,
 * whatever the workspace holds now). */
static int64_t gathered_count(const dssa_run *r, const unsigned char *scratch, int64_t vb)
{
    const dssa_layout lay = block_layout(r->p);
    const int64_t n = *(const int64_t *)(const void *)(scratch + lay.count);
    return n < 0 ? 0 : n > vb * DSSA_VB ? vb * DSSA_VB : n;
}

/* The kernel on a's rows: kvlen of them attended. */
static void run_kernel(const dssa_run *r, const spa_nsas_args *a, int64_t kvlen, unsigned char *scratch)
{
    const dssa_shape *sh = r->p->sh;
#if SPA_FLOAT64_DSA_SPARSE_ATTENTION
    if (sh->dtype == SPA_FLOAT64) {
        spa_nsas_f64_args f;
        memset(&f, 0, sizeof f);
        f.a = *a;
        f.k = (const double *)(const void *)a->kf, f.ks0 = sh->dp, f.ks1 = 0, f.ks2 = 1;
        f.v = (const double *)(const void *)a->vf, f.vs0 = a->vfr, f.vs1 = 0, f.vs2 = 1;
        f.scale = r->e->in.scale;
        SPA_K_NSA_SELECT_F64(&f, 0, 0, 1, 0, 0, kvlen, (double *)(void *)scratch);
        return;
    }
#endif
    /* direct calls: the stack bound (tools/stack.awk) follows them */
    float *s = (float *)(void *)scratch;
    if (sh->dtype == SPA_FLOAT16 && a->split)
        SPA_K_NSA_SELECT_SPLIT_F16(a, 0, 0, 1, 0, 0, kvlen, s);
    else if (sh->dtype == SPA_FLOAT16)
        SPA_K_NSA_SELECT_F16(a, 0, 0, 1, 0, 0, kvlen, s);
    else if (sh->dtype == SPA_BFLOAT16 && a->split)
        SPA_K_NSA_SELECT_SPLIT_BF16(a, 0, 0, 1, 0, 0, kvlen, s);
    else if (sh->dtype == SPA_BFLOAT16)
        SPA_K_NSA_SELECT_BF16(a, 0, 0, 1, 0, 0, kvlen, s);
    else
        SPA_K_NSA_SELECT_F32(a, 0, 0, 1, 0, 0, kvlen, s);
}

/* Element offset of tensor x at (i, j, k) as a pointer. */
static void *at3(const spa_tensor *x, int64_t i, int64_t j, int64_t k)
{
    return (unsigned char *)x->data +
           (uint64_t)(i * x->strides[0] + j * x->strides[1] + k * x->strides[2]) * spa_dtype_size(x->dtype);
}

/* Units of block blk, whole (parts == 1): gathered, then the kernel into
 * the outputs. */
static void run_block(void *arg, uint32_t blk)
{
    const dssa_run *r = arg;
    const dssa_plan *p = r->p;
    const dssa_exec *e = r->e;
    unsigned char *scratch = r->scratch + (uint64_t)blk * p->scratch_bytes;
    const int64_t u0 = (int64_t)blk * p->per_block;
    const int64_t u1 = u0 + p->per_block < p->units ? u0 + p->per_block : p->units;
    const int64_t vb = spa_dsa_sfa_vblocks(p->sh, p->sh->kc);
    for (int64_t u = u0; u < u1; u++) {
        const dssa_unit x = unit_of(r, u);
        pack_query(r, &x, scratch + block_layout(p).q);
        gather_slots(r, &x, 0, p->sh->kc, scratch);
        spa_nsas_args a;
        unit_args(r, &x, vb, scratch, &a);
        a.o = at3(&e->in.o, x.t, x.h0, 0), a.os0 = 0, a.os1 = e->in.o.strides[1], a.os2 = e->in.o.strides[2];
        if (e->has_mx)
            a.mx = at3(&e->mx, x.n, x.t, x.h0 - x.n * p->sh->g), a.ms1 = e->mx.strides[2];
        if (e->has_sm)
            a.sm = at3(&e->sm, x.n, x.t, x.h0 - x.n * p->sh->g), a.ss1 = e->sm.strides[2];
        run_kernel(r, &a, gathered_count(r, scratch, vb), scratch);
    }
}

/* Block blk of a round's parts: its round unit, part, unit and slots
 * [j0, j1); false past the units. */
static bool part_block(const dssa_run *r, uint32_t blk, int64_t *ru, int64_t *part, dssa_unit *x, int64_t *j0,
                       int64_t *j1)
{
    const dssa_plan *p = r->p;
    *ru = (int64_t)blk / p->parts, *part = (int64_t)blk - *ru * p->parts;
    if (r->u0 + *ru >= p->units)
        return false;
    *x = unit_of(r, r->u0 + *ru);
    *j0 = *part * p->kcp, *j1 = *j0 + p->kcp < p->sh->kc ? *j0 + p->kcp : p->sh->kc;
    return true;
}

/* Part `part` of round unit ru's arguments: its outputs are its partials. */
static void part_args(const dssa_run *r, int64_t ru, int64_t part, spa_nsas_args *a)
{
    a->o = spa_attn_parts_at(&r->partial, ru, part, 0), a->os0 = 0, a->os1 = r->p->sh->dv, a->os2 = 1;
    a->mx = spa_attn_parts_at(&r->partial, ru, part, 1), a->ms0 = 0, a->ms1 = 1, a->ms2 = 0;
    a->sm = spa_attn_parts_at(&r->partial, ru, part, 2), a->ss0 = 0, a->ss1 = 1, a->ss2 = 0;
}

/* A part: its slots gathered, into its partial output, max and sum (f16 /
 * bf16: its max and sum, the scores kept in its scratch for the finish). */
static void run_part_block(void *arg, uint32_t blk)
{
    const dssa_run *r = arg;
    int64_t ru, part, j0, j1;
    dssa_unit x;
    if (!part_block(r, blk, &ru, &part, &x, &j0, &j1))
        return;
    unsigned char *scratch = r->scratch + (uint64_t)blk * r->p->scratch_bytes;
    const int64_t vb = spa_dsa_sfa_vblocks(r->p->sh, j1 - j0);
    pack_query(r, &x, scratch + block_layout(r->p).q);
    gather_slots(r, &x, j0, j1, scratch);
    spa_nsas_args a;
    unit_args(r, &x, vb, scratch, &a);
    part_args(r, ru, part, &a);
    a.split = is_half(r->p->sh) ? SPA_NSAS_SPLIT_STATS : 0;
    run_kernel(r, &a, gathered_count(r, scratch, vb), scratch);
}

/* An f16 / bf16 part again on its scratch: with the row's max and sum from
 * every part's, its P rounded and its P V into its partial output. */
static void run_finish_block(void *arg, uint32_t blk)
{
    const dssa_run *r = arg;
    int64_t ru, part, j0, j1;
    dssa_unit x;
    if (!part_block(r, blk, &ru, &part, &x, &j0, &j1))
        return;
    unsigned char *scratch = r->scratch + (uint64_t)blk * r->p->scratch_bytes;
    const int64_t vb = spa_dsa_sfa_vblocks(r->p->sh, j1 - j0);
    float pscale[DSSA_HALF_HEADS] = {0.0f}; /* padded lanes 0 */
    spa_attn_parts_scale(&r->partial, ru, part, x.g, pscale);
    spa_nsas_args a;
    unit_args(r, &x, vb, scratch, &a);
    part_args(r, ru, part, &a);
    a.split = SPA_NSAS_SPLIT_FINISH, a.pscale = pscale;
    run_kernel(r, &a, gathered_count(r, scratch, vb), scratch);
}

/* Round unit blk: its parts merged into the outputs (attn_parts.h). */
static void run_merge_block(void *arg, uint32_t blk)
{
    const dssa_run *r = arg;
    const dssa_exec *e = r->e;
    if (r->u0 + (int64_t)blk >= r->p->units)
        return;
    const dssa_unit x = unit_of(r, r->u0 + (int64_t)blk);
    const int64_t gl = x.h0 - x.n * r->p->sh->g; /* the group's first head within its key head */
    void *mx = e->has_mx ? at3(&e->mx, x.n, x.t, gl) : NULL, *sm = e->has_sm ? at3(&e->sm, x.n, x.t, gl) : NULL;
    spa_attn_parts_merge(&r->partial, (int64_t)blk, x.g, at3(&e->in.o, x.t, x.h0, 0), e->in.o.strides[1],
                         e->in.o.strides[2], mx, e->mx.strides[2], sm, e->sm.strides[2]);
}

spa_status spa_dsa_sparse_attention_phase2(void *workspace, uint64_t workspace_size, const spa_executor *executor,
                                           const spa_runner *runner)
{
    const spa_runner rn = spa_runner_copy(runner);
    dssa_exec e;
    SPA_TRY(spa_exec_open(executor, &e, sizeof e, SPA_OP_DSA_SPARSE_ATTENTION));
    dssa_shape sh;
    SPA_TRY(check_args(&e, &sh));
    SPA_TRY(spa_ws_check_args(workspace, workspace_size, e.head.ws_size));
    const spa_tensor *tensors[] = {&e.in.q,  &e.in.k, &e.in.v, &e.in.idx, &e.in.o, e.in.has_rope ? &e.in.qr : NULL,
                                   e.in.has_rope ? &e.in.kr : NULL, e.in.has_table ? &e.in.table : NULL,
                                   e.has_mx ? &e.mx : NULL, e.has_sm ? &e.sm : NULL};
    const spa_int_array *arrays[] = {e.in.has_skv ? &e.in.skv : NULL, e.in.has_sq ? &e.in.sq : NULL};
    SPA_TRY(spa_ws_check_disjoint(workspace, e.head.ws_size, tensors, 10, arrays, 2));
    dssa_plan p;
    make_plan(&sh, &p);
    SPA_REQUIRE(planned_bytes(&p) == e.head.ws_size);
    spa_ws ws;
    dssa_run r;
    int64_t *sq, *kv, *qs, *ks;
    spa_ws_attach(&ws, workspace, e.head.ws_size);
    carve(&ws, &p, &sq, &kv, &qs, &ks, &r.scratch, &r.partial.base);
    SPA_REQUIRE(!ws.overflow);
    SPA_TRY(spa_dsa_sfa_check_seq(&e.in, &sh, sq, kv, ks));
    for (int64_t b = 0, t = 0; b < sh.batches; t += sq[b], b++)
        qs[b] = t;
    SPA_TRY(spa_dsa_sfa_check_indices(&e.in, &sh, sq, kv));
    if (sh.t == 0)
        return SPA_OK;
    r.e = &e, r.p = &p, r.sq = sq, r.kv = kv, r.qs = qs, r.ks = ks;
    r.partial.round = p.round, r.partial.parts = p.parts, r.partial.g = sh.gu, r.partial.dv = sh.dv;
    r.partial.dtype = sh.dtype;
    if (p.parts == 1) {
        spa_run_blocks(&rn, run_block, &r, p.blocks);
        return SPA_OK;
    }
    for (r.u0 = 0; r.u0 < p.units; r.u0 += p.round) { /* the parts of a round's units, then their merges */
        const int64_t n = p.units - r.u0 < p.round ? p.units - r.u0 : p.round;
        spa_run_blocks(&rn, run_part_block, &r, (uint32_t)(n * p.parts));
        if (is_half(&sh))
            spa_run_blocks(&rn, run_finish_block, &r, (uint32_t)(n * p.parts));
        spa_run_blocks(&rn, run_merge_block, &r, (uint32_t)n);
    }
    return SPA_OK;
}

spa_status spa_dsa_sparse_attention_get_workspace_size(
    const spa_tensor *query, const spa_tensor *query_rope, const spa_tensor *key, const spa_tensor *key_rope,
    const spa_tensor *value, const spa_tensor *sparse_indices, const spa_tensor *block_table,
    const spa_int_array *actual_seq_q_len, const spa_int_array *actual_seq_kv_len, double scale_value,
    int64_t sparse_block_size, int64_t sparse_mode, const spa_tensor *attention_out,
    const spa_tensor *softmax_max_out, const spa_tensor *softmax_sum_out, uint64_t *workspace_size,
    spa_executor *executor)
{
    return spa_refusal_record(phase1(query, query_rope, key, key_rope, value, sparse_indices, block_table,
                                     actual_seq_q_len, actual_seq_kv_len, scale_value, sparse_block_size,
                                     sparse_mode, attention_out, softmax_max_out, softmax_sum_out,
                                     workspace_size, executor),
                              executor, SPA_OP_DSA_SPARSE_ATTENTION, 1);
}

spa_status spa_dsa_sparse_attention(void *workspace, uint64_t workspace_size, const spa_executor *executor,
                                    const spa_runner *runner)
{
    return spa_public_status(spa_dsa_sparse_attention_phase2(workspace, workspace_size, executor, runner));
}
