/* fp64 reference of spec/msda.md 5 and 6: one sample at a time, corners
 * outside the map read as 0, samples outside (-1, W) x (-1, H) skipped. A
 * location with a NaN coordinate samples the map at NaN: the sample is NaN
 * in every channel (so is the query's output row), its location and weight
 * gradients are NaN, and no corner gets a gradValue share (which pixels it
 * would reach is undefined). An infinite location is off the map: skipped. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif
#include "ref_msda.h"

#include <math.h>
#include <string.h>

/* One sample: its four corners (key or -1 when outside) and weights, or
 * live = 0 when the range check fails (NaN and Inf included); nan: a
 * coordinate is NaN. */
typedef struct ref_sample {
    int live, nan;
    int64_t key[4];
    double w[4], lx, ly;
} ref_sample;

static double coord(double loc, int64_t size, int mode)
{
    if (mode == REF_COORD_EXACT)
        return loc * (double)size - 0.5;
    volatile float prod = (float)loc * (float)size; /* rounded to fp32, then shifted */
    volatile float shifted = prod - 0.5f;
    return shifted;
}

static ref_sample sample_at(const ref_msda_shape *s, int64_t l, double lx_in, double ly_in, int mode)
{
    ref_sample r;
    memset(&r, 0, sizeof r);
    const int64_t hh = s->h[l], ww = s->w[l];
    const double x = coord(lx_in, ww, mode), y = coord(ly_in, hh, mode);
    r.nan = isnan(lx_in) || isnan(ly_in);
    if (!(x > -1.0 && y > -1.0 && x < (double)ww && y < (double)hh))
        return r;
    r.live = 1;
    const double x0 = floor(x), y0 = floor(y);
    r.lx = x - x0;
    r.ly = y - y0;
    const double hx = 1.0 - r.lx, hy = 1.0 - r.ly;
    const int64_t xi[2] = {(int64_t)x0, (int64_t)x0 + 1}, yi[2] = {(int64_t)y0, (int64_t)y0 + 1};
    const double wy[2] = {hy, r.ly}, wx[2] = {hx, r.lx};
    for (int cy = 0; cy < 2; cy++)
        for (int cx = 0; cx < 2; cx++) {
            const int k = cy * 2 + cx;
            const int inside = yi[cy] >= 0 && yi[cy] < hh && xi[cx] >= 0 && xi[cx] < ww;
            r.key[k] = inside ? s->start[l] + yi[cy] * ww + xi[cx] : -1;
            r.w[k] = wy[cy] * wx[cx];
        }
    return r;
}

static int64_t sample_index(const ref_msda_shape *s, int64_t b, int64_t q, int64_t h, int64_t l,
                            int64_t p)
{
    return (((b * s->nq + q) * s->nh + h) * s->nl + l) * s->np + p;
}

static double corner_value(const ref_msda_shape *s, const double *value, int64_t b, int64_t key,
                           int64_t h, int64_t c)
{
    return key < 0 ? 0.0 : value[((b * s->nk + key) * s->nh + h) * s->c + c];
}

void ref_msda(const ref_msda_shape *s, const double *value, const double *loc, const double *attn,
              int coord_mode, double *out, double *mag)
{
    const int64_t n = s->bs * s->nq * s->nh * s->c;
    for (int64_t i = 0; i < n; i++)
        out[i] = mag[i] = 0.0;
    for (int64_t b = 0; b < s->bs; b++)
        for (int64_t q = 0; q < s->nq; q++)
            for (int64_t h = 0; h < s->nh; h++)
                for (int64_t l = 0; l < s->nl; l++)
                    for (int64_t p = 0; p < s->np; p++) {
                        const int64_t si = sample_index(s, b, q, h, l, p);
                        const ref_sample r = sample_at(s, l, loc[2 * si], loc[2 * si + 1], coord_mode);
                        double *o = out + ((b * s->nq + q) * s->nh + h) * s->c;
                        double *m = mag + ((b * s->nq + q) * s->nh + h) * s->c;
                        if (r.nan)
                            for (int64_t c = 0; c < s->c; c++)
                                o[c] += NAN;
                        if (!r.live)
                            continue;
                        const double a = attn[si];
                        for (int64_t c = 0; c < s->c; c++) {
                            double samp = 0.0, samp_mag = 0.0;
                            for (int k = 0; k < 4; k++) {
                                const double v = corner_value(s, value, b, r.key[k], h, c);
                                samp += r.w[k] * v;
                                samp_mag += fabs(r.w[k] * v);
                            }
                            o[c] += a * samp;
                            m[c] += fabs(a) * samp_mag;
                        }
                    }
}

