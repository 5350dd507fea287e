/* The hostile-input engine: see fz_engine.h. */
#include "fz_engine.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RED 64
#define CANARY 0xA5
#define MAX_TENSOR_BYTES ((int64_t)1 << 20) /* per tensor, to materialise it */
#define MAX_TOTAL_BYTES ((int64_t)8 << 20)
#define MAX_WS_BYTES ((uint64_t)64 << 20)
#define MAX_WORK 3e8 /* multiply-adds of a phase 2 (op->work): well under a second */
#define MAX_MUTATIONS 48
#define MAX_OVERRIDES 32
#define MAX_ALIASES 8
#define MAX_EXEC_EDITS 64

/* ---- reading the input ---- */
typedef struct reader {
    const uint8_t *p;
    size_t n;
} reader;

static uint8_t rd_u8(reader *r)
{
    if (r->n == 0)
        return 0;
    r->n--;
    return *r->p++;
}

static uint64_t rd_u64(reader *r)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | rd_u8(r);
    return v;
}

/* Values that sit on the rules' edges (16-multiples, limits of the specs,
 * 32-bit edges) and on overflow edges. */
static const int64_t interesting[] = {
    0, 1, 2, 3, 4, 7, 8, 15, 16, 17, 31, 32, 33, 48, 63, 64, 65, 127, 128, 129, 255, 256, 257,
    500000, 767, 768, 769, 1023, 1024, 1025, 3072, 3073, -1, -2, -16, -128,
    INT32_MAX, INT32_MIN, (int64_t)INT32_MAX + 1, (int64_t)1 << 32, ((int64_t)1 << 32) + 1,
    (int64_t)1 << 40, (int64_t)1 << 61, (int64_t)1 << 62, INT64_MAX / 2, INT64_MAX / 2 + 1,
    INT64_MAX - 1, INT64_MAX, INT64_MIN, INT64_MIN + 1,
};
#define N_INTERESTING (int)(sizeof interesting / sizeof interesting[0])

/* One byte picks an edge value, a small value, or (0xF0..) 8 raw bytes. */
static int64_t rd_value(reader *r)
{
    uint8_t b = rd_u8(r);
    if (b < N_INTERESTING)
        return interesting[b];
    if (b < 0xF0)
        return (int64_t)b - N_INTERESTING;
    return (int64_t)rd_u64(r);
}

static const int32_t dtypes[] = {SPA_FLOAT32, SPA_FLOAT16, SPA_BFLOAT16, SPA_INT32, SPA_INT64,
                                 SPA_UINT8,   SPA_BOOL,    2,            99,        -1};
static const char *const layouts[] = {"TND", NULL, "BSH", "TN", "TNDX", "", "tnd", "BNSD"};
static const double doubles[] = {1.0, 0.25, 0.0, -1.0, 1e-30, 1e30, NAN, INFINITY, -INFINITY,
                                 DBL_MAX, 0x1p-1074, 1e300, 0.125};

/* ---- the decoded input ---- */
typedef struct override {
    int t, k;
    int64_t v;
} override;

/* A view laid over another's memory: tensor t (kind 0) or array t (kind
 * 1) at byte off of tensor u's span. */
typedef struct alias {
    int kind, t, u;
    size_t off;
} alias;

/* One executor byte edited after phase 1 (and the executor sealed again). */
typedef struct exec_edit {
    uint32_t off;
    uint8_t x;
} exec_edit;

typedef struct plan {
    fz_call c;
    alias aliases[MAX_ALIASES];
    int naliases;
    exec_edit edits[MAX_EXEC_EDITS];
    int nedits;
    int ws_over; /* -1, or the workspace laid over tensor ws_over (arrays after the tensors) */
    size_t ws_over_off;
    int pad[FZ_MAX_TENSORS];
    bool null_data[FZ_MAX_TENSORS];
    override strides[MAX_OVERRIDES];
    int nstrides;
    override index[MAX_OVERRIDES]; /* t, flat element, value */
    int nindex;
    uint64_t seed;
    unsigned special; /* 1 in `special` float inputs is NaN, Inf or huge (0: none) */
    size_t skew;
} plan;

