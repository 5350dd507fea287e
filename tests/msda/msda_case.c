#include "msda_case.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const spa_dtype float_dts[3] = {SPA_FLOAT32, SPA_FLOAT16, SPA_BFLOAT16};

/* Mostly small, sometimes the maximum. */
static int64_t draw_count(rng *r, int64_t max)
{
    int64_t k = rng_int(r, 0, 9);
    return k == 0 ? max : k < 6 ? rng_int(r, 1, 3) : rng_int(r, 1, max);
}

static void finish_levels(msda_case *c, rng *r, int packing)
{
    int64_t sum = 0;
    for (int64_t l = 0; l < c->nl; l++) {
        c->start[l] = sum;
        sum += c->h[l] * c->w[l];
    }
    c->nk = sum;
    if (packing == 1) { /* gaps: room after every level */
        int64_t s = 0;
        for (int64_t l = 0; l < c->nl; l++) {
            s += rng_int(r, 0, 5);
            c->start[l] = s;
            s += c->h[l] * c->w[l];
        }
        c->nk = s + rng_int(r, 0, 3);
    } else if (packing == 2) { /* any start that fits: levels may overlap */
        for (int64_t l = 0; l < c->nl; l++)
            c->start[l] = rng_int(r, 0, c->nk - c->h[l] * c->w[l]);
    }
}

void msda_case_draw(msda_case *c, int i, rng *r, bool grad)
{
    memset(c, 0, sizeof *c);
    c->vdt = float_dts[i % 3];
    c->ldt = c->adt = c->odt = c->gvdt = c->gldt = c->gadt = c->vdt;
    if (grad ? i % 2 == 1 : i % 3 == 2) { /* both take any mix of float dtypes */
        spa_dtype *d[6] = {&c->ldt, &c->adt, &c->odt, &c->gvdt, &c->gldt, &c->gadt};
        for (int k = 0; k < 6; k++)
            *d[k] = float_dts[rng_int(r, 0, 2)];
    }
    c->idt = rng_int(r, 0, 1) ? SPA_INT64 : SPA_INT32;
    c->c = 8 * (1 + i % 32) - (i % 5 == 4 ? rng_int(r, 1, 7) : 0);
    c->bs = rng_int(r, 1, 2);
    const int64_t most = i % 8 == 7 ? 20 : 16;
    c->nh = draw_count(r, most);
    c->nl = draw_count(r, most);
    c->np = draw_count(r, most);
    /* keep every case small: samples x channels bounded */
    while (c->nh * c->nl * c->np * c->c > 16384) {
        if (c->np > 1)
            c->np = (c->np + 1) / 2;
        else if (c->nl > 1)
            c->nl = (c->nl + 1) / 2;
        else
            c->nh = (c->nh + 1) / 2;
    }
    c->nq = i % 4 == 3 ? rng_int(r, 1, 40) : rng_int(r, 32, 45);
    for (int64_t l = 0; l < c->nl; l++) {
        c->h[l] = rng_int(r, 1, 13);
        c->w[l] = rng_int(r, 1, 13);
    }
    /* and the maps: at most ~64K value elements */
    for (bool big = true; big;) {
        int64_t keys = 0;
        for (int64_t l = 0; l < c->nl; l++)
            keys += c->h[l] * c->w[l];
        big = keys > c->nl && keys * c->nh * c->c > 65536;
        for (int64_t l = 0; big && l < c->nl; l++) {
            c->h[l] = (c->h[l] + 1) / 2;
            c->w[l] = (c->w[l] + 1) / 2;
        }
    }
    finish_levels(c, r, (int)rng_int(r, 0, 2));
    c->loc_mode = (int)rng_int(r, 0, 2);
    c->strided = rng_int(r, 0, 2) == 0;
}

