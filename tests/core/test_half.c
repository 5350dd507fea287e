/* The f16 / bf16 conversions of src/core/half.h (white-box: every kernel widens
 * and narrows through them): exhaustive widening against the definitions,
 * narrowing against round-to-nearest-even computed in double, and the run
 * (vectorised, streaming) forms equal to the scalar forms bit for bit. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"
#include "nsa_select_mk.h"
#include "ref/ref.h"
#include "util.h"

/* Lengths the compiler cannot see (gcc 12 otherwise reasons about the scalar
 * tails of the vector loops as if they could run forever). */
static volatile int64_t all_patterns = 65536;

static bool same_value(double a, double b)
{
    return (isnan(a) && isnan(b)) || (a == b && signbit(a) == signbit(b));
}

static void test_widen_exhaustive(void)
{
    uint16_t *all = malloc(sizeof(uint16_t) * 65536);
    float *wide = malloc(sizeof(float) * 65536);
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++)
        all[h] = (uint16_t)h;
    spa_f16_widen_run(wide, all, all_patterns);
    for (uint32_t h = 0; h < 65536; h++) {
        bad += !same_value(spa_f16_to_f32((uint16_t)h), ref_f16_to_double((uint16_t)h));
        bad += !same_value(wide[h], ref_f16_to_double((uint16_t)h));
    }
    spa_bf16_widen_run(wide, all, all_patterns);
    for (uint32_t h = 0; h < 65536; h++)
        bad += !same_value(wide[h], ref_bf16_to_double((uint16_t)h));
    CU_ASSERT_EQUAL(bad, 0);
    free(all);
    free(wide);
}

/* Round-to-nearest-even of a finite double to a binary format with `mant`
 * explicit bits, minimum normal exponent `emin` and largest finite `max`. */
static double rne(double v, int mant, int emin, double max)
{
    if (v == 0 || isinf(v))
        return v;
    int e = (int)floor(log2(fabs(v)));
    if (ldexp(1.0, e) > fabs(v)) /* log2 rounding at powers of two */
        e--;
    if (e < emin)
        e = emin;
    double ulp = ldexp(1.0, e - mant);
    double q = nearbyint(v / ulp) * ulp;
    double overflow = max + ldexp(1.0, (int)floor(log2(max)) - mant) / 2; /* halfway above max */
    if (fabs(v) >= overflow)
        return copysign(INFINITY, v);
    return q == 0 ? copysign(0.0, v) : q;
}

