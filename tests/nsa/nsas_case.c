#include "nsas_case.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void finish(nsas_case *c, int64_t extra_kv)
{
    int64_t qs = 0, ks = 0;
    for (int64_t b = 0; b < c->batches; b++) {
        c->qstart[b] = qs;
        c->kstart[b] = ks;
        qs += c->qlen[b];
        ks += c->klen[b];
        c->sq_vals[b] = qs;
        c->skv_vals[b] = ks;
    }
    c->t1 = qs;
    c->t2 = ks + extra_kv;
    c->sq.data = c->sq_vals;
    c->sq.size = (uint64_t)c->batches;
    c->skv.data = c->skv_vals;
    c->skv.size = (uint64_t)c->batches;
    c->idx = malloc(sizeof(int32_t) * (size_t)(c->t1 * c->n2 * c->kc + 1));
}

void nsas_case_draw_indices(nsas_case *c, rng *r, bool dups)
{
    for (int64_t b = 0; b < c->batches; b++) {
        /* blocks starting inside the batch's KV, the last one maybe partial */
        const int64_t blocks = (c->klen[b] + c->bs - 1) / c->bs;
        for (int64_t t = c->qstart[b]; t < c->qstart[b] + c->qlen[b]; t++)
            for (int64_t h = 0; h < c->n2; h++) {
                int32_t *row = c->idx + (t * c->n2 + h) * c->kc;
                for (int64_t i = 0; i < c->kc; i++) {
                    int64_t x;
                    if (blocks == 0) { /* nothing to select: padding */
                        row[i] = -1;
                        continue;
                    }
                    bool again;
                    int tries = 0;
                    do { /* distinct unless duplicates are wanted or forced */
                        x = rng_int(r, 0, blocks - 1);
                        again = false;
                        for (int64_t j = 0; j < i && !dups && c->kc <= blocks; j++)
                            again |= row[j] == x;
                    } while (again && ++tries < 1000);
                    row[i] = (int32_t)x;
                }
            }
    }
}

void nsas_case_pad_indices(nsas_case *c, rng *r)
{
    const int64_t rows = c->t1 * c->n2;
    for (int64_t u = 0; u < rows; u++) {
        int32_t *row = c->idx + u * c->kc;
        const int64_t kind = rng_int(r, 0, 7);
        if (kind < 2) /* a quarter of the rows unpadded */
            continue;
        for (int64_t i = 0; i < c->kc; i++) /* one row in eight fully padded */
            if (kind == 2 || rng_int(r, 0, 2) == 0)
                row[i] = -1;
    }
    if (rows > 0) /* at least one fully padded row, the last (in the last batch) */
        for (int64_t i = 0; i < c->kc; i++)
            c->idx[(rows - 1) * c->kc + i] = -1;
}