static void baseline(const fz_op *op, plan *p)
{
    memset(p, 0, sizeof *p);
    p->ws_over = -1;
    for (int k = 0; k < op->ntensors; k++) {
        const fz_tensor_spec *s = &op->tensors[k];
        p->c.t[k].dtype = s->dtype;
        p->c.t[k].rank = s->rank;
        memcpy(p->c.t[k].dims, s->dims, sizeof s->dims);
        p->c.present[k] = !s->optional;
    }
    for (int a = 0; a < op->narrays; a++) {
        memcpy(p->c.a_vals[a], op->arrays[a].vals, sizeof op->arrays[a].vals);
        p->c.a[a].size = op->arrays[a].size;
        p->c.array_present[a] = true;
    }
    for (int i = 0; i < op->nattrs; i++)
        p->c.attr[i] = op->attrs[i];
    p->c.dattr = op->dattr;
    p->c.layout = op->layout;
}

/* Every occurrence of the shape value `from` (dims, array values, attributes)
 * becomes `to`: consistent reshapes, not just broken ones. */
static void substitute(const fz_op *op, plan *p, int64_t from, int64_t to)
{
    for (int k = 0; k < op->ntensors; k++)
        for (int d = 0; d < SPA_MAX_RANK; d++)
            if (p->c.t[k].dims[d] == from)
                p->c.t[k].dims[d] = to;
    for (int a = 0; a < op->narrays; a++)
        for (int i = 0; i < FZ_MAX_SEQ; i++)
            if (p->c.a_vals[a][i] == from)
                p->c.a_vals[a][i] = to;
    for (int i = 0; i < op->nattrs; i++)
        if (p->c.attr[i] == from)
            p->c.attr[i] = to;
}

static void decode(const fz_op *op, reader *r, plan *p)
{
    baseline(op, p);
    p->seed = rd_u8(r);
    uint8_t flags = rd_u8(r);
    p->special = flags & 0x80 ? 1u + (flags & 0x0F) : 0u;
    p->skew = (size_t)(flags >> 4 & 0x7) * 9;
    const int nt = op->ntensors, na = op->narrays > 0 ? op->narrays : 1;
    for (int m = 0; m < MAX_MUTATIONS && r->n > 0; m++) {
        const uint8_t kind = rd_u8(r) % 16;
        const int t = rd_u8(r) % nt;
        spa_tensor *tt = &p->c.t[t];
        switch (kind) {
        case 0:
            tt->dims[rd_u8(r) % SPA_MAX_RANK] = rd_value(r);
            break;
        case 1: {
            uint8_t b = rd_u8(r);
            tt->rank = b >= 250 ? -1 - (b & 1) : b % (SPA_MAX_RANK + 2);
            break;
        }
        case 2:
            tt->dtype = dtypes[rd_u8(r) % (sizeof dtypes / sizeof dtypes[0])];
            break;
        case 3:
            if (p->nstrides < MAX_OVERRIDES) {
                int k = rd_u8(r) % SPA_MAX_RANK;
                p->strides[p->nstrides++] = (override){t, k, rd_value(r)};
            }
            break;
        case 4:
            p->pad[t] = rd_u8(r) % 8;
            break;
        case 5:
            p->c.present[t] = !p->c.present[t];
            break;
        case 6:
            p->null_data[t] = !p->null_data[t];
            break;
        case 7: {
            int a = t % na, i = rd_u8(r) % FZ_MAX_SEQ;
            p->c.a_vals[a][i] = rd_value(r);
            break;
        }
        case 8: {
            int a = t % na;
            p->c.a[a].size = rd_u8(r) % (FZ_MAX_SEQ + 1);
            break;
        }
        case 9:
            if (op->nattrs > 0)
                p->c.attr[rd_u8(r) % op->nattrs] = rd_value(r);
            break;
        case 10:
            p->c.dattr = doubles[rd_u8(r) % (sizeof doubles / sizeof doubles[0])];
            break;
        case 11:
            p->c.layout = layouts[rd_u8(r) % (sizeof layouts / sizeof layouts[0])];
            break;
        case 12:
            if (p->nindex < MAX_OVERRIDES) {
                int flat = rd_u8(r);
                flat |= rd_u8(r) << 8;
                p->index[p->nindex++] = (override){t, flat, rd_value(r)};
            }
            break;
        case 13: {
            uint8_t b = rd_u8(r);
            if (b & 1)
                p->c.null_ws_size = !p->c.null_ws_size;
            if (b & 2)
                p->c.null_executor = !p->c.null_executor;
            if (b & 4)
                p->c.array_present[t % na] = !p->c.array_present[t % na];
            break;
        }
        case 14: {
            int d = rd_u8(r) % SPA_MAX_RANK;
            substitute(op, p, tt->dims[d], rd_value(r));
            break;
        }
        default: {
            /* 15: below 0x80 a new data seed; from 0x80 the memory of the
             * call turned hostile (the low two bits say how) */
            const uint8_t b = rd_u8(r);
            if (b < 0x80) {
                p->seed = p->seed * 131 + b;
                break;
            }
            const int ntargets = nt + op->narrays;
            if ((b & 3) == 0 && p->naliases < MAX_ALIASES) { /* tensor t over tensor u */
                const int u = rd_u8(r) % nt;
                p->aliases[p->naliases++] = (alias){0, t, u, (size_t)rd_u8(r) * 16};
            } else if ((b & 3) == 1 && op->narrays > 0 && p->naliases < MAX_ALIASES) {
                const int u = rd_u8(r) % nt; /* sequence array t over tensor u */
                p->aliases[p->naliases++] = (alias){1, t % na, u, (size_t)rd_u8(r) * 16};
            } else if ((b & 3) == 2 && p->nedits < MAX_EXEC_EDITS) { /* executor byte */
                uint32_t off = rd_u8(r);
                off |= (uint32_t)rd_u8(r) << 8;
                const uint8_t x = rd_u8(r);
                p->edits[p->nedits++] = (exec_edit){off, x != 0 ? x : 0xFF};
            } else if ((b & 3) == 3) { /* the workspace over a tensor or an array */
                p->ws_over = rd_u8(r) % ntargets;
                p->ws_over_off = (size_t)rd_u8(r) * 16;
            }
            break;
        }
        }
    }
}