static float random_float(rng *r)
{
    uint32_t u = (uint32_t)rng_u64(r);
    switch (rng_int(r, 0, 3)) {
    case 0: /* near the f16 range, ties included */
        u = (u & 0x80000000u) | (uint32_t)rng_int(r, 0x33000000, 0x47800000);
        if (rng_int(r, 0, 3) == 0)
            u = (u & ~0x1FFFu) | 0x1000u; /* exactly halfway between two f16 */
        break;
    case 1: /* bf16 ties */
        u = (u & ~0xFFFFu) | 0x8000u;
        break;
    default:
        break;
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* The layer's f16 narrowing against the scalar one: the same bits; where the
 * layer's conversions make the canonical NaN (SPA_ISA_NAN_CANONICAL: RISC-V
 * Zvfhmin), a NaN for a NaN, whatever its sign and payload. */
static bool same_f16(uint16_t want, uint16_t got)
{
#ifdef SPA_ISA_NAN_CANONICAL
    if ((want & 0x7FFFu) > 0x7C00u)
        return (got & 0x7FFFu) > 0x7C00u;
#endif
    return want == got;
}

static void test_narrow_against_rne(void)
{
    enum { N = 1 << 16 };
    float *src = malloc(sizeof(float) * N);
    uint16_t *h_run = malloc(2 * (N + 1)), *h_stream = malloc(2 * (N + 1));
    uint16_t *b_run = malloc(2 * (N + 1)), *b_stream = malloc(2 * (N + 1));
    rng r = rng_seed(301);
    for (int i = 0; i < N; i++)
        src[i] = random_float(&r);
    src[0] = NAN;
    src[1] = -INFINITY;
    src[2] = 65520.0f;  /* rounds to f16 Inf */
    src[3] = 65519.0f;  /* rounds to f16 65504 */
    src[4] = 0x1p-25f;  /* halfway to the smallest f16 subnormal: even, 0 */
    src[5] = 0x1.8p-24f; /* 1.5 subnormal units: to 2 */
    int bad = 0;
    const int64_t n = all_patterns;
    spa_f16_narrow_run(h_run, src, n);
    spa_bf16_narrow_run(b_run, src, n);
    /* +1: an odd start exercises the streaming runs' alignment peeling */
    spa_f16_narrow_stream_run(h_stream + 1, src, n);
    spa_bf16_narrow_stream_run(b_stream + 1, src, n);
    spa_stream_fence();
    for (int i = 0; i < N; i++) {
        uint16_t h = spa_f32_to_f16(src[i]), b = spa_f32_to_bf16(src[i]);
        bad += !same_f16(h, h_run[i]) || !same_f16(h, h_stream[i + 1]) || b != b_run[i] || b != b_stream[i + 1];
        if (isnan(src[i])) {
            bad += !isnan(ref_f16_to_double(h)) || !isnan(ref_bf16_to_double(b));
            continue;
        }
        bad += !same_value(ref_f16_to_double(h), rne(src[i], 10, -14, 65504.0));
        bad += !same_value(ref_bf16_to_double(b), rne(src[i], 7, -126, 0x1.FEp127));
    }
    CU_ASSERT_EQUAL(bad, 0);
    /* The same values without NaN: the bf16 run then keeps its narrowing for
     * numbers (a run that meets a NaN narrows again with the exact form);
     * then a NaN of each kind at a few places of a short run. */
    for (int i = 0; i < N; i++)
        if (isnan(src[i]))
            src[i] = (float)i;
    spa_bf16_narrow_run(b_run, src, n);
    for (int i = 0; i < N; i++)
        bad += b_run[i] != spa_f32_to_bf16(src[i]);
    CU_ASSERT_EQUAL(bad, 0);
    static const uint32_t nans[] = {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF800001u, 0x7FFFFFFFu, 0x7FFF8000u,
                                    0xFFFF8001u, 0x7F808000u};
    for (int k = 0; k < (int)(sizeof nans / sizeof nans[0]); k++)
        for (int at = 0; at < 37; at += 6) {
            float run[37];
            uint16_t out[37];
            for (int i = 0; i < 37; i++)
                run[i] = src[1000 + i];
            memcpy(&run[at], &nans[k], 4);
            spa_bf16_narrow_run(out, run, 37);
            for (int i = 0; i < 37; i++)
                bad += out[i] != spa_f32_to_bf16(run[i]);
        }
    CU_ASSERT_EQUAL(bad, 0);
    free(src), free(h_run), free(h_stream), free(b_run), free(b_stream);
}

/* The in-place round trips of the selected-attention kernels (P and dS in
 * the dtype) equal narrowing then widening with the scalar forms. */
static void test_round_in_place(void)
{
    enum { N = 1 << 16 };
    float *x = malloc(sizeof(float) * N), *h = malloc(sizeof(float) * N), *b = malloc(sizeof(float) * N);
    rng r = rng_seed(302);
    for (int i = 0; i < N; i++)
        x[i] = random_float(&r);
    x[0] = NAN, x[1] = -INFINITY, x[2] = 65520.0f, x[3] = 0x1p-25f, x[4] = 0x1.8p-24f;
    x[5] = 0x1p-140f, x[6] = -0.0f, x[7] = 0x1.fffffep127f;
    memcpy(h, x, sizeof(float) * N);
    memcpy(b, x, sizeof(float) * N);
    spa_nsas_round(h, all_patterns, 0);
    spa_nsas_round(b, all_patterns, 1);
    int bad = 0;
    for (int i = 0; i < N; i++) {
        const float hf = spa_f16_to_f32(spa_f32_to_f16(x[i])), bf = spa_bf16_to_f32(spa_f32_to_bf16(x[i]));
        bad += !same_value(h[i], hf) || !same_value(b[i], bf);
        bad += spa_f32_bits(b[i]) != spa_f32_bits(bf); /* NaN payloads too */
    }
    CU_ASSERT_EQUAL(bad, 0);
    free(x), free(h), free(b);
}

#ifdef SPA_ISA_EVEN_ODD
/* The layer's even / odd pair forms (eight elements, the even ones in one
 * vector and the odd ones in another) equal the scalar conversions bit for
 * bit: widening every pattern, narrowing random floats with NaN, Inf, ties. */
static void test_even_odd_pairs(void)
{
    enum { N = 1 << 16 };
    uint16_t *all = malloc(sizeof(uint16_t) * N), *h = malloc(sizeof(uint16_t) * N),
             *b = malloc(sizeof(uint16_t) * N);
    float *src = malloc(sizeof(float) * N), *f = malloc(sizeof(float) * N);
    rng r = rng_seed(303);
    for (int i = 0; i < N; i++) {
        all[i] = (uint16_t)i;
        src[i] = random_float(&r);
    }
    src[0] = NAN, src[3] = -INFINITY, src[4] = 65520.0f, src[9] = 0x1p-25f, src[14] = -0.0f;
    int bad = 0;
    for (int64_t i = 0; i < all_patterns; i += 2 * SPA_VL) {
        float ev[SPA_VL], od[SPA_VL];
        spa_vf e, o;
        spa_vf_load_eo_f16(all + i, &e, &o);
        spa_vf_store(ev, e), spa_vf_store(od, o);
        for (int k = 0; k < SPA_VL; k++)
            bad += !same_value(ev[k], spa_f16_to_f32(all[i + 2 * k])) ||
                   !same_value(od[k], spa_f16_to_f32(all[i + 2 * k + 1]));
        spa_vf_load_eo_bf16(all + i, &e, &o);
        spa_vf_store(ev, e), spa_vf_store(od, o);
        for (int k = 0; k < SPA_VL; k++)
            bad += spa_f32_bits(ev[k]) != spa_f32_bits(spa_bf16_to_f32(all[i + 2 * k])) ||
                   spa_f32_bits(od[k]) != spa_f32_bits(spa_bf16_to_f32(all[i + 2 * k + 1]));
        for (int k = 0; k < SPA_VL; k++)
            ev[k] = src[i + 2 * k], od[k] = src[i + 2 * k + 1];
        spa_vf_store_eo_f16(h + i, spa_vf_load(ev), spa_vf_load(od));
        spa_vf_store_eo_bf16(b + i, spa_vf_load(ev), spa_vf_load(od));
        spa_vf_store_eo(f + i, spa_vf_load(ev), spa_vf_load(od));
    }
    for (int i = 0; i < N; i++)
        bad += h[i] != spa_f32_to_f16(src[i]) || b[i] != spa_f32_to_bf16(src[i]) ||
               spa_f32_bits(f[i]) != spa_f32_bits(src[i]);
    CU_ASSERT_EQUAL(bad, 0);
    free(all), free(h), free(b), free(src), free(f);
}
#endif

void suite_half(void)
{
    CU_pSuite s = CU_add_suite("half", NULL, NULL);
    CU_add_test(s, "widening, all 65536 patterns", test_widen_exhaustive);
    CU_add_test(s, "narrowing is RNE; run forms equal scalar", test_narrow_against_rne);
    CU_add_test(s, "in-place round trips equal scalar", test_round_in_place);
#ifdef SPA_ISA_EVEN_ODD
    CU_add_test(s, "even / odd pair forms equal scalar", test_even_odd_pairs);
#endif
}
