/* Shared planning of MultiScaleDeformableAttnFunction and its grad. */
#include <string.h>

#include "msda_plan.h"
#include "native_div.h"

/* Element i of a rank-1 view or of column j of a rank-2 view, as int64. */
static int64_t index_at(const spa_tensor *t, int64_t i, int64_t j)
{
    const int64_t off = i * t->strides[0] + (t->rank == 2 ? j * t->strides[1] : 0);
    if (t->dtype == SPA_INT32) {
        int32_t v;
        memcpy(&v, (const unsigned char *)t->data + off * 4, sizeof v);
        return v;
    }
    int64_t v;
    memcpy(&v, (const unsigned char *)t->data + off * 8, sizeof v);
    return v;
}

spa_status spa_msda_check_ranks(const spa_tensor *value, const spa_tensor *spatial_shape,
                                const spa_tensor *level_start, const spa_tensor *location,
                                const spa_tensor *attn_weight, const spa_tensor *output,
                                bool written)
{
    SPA_TRY(spa_tensor_check(value, 4));
    SPA_TRY(spa_tensor_check(spatial_shape, 2));
    SPA_TRY(spa_tensor_check(level_start, 1));
    SPA_TRY(spa_tensor_check(location, 6));
    SPA_TRY(spa_tensor_check(attn_weight, 5));
    if (written)
        SPA_TRY(spa_tensor_check_output(output, 3));
    else
        SPA_TRY(spa_tensor_check(output, 3));
    SPA_REQUIRE(spatial_shape->dims[1] == 2);
    SPA_REQUIRE(location->dims[5] == 2);
    return SPA_OK;
}

spa_status spa_msda_levels_read(const spa_tensor *spatial_shape, const spa_tensor *level_start,
                                int64_t nl, int64_t nk, spa_msda_level *lv)
{
    for (int64_t l = 0; l < nl; l++) {
        const int64_t h = index_at(spatial_shape, l, 0), w = index_at(spatial_shape, l, 1);
        const int64_t start = index_at(level_start, l, 0);
        int64_t area, end;
        SPA_REQUIRE(h >= 1);
        SPA_REQUIRE(h <= INT32_MAX);
        SPA_REQUIRE(w >= 1);
        SPA_REQUIRE(w <= INT32_MAX);
        SPA_REQUIRE(start >= 0);
        SPA_REQUIRE(start <= INT32_MAX);
        SPA_REQUIRE(spa_mul_ok(h, w, &area));
        SPA_REQUIRE(spa_add_ok(start, area, &end));
        SPA_REQUIRE(end <= nk);
        if (lv != NULL)
            lv[l] = (spa_msda_level){h, w, start, (float)h, (float)w};
    }
    return SPA_OK;
}

int64_t spa_msda_tile_samples(int64_t ts, int64_t c, int64_t desc_bytes, int64_t row_bytes, int64_t budget)
{
    while (ts > 16 && (c > budget / row_bytes || ts * desc_bytes + c * row_bytes > budget))
        ts /= 2;
    return ts;
}

int64_t spa_msda_split(int64_t units, uint32_t *blocks)
{
    int64_t per = (units + SPA_MSDA_MAX_BLOCKS - 1) / SPA_MSDA_MAX_BLOCKS;
    if (per < 1)
        per = 1;
    *blocks = (uint32_t)((units + per - 1) / per);
    return per;
}

void spa_msda_zero_fill(const spa_tensor *t)
{
    const int64_t esz = (int64_t)spa_dtype_size(t->dtype);
    const int32_t r = t->rank;
    if (spa_tensor_numel(t) == 0 || r == 0)
        return;
    /* Odometer over all dims but the last; the last is one run when unit-strided. */
    int64_t idx[SPA_MAX_RANK] = {0};
    const int64_t inner = t->dims[r - 1], ist = t->strides[r - 1];
    for (;;) {
        int64_t off = 0;
        for (int32_t k = 0; k < r - 1; k++)
            off += idx[k] * t->strides[k];
        unsigned char *row = (unsigned char *)t->data + off * esz;
        if (ist == 1)
            memset(row, 0, (size_t)(inner * esz));
        else
            for (int64_t i = 0; i < inner; i++)
                memset(row + i * ist * esz, 0, (size_t)esz);
        int32_t k = r - 2;
        while (k >= 0 && ++idx[k] == t->dims[k])
            idx[k--] = 0;
        if (k < 0)
            return;
    }
}