void msda_case_fixed(msda_case *c, spa_dtype dt, int64_t bs, int64_t nh, int64_t ch, int64_t nq,
                     int64_t nl, const int64_t *h, const int64_t *w, int64_t np)
{
    memset(c, 0, sizeof *c);
    c->vdt = c->ldt = c->adt = c->odt = c->gvdt = c->gldt = c->gadt = dt;
    c->idt = SPA_INT64;
    c->bs = bs, c->nh = nh, c->c = ch, c->nq = nq, c->nl = nl, c->np = np;
    for (int64_t l = 0; l < nl; l++) {
        c->h[l] = h[l];
        c->w[l] = w[l];
    }
    finish_levels(c, NULL, 0);
    c->loc_mode = LOC_UNIFORM;
}

void msda_set_float(ttensor *t, int64_t flat, double v)
{
    if (t->t.dtype == SPA_FLOAT64) { /* exact */
        memcpy((unsigned char *)t->t.data + tt_offset(t, flat) * 8, &v, 8);
        return;
    }
    unsigned char *p = (unsigned char *)t->t.data + tt_offset(t, flat) * (t->t.dtype == SPA_FLOAT32 ? 4 : 2);
    float f = (float)v;
    uint32_t u;
    memcpy(&u, &f, 4);
    if (t->t.dtype == SPA_FLOAT32) {
        memcpy(p, &f, 4);
    } else if (t->t.dtype == SPA_BFLOAT16) {
        uint16_t h = (uint16_t)(u >> 16);
        if (isnan(f))
            h = 0x7FC0;
        memcpy(p, &h, 2);
    } else {
        uint16_t h;
        double a = fabs(v);
        if (isnan(v))
            h = 0x7E00;
        else if (a >= 65520.0)
            h = 0x7C00;
        else if (a >= 0x1p-14) {
            int e;
            double m = frexp(a, &e);
            h = (uint16_t)(((e + 14) << 10) | ((int)(m * 2048.0) - 1024));
        } else {
            h = (uint16_t)(a * 0x1p24);
        }
        if (signbit(v))
            h |= 0x8000;
        memcpy(p, &h, 2);
    }
}

/* A normalised coordinate for a map of `size` cells. */
static double special_coord(rng *r, int64_t size, int mode)
{
    const double n = (double)size;
    switch (rng_int(r, 0, mode == LOC_NONFINITE ? 11 : 8)) {
    case 0: return 0.0;
    case 1: return 1.0;
    case 2: return -0.5 / n;               /* x = -1: just outside */
    case 3: return 1.0 + 0.5 / n;          /* x = W: just outside */
    case 4: return 0.5 / n;                /* x = 0: first column */
    case 5: return 1.0 - 0.5 / n;          /* x = W-1: last column */
    case 6:
    case 7: return ((double)rng_int(r, 0, size - 1) + 0.5) / n; /* on a grid point */
    case 8: return ((double)rng_int(r, -1, size) + rng_unit(r)) / n; /* any cell, border band */
    case 9: return rng_int(r, 0, 1) ? INFINITY : -INFINITY;
    case 10: return NAN;
    default: return rng_int(r, 0, 1) ? 1e30 : -3e9;
    }
}

static void fill_locations(msda_io *io, const msda_case *c, rng *r)
{
    tt_fill_random(&io->loc, r, -0.3, 1.3);
    if (c->loc_mode == LOC_UNIFORM)
        return;
    const int64_t n = tt_numel(&io->loc);
    for (int64_t i = 0; i < n; i += 2) {
        if (rng_int(r, 0, 1))
            continue;
        const int64_t l = (i / 2 / c->np) % c->nl;
        msda_set_float(&io->loc, i, special_coord(r, c->w[l], c->loc_mode));
        msda_set_float(&io->loc, i + 1, special_coord(r, c->h[l], c->loc_mode));
    }
}

