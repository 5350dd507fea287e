/* MultiScaleDeformableAttnFunction and its grad at shape `bench`, the
 * Deformable-DETR encoder: bs 2, 8 heads, 32 channels, 4 levels (100x150,
 * 50x75, 25x38, 13x19), 4 points, num_queries = num_keys = 19947; weights and
 * values uniform in [-1, 1). Two location patterns:
 *   bench          as the encoder samples: every query is a pixel of one level,
 *                  its reference point that pixel's centre, and head h, point p
 *                  look (p + 1) cells away in direction 2*pi*h/8 on every level
 *                  (Deformable-DETR's initial offsets), jittered by +-0.5 cell;
 *   bench_uniform  locations uniform in [0, 1): no locality at all, the worst
 *                  case for the caches.
 * gbps: every input read once and every output written once. gflops: per
 * (sample, channel) 4 multiply-adds forward (the 4 corners; the attention
 * weight folded into the corner weights once per sample, so not counted per
 * channel) and 19 in the grad by the same rule (4 gradValue, 4 for the
 * sample, 4 each for d/dx and d/dy, 3 reductions), a multiply-add counted as
 * 2: the counts of tools/insn/insn_case.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

enum { BS = 2, NH = 8, C = 32, NL = 4, NP = 4, NK = 19947, NQ = NK };
static const int64_t level_hw[NL][2] = {{100, 150}, {50, 75}, {25, 38}, {13, 19}};

typedef struct msda_bench {
    void *ws;
    uint64_t ws_size;
    spa_executor ex;
    const spa_runner *runner;
    spa_status (*run)(void *, uint64_t, const spa_executor *, const spa_runner *);
} msda_bench;

static void run_once(void *arg)
{
    msda_bench *b = arg;
    if (b->run(b->ws, b->ws_size, &b->ex, b->runner) != SPA_OK) {
        fprintf(stderr, "msda bench: run failed\n");
        exit(1);
    }
}

static double next_unit(uint64_t *s)
{
    *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
    return (double)((*s * 0x2545F4914F6CDD1Dull) >> 40) * 0x1p-24;
}

/* Normalised location number i of the layout [BS][NQ][NH][NL][NP][2]. */
static float location_value(size_t i, int encoder, uint64_t *s)
{
    if (!encoder)
        return (float)next_unit(s);
    const size_t xy = i % 2, p = i / 2 % NP, l = i / (2 * NP) % NL, h = i / (2 * NP * NL) % NH;
    const size_t q = i / (2 * NP * NL * NH) % NQ;
    size_t lq = 0, first = 0; /* the level and pixel of query q */
    while (q >= first + (size_t)(level_hw[lq][0] * level_hw[lq][1])) {
        first += (size_t)(level_hw[lq][0] * level_hw[lq][1]);
        lq++;
    }
    const double hq = (double)level_hw[lq][0], wq = (double)level_hw[lq][1];
    const double ref = xy == 0 ? ((double)((q - first) % (size_t)wq) + 0.5) / wq
                               : ((double)((q - first) / (size_t)wq) + 0.5) / hq;
    const double angle = 2.0 * 3.14159265358979 * (double)h / NH;
    double dx = cos(angle), dy = sin(angle);
    const double norm = fmax(fabs(dx), fabs(dy));
    const double cells = (xy == 0 ? dx : dy) / norm * (double)(p + 1) + next_unit(s) - 0.5;
    return (float)(ref + cells / (double)level_hw[l][xy == 0 ? 1 : 0]);
}

/* Locations stored in dt (f16: nearest below, bf16: truncated). */
static void *alloc_locations(spa_dtype dt, size_t count, uint64_t seed, int encoder)
{
    size_t es = bench_dtype_size(dt);
    unsigned char *p = bench_alloc_zero(count * es);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < count; i++) {
        float v = location_value(i, encoder, &s);
        uint32_t u;
        memcpy(&u, &v, 4);
        if (dt == SPA_FLOAT64) {
            const double d = v;
            memcpy(p + i * 8, &d, 8);
        } else if (dt == SPA_FLOAT32) {
            memcpy(p + i * 4, &v, 4);
        } else if (dt == SPA_BFLOAT16) {
            uint16_t h = (uint16_t)(u >> 16);
            memcpy(p + i * 2, &h, 2);
        } else {
            int e;
            float m = frexpf(v, &e); /* v = m * 2^e, m in [0.5, 1) */
            uint16_t h = fabsf(v) < 0x1p-14f ? 0 : (uint16_t)(((e + 14) << 10) | ((int)(m * 2048.0f) - 1024));
            if (v < 0 && h != 0)
                h |= 0x8000u;
            memcpy(p + i * 2, &h, 2);
        }
    }
    return p;
}

