/* The float64 path of MultiScaleDeformableAttnFunction and its grad
 * (msda_f64.h): the workspace layout, value packed into double pair slices,
 * the parallel steps and the gradValue slices stored back. Each step splits
 * fixed units into contiguous block ranges (spa_msda_split) and every sum
 * stays inside one unit, so the results do not depend on the runner. */
#include "msda_f64.h"

#include "msda_plan.h"
#include "spa_kernels.h"

#if SPA_HAVE_F64

/* Queries per forward unit (pair, tile of queries): enough units to share a
 * few pairs among the blocks. */
enum { F64_TILE_QUERIES = 16 };

typedef struct f64_layout {
    uint64_t args, zero, scratch, vpack, gacc, total; /* byte offsets, 64-aligned */
    uint64_t scratch_bytes;                           /* per block */
    int64_t units, per_block;                         /* forward: (pair, tile); grad: pairs */
    uint32_t blocks;
    int64_t pairs, pack_per_block;
    uint32_t pack_blocks;
} f64_layout;

static bool add64(uint64_t *at, uint64_t n, uint64_t elem, uint64_t *off)
{
    if (elem != 0 && n > (UINT64_MAX / 4) / elem)
        return false;
    const uint64_t bytes = (n * elem + 63) / 64 * 64;
    if (*at > UINT64_MAX / 4 - bytes)
        return false;
    *off = *at;
    *at += bytes;
    return true;
}

static bool layout(int64_t bs, int64_t nk, int64_t nh, int64_t c, int64_t nq, int64_t nl, int64_t np, bool grad,
                   f64_layout *o)
{
    int64_t nlp, slice, pairs, tiles;
    memset(o, 0, sizeof *o);
    if (!spa_mul_ok(nl, np, &nlp) || !spa_mul_ok(nk, c, &slice) || !spa_mul_ok(bs, nh, &pairs))
        return false;
    tiles = (nq + F64_TILE_QUERIES - 1) / F64_TILE_QUERIES;
    o->pairs = pairs;
    if (grad) {
        o->units = pairs;
        o->scratch_bytes = 2 * (uint64_t)c * sizeof(double);
    } else {
        if (!spa_mul_ok(pairs, tiles, &o->units))
            return false;
        if ((uint64_t)nlp > UINT64_MAX / 8 / sizeof(spa_msda_f64_sample) || (uint64_t)c > UINT64_MAX / 64)
            return false;
        o->scratch_bytes = (uint64_t)nlp * sizeof(spa_msda_f64_sample) + (uint64_t)c * sizeof(double);
    }
    o->scratch_bytes = (o->scratch_bytes + 63) / 64 * 64;
    o->per_block = spa_msda_split(o->units, &o->blocks);
    o->pack_per_block = spa_msda_split(pairs, &o->pack_blocks);
    if ((uint64_t)slice > UINT64_MAX / 16 / (uint64_t)(pairs > 0 ? pairs : 1))
        return false;
    const uint64_t packed = (uint64_t)pairs * (uint64_t)slice;
    uint64_t at = 0;
    bool ok = add64(&at, 1, sizeof(spa_msda_f64_args), &o->args) && add64(&at, (uint64_t)c, sizeof(double), &o->zero) &&
              add64(&at, o->blocks, o->scratch_bytes, &o->scratch) && add64(&at, packed, sizeof(double), &o->vpack);
    if (ok && grad)
        ok = add64(&at, packed, sizeof(double), &o->gacc);
    o->total = at;
    return ok;
}

bool spa_msda_f64_bytes(int64_t bs, int64_t nk, int64_t nh, int64_t c, int64_t nq, int64_t nl, int64_t np,
                        bool grad, uint64_t *bytes)
{
    f64_layout o;
    if (!layout(bs, nk, nh, c, nq, nl, np, grad, &o))
        return false;
    *bytes = o.total;
    return true;
}

/* value[b, :, h, :] widened into the pair slice dst [nk][C]. */
static void pack_pair(const spa_tensor *value, int64_t b, int64_t h, double *dst)
{
    const int64_t nk = value->dims[1], cl = value->dims[3], cs = value->strides[3];
    for (int64_t k = 0; k < nk; k++) {
        const int64_t off = b * value->strides[0] + k * value->strides[1] + h * value->strides[2];
        double *row = dst + k * cl;
        if (value->dtype == SPA_FLOAT64 && cs == 1)
            memcpy(row, (const double *)value->data + off, (size_t)cl * sizeof(double));
        else
            for (int64_t c = 0; c < cl; c++)
                row[c] = spa_msda_f64_get(value->data, value->dtype, off + c * cs);
    }
}