/* ---- materialising the tensors ---- */
typedef struct buffer {
    unsigned char *block; /* RED + bytes + RED, or NULL */
    size_t bytes;
    bool real;            /* sized to the view's span */
    unsigned char *before; /* inputs: copy of the block */
} buffer;

static size_t esize(int32_t dt)
{
    switch (dt) {
    case SPA_FLOAT16: case SPA_BFLOAT16: return 2;
    case SPA_UINT8: case SPA_BOOL: return 1;
    case SPA_FLOAT32: case SPA_INT32: return 4;
    default: return 8; /* int64, and the most any unknown dtype could mean */
    }
}

static void set_strides(plan *p, int k)
{
    spa_tensor *t = &p->c.t[k];
    const int32_t rank = t->rank < 0 ? 0 : t->rank > SPA_MAX_RANK ? SPA_MAX_RANK : t->rank;
    int64_t stride = 1 + (p->pad[k] & 1);
    for (int32_t d = rank - 1; d >= 0; d--) {
        t->strides[d] = stride;
        int64_t next;
        if (__builtin_mul_overflow(stride, t->dims[d] > 0 ? t->dims[d] : 1, &next) ||
            __builtin_add_overflow(next, (int64_t)(p->pad[k] >> 1), &next))
            next = INT64_MAX;
        stride = next;
    }
    for (int i = 0; i < p->nstrides; i++)
        if (p->strides[i].t == k)
            t->strides[p->strides[i].k] = p->strides[i].v;
}

/* Bytes addressed by the view, or -1 if it cannot be materialised. */
static int64_t span_bytes(const spa_tensor *t)
{
    if (t->rank < 0 || t->rank > SPA_MAX_RANK)
        return -1;
    int64_t last = 0;
    for (int32_t d = 0; d < t->rank; d++) {
        if (t->dims[d] < 0 || t->strides[d] < 0)
            return -1;
        if (t->dims[d] == 0)
            return 0;
    }
    for (int32_t d = 0; d < t->rank; d++) {
        int64_t step;
        if (__builtin_mul_overflow(t->dims[d] - 1, t->strides[d], &step) ||
            __builtin_add_overflow(last, step, &last))
            return -1;
    }
    int64_t bytes;
    if (__builtin_add_overflow(last, 1, &last) ||
        __builtin_mul_overflow(last, (int64_t)esize(t->dtype), &bytes))
        return -1;
    return bytes;
}

