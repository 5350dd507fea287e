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

static void pack_task(void *arg, uint32_t task)
{
    const nsas_pack *p = arg;
    const int64_t r0 = (int64_t)task * NSAS_PACK_ROWS;
    const int64_t r1 = r0 + NSAS_PACK_ROWS < p->rows ? r0 + NSAS_PACK_ROWS : p->rows;
    const int64_t n = p->t->dims[2];
    const spa_int_array kend = {p->tr->kend, p->tr->skva.size};
    int64_t b = spa_nsas_batch_of(&kend, r0);
    for (int64_t r = r0; r < r1; r++) {
        while (p->tr->kend[b] <= r) /* past the batch's last block (or an empty batch) */
            b++;
        int64_t ks, ke;
        spa_nsas_batch(&p->tr->skva, b, &ks, &ke);
        const int64_t pos = r - (b == 0 ? 0 : p->tr->kend[b - 1]);
        float *dst = p->dst + r * p->pitch;
        int64_t i = 0;
        if (pos < ke - ks) { /* a KV row; past its batch's end: zeros */
            widen_row(dst, p->t, ks + pos, p->h);
            i = n;
        }
        for (; i < p->pitch; i++)
            dst[i] = 0.0f;
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