/* The pair slice src into grad_value[b, :, h, :], one rounding per element. */
static void unpack_pair(const double *src, const spa_tensor *gv, int64_t b, int64_t h)
{
    const int64_t nk = gv->dims[1], cl = gv->dims[3], cs = gv->strides[3];
    for (int64_t k = 0; k < nk; k++) {
        const int64_t off = b * gv->strides[0] + k * gv->strides[1] + h * gv->strides[2];
        const double *row = src + k * cl;
        if (gv->dtype == SPA_FLOAT64 && cs == 1)
            memcpy((double *)gv->data + off, row, (size_t)cl * sizeof(double));
        else
            for (int64_t c = 0; c < cl; c++)
                spa_msda_f64_put(gv->data, gv->dtype, off + c * cs, row[c]);
    }
}

typedef struct f64_run {
    f64_layout o;
    unsigned char *ws;
    const spa_msda_f64_args *args;
    const spa_tensor *value, *grad_value;
} f64_run;

static double *pair_slice(const f64_run *r, uint64_t base, int64_t pair)
{
    return (double *)(void *)(r->ws + base) + (uint64_t)pair * (uint64_t)(r->args->nk * r->args->c);
}

static void range(int64_t per_block, int64_t units, uint32_t blk, int64_t *first, int64_t *end)
{
    *first = (int64_t)blk * per_block;
    *end = *first + per_block < units ? *first + per_block : units;
}

static void run_pack(void *arg, uint32_t blk)
{
    const f64_run *r = arg;
    int64_t pair, end;
    for (range(r->o.pack_per_block, r->o.pairs, blk, &pair, &end); pair < end; pair++)
        pack_pair(r->value, pair / r->args->nh, pair % r->args->nh, pair_slice(r, r->o.vpack, pair));
}

static void run_forward(void *arg, uint32_t blk)
{
    const f64_run *r = arg;
    const spa_msda_f64_args *a = r->args;
    const int64_t tiles = (a->nq + F64_TILE_QUERIES - 1) / F64_TILE_QUERIES;
    void *scratch = r->ws + r->o.scratch + (uint64_t)blk * r->o.scratch_bytes;
    int64_t u, end;
    /* tile-major: the heads of one batch and query tile one after another,
     * so that their location, weight and output rows are read and written
     * while in cache */
    for (range(r->o.per_block, r->o.units, blk, &u, &end); u < end; u++) {
        const int64_t h = u % a->nh, bt = u / a->nh, b = bt / tiles, q0 = bt % tiles * F64_TILE_QUERIES;
        const int64_t q1 = q0 + F64_TILE_QUERIES < a->nq ? q0 + F64_TILE_QUERIES : a->nq;
        SPA_K_MSDA_F64(a, b, h, pair_slice(r, r->o.vpack, b * a->nh + h), q0, q1, scratch);
    }
}

/* The grad's whole work for a pair: pack, zero, accumulate, store back. */
static void run_backward(void *arg, uint32_t blk)
{
    const f64_run *r = arg;
    const spa_msda_f64_args *a = r->args;
    void *scratch = r->ws + r->o.scratch + (uint64_t)blk * r->o.scratch_bytes;
    int64_t pair, end;
    for (range(r->o.per_block, r->o.units, blk, &pair, &end); pair < end; pair++) {
        const int64_t b = pair / a->nh, h = pair % a->nh;
        double *v = pair_slice(r, r->o.vpack, pair), *g = pair_slice(r, r->o.gacc, pair);
        pack_pair(r->value, b, h, v);
        memset(g, 0, (size_t)(a->nk * a->c) * sizeof(double));
        SPA_K_MSDA_GRAD_F64(a, b, h, v, g, scratch);
        unpack_pair(g, r->grad_value, b, h);
    }
}

