/* The key rows' gradient partials of the DSA grads (dsa_grad_rows.h). */
#include "dsa_grad_rows.h"

#include "attn_plan.h"
#include "half.h"
#include "internal.h"
#include "nsa_cache_rows.h"

#define DSA_TARGET_RANGES 16
#define DSA_WORK_PER_BYTE 64.0f
#ifndef SPA_DSA_PARTIAL_BYTES
#define SPA_DSA_PARTIAL_BYTES (512ull << 20)
#endif

/* The partial rows [lo, hi) of the batches holding tokens [t0, t1) (t0 < t1). */
static void range_rows(const spa_dsa_lens *l, int64_t t0, int64_t t1, int64_t *lo, int64_t *hi)
{
    int64_t tok = 0, row = 0;
    *lo = *hi = 0;
    for (int64_t b = 0; b < l->batches; b++) {
        const int64_t nq = spa_dsa_lens_nq(l, b), rows = spa_dsa_lens_kv(l, b);
        if (tok + nq > t0 && tok < t1) {
            if (tok <= t0)
                *lo = row;
            *hi = row + rows;
        }
        tok += nq, row += rows;
    }
}

void spa_dsa_ranges_plan(const spa_dsa_lens *l, float work, int64_t pitch, uint64_t es, spa_dsa_ranges *rg)
{
    rg->pitch = pitch, rg->es = es;
    int64_t ranges = l->t < DSA_TARGET_RANGES ? (l->t > 0 ? l->t : 1) : DSA_TARGET_RANGES;
    float keys = 0.0f;
    for (int64_t b = 0; b < l->batches; b++)
        keys += (float)spa_dsa_lens_kv(l, b);
    const float by_work = work / (DSA_WORK_PER_BYTE * keys * (float)pitch * (float)es + 1.0f);
    ranges = by_work < (float)ranges ? (by_work > 1.0f ? (int64_t)by_work : 1) : ranges;
    for (;; ranges--) {
        rg->ranges = ranges;
        rg->per_range = l->t > 0 ? (l->t + ranges - 1) / ranges : 1;
        uint64_t rows = 0;
        for (int64_t r = 0; r < ranges; r++) {
            int64_t t0, t1, lo, hi;
            spa_attn_range_tokens(r, rg->per_range, l->t, &t0, &t1);
            if (t0 < t1) {
                range_rows(l, t0, t1, &lo, &hi);
                rows += (uint64_t)(hi - lo);
            }
        }
        rg->elems = rows * (uint64_t)pitch; /* rows <= B * kv_cap, pitch <= 1536: no overflow */
        if (ranges == 1 || rg->elems * es <= SPA_DSA_PARTIAL_BYTES)
            break;
    }
}

void spa_dsa_ranges_table(const spa_dsa_lens *l, const spa_dsa_ranges *rg, int64_t *lo, int64_t *hi,
                          uint64_t *offset)
{
    uint64_t off = 0;
    for (int64_t r = 0; r < rg->ranges; r++) {
        int64_t t0, t1;
        lo[r] = hi[r] = 0;
        spa_attn_range_tokens(r, rg->per_range, l->t, &t0, &t1);
        if (t0 < t1)
            range_rows(l, t0, t1, &lo[r], &hi[r]);
        offset[r] = off;
        off += (uint64_t)(hi[r] - lo[r]) * (uint64_t)rg->pitch;
    }
}

void spa_dsa_partials_sum(const spa_dsa_partials *p, int64_t row, int64_t c0, int64_t n, double *acc)
{
    float accf[SPA_DSA_SUM_MAX];
    for (int64_t i = 0; i < n; i++)
        acc[i] = 0.0, accf[i] = 0.0f;
    for (int64_t r = 0; row >= 0 && r < p->rg.ranges; r++) {
        if (row < p->lo[r] || row >= p->hi[r])
            continue;
        const uint64_t at = p->offset[r] + (uint64_t)((row - p->lo[r]) * p->rg.pitch + c0);
        if (p->rg.es == 8) {
            const double *src = (const double *)(const void *)p->base + at;
            for (int64_t i = 0; i < n; i++)
                acc[i] += src[i];
        } else {
            const float *src = (const float *)(const void *)p->base + at;
            for (int64_t i = 0; i < n; i++)
                accf[i] += src[i];
        }
    }
    if (p->rg.es != 8)
        for (int64_t i = 0; i < n; i++)
            acc[i] = (double)accf[i];
}

int64_t spa_dsa_partial_row(const spa_dsa_kv *kv, const int64_t *ks, const int64_t *len, const int64_t *first,
                            int64_t pg, int64_t row)
{
    int64_t b = pg;
    if (kv->tnd) {
        if (kv->batches == 0)
            return -1;
        b = spa_nsa_cache_batch_of(ks, kv->batches, row);
        row -= ks[b];
        if (row < 0)
            return -1;
    }
    return row < len[b] ? first[b] + row : -1;
}

void spa_dsa_store_run(int32_t dtype, void *base, int64_t stride, const double *acc, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        switch (dtype) {
        case SPA_FLOAT16:
            ((uint16_t *)base)[i * stride] = spa_f32_to_f16((float)acc[i]);
            break;
        case SPA_BFLOAT16:
            ((uint16_t *)base)[i * stride] = spa_f32_to_bf16((float)acc[i]);
            break;
        case SPA_FLOAT64:
            ((double *)base)[i * stride] = acc[i];
            break;
        default:
            ((float *)base)[i * stride] = (float)acc[i];
            break;
        }
    }
}

void spa_dsa_grad_head(spa_ws *ws, uint64_t exec_bytes, int64_t batches, spa_dsa_grad_slices *s)
{
    const uint64_t nb = (uint64_t)batches;
    s->exec = spa_ws_take(ws, 1, exec_bytes);
    int64_t **per_batch[5] = {&s->sq, &s->kv, &s->qs, &s->ks, &s->kf};
    for (int i = 0; i < 5; i++)
        *per_batch[i] = spa_ws_take(ws, nb, sizeof(int64_t));
}

void spa_dsa_grad_carve(spa_ws *ws, uint64_t exec_bytes, int64_t batches, const spa_dsa_ranges *rg,
                        uint64_t scratch_bytes, spa_dsa_grad_slices *s)
{
    const uint64_t nr = (uint64_t)rg->ranges;
    spa_dsa_grad_head(ws, exec_bytes, batches, s);
    s->lo = spa_ws_take(ws, nr, sizeof(int64_t));
    s->hi = spa_ws_take(ws, nr, sizeof(int64_t));
    s->offset = spa_ws_take(ws, nr, sizeof(uint64_t));
    s->scratch = spa_ws_take(ws, nr, scratch_bytes);
    s->partial = spa_ws_take(ws, rg->elems > 0 ? rg->elems : 1u, rg->es);
}

void spa_dsa_grad_tables(const spa_dsa_lens *l, const spa_dsa_ranges *rg, spa_dsa_grad_slices *s,
                         spa_dsa_partials *part)
{
    for (int64_t b = 0, t = 0, row = 0; b < l->batches; b++) {
        s->qs[b] = t, s->kf[b] = row;
        t += s->sq[b], row += s->kv[b];
    }
    spa_dsa_ranges_table(l, rg, s->lo, s->hi, s->offset);
    part->base = s->partial, part->lo = s->lo, part->hi = s->hi, part->offset = s->offset, part->rg = *rg;
}
