/* Widening the key / value rows of selected attention once per call and head. */
#include "nsa_select_pack.h"

#include "half.h"

/* Rows per pack task: up to a few hundred KiB of output per task. */
#define NSAS_PACK_ROWS 256

bool spa_nsas_pack_needed(const spa_tensor *t)
{
    /* in place only when the rows of a head are already dense f32 rows */
    return t->dtype != SPA_FLOAT32 || t->strides[2] != 1 || t->strides[0] != t->dims[2];
}

uint64_t spa_nsas_pack_floats(const spa_tensor *t, int64_t rows)
{
    if (!spa_nsas_pack_needed(t))
        return 0;
    /* rows <= dims[0] and the tensor's span is checked: no overflow */
    return (uint64_t)rows * (uint64_t)t->dims[2];
}

/* Rows [0, rows) of head h of t into dst [rows][dim], in tasks of NSAS_PACK_ROWS. */
typedef struct nsas_pack {
    const spa_tensor *t;
    int64_t rows, h;
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
    for (int64_t r = r0; r < r1; r++)
        widen_row(p->dst + r * p->t->dims[2], p->t, r, p->h);
}

/* The f32 rows of head h of t: packed into dst first, or in place. */
static const float *head_rows(const spa_tensor *t, int64_t rows, float *dst, int64_t h,
                              const spa_runner *runner, int64_t *pitch)
{
    if (!spa_nsas_pack_needed(t)) {
        *pitch = t->strides[0];
        return (const float *)t->data + h * t->strides[1];
    }
    const nsas_pack p = {t, rows, h, dst};
    spa_run_blocks(runner, pack_task, (void *)&p, (uint32_t)((rows + NSAS_PACK_ROWS - 1) / NSAS_PACK_ROWS));
    *pitch = t->dims[2];
    return dst;
}

void spa_nsas_attach_head(spa_nsas_args *a, int64_t kv_total, const spa_tensor *k,
                          const spa_tensor *v, float *kpack, float *vpack, int64_t h2,
                          const spa_runner *runner)
{
    a->kf = head_rows(k, kv_total, kpack, h2, runner, &a->kfr);
    a->vf = head_rows(v, kv_total, vpack, h2, runner, &a->vfr);
}