/* The arguments shared by both ops, in the workspace. */
static spa_msda_f64_args *args_init(f64_run *r, void *ws, const spa_tensor *value, const spa_tensor *location,
                                    const spa_tensor *attn_weight, const spa_msda_level *lv, bool grad)
{
    (void)layout(value->dims[0], value->dims[1], value->dims[2], value->dims[3], location->dims[1],
                 location->dims[3], location->dims[4], grad, &r->o); /* checked by phase 1 */
    r->ws = ws;
    spa_msda_f64_args *a = (spa_msda_f64_args *)(void *)(r->ws + r->o.args);
    memset(a, 0, sizeof *a);
    a->loc = location->data;
    a->loc_dt = location->dtype;
    memcpy(a->ls, location->strides, sizeof a->ls);
    a->attn = attn_weight->data;
    a->attn_dt = attn_weight->dtype;
    memcpy(a->as, attn_weight->strides, sizeof a->as);
    a->nk = value->dims[1];
    a->nh = value->dims[2];
    a->c = value->dims[3];
    a->nq = location->dims[1];
    a->nl = location->dims[3];
    a->np = location->dims[4];
    a->lv = lv;
    double *zero = (double *)(void *)(r->ws + r->o.zero);
    for (int64_t c = 0; c < a->c; c++)
        zero[c] = 0.0;
    a->zero = zero;
    r->args = a;
    r->value = value;
    return a;
}

void spa_msda_f64_forward(const spa_tensor *value, const spa_tensor *location, const spa_tensor *attn_weight,
                          const spa_tensor *output, const spa_msda_level *lv, void *ws, const spa_runner *rn)
{
    f64_run r;
    spa_msda_f64_args *a = args_init(&r, ws, value, location, attn_weight, lv, false);
    a->out = output->data;
    a->out_dt = output->dtype;
    memcpy(a->os, output->strides, sizeof a->os);
    spa_run_blocks(rn, run_pack, &r, r.o.pack_blocks);
    spa_run_blocks(rn, run_forward, &r, r.o.blocks);
}

void spa_msda_f64_backward(const spa_tensor *value, const spa_tensor *location, const spa_tensor *attn_weight,
                           const spa_tensor *grad_output, const spa_tensor *grad_value,
                           const spa_tensor *grad_location, const spa_tensor *grad_attn_weight,
                           const spa_msda_level *lv, void *ws, const spa_runner *rn)
{
    f64_run r;
    spa_msda_f64_args *a = args_init(&r, ws, value, location, attn_weight, lv, true);
    a->gout = grad_output->data;
    a->gout_dt = grad_output->dtype;
    memcpy(a->gos, grad_output->strides, sizeof a->gos);
    a->gloc = grad_location->data;
    a->gloc_dt = grad_location->dtype;
    memcpy(a->gls, grad_location->strides, sizeof a->gls);
    a->gattn = grad_attn_weight->data;
    a->gattn_dt = grad_attn_weight->dtype;
    memcpy(a->gas, grad_attn_weight->strides, sizeof a->gas);
    r.grad_value = grad_value;
    spa_run_blocks(rn, run_backward, &r, r.o.blocks);
}

#else
/* A build without float64 kernels (DTYPES without f64): the ops refuse
 * float64 in phase 1 (src/core/f64.h), so nothing here is ever reached. */
bool spa_msda_f64_bytes(int64_t bs, int64_t nk, int64_t nh, int64_t c, int64_t nq, int64_t nl, int64_t np,
                        bool grad, uint64_t *bytes)
{
    (void)bs, (void)nk, (void)nh, (void)c, (void)nq, (void)nl, (void)np, (void)grad;
    *bytes = 0;
    return false;
}
void spa_msda_f64_forward(const spa_tensor *value, const spa_tensor *location, const spa_tensor *attn_weight,
                          const spa_tensor *output, const spa_msda_level *lv, void *ws, const spa_runner *rn)
{
    (void)value, (void)location, (void)attn_weight, (void)output, (void)lv, (void)ws, (void)rn;
}
void spa_msda_f64_backward(const spa_tensor *value, const spa_tensor *location, const spa_tensor *attn_weight,
                           const spa_tensor *grad_output, const spa_tensor *grad_value,
                           const spa_tensor *grad_location, const spa_tensor *grad_attn_weight,
                           const spa_msda_level *lv, void *ws, const spa_runner *rn)
{
    (void)value, (void)location, (void)attn_weight, (void)grad_output, (void)grad_value, (void)grad_location;
    (void)grad_attn_weight, (void)lv, (void)ws, (void)rn;
}
#endif