void nsas_case_draw(nsas_case *c, int i, rng *r)
{
    static const spa_dtype dts[3] = {SPA_FLOAT32, SPA_FLOAT16, SPA_BFLOAT16};
    static const int64_t groups[] = {1, 2, 3, 4, 5, 6, 8, 12, 16, 17, 24, 32, 33, 48, 64};
    memset(c, 0, sizeof *c);
    c->dt = dts[i % 3];
    int64_t g = groups[rng_int(r, 0, (int64_t)(sizeof groups / sizeof groups[0]) - 1)];
    c->n2 = rng_int(r, 1, g > 32 ? 1 : g > 16 ? 2 : 3);
    c->n1 = c->n2 * g;
    switch (i % 8) {
    case 0: c->d = 16 * rng_int(r, 1, 4); break;
    case 1: c->d = 192; break;
    case 2: c->d = 48; break;
    case 3: c->d = 80; break;
    case 4: c->d = 272; break;
    case 5: c->d = 128; break;
    case 6: c->d = rng_int(r, 0, 1) ? 100 : rng_int(r, 1, 130); break; /* head-dim tails */
    default: c->d = 16 * rng_int(r, 1, 12); break;
    }
    if (i % 23 == 7)
        c->d = 768;
    /* small targets: a few MiB of heap (the quick set keeps D and Dv: they
     * pick the kernels' tiles and tails) */
    c->d = TEST_BOARD_CAP(c->d, 128);
    c->dv = i % 3 == 1 ? c->d : c->d >= 16 ? 16 * rng_int(r, 1, c->d / 16) : c->d;
    if (i % 5 == 2) /* any Dv, also above D */
        c->dv = rng_int(r, 1, TEST_BOARD_CAP(160, 64));
    if (c->d == 192 && i % 2)
        c->dv = 128;
    c->bs = 16 * rng_int(r, 1, 8);
    c->kc = rng_int(r, 1, 6);
    if (i % 11 == 5) {
        c->bs = 16;
        c->kc = 32;
    }
    c->sparse_mode = rng_int(r, 0, 2) == 0 ? 0 : 2;
    c->has_mask = rng_int(r, 0, 3) != 0;
    c->batches = TEST_CAP(rng_int(r, 1, 4), 2);
    /* keep the fp64 reference cheap: queries x heads x selected keys x dims */
    const double per_token = (double)(c->n1 * c->kc * c->bs * (c->d + c->dv));
    int64_t max_q = (int64_t)(TEST_SIZE(1.5e6, 2e5) / per_token);
    if (max_q < 1)
        max_q = 1;
    for (int64_t b = 0; b < c->batches; b++) {
        int64_t kind = rng_int(r, 0, 5);
        c->qlen[b] = kind == 0 ? 0 : rng_int(r, 1, max_q < 12 ? max_q : 12);
        c->klen[b] = c->qlen[b] == 0 && rng_int(r, 0, 1) ? rng_int(r, 0, c->bs - 1)
                                                         : c->bs * rng_int(r, 1, TEST_SIZE(5, 2)) + rng_int(r, 0, c->bs - 1);
        /* causal cases with Sq > Skv: queries beyond the last key see every key */
        if (kind == 5 && c->qlen[b] > 0)
            c->qlen[b] = c->klen[b] + rng_int(r, 1, 8) < max_q ? c->klen[b] + rng_int(r, 1, 8) : max_q;
    }
    c->strided = rng_int(r, 0, 2) == 0;
    c->scale = (0.5 + rng_unit(r)) / sqrt((double)c->d) * (i % 9 == 4 ? -1.0 : 1.0);
    finish(c, rng_int(r, 0, 3));
    nsas_case_draw_indices(c, r, rng_int(r, 0, 3) == 0);
    if (rng_int(r, 0, 2) == 0) /* -1 padding slots, a fully padded row */
        nsas_case_pad_indices(c, r);
}

void nsas_case_fixed(nsas_case *c, spa_dtype dt, int64_t n1, int64_t n2, int64_t d, int64_t dv,
                     int64_t bs, int64_t kc, int64_t batches, const int64_t *qlen,
                     const int64_t *klen, int64_t sparse_mode, bool has_mask, rng *r, bool dups)
{
    memset(c, 0, sizeof *c);
    c->dt = dt;
    c->n1 = n1;
    c->n2 = n2;
    c->d = d;
    c->dv = dv;
    c->bs = bs;
    c->kc = kc;
    c->batches = batches;
    for (int64_t b = 0; b < batches; b++) {
        c->qlen[b] = qlen[b];
        c->klen[b] = klen[b];
    }
    c->sparse_mode = sparse_mode;
    c->has_mask = has_mask;
    c->scale = 1.0 / sqrt((double)d);
    finish(c, 0);
    nsas_case_draw_indices(c, r, dups);
}

void nsas_case_free(nsas_case *c)
{
    free(c->idx);
    c->idx = NULL;
}

bool nsas_case_causal(const nsas_case *c)
{
    return c->sparse_mode == 2 && c->has_mask;
}

ref_nsas_problem nsas_case_problem(const nsas_case *c)
{
    ref_nsas_problem p;
    p.t1 = c->t1;
    p.t2 = c->t2;
    p.n1 = c->n1;
    p.n2 = c->n2;
    p.d = c->d;
    p.dv = c->dv;
    p.bs = c->bs;
    p.kc = c->kc;
    p.batches = c->batches;
    p.qstart = c->qstart;
    p.qlen = c->qlen;
    p.kstart = c->kstart;
    p.klen = c->klen;
    p.idx = c->idx;
    p.scale = (double)(float)c->scale; /* the op converts scaleValue to float */
    p.causal = nsas_case_causal(c);
    p.round = c->dt == SPA_FLOAT16 ? REF_ROUND_F16 : c->dt == SPA_BFLOAT16 ? REF_ROUND_BF16 : REF_ROUND_NONE;
    return p;
}