static void time_threads(const char *op, spa_dtype dt, const char *shape, msda_bench *b, double bytes,
                         double flops)
{
    unsigned threads[8];
    int nt = bench_thread_counts(threads, 8);
    b->ws = bench_alloc_zero(b->ws_size);
    for (int i = 0; i < nt; i++) {
        b->runner = bench_runner(threads[i]);
        bench_report(op, dt, shape, threads[i], bench_time_ms(run_once, b), bytes, flops);
    }
    free(b->ws);
}

static void bench_dtype(spa_dtype dt, int grad, int encoder)
{
    const char *shape = encoder ? "bench" : "bench_uniform";
    if (!bench_wanted(dt, shape))
        return;
    int64_t ss_data[NL * 2], lsi_data[NL], start = 0;
    for (int l = 0; l < NL; l++) {
        ss_data[2 * l] = level_hw[l][0];
        ss_data[2 * l + 1] = level_hw[l][1];
        lsi_data[l] = start;
        start += level_hw[l][0] * level_hw[l][1];
    }
    const size_t es = bench_dtype_size(dt);
    const int64_t vd[4] = {BS, NK, NH, C}, ssd[2] = {NL, 2}, lsid[1] = {NL};
    const int64_t ld[6] = {BS, NQ, NH, NL, NP, 2}, ad[5] = {BS, NQ, NH, NL, NP}, od[3] = {BS, NQ, NH * C};
    const size_t nv = (size_t)BS * NK * NH * C, na = (size_t)BS * NQ * NH * NL * NP, no = (size_t)BS * NQ * NH * C;
    void *v = bench_alloc_random(dt, nv, 1);
    void *loc = alloc_locations(dt, 2 * na, 2, encoder);
    void *att = bench_alloc_random(dt, na, 3);
    void *go = bench_alloc_random(dt, no, 4);
    spa_tensor tv = bench_tensor(dt, 4, vd, v), tss = bench_tensor(SPA_INT64, 2, ssd, ss_data),
               tlsi = bench_tensor(SPA_INT64, 1, lsid, lsi_data), tl = bench_tensor(dt, 6, ld, loc),
               ta = bench_tensor(dt, 5, ad, att), to = bench_tensor(dt, 3, od, go);
    const double idx_bytes = 3.0 * NL * 8;
    const double v_bytes = (double)nv * (double)es, l_bytes = 2.0 * (double)na * (double)es;
    const double a_bytes = (double)na * (double)es, o_bytes = (double)no * (double)es;
    const double per_ch = (double)na * C;
    msda_bench b;
    if (!grad) {
        if (spa_msda_get_workspace_size(&tv, &tss, &tlsi, &tl, &ta, &to, &b.ws_size, &b.ex) != SPA_OK) {
            fprintf(stderr, "msda bench: phase 1 failed\n");
            exit(1);
        }
        b.run = spa_msda;
        time_threads("msda", dt, shape, &b, v_bytes + l_bytes + a_bytes + o_bytes + idx_bytes, 2 * 4 * per_ch);
    } else {
        void *gv = bench_alloc_zero(nv * es), *gl = bench_alloc_zero(2 * na * es), *ga = bench_alloc_zero(na * es);
        spa_tensor tgv = bench_tensor(dt, 4, vd, gv), tgl = bench_tensor(dt, 6, ld, gl),
                   tga = bench_tensor(dt, 5, ad, ga);
        if (spa_msda_grad_get_workspace_size(&tv, &tss, &tlsi, &tl, &ta, &to, &tgv, &tgl, &tga,
                                             &b.ws_size, &b.ex) != SPA_OK) {
            fprintf(stderr, "msda_grad bench: phase 1 failed\n");
            exit(1);
        }
        b.run = spa_msda_grad;
        time_threads("msda_grad", dt, shape, &b,
                     2 * (v_bytes + l_bytes + a_bytes) + o_bytes + idx_bytes, 2 * 19 * per_ch);
        free(gv), free(gl), free(ga);
    }
    free(v), free(loc), free(att), free(go);
}

void bench_msda(void)
{
    /* f64 only where BENCH_DTYPE names it (bench_wanted) */
    static const spa_dtype dts[4] = {SPA_FLOAT32, SPA_FLOAT16, SPA_BFLOAT16, SPA_FLOAT64};
    for (int encoder = 1; encoder >= 0; encoder--)
        for (int k = 0; k < 4; k++)
            bench_dtype(dts[k], 0, encoder);
}

void bench_msda_grad(void)
{
    /* f64 only where BENCH_DTYPE names it (bench_wanted) */
    static const spa_dtype dts[4] = {SPA_FLOAT32, SPA_FLOAT16, SPA_BFLOAT16, SPA_FLOAT64};
    for (int encoder = 1; encoder >= 0; encoder--)
        for (int k = 0; k < 4; k++)
            bench_dtype(dts[k], 1, encoder);
}