void spa_msda_args_init(spa_msda_args *a, const spa_tensor *location, const spa_tensor *attn_weight,
                        const spa_msda_dims *d)
{
    memset(a, 0, sizeof *a);
    a->loc = location->data;
    a->loc_dt = location->dtype;
    memcpy(a->ls, location->strides, sizeof a->ls);
    a->attn = attn_weight->data;
    a->attn_dt = attn_weight->dtype;
    memcpy(a->as, attn_weight->strides, sizeof a->as);
    a->nk = d->nk;
    a->nq = d->nq;
    a->nh = d->nh;
    a->c = d->c;
    a->nl = d->nl;
    a->np = d->np;
}

/* One row of C channels: the unit-stride case as one run (ISA layer), the
 * strided one element by element. */
#define SPA_MSDA_ROW(unit, strided)           \
    do {                                      \
        if (cs == 1)                          \
            unit;                             \
        else                                  \
            for (int64_t c = 0; c < cl; c++)  \
                strided;                      \
    } while (0)

/* One row of C channels of value at element offset off, widened into row. */
static void spa_msda_widen_row(const spa_tensor *value, int64_t off, float *row)
{
    const int64_t cl = value->dims[3], cs = value->strides[3];
    switch (value->dtype) {
    case SPA_FLOAT16: {
        const uint16_t *src = (const uint16_t *)value->data + off;
        if (cs == 1) /* in hardware where the target has it (exact, like the portable path) */
            spa_f16_widen_run(row, src, cl);
        else
            for (int64_t c = 0; c < cl; c++)
                row[c] = spa_f16_to_f32(src[c * cs]);
        break;
    }
    case SPA_BFLOAT16: {
        const uint16_t *src = (const uint16_t *)value->data + off;
        SPA_MSDA_ROW(spa_bf16_widen_run(row, src, cl), row[c] = spa_bf16_to_f32(src[c * cs]));
        break;
    }
    default: {
        const float *src = (const float *)value->data + off;
        SPA_MSDA_ROW(spa_f32_copy_run(row, src, cl), row[c] = src[c * cs]);
        break;
    }
    }
}

/* The pack loops over keys and heads with the row call chosen once: src (T
 * elements) and row stepped, not multiplied, in native-width strides (the
 * steps between elements of tensors in memory; 64-bit arithmetic costs a
 * few instructions each on 32-bit cores), never a step past the last key or
 * head. */
#define SPA_MSDA_PACK(T, row_call)                                                             \
    do {                                                                                       \
        const ptrdiff_t s1 = (ptrdiff_t)value->strides[1], s2 = (ptrdiff_t)value->strides[2]; \
        const ptrdiff_t heads = (ptrdiff_t)nh, row_step = (ptrdiff_t)(nk * cl);                \
        const T *key = (const T *)value->data + b * value->strides[0] + k0 * value->strides[1]; \
        for (int64_t k = k0; k < k1; k++) {                                                    \
            const T *src = key;                                                                \
            float *row = dst + k * cl;                                                         \
            for (ptrdiff_t h = 0; h < heads; h++) {                                            \
                row_call;                                                                      \
                if (h + 1 < heads) {                                                           \
                    src += s2;                                                                 \
                    row += row_step;                                                           \
                }                                                                              \
            }                                                                                  \
            if (k + 1 < k1)                                                                    \
                key += s1;                                                                     \
        }                                                                                      \
    } while (0)

/* value[b, k0:k1, :, :] widened into the pair slices of batch b: head h's
 * row k at dst + (h * nk + k) * C (f32). */