static uint64_t next_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void fill_input(unsigned char *d, size_t bytes, int32_t dt, uint64_t *s, unsigned special)
{
    const size_t es = esize(dt);
    for (size_t i = 0; i + es <= bytes; i += es) {
        uint64_t r = next_rand(s);
        float f = (float)((double)(r >> 40) * 0x1p-23 - 1.0); /* [-1, 1) */
        if (special && r % special == 0) {
            static const float sp[] = {NAN, INFINITY, -INFINITY, FLT_MAX, -FLT_MAX, 0x1p-140f, -0.0f};
            f = sp[(r >> 8) % (sizeof sp / sizeof sp[0])];
        }
        uint32_t u;
        memcpy(&u, &f, 4);
        if (dt == SPA_FLOAT32) {
            memcpy(d + i, &u, 4);
        } else if (dt == SPA_BFLOAT16) {
            uint16_t h = (uint16_t)(u >> 16);
            memcpy(d + i, &h, 2);
        } else if (dt == SPA_FLOAT16) {
            /* sign, exponent 9..15 (|x| in [2^-6, 2)), or the specials as bits */
            uint16_t h = (uint16_t)((r >> 20 & 0x8000) | ((9 + r % 7) << 10) | (r >> 32 & 0x3FF));
            if (isnan(f))
                h = 0x7E00;
            else if (isinf(f))
                h = f > 0 ? 0x7C00 : 0xFC00;
            memcpy(d + i, &h, 2);
        } else {
            memcpy(d + i, &r, es);
        }
    }
}

static void store_index(unsigned char *d, size_t bytes, int32_t dt, int64_t flat, int64_t v)
{
    const size_t es = esize(dt);
    if (flat < 0 || (size_t)(flat + 1) * es > bytes)
        return;
    if (es == 4) {
        int32_t x = (int32_t)v;
        memcpy(d + (size_t)flat * es, &x, 4);
    } else if (es == 8) {
        memcpy(d + (size_t)flat * es, &v, 8);
    } else {
        memset(d + (size_t)flat * es, (int)(v & 0xFF), es);
    }
}

/* Element offsets of a view's elements in row-major order: visits each. */
static int64_t element_offset(const spa_tensor *t, int64_t flat)
{
    int64_t off = 0;
    for (int32_t d = t->rank - 1; d >= 0; d--) {
        off += flat % t->dims[d] * t->strides[d];
        flat /= t->dims[d];
    }
    return off;
}

/* Elements of a view, or -1 past MAX_ELEMS (zero strides make small
 * spans of huge views: such a view is not materialised either, or filling
 * it and running phase 2 on it would take forever). */
#define MAX_ELEMS ((int64_t)1 << 20)
static int64_t numel(const spa_tensor *t)
{
    if (t->rank < 0 || t->rank > SPA_MAX_RANK)
        return -1;
    for (int32_t d = 0; d < t->rank; d++)
        if (t->dims[d] == 0)
            return 0;
    int64_t n = 1;
    for (int32_t d = 0; d < t->rank; d++)
        if (t->dims[d] < 0 || __builtin_mul_overflow(n, t->dims[d], &n) || n > MAX_ELEMS)
            return -1;
    return n;
}

static void fill_index(const fz_tensor_spec *s, const plan *p, int k, unsigned char *d, size_t bytes)
{
    const spa_tensor *t = &p->c.t[k];
    const int64_t n = numel(t);
    for (int64_t i = 0; i < n; i++) {
        int64_t v = s->index_count > 0 ? s->index_vals[i % s->index_count] : 0;
        store_index(d, bytes, t->dtype, element_offset(t, i), v);
    }
    for (int i = 0; i < p->nindex; i++)
        if (p->index[i].t == k && p->index[i].k < n)
            store_index(d, bytes, t->dtype, element_offset(t, p->index[i].k), p->index[i].v);
}

static _Noreturn void finding(const fz_op *op, const char *what)
{
    fprintf(stderr, "fuzz %s: %s\n", op->name, what);
    abort();
}