void nsas_case_describe(const nsas_case *c, char *buf, size_t size)
{
    int k = snprintf(buf, size,
                     "%s N1=%lld N2=%lld D=%lld Dv=%lld bs=%lld K=%lld mode=%lld mask=%d%s scale=%.3g T2=%lld q/kv=",
                     dtype_name(c->dt), (long long)c->n1, (long long)c->n2, (long long)c->d,
                     (long long)c->dv, (long long)c->bs, (long long)c->kc, (long long)c->sparse_mode,
                     c->has_mask, c->strided ? " strided" : "", c->scale, (long long)c->t2);
    for (int64_t b = 0; b < c->batches && k > 0 && (size_t)k < size; b++)
        k += snprintf(buf + k, size - (size_t)k, "%lld/%lld,", (long long)c->qlen[b], (long long)c->klen[b]);
}

void nsas_io_set_indices(nsas_io *io, const nsas_case *c)
{
    for (int64_t i = 0; i < c->t1 * c->n2 * c->kc; i++)
        tt_set_int(&io->topk, i, c->idx[i]);
}

void nsas_io_make(nsas_io *io, const nsas_case *c, rng *r)
{
    const int64_t qd[3] = {c->t1, c->n1, c->d}, kd[3] = {c->t2, c->n2, c->d},
                  vd[3] = {c->t2, c->n2, c->dv}, id[3] = {c->t1, c->n2, c->kc},
                  od[3] = {c->t1, c->n1, c->dv}, sd[3] = {c->t1, c->n1, 8}, md[2] = {4, 4};
    tt_make(&io->q, c->dt, 3, qd, c->strided, r);
    tt_make(&io->k, c->dt, 3, kd, c->strided, r);
    tt_make(&io->v, c->dt, 3, vd, c->strided, r);
    tt_make(&io->topk, SPA_INT32, 3, id, c->strided, r);
    tt_make(&io->mask, SPA_BOOL, 2, md, false, r);
    tt_make(&io->mx, SPA_FLOAT32, 3, sd, c->strided, r);
    tt_make(&io->sm, SPA_FLOAT32, 3, sd, c->strided, r);
    tt_make(&io->o, c->dt, 3, od, c->strided, r);
    tt_make(&io->dy, c->dt, 3, od, c->strided, r);
    tt_make(&io->dq, c->dt, 3, qd, c->strided, r);
    tt_make(&io->dk, c->dt, 3, kd, c->strided, r);
    tt_make(&io->dv, c->dt, 3, vd, c->strided, r);
    tt_fill_random(&io->q, r, -1.0, 1.0);
    tt_fill_random(&io->k, r, -1.0, 1.0);
    tt_fill_random(&io->v, r, -1.0, 1.0);
    tt_fill_random(&io->dy, r, -1.0, 1.0);
    tt_fill_random(&io->mask, r, 0.0, 1.0);
    nsas_io_set_indices(io, c);
}

void nsas_io_free(nsas_io *io)
{
    ttensor *all[] = {&io->q, &io->k, &io->v, &io->topk, &io->mask, &io->mx,
                      &io->sm, &io->o, &io->dy, &io->dq, &io->dk, &io->dv};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tt_free(all[i]);
}

void nsas_io_set_stat(ttensor *tt, const double *val, int64_t count)
{
    for (int64_t i = 0; i < count; i++)
        for (int64_t l = 0; l < 8; l++) {
            float f = (float)val[i];
            memcpy((float *)tt->t.data + tt_offset(tt, i * 8 + l), &f, sizeof f);
        }
}