static void spa_msda_pack_keys(const spa_tensor *value, int64_t b, int64_t k0, int64_t k1,
                               float *dst)
{
    const int64_t nk = value->dims[1], nh = value->dims[2], cl = value->dims[3];
    if (value->strides[3] != 1) {
        /* strided rows, element by element (the dtype chosen per row) */
        for (int64_t k = k0; k < k1; k++)
            for (int64_t h = 0; h < nh; h++)
                spa_msda_widen_row(value, b * value->strides[0] + k * value->strides[1] + h * value->strides[2],
                                   dst + (h * nk + k) * cl);
        return;
    }
    /* unit-stride rows: one run of the layer per row */
    switch (value->dtype) {
    case SPA_FLOAT16:
        SPA_MSDA_PACK(uint16_t, spa_f16_widen_run(row, src, cl));
        break;
    case SPA_BFLOAT16:
        SPA_MSDA_PACK(uint16_t, spa_bf16_widen_run(row, src, cl));
        break;
    default:
        SPA_MSDA_PACK(float, spa_f32_copy_run(row, src, cl));
        break;
    }
}
#undef SPA_MSDA_PACK

/* row (f32, C channels) into grad_value at element offset off, one RNE rounding. */
static void spa_msda_narrow_row(const float *row, const spa_tensor *gv, int64_t off)
{
    const int64_t cl = gv->dims[3], cs = gv->strides[3];
    switch (gv->dtype) {
    case SPA_FLOAT16: {
        uint16_t *dst = (uint16_t *)gv->data + off;
        if (cs == 1) /* in hardware where the target has it (RNE, like spa_f32_to_f16) */
            spa_f16_narrow_run(dst, row, cl);
        else
            for (int64_t c = 0; c < cl; c++)
                dst[c * cs] = spa_f32_to_f16(row[c]);
        break;
    }
    case SPA_BFLOAT16: {
        uint16_t *dst = (uint16_t *)gv->data + off;
        SPA_MSDA_ROW(spa_bf16_narrow_run(dst, row, cl), dst[c * cs] = spa_f32_to_bf16(row[c]));
        break;
    }
    default: {
        float *dst = (float *)gv->data + off;
        SPA_MSDA_ROW(spa_f32_copy_run(dst, row, cl), dst[c * cs] = row[c]);
        break;
    }
    }
}

/* The pair slices of batch b (head h's row k at src + (h * nk + k) * C)
 * into grad_value[b, k0:k1, :, :], one RNE rounding. */
static void spa_msda_unpack_keys(const float *src, const spa_tensor *grad_value, int64_t b,
                                 int64_t k0, int64_t k1)
{
    const spa_tensor *gv = grad_value;
    const int64_t nk = gv->dims[1], nh = gv->dims[2], cl = gv->dims[3];
    for (int64_t k = k0; k < k1; k++)
        for (int64_t h = 0; h < nh; h++)
            spa_msda_narrow_row(src + (h * nk + k) * cl, gv,
                                b * gv->strides[0] + k * gv->strides[1] + h * gv->strides[2]);
}

/* Packing unit u of a tensor of nk keys: batch *b, keys [*k0, *k1). */
static void key_run(int64_t u, int64_t nk, int64_t *b, int64_t *k0, int64_t *k1)
{
    const int64_t runs = (nk + SPA_MSDA_PACK_KEYS - 1) / SPA_MSDA_PACK_KEYS;
    *b = spa_div_nat(u, runs);
    *k0 = spa_mod_nat(u, runs) * SPA_MSDA_PACK_KEYS;
    *k1 = *k0 + SPA_MSDA_PACK_KEYS < nk ? *k0 + SPA_MSDA_PACK_KEYS : nk;
}

void spa_msda_pack_units(const spa_tensor *value, int64_t u0, int64_t u1, float *pack)
{
    const int64_t batch_floats = value->dims[2] * value->dims[1] * value->dims[3];
    for (int64_t u = u0; u < u1; u++) {
        int64_t b, k0, k1;
        key_run(u, value->dims[1], &b, &k0, &k1);
        spa_msda_pack_keys(value, b, k0, k1, pack + b * batch_floats);
    }
}

void spa_msda_unpack_units(const float *pack, const spa_tensor *grad_value, int64_t u0, int64_t u1)
{
    const int64_t batch_floats = grad_value->dims[2] * grad_value->dims[1] * grad_value->dims[3];
    for (int64_t u = u0; u < u1; u++) {
        int64_t b, k0, k1;
        key_run(u, grad_value->dims[1], &b, &k0, &k1);
        spa_msda_unpack_keys(pack + b * batch_floats, grad_value, b, k0, k1);
    }
}