void msda_io_make(msda_io *io, const msda_case *c, rng *r, bool grad)
{
    memset(io, 0, sizeof *io);
    io->grad = grad;
    const int64_t vd[4] = {c->bs, c->nk, c->nh, c->c}, ssd[2] = {c->nl, 2}, lsid[1] = {c->nl};
    const int64_t ld[6] = {c->bs, c->nq, c->nh, c->nl, c->np, 2};
    const int64_t ad[5] = {c->bs, c->nq, c->nh, c->nl, c->np}, od[3] = {c->bs, c->nq, c->nh * c->c};
    tt_make(&io->value, c->vdt, 4, vd, c->strided, r);
    tt_make(&io->ss, c->idt, 2, ssd, c->strided, r);
    tt_make(&io->lsi, c->idt, 1, lsid, c->strided, r);
    tt_make(&io->loc, c->ldt, 6, ld, c->strided, r);
    tt_make(&io->attn, c->adt, 5, ad, c->strided, r);
    tt_make(&io->out, c->odt, 3, od, c->strided, r);
    tt_fill_random(&io->value, r, -1.0, 1.0);
    tt_fill_random(&io->attn, r, -1.0, 1.0);
    fill_locations(io, c, r);
    for (int64_t l = 0; l < c->nl; l++) {
        tt_set_int(&io->ss, 2 * l, c->h[l]);
        tt_set_int(&io->ss, 2 * l + 1, c->w[l]);
        tt_set_int(&io->lsi, l, c->start[l]);
    }
    if (grad) {
        tt_fill_random(&io->out, r, -1.0, 1.0);
        tt_make(&io->gv, c->gvdt, 4, vd, c->strided, r);
        tt_make(&io->gl, c->gldt, 6, ld, c->strided, r);
        tt_make(&io->ga, c->gadt, 5, ad, c->strided, r);
    }
}

void msda_io_free(msda_io *io)
{
    ttensor *all[9] = {&io->value, &io->ss, &io->lsi, &io->loc, &io->attn, &io->out, &io->gv, &io->gl, &io->ga};
    for (int k = 0; k < 9; k++)
        if (all[k]->block)
            tt_free(all[k]);
}

bool msda_io_guards_ok(const msda_io *io)
{
    const ttensor *all[9] = {&io->value, &io->ss, &io->lsi, &io->loc, &io->attn, &io->out, &io->gv, &io->gl, &io->ga};
    for (int k = 0; k < 9; k++)
        if (all[k]->block && !tt_guard_ok(all[k]))
            return false;
    return true;
}

ref_msda_shape msda_case_shape(const msda_case *c)
{
    ref_msda_shape s = {c->bs, c->nk, c->nh, c->c, c->nq, c->nl, c->np, c->h, c->w, c->start};
    return s;
}

void msda_case_describe(const msda_case *c, char *buf, size_t size)
{
    int k = snprintf(buf, size,
                     "v=%s loc=%s attn=%s out=%s gv=%s gl=%s ga=%s idx=%s bs=%lld nk=%lld nh=%lld "
                     "C=%lld nq=%lld nl=%lld np=%lld loc_mode=%d%s levels=",
                     dtype_name(c->vdt), dtype_name(c->ldt), dtype_name(c->adt), dtype_name(c->odt),
                     dtype_name(c->gvdt), dtype_name(c->gldt), dtype_name(c->gadt), dtype_name(c->idt),
                     (long long)c->bs, (long long)c->nk, (long long)c->nh, (long long)c->c,
                     (long long)c->nq, (long long)c->nl, (long long)c->np, c->loc_mode,
                     c->strided ? " strided" : "");
    for (int64_t l = 0; l < c->nl && k > 0 && (size_t)k < size; l++)
        k += snprintf(buf + k, size - (size_t)k, "%lldx%lld@%lld,", (long long)c->h[l],
                      (long long)c->w[l], (long long)c->start[l]);
}

int64_t msda_check(const char *what, spa_dtype dt, double f32_atol, double *got, const double *ref,
                   const double *mag, int64_t n)
{
    if (dt == SPA_FLOAT16)
        for (int64_t i = 0; i < n; i++)
            if (mag[i] != 0.0 && fabs(ref[i]) < 0x1p-14 && fabs(got[i] - ref[i]) <= 0x1p-25)
                got[i] = ref[i];
    return check_close(what, got, ref, mag, n, tol_for(dt, f32_atol));
}