void ref_msda_grad(const ref_msda_shape *s, const double *value, const double *loc,
                   const double *attn, const double *gout, int coord_mode, double *gv,
                   double *gv_mag, double *gl, double *gl_mag, double *ga, double *ga_mag)
{
    const int64_t nv = s->bs * s->nk * s->nh * s->c, ns = s->bs * s->nq * s->nh * s->nl * s->np;
    for (int64_t i = 0; i < nv; i++)
        gv[i] = gv_mag[i] = 0.0;
    for (int64_t b = 0; b < s->bs; b++)
        for (int64_t q = 0; q < s->nq; q++)
            for (int64_t h = 0; h < s->nh; h++)
                for (int64_t l = 0; l < s->nl; l++)
                    for (int64_t p = 0; p < s->np; p++) {
                        const int64_t si = sample_index(s, b, q, h, l, p);
                        const ref_sample r = sample_at(s, l, loc[2 * si], loc[2 * si + 1], coord_mode);
                        double gx = 0, gy = 0, gx_m = 0, gy_m = 0, gA = 0, gA_m = 0;
                        if (r.live) {
                            const double a = attn[si];
                            const double hx = 1.0 - r.lx, hy = 1.0 - r.ly;
                            const double ww = (double)s->w[l], hh = (double)s->h[l];
                            for (int64_t c = 0; c < s->c; c++) {
                                const double g = gout[((b * s->nq + q) * s->nh + h) * s->c + c];
                                const double t = g * a;
                                double v[4];
                                for (int k = 0; k < 4; k++) {
                                    v[k] = corner_value(s, value, b, r.key[k], h, c);
                                    if (r.key[k] >= 0) {
                                        const int64_t vi = ((b * s->nk + r.key[k]) * s->nh + h) * s->c + c;
                                        gv[vi] += r.w[k] * t;
                                        gv_mag[vi] += fabs(r.w[k] * t);
                                    }
                                }
                                /* d samp / dx and d samp / dy of the bilinear interpolant */
                                const double dx = hy * (v[1] - v[0]) + r.ly * (v[3] - v[2]);
                                const double dy = hx * (v[2] - v[0]) + r.lx * (v[3] - v[1]);
                                const double dx_m = hy * (fabs(v[1]) + fabs(v[0])) + r.ly * (fabs(v[3]) + fabs(v[2]));
                                const double dy_m = hx * (fabs(v[2]) + fabs(v[0])) + r.lx * (fabs(v[3]) + fabs(v[1]));
                                double val = 0, val_m = 0;
                                for (int k = 0; k < 4; k++) {
                                    val += r.w[k] * v[k];
                                    val_m += fabs(r.w[k] * v[k]);
                                }
                                gA += g * val;
                                gA_m += fabs(g) * val_m;
                                gx += t * dx * ww;
                                gx_m += fabs(t) * dx_m * ww;
                                gy += t * dy * hh;
                                gy_m += fabs(t) * dy_m * hh;
                            }
                        }
                        if (r.nan)
                            gx = gy = gA = NAN;
                        gl[2 * si] = gx;
                        gl[2 * si + 1] = gy;
                        gl_mag[2 * si] = gx_m;
                        gl_mag[2 * si + 1] = gy_m;
                        ga[si] = gA;
                        ga_mag[si] = gA_m;
                    }
    (void)ns;
}