static bool all_canary(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != CANARY)
            return false;
    return true;
}

static void run_reversed(void *ctx, spa_task_fn task, void *arg, uint32_t n)
{
    (void)ctx;
    for (uint32_t i = n; i-- > 0;)
        task(arg, i);
}

static void check_buffers(const fz_op *op, const buffer *buf, const char *when)
{
    char msg[160];
    for (int k = 0; k < op->ntensors; k++) {
        const buffer *b = &buf[k];
        if (b->block == NULL)
            continue;
        if (b->before != NULL && memcmp(b->block, b->before, b->bytes + 2 * RED) != 0) {
            snprintf(msg, sizeof msg, "%s: input %s was written", when, op->tensors[k].name);
            finding(op, msg);
        }
        if (!all_canary(b->block, RED) || !all_canary(b->block + RED + b->bytes, RED)) {
            snprintf(msg, sizeof msg, "%s: red zone of %s was written", when, op->tensors[k].name);
            finding(op, msg);
        }
    }
}

/* ---- hostile memory ---- */

/* Lays the views of p->aliases over the memory of other tensors (index
 * contents are written where the view now lies). True if any was laid. */
static bool apply_aliases(const fz_op *op, plan *p, const buffer *buf)
{
    bool any = false;
    for (int i = 0; i < p->naliases; i++) {
        const alias *al = &p->aliases[i];
        const buffer *host = &buf[al->u];
        if (host->block == NULL || !host->real || host->bytes <= al->off)
            continue;
        unsigned char *at = host->block + RED + al->off;
        const size_t room = host->bytes - al->off;
        if (al->kind == 0) {
            const buffer *own = &buf[al->t];
            if (al->t == al->u || own->block == NULL || !own->real || own->bytes > room)
                continue;
            p->c.t[al->t].data = at;
            if (op->tensors[al->t].role == FZ_INDEX)
                fill_index(&op->tensors[al->t], p, al->t, at, room);
        } else {
            const uint64_t n = p->c.a[al->t].size < FZ_MAX_SEQ ? p->c.a[al->t].size : FZ_MAX_SEQ;
            if (!p->c.array_present[al->t] || n == 0 || n * sizeof(int64_t) > room)
                continue;
            memcpy(at, p->c.a_vals[al->t], (size_t)n * sizeof(int64_t));
            p->c.a[al->t].data = (const int64_t *)(const void *)at;
        }
        any = true;
    }
    return any;
}

/* Every tensor block as it is now, to tell later whether anything was written. */
static unsigned char **snapshot_all(const fz_op *op, const buffer *buf)
{
    unsigned char **snap = calloc(FZ_MAX_TENSORS, sizeof *snap);
    for (int k = 0; k < op->ntensors; k++)
        if (buf[k].block != NULL) {
            snap[k] = malloc(buf[k].bytes + 2 * RED);
            memcpy(snap[k], buf[k].block, buf[k].bytes + 2 * RED);
        }
    return snap;
}

static bool unchanged_since(const fz_op *op, const buffer *buf, unsigned char **snap)
{
    bool same = true;
    for (int k = 0; k < op->ntensors; k++) {
        if (snap[k] != NULL && memcmp(snap[k], buf[k].block, buf[k].bytes + 2 * RED) != 0)
            same = false;
        free(snap[k]);
    }
    free(snap);
    return same;
}

static void check_red_zones(const fz_op *op, const buffer *buf, const char *when)
{
    char msg[160];
    for (int k = 0; k < op->ntensors; k++)
        if (buf[k].block != NULL &&
            (!all_canary(buf[k].block, RED) || !all_canary(buf[k].block + RED + buf[k].bytes, RED))) {
            snprintf(msg, sizeof msg, "%s: red zone of %s was written", when, op->tensors[k].name);
            finding(op, msg);
        }
}

/* The library's sealing (not in the public headers): an edited executor is
 * sealed again, as a caller who knows the checksum could. */
void spa_exec_seal(spa_executor *ex, void *internal, uint32_t bytes, uint32_t op);

/* Whether executor byte off lies in a copy of one of the call's tensor or
 * array descriptors: those are the call's arguments (an edited stride or
 * pointer describes other caller memory, which no library can check). */
