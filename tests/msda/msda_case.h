/* Random MultiScaleDeformableAttn problems shared by the forward and grad suites. */
#ifndef SPA_TEST_MSDA_CASE_H
#define SPA_TEST_MSDA_CASE_H

#include "ref/ref_msda.h"
#include "util.h"

#define MSDA_MAX_LEVELS 40

/* Random cases per sweep (fewer on small targets). */
#define MSDA_RANDOM_CASES TEST_COUNT(64, 16)

/* How locations are drawn. */
enum {
    LOC_UNIFORM = 0, /* uniform in [-0.3, 1.3]: inside, half-pixel border band and outside */
    LOC_SPECIAL = 1, /* half of them on grid points, map borders, +-0.5/W, 0 and 1 */
    LOC_NONFINITE = 2 /* LOC_SPECIAL plus NaN, +-Inf and huge values */
};

typedef struct msda_case {
    /* dtypes: value, location, attnWeight, output or gradOutput; grad outputs; indices */
    spa_dtype vdt, ldt, adt, odt, gvdt, gldt, gadt, idt;
    int64_t bs, nk, nh, c, nq, nl, np;
    int64_t h[MSDA_MAX_LEVELS], w[MSDA_MAX_LEVELS], start[MSDA_MAX_LEVELS];
    int loc_mode;
    bool strided;
} msda_case;

/* Every tensor of one call; the grad ones only when `grad`. */
typedef struct msda_io {
    ttensor value, ss, lsi, loc, attn, out; /* out: output (forward) or gradOutput (grad) */
    ttensor gv, gl, ga;
    bool grad;
} msda_io;

/* Case number i of a sweep: C runs through 8..256 every 32 cases (every
 * fifth case a few channels less: tails), dtypes every 3 (mixed tensor by
 * tensor in every other grad case and every third forward one), the rest
 * drawn from r: heads, levels and points 1..16 (mostly small; up to 20 every
 * eighth case), queries 32..45 (1..40 every fourth case), level sizes 1..13,
 * starts packed, with gaps or overlapping, INT32 or INT64 indices, strided
 * views. */
void msda_case_draw(msda_case *c, int i, rng *r, bool grad);
/* A fixed shape: one dtype everywhere, levels h[l] x w[l] packed from key 0. */
void msda_case_fixed(msda_case *c, spa_dtype dt, int64_t bs, int64_t nh, int64_t ch, int64_t nq,
                     int64_t nl, const int64_t *h, const int64_t *w, int64_t np);
void msda_io_make(msda_io *io, const msda_case *c, rng *r, bool grad);
void msda_io_free(msda_io *io);
bool msda_io_guards_ok(const msda_io *io);
ref_msda_shape msda_case_shape(const msda_case *c);
void msda_case_describe(const msda_case *c, char *buf, size_t size);
/* Stores v (exact, or truncated towards zero) into element `flat` of a float tensor. */
void msda_set_float(ttensor *t, int64_t flat, double v);



/* check_close with the dtype's tolerance, plus half an f16 subnormal ulp
 * (2^-25) of absolute slack where the reference is below the f16 normal range. */
int64_t msda_check(const char *what, spa_dtype dt, double f32_atol, double *got, const double *ref,
                   const double *mag, int64_t n);
#endif
