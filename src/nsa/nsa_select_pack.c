/* Widening the key / value rows of selected attention once per call and head. */
#include "nsa_select_pack.h"

#include "half.h"

/* Rows per pack task: up to a few hundred KiB of output per task. */
#define NSAS_PACK_ROWS 256

/* The head dim rounded up to the micro-kernels' step. */
static int64_t padded_dim(const spa_tensor *t)
{
    return (t->dims[2] + SPA_NSAS_DIM_STEP - 1) / SPA_NSAS_DIM_STEP * SPA_NSAS_DIM_STEP;
}

bool spa_nsas_pack_needed(const spa_tensor *t, const spa_nsas_shape *sh)
{
    /* in place only when the rows of a head are already dense f32 rows of a
     * whole number of steps, and every batch a whole number of blocks */
    return t->dtype != SPA_FLOAT32 || t->strides[2] != 1 || t->strides[0] != t->dims[2] ||
           t->dims[2] % SPA_NSAS_DIM_STEP != 0 || !sh->aligned;
}

uint64_t spa_nsas_pack_floats(const spa_tensor *t, const spa_nsas_shape *sh)
{
    if (!spa_nsas_pack_needed(t, sh))
        return 0;
    /* kv_rows < kv_total + batches * bs and dims[2] <= 768: no overflow */
    return (uint64_t)sh->kv_rows * (uint64_t)padded_dim(t);
}

/* Kernel rows [0, rows) of head h of t into dst [rows][pitch], in tasks of
 * NSAS_PACK_ROWS. */
typedef struct nsas_pack {
    const spa_tensor *t;
    const spa_nsas_trusted *tr;
    int64_t rows, h, pitch;
    float *dst;
} nsas_pack;