static bool in_descriptor(const plan *p, const fz_op *op, const unsigned char *ex, uint32_t bytes,
                          uint32_t off)
{
    for (int k = 0; k < op->ntensors + op->narrays; k++) {
        const void *d = k < op->ntensors ? (const void *)&p->c.t[k] : (const void *)&p->c.a[k - op->ntensors];
        const size_t n = k < op->ntensors ? sizeof(spa_tensor) : sizeof(spa_int_array);
        if (k < op->ntensors ? !p->c.present[k] : !p->c.array_present[k - op->ntensors])
            continue;
        for (uint32_t at = 0; at + n <= bytes; at += 8)
            if (memcmp(ex + at, d, n) == 0 && off >= at && off < at + n)
                return true;
    }
    return false;
}

/* Phase 2 from executors edited byte by byte and sealed again: whatever it
 * answers, it stays inside every buffer and the workspace (and, under the
 * sanitizers, reads nothing out of bounds) and returns. */
static void run_edited(const fz_op *op, const plan *p, const buffer *buf, const spa_executor *ex,
                       unsigned char *wblock, void *ws, uint64_t ws_size)
{
    uint32_t bytes, opid;
    memcpy(&opid, ex->u.bytes + 4, sizeof opid);
    memcpy(&bytes, ex->u.bytes + 8, sizeof bytes);
    for (int i = 0; i < p->nedits; i++) {
        const uint32_t off = p->edits[i].off % bytes;
        if (in_descriptor(p, op, ex->u.bytes, bytes, off))
            continue;
        unsigned char internal[SPA_EXECUTOR_BYTES];
        spa_executor edited;
        memcpy(internal, ex->u.bytes, bytes);
        internal[off] ^= p->edits[i].x;
        spa_exec_seal(&edited, internal, bytes, opid);
        const spa_status st = op->phase2(ws, ws_size, &edited, NULL);
        if (st != SPA_OK && st != SPA_ERR_INVALID && st != SPA_ERR_WORKSPACE && st != SPA_ERR_NULLPTR)
            finding(op, "phase 2 of an edited executor returned an unknown status");
        check_red_zones(op, buf, "edited executor");
        if (!all_canary(wblock, RED + p->skew) || !all_canary(wblock + RED + p->skew + ws_size, RED))
            finding(op, "phase 2 of an edited executor wrote outside its workspace");
    }
}

/* Phase 2 with the workspace laid over a tensor or array of the call: it
 * must refuse (161002) and write nothing. */
static void run_ws_over(const fz_op *op, const plan *p, const buffer *buf, const spa_executor *ex,
                        uint64_t ws_size)
{
    unsigned char *at = NULL;
    if (ws_size == 0)
        return; /* no workspace: nothing can overlap */
    if (p->ws_over < op->ntensors) {
        /* where the view lies now (an alias may have moved it off its own block) */
        const buffer *own = &buf[p->ws_over];
        const spa_tensor *t = &p->c.t[p->ws_over];
        const int64_t bytes = span_bytes(t);
        if (own->block == NULL || !own->real || t->data == NULL || bytes <= (int64_t)p->ws_over_off)
            return;
        at = (unsigned char *)t->data + p->ws_over_off;
    } else {
        const int a = p->ws_over - op->ntensors;
        const uint64_t n = p->c.a[a].size < FZ_MAX_SEQ ? p->c.a[a].size : FZ_MAX_SEQ;
        if (!p->c.array_present[a] || p->ws_over_off >= n * sizeof(int64_t))
            return;
        at = (unsigned char *)(uintptr_t)p->c.a[a].data + p->ws_over_off;
    }
    int64_t vals[FZ_MAX_ARRAYS][FZ_MAX_SEQ];
    memcpy(vals, p->c.a_vals, sizeof vals);
    unsigned char **snap = snapshot_all(op, buf);
    const spa_status st = op->phase2(at, ws_size, ex, NULL);
    if (!unchanged_since(op, buf, snap) || memcmp(vals, p->c.a_vals, sizeof vals) != 0)
        finding(op, "phase 2 wrote with its workspace laid over the call's memory");
    if (st != SPA_ERR_INVALID)
        finding(op, "phase 2 accepted a workspace laid over the call's memory");
}