static const int64_t fq1[2] = {9, 5}, fk1[2] = {200, 70};
static const int64_t fq2[1] = {40}, fk2[1] = {33};
static const int64_t fq3[3] = {3, 0, 6}, fk3[3] = {256, 17, 130};
static const int64_t fq4[1] = {2}, fk4[1] = {512};
static const int64_t fq5[2] = {7, 5}, fk5[2] = {37, 50}; /* partial last blocks */
static const int64_t fq6[1] = {6}, fk6[1] = {41};
static const struct {
    spa_dtype dt;
    int64_t n1, n2, d, dv, bs, kc, batches;
    const int64_t *q, *k;
    int64_t mode;
    bool mask, dups, pad; /* pad: -1 slots (nsas_case_pad_indices) */
} features[] = {
    {SPA_FLOAT16, 12, 4, 192, 128, 64, 2, 2, fq1, fk1, 2, true, false, false},
    {SPA_BFLOAT16, 6, 1, 48, 48, 16, 2, 1, fq2, fk2, 2, true, true, false},   /* Sq > Skv, causal */
    {SPA_FLOAT32, 6, 1, 80, 32, 32, 4, 3, fq3, fk3, 2, true, true, false},    /* Sq < Skv, causal */
    {SPA_FLOAT16, 4, 2, 272, 16, 16, 8, 3, fq3, fk3, 0, true, false, false},
    {SPA_FLOAT32, 32, 1, 64, 64, 16, 32, 1, fq4, fk4, 2, false, true, false}, /* G 32, K 32, mode 2 w/o mask */
    {SPA_FLOAT16, 80, 2, 64, 48, 32, 3, 2, fq5, fk5, 2, true, false, true},   /* G 40: chunks of 32 and 8 */
    {SPA_BFLOAT16, 128, 1, 32, 64, 16, 4, 1, fq2, fk2, 0, false, true, false}, /* G 128 (CANN's infer limit): fq6 in the quick set */
    {SPA_BFLOAT16, 2, 2, SPA_TEST_SMALL ? 128 : 768, SPA_TEST_SMALL ? 128 : 768, 128, 4, 1, fq4, fk4, 0, false, false, false},
    {SPA_FLOAT16, 20, 4, 128, 128, 64, 3, 2, fq1, fk1, 2, true, true, false}, /* G 5 */
    {SPA_FLOAT32, 18, 1, 192, 128, 64, 2, 1, fq2, fk4, 2, true, true, false}, /* G 18: 32 lanes */
    /* the public conventions (spec/nsa.md 0.3b): -1 slots, partial last
     * blocks, head-dim tails, Dv != D (above D too), G 1 to 16, each dtype */
    {SPA_FLOAT32, 2, 2, 100, 100, 16, 3, 2, fq5, fk5, 2, true, false, true},  /* G 1, causal */
    {SPA_FLOAT16, 4, 2, 48, 100, 32, 4, 2, fq5, fk5, 0, false, true, true},   /* G 2, Dv > D */
    {SPA_BFLOAT16, 4, 1, 100, 48, 16, 3, 2, fq5, fk5, 2, true, false, true},  /* G 4, causal */
    {SPA_FLOAT32, 16, 1, 48, 24, 16, 2, 2, fq5, fk5, 0, true, false, true},   /* G 16 */
    {SPA_FLOAT16, 32, 2, 100, 100, 16, 2, 1, fq6, fk6, 2, true, false, true}, /* G 16, causal */
    {SPA_BFLOAT16, 16, 1, 48, 100, 32, 3, 1, fq6, fk6, 0, false, true, true}, /* G 16, Dv > D */
    {SPA_FLOAT32, 4, 2, 48, 48, 16, 3, 2, fq5, fk5, 2, true, true, true},     /* G 2, causal */
    {SPA_FLOAT16, 4, 1, 100, 40, 16, 2, 2, fq5, fk5, 0, false, false, true},  /* G 4 */
    {SPA_BFLOAT16, 2, 2, 48, 48, 32, 2, 2, fq5, fk5, 2, true, true, true},    /* G 1, causal */
    {SPA_FLOAT32, 8, 2, 64, 48, 16, 40, 1, fq4, fk4, 2, true, true, true},    /* K 40: past CANN's 32 */
};

int nsas_feature_count(void)
{
    return (int)(sizeof features / sizeof features[0]);
}

void nsas_case_feature(nsas_case *c, int i, rng *r)
{
    /* G 128 takes the same paths for 6 queries as for 40 (the queries are
     * units of their own), at a seventh of the cost in the quick set */
    const int64_t *q = TEST_SMALL_SIZES && features[i].n1 == 128 ? fq6 : features[i].q;
    const int64_t *k = q == fq6 ? fk6 : features[i].k;
    nsas_case_fixed(c, features[i].dt, features[i].n1, features[i].n2, features[i].d, features[i].dv,
                    features[i].bs, features[i].kc, features[i].batches, q, k, features[i].mode, features[i].mask, r,
                    features[i].dups);
    if (features[i].pad)
        nsas_case_pad_indices(c, r);
    c->strided = i % 2 == 1;
}

void nsas_io_poison(nsas_io *io, rng *r)
{
    ttensor *const pick[3] = {&io->q, &io->k, &io->v};
    tt_poison(pick[rng_int(r, 0, 2)], r, (int)rng_int(r, 1, 2), true);
}
