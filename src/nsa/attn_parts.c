/* Merging a decode unit's parts (attn_parts.h). */
#include "attn_parts.h"

#include <float.h>
#include <math.h>

#include "half.h"
#include "spattn/types.h"

static bool is_half(int32_t dt)
{
    return dt != SPA_FLOAT32 && dt != SPA_FLOAT64;
}

uint64_t spa_attn_parts_elems(int64_t round, int64_t parts, int64_t g, int64_t dv)
{
    return (uint64_t)(round * parts * g * (dv + 2));
}

uint64_t spa_attn_parts_elem_bytes(int32_t dtype)
{
    return dtype == SPA_FLOAT64 ? 8u : 4u;
}

unsigned char *spa_attn_parts_at(const spa_attn_parts *ap, int64_t ru, int64_t part, int which)
{
    const int64_t pu = ru * ap->parts + part, g = ap->g, dv = ap->dv, all = ap->round * ap->parts;
    const int64_t at = which == 0 ? pu * g * dv : which == 1 ? all * g * dv + pu * g : all * g * (dv + 1) + pu * g;
    return ap->base + (uint64_t)at * spa_attn_parts_elem_bytes(ap->dtype);
}

/* A partial value as double. */
static double value_at(const spa_attn_parts *ap, int64_t ru, int64_t part, int which, int64_t i)
{
    const unsigned char *p = spa_attn_parts_at(ap, ru, part, which);
    if (ap->dtype == SPA_FLOAT64)
        return ((const double *)(const void *)p)[i];
    return (double)((const float *)(const void *)p)[i];
}

/* Head l of round unit ru: each part's weight l_k exp(m_k - M) into w (a
 * part without keys: 0), the row's max M into *m; returns their sum L
 * (double, part order). */
static double row_weights(const spa_attn_parts *ap, int64_t ru, int64_t l, double *w, double *m)
{
    double sum = 0.0;
    *m = -HUGE_VAL;
    for (int64_t k = 0; k < ap->parts; k++) {
        const double mk = value_at(ap, ru, k, 1, l);
        *m = mk > *m ? mk : *m;
    }
    for (int64_t k = 0; k < ap->parts; k++) {
        const double mk = value_at(ap, ru, k, 1, l), lk = value_at(ap, ru, k, 2, l);
        w[k] = lk == 0.0 ? 0.0 : lk * exp(mk - *m);
        sum += w[k];
    }
    return sum;
}

void spa_attn_parts_scale(const spa_attn_parts *ap, int64_t ru, int64_t part, int64_t heads, float *pscale)
{
    for (int64_t l = 0; l < heads; l++) {
        double w[SPA_ATTN_PARTS_MAX], m;
        const double sum = row_weights(ap, ru, l, w, &m);
        const double mp = value_at(ap, ru, part, 1, l);
        pscale[l] = sum == 0.0 ? 0.0f : (float)(exp(mp - m) / sum); /* NaN stays NaN */
    }
}

static void put(void *base, int32_t dt, int64_t off, double x)
{
    if (dt == SPA_FLOAT64)
        ((double *)base)[off] = x;
    else if (dt == SPA_FLOAT32)
        ((float *)base)[off] = (float)x;
    else if (dt == SPA_BFLOAT16)
        ((uint16_t *)base)[off] = spa_f32_to_bf16((float)x);
    else
        ((uint16_t *)base)[off] = spa_f32_to_f16((float)x);
}

void spa_attn_parts_merge(const spa_attn_parts *ap, int64_t ru, int64_t heads, void *o, int64_t os_head,
                          int64_t os_c, void *mx, int64_t mx_head, void *sm, int64_t sm_head)
{
    const bool half = is_half(ap->dtype); /* the parts are normalised: their sum */
    const int32_t st = ap->dtype == SPA_FLOAT64 ? SPA_FLOAT64 : SPA_FLOAT32;
    for (int64_t l = 0; l < heads; l++) {
        double w[SPA_ATTN_PARTS_MAX], m, sum;
        sum = row_weights(ap, ru, l, w, &m);
        if (mx != NULL)
            put(mx, st, l * mx_head, m == -HUGE_VAL ? -FLT_MAX : m);
        if (sm != NULL)
            put(sm, st, l * sm_head, sum);
        for (int64_t k = 0; half && k < ap->parts; k++)
            w[k] = 1.0;
        for (int64_t c = 0; c < ap->dv; c++) {
            double acc = 0.0;
            for (int64_t k = 0; k < ap->parts; k++)
                acc += w[k] * value_at(ap, ru, k, 0, l * ap->dv + c);
            put(o, ap->dtype, l * os_head + c * os_c, half ? acc : sum == 0.0 ? 0.0 : acc / sum);
        }
    }
}