static void widen_row(float *dst, const spa_tensor *t, int64_t r, int64_t h)
{
    const int64_t n = t->dims[2], s = t->strides[2];
    const size_t es = spa_dtype_size(t->dtype);
    const unsigned char *src = (const unsigned char *)t->data +
                               (size_t)(r * t->strides[0] + h * t->strides[1]) * es;
    if (t->dtype == SPA_FLOAT32) {
        const float *f = (const float *)(const void *)src;
        for (int64_t i = 0; i < n; i++)
            dst[i] = f[i * s];
        return;
    }
    const uint16_t *u = (const uint16_t *)(const void *)src;
    if (s == 1) {
        if (t->dtype == SPA_FLOAT16)
            spa_f16_widen_run(dst, u, n);
        else
            spa_bf16_widen_run(dst, u, n);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        dst[i] = t->dtype == SPA_FLOAT16 ? spa_f16_to_f32(u[i * s]) : spa_bf16_to_f32(u[i * s]);
}

/* The KV row of kernel row r (rows ascending within a task, *b the batch of
 * the row before, advanced here), or -1 for a row past its batch's end. */
static int64_t source_row(const spa_nsas_trusted *tr, int64_t r, int64_t *b)
{
    while (tr->kend[*b] <= r) /* past the batch's last block (or an empty batch) */
        (*b)++;
    int64_t ks, ke;
    spa_nsas_batch(&tr->skva, *b, &ks, &ke);
    const int64_t pos = r - (*b == 0 ? 0 : tr->kend[*b - 1]);
    return pos < ke - ks ? ks + pos : -1;
}

static int64_t first_batch(const nsas_pack *p, int64_t r0)
{
    const spa_int_array kend = {p->tr->kend, p->tr->skva.size};
    return spa_nsas_batch_of(&kend, r0);
}

/* Kernel rows [r0, *r1) of pack task `task`; returns r0. */
static int64_t task_rows(const nsas_pack *p, uint32_t task, int64_t *r1)
{
    const int64_t r0 = (int64_t)task * NSAS_PACK_ROWS;
    *r1 = r0 + NSAS_PACK_ROWS < p->rows ? r0 + NSAS_PACK_ROWS : p->rows;
    return r0;
}

static void pack_task(void *arg, uint32_t task)
{
    const nsas_pack *p = arg;
    int64_t r1;
    const int64_t r0 = task_rows(p, task, &r1);
    const int64_t n = p->t->dims[2];
    int64_t b = first_batch(p, r0);
    for (int64_t r = r0; r < r1; r++) {
        const int64_t src = source_row(p->tr, r, &b);
        float *dst = p->dst + r * p->pitch;
        int64_t i = 0;
        if (src >= 0) { /* a KV row; past its batch's end: zeros */
            widen_row(dst, p->t, src, p->h);
            i = n;
        }
        for (; i < p->pitch; i++)
            dst[i] = 0.0f;
    }
}

/* Row src of head h of t (a bf16 tensor) as a pointer to its first element,
 * its elements strides[2] apart; NULL for a row past its batch (src < 0). */
static const uint16_t *bf16_row(const spa_tensor *t, int64_t src, int64_t h)
{
    return src < 0 ? NULL : (const uint16_t *)t->data + src * t->strides[0] + h * t->strides[1];
}

static uint32_t bf16_elem(const uint16_t *row, int64_t s, int64_t n, int64_t i)
{
    return row != NULL && i < n ? row[i * s] : 0u;
}

/* Key rows as bf16 pairs, padded to the pitch (words): element 2i of the
 * row in the low half of word i. */
static void pack_bf16_task(void *arg, uint32_t task)
{
    const nsas_pack *p = arg;
    int64_t r1;
    const int64_t r0 = task_rows(p, task, &r1);
    const int64_t n = p->t->dims[2], s = p->t->strides[2];
    uint32_t *dst = (uint32_t *)(void *)p->dst;
    int64_t b = first_batch(p, r0);
    for (int64_t r = r0; r < r1; r++) {
        const uint16_t *row = bf16_row(p->t, source_row(p->tr, r, &b), p->h);
        uint32_t *restrict w = dst + r * p->pitch;
        int64_t i = 0;
        if (row != NULL && s == 1) /* dense: two elements a word, in order */
            for (; 2 * i + 1 < n; i++)
                w[i] = (uint32_t)row[2 * i] | (uint32_t)row[2 * i + 1] << 16;
        for (; i < p->pitch; i++)
            w[i] = bf16_elem(row, s, n, 2 * i) | bf16_elem(row, s, n, 2 * i + 1) << 16;
    }
}

/* Value rows 2i and 2i+1 as one row of pairs (kernel rows come in whole
 * blocks, multiples of 16, and tasks in NSAS_PACK_ROWS: every pair is whole). */
static void pack_pairs_task(void *arg, uint32_t task)
{
    const nsas_pack *p = arg;
    int64_t r1;
    const int64_t r0 = task_rows(p, task, &r1);
    const int64_t n = p->t->dims[2], s = p->t->strides[2];
    uint32_t *dst = (uint32_t *)(void *)p->dst;
    int64_t b = first_batch(p, r0);
    for (int64_t r = r0; r < r1; r += 2) {
        const uint16_t *lo = bf16_row(p->t, source_row(p->tr, r, &b), p->h);
        const uint16_t *hi = bf16_row(p->t, source_row(p->tr, r + 1, &b), p->h);
        uint32_t *restrict w = dst + r / 2 * p->pitch;
        int64_t i = 0;
        if (lo != NULL && hi != NULL && s == 1) /* both rows dense and inside the batch */
            for (; i < n; i++)
                w[i] = (uint32_t)lo[i] | (uint32_t)hi[i] << 16;
        for (; i < p->pitch; i++)
            w[i] = bf16_elem(lo, s, n, i) | bf16_elem(hi, s, n, i) << 16;
    }
}

/* The f32 kernel rows of head h of t: packed into dst first, or in place. */
static const float *head_rows(const spa_tensor *t, const spa_nsas_shape *sh,
                              const spa_nsas_trusted *tr, float *dst, int64_t h,
                              const spa_runner *runner, int64_t *pitch)
{
    if (!spa_nsas_pack_needed(t, sh)) { /* kernel row = KV row */
        *pitch = t->strides[0];
        return (const float *)t->data + h * t->strides[1];
    }
    const nsas_pack p = {t, tr, sh->kv_rows, h, padded_dim(t), dst};
    spa_run_blocks(runner, pack_task, (void *)&p,
                   (uint32_t)((sh->kv_rows + NSAS_PACK_ROWS - 1) / NSAS_PACK_ROWS));
    *pitch = p.pitch;
    return dst;
}

void spa_nsas_attach_head(spa_nsas_args *a, const spa_nsas_shape *sh, const spa_nsas_trusted *tr,
                          const spa_tensor *k, const spa_tensor *v, float *kpack, float *vpack,
                          int64_t h2, const spa_runner *runner)
{
    a->kf = head_rows(k, sh, tr, kpack, h2, runner, &a->kfr);
    a->vf = head_rows(v, sh, tr, vpack, h2, runner, &a->vfr);
}

void spa_nsas_attach_head_bf16(spa_nsas_args *a, const spa_nsas_shape *sh,
                               const spa_nsas_trusted *tr, const spa_tensor *k,
                               const spa_tensor *v, float *kpack, float *vpack, int64_t h2,
                               const spa_runner *runner)
{
    const uint32_t tasks = (uint32_t)((sh->kv_rows + NSAS_PACK_ROWS - 1) / NSAS_PACK_ROWS);
    const nsas_pack kp = {k, tr, sh->kv_rows, h2, padded_dim(k) / 2, kpack};
    const nsas_pack vp = {v, tr, sh->kv_rows, h2, padded_dim(v), vpack};
    spa_run_blocks(runner, pack_bf16_task, (void *)&kp, tasks);
    spa_run_blocks(runner, pack_pairs_task, (void *)&vp, tasks);
    a->kf = NULL, a->vf = NULL, a->kfr = 0, a->vfr = 0;
    a->kb = (const uint32_t *)(const void *)kpack, a->kbr = kp.pitch;
    a->vp = (const uint32_t *)(const void *)vpack, a->vpr = vp.pitch;
}
