/* Widening the key / value rows of selected attention once per call. */
#include "nsa_select_pack.h"

#include "half.h"

/* Rows per pack task: a few hundred KiB of output per task. */
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
    return (uint64_t)rows * (uint64_t)t->dims[1] * (uint64_t)t->dims[2];
}

spa_nsas_f32rows spa_nsas_rows_of(const spa_tensor *t, int64_t rows, float *dst)
{
    spa_nsas_f32rows r;
    if (!spa_nsas_pack_needed(t)) {
        r.base = t->data;
        r.row = t->strides[0];
        r.head = t->strides[1];
    } else {
        r.base = dst;
        r.row = t->dims[2];
        r.head = rows * t->dims[2];
    }
    return r;
}

uint32_t spa_nsas_pack_tasks(const spa_nsas_pack *p)
{
    if (!spa_nsas_pack_needed(p->t))
        return 0;
    return (uint32_t)((p->rows + NSAS_PACK_ROWS - 1) / NSAS_PACK_ROWS);
}

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

void spa_nsas_pack_task(void *arg, uint32_t task)
{
    const spa_nsas_pack *p = arg;
    const int64_t r0 = (int64_t)task * NSAS_PACK_ROWS;
    const int64_t r1 = r0 + NSAS_PACK_ROWS < p->rows ? r0 + NSAS_PACK_ROWS : p->rows;
    const int64_t n2 = p->t->dims[1], dim = p->t->dims[2];
    for (int64_t h = 0; h < n2; h++)
        for (int64_t r = r0; r < r1; r++)
            widen_row(p->dst + (h * p->rows + r) * dim, p->t, r, h);
}

void spa_nsas_attach_rows(spa_nsas_args *a, int64_t kv_total, const spa_tensor *k,
                          const spa_tensor *v, float *kpack, float *vpack,
                          const spa_runner *runner)
{
    const spa_nsas_pack pk = {k, kv_total, kpack}, pv = {v, kv_total, vpack};
    spa_run_blocks(runner, spa_nsas_pack_task, (void *)&pk, spa_nsas_pack_tasks(&pk));
    spa_run_blocks(runner, spa_nsas_pack_task, (void *)&pv, spa_nsas_pack_tasks(&pv));
    const spa_nsas_f32rows kr = spa_nsas_rows_of(k, kv_total, kpack);
    const spa_nsas_f32rows vr = spa_nsas_rows_of(v, kv_total, vpack);
    a->kf = kr.base, a->kfr = kr.row, a->kfh = kr.head;
    a->vf = vr.base, a->vfr = vr.row, a->vfh = vr.head;
}