int fz_run(const fz_op *op, const uint8_t *data, size_t size)
{
    return fz_run_report(op, data, size, NULL);
}

int fz_run_report(const fz_op *op, const uint8_t *data, size_t size, fz_report *rep)
{
    reader r = {data, size};
    plan p;
    decode(op, &r, &p);
    buffer buf[FZ_MAX_TENSORS];
    memset(buf, 0, sizeof buf);
    uint64_t rnd = 0x9E3779B97F4A7C15ull ^ (p.seed * 0x2545F4914F6CDD1Dull);
    bool runnable = true;
    int64_t total = 0;
    int result = 0;

    for (int k = 0; k < op->ntensors; k++) {
        if (!p.c.present[k])
            continue;
        set_strides(&p, k);
        const fz_tensor_spec *s = &op->tensors[k];
        int64_t bytes = span_bytes(&p.c.t[k]);
        bool real = bytes >= 0 && bytes <= MAX_TENSOR_BYTES && total + bytes <= MAX_TOTAL_BYTES &&
                    numel(&p.c.t[k]) >= 0;
        if (s->role == FZ_INDEX && !real && !p.null_data[k]) {
            /* An index tensor too big to build: phase 1 may read it all. */
            result = -1;
            goto out;
        }
        if (p.null_data[k]) {
            p.c.t[k].data = NULL;
            runnable = false;
            continue;
        }
        buffer *b = &buf[k];
        b->bytes = real ? (size_t)bytes : 0;
        b->real = real;
        total += real ? bytes : 0;
        runnable = runnable && real;
        /* Not materialised: a block with nothing between its red zones, so
         * any access phase 1 makes to the data is out of bounds. */
        b->block = malloc(b->bytes + 2 * RED);
        memset(b->block, CANARY, b->bytes + 2 * RED);
        p.c.t[k].data = b->block + RED;
        if (s->role == FZ_IN && real)
            fill_input(b->block + RED, b->bytes, p.c.t[k].dtype, &rnd, p.special);
        else if (s->role == FZ_INDEX)
            fill_index(s, &p, k, b->block + RED, b->bytes);
        if (s->role != FZ_OUT) {
            b->before = malloc(b->bytes + 2 * RED);
            memcpy(b->before, b->block, b->bytes + 2 * RED);
        }
    }
    for (int a = 0; a < op->narrays; a++)
        p.c.a[a].data = p.c.a_vals[a];
    /* Views laid over each other: results are the caller's problem, memory
     * safety and the red zones are not. */
    const bool aliased = apply_aliases(op, &p, buf);

    /* ---- phase 1 ---- */
    unsigned char **before_phase1 = snapshot_all(op, buf);
    uint64_t ws_size = 0x5A5A5A5A5A5A5A5Aull;
    spa_executor ex, untouched;
    memset(&ex, 0x5A, sizeof ex);
    untouched = ex;
    spa_status st = op->phase1(&p.c, &ws_size, &ex);
    /* SPA_FUZZ_VERBOSE=1: say what each input did (to check a new seed). */
    if (getenv("SPA_FUZZ_VERBOSE") != NULL)
        fprintf(stderr, "fuzz %s: phase 1 status %d, workspace %llu, work %.3g, %s\n", op->name,
                (int)st, (unsigned long long)(st == SPA_OK ? ws_size : 0),
                op->work != NULL ? op->work(&p.c) : 0.0,
                st == SPA_OK && runnable && ws_size <= MAX_WS_BYTES &&
                        (op->work == NULL || op->work(&p.c) <= MAX_WORK)
                    ? "phase 2 runs"
                    : "no phase 2");
    if (!unchanged_since(op, buf, before_phase1))
        finding(op, "phase 1 wrote caller memory");
    if (rep != NULL) {
        rep->phase1 = st;
        rep->exec_bytes = 0;
        if (st == SPA_OK)
            memcpy(&rep->exec_bytes, ex.u.bytes + 8, sizeof rep->exec_bytes);
    }
    if (st != SPA_OK) {
        if (st != SPA_ERR_NULLPTR && st != SPA_ERR_INVALID)
            finding(op, "phase 1 returned an unknown status");
        /* a refusal writes no workspace size; into its executor, its reason
         * and a disarmed plan that phase 2 refuses */
        if (ws_size != 0x5A5A5A5A5A5A5A5Aull)
            finding(op, "phase 1 failed but wrote the workspace size");
        if (p.c.null_executor && memcmp(&ex, &untouched, sizeof ex) != 0)
            finding(op, "phase 1 failed with a NULL executor but wrote the executor");
        if (!p.c.null_executor && spa_executor_reason(&ex, NULL)[0] == '\0')
            finding(op, "phase 1 failed without recording a reason");
        if (!p.c.null_executor) {
            unsigned char small_ws[64];
            if (spa_executor_run(small_ws, sizeof small_ws, &ex, NULL) != SPA_ERR_INVALID)
                finding(op, "phase 1 failed but left its executor runnable");
        }
        goto out;
    }
    if (p.c.null_ws_size || p.c.null_executor)
        finding(op, "phase 1 accepted a NULL workspace size or executor");
    if (!runnable || ws_size > MAX_WS_BYTES)
        goto out;
    if (op->work != NULL && op->work(&p.c) > MAX_WORK)
        goto out;

    /* ---- phase 2: too small a workspace, then twice for real ---- */
    unsigned char *wblock = malloc((size_t)ws_size + 2 * RED + p.skew);
    memset(wblock, CANARY, (size_t)ws_size + 2 * RED + p.skew);
    void *ws = wblock + RED + p.skew;
    unsigned char **before_small = snapshot_all(op, buf);
    if (ws_size > 0 && op->phase2(ws, ws_size - 1, &ex, NULL) != SPA_ERR_WORKSPACE)
        finding(op, "phase 2 accepted a workspace smaller than phase 1 asked");
    if (!unchanged_since(op, buf, before_small))
        finding(op, "phase 2 refused the workspace but wrote caller memory");
    if (p.ws_over >= 0)
        run_ws_over(op, &p, buf, &ex, ws_size);
    if (aliased) {
        const spa_status st2 = op->phase2(ws, ws_size, &ex, NULL);
        if (st2 != SPA_OK && st2 != SPA_ERR_INVALID)
            finding(op, "phase 2 over aliased views returned neither success nor 161002");
        check_red_zones(op, buf, "phase 2 over aliased views");
        if (!all_canary(wblock, RED + p.skew) || !all_canary(wblock + RED + p.skew + ws_size, RED))
            finding(op, "phase 2 over aliased views wrote outside its workspace");
        run_edited(op, &p, buf, &ex, wblock, ws, ws_size);
        free(wblock);
        goto out;
    }
    if (op->phase2(ws, ws_size, &ex, NULL) != SPA_OK)
        finding(op, "phase 2 refused what phase 1 accepted");
    check_buffers(op, buf, "phase 2");
    if (!all_canary(wblock, RED + p.skew) || !all_canary(wblock + RED + p.skew + ws_size, RED))
        finding(op, "phase 2 wrote outside its workspace");
    unsigned char *first[FZ_MAX_TENSORS] = {0};
    for (int k = 0; k < op->ntensors; k++)
        if (buf[k].block != NULL && op->tensors[k].role == FZ_OUT) {
            first[k] = malloc(buf[k].bytes + 2 * RED);
            memcpy(first[k], buf[k].block, buf[k].bytes + 2 * RED);
        }
    const spa_runner reversed = {run_reversed, NULL};
    memset(wblock, CANARY, (size_t)ws_size + 2 * RED + p.skew);
    if (op->phase2(ws, ws_size, &ex, &reversed) != SPA_OK)
        finding(op, "phase 2 failed on its second run");
    for (int k = 0; k < op->ntensors; k++)
        if (first[k] != NULL) {
            if (memcmp(first[k], buf[k].block, buf[k].bytes + 2 * RED) != 0)
                finding(op, "outputs differ when the tasks run in reverse order");
            free(first[k]);
        }
    run_edited(op, &p, buf, &ex, wblock, ws, ws_size);
    check_buffers(op, buf, "edited executors");
    free(wblock);

out:
    for (int k = 0; k < op->ntensors; k++) {
        free(buf[k].block);
        free(buf[k].before);
    }
    return result;
}
