#include "nsac_case.h"

#include <stdio.h>

static void finish(nsac_case *c)
{
    int64_t s = 0;
    for (int64_t b = 0; b < c->batches; b++) {
        c->start[b] = s;
        s += c->len[b];
        c->seq_vals[b] = c->seq_type == 0 ? s : c->len[b];
    }
    c->tokens = s;
    c->seq.data = c->seq_vals;
    c->seq.size = (uint64_t)c->batches;
    ref_batches bt = nsac_case_batches(c);
    c->windows = ref_nsa_compress_windows(&bt, c->bs, c->st);
}

/* Small targets also cap T*N*D (the fp64 copies of the grad suite are
 * 8 bytes an element, six of them): the longest batch is halved until it
 * fits. */
static void cap_small(nsac_case *c)
{
    for (;;) {
        int64_t tokens = 0, longest_b = 0;
        for (int64_t b = 0; b < c->batches; b++) {
            tokens += c->len[b];
            if (c->len[b] > c->len[longest_b])
                longest_b = b;
        }
        if (!SPA_TEST_SMALL || tokens * c->n * c->d <= 96 * 1024)
            break;
        c->len[longest_b] /= 2;
    }
}

void nsac_case_draw(nsac_case *c, int i, rng *r)
{
    static const spa_dtype dts[3] = {SPA_FLOAT32, SPA_FLOAT16, SPA_BFLOAT16};
    c->dt = dts[i % 3];
    c->d = 16 * (1 + i % 16);
    c->bs = 16 * rng_int(r, 1, 8);
    c->st = 16 * rng_int(r, 1, c->bs / 16);
    if (i % 4 == 0)
        c->st = c->bs; /* stride == block: no overlap */
    if (i % 4 == 3) { /* off the NPU's grid: tails and odd windows */
        c->d = rng_int(r, 1, 130);
        c->bs = rng_int(r, 1, 40);
        c->st = rng_int(r, 1, c->bs);
    }
    c->n = TEST_BOARD_CAP(rng_int(r, 1, 5), 2);
    c->seq_type = rng_int(r, 0, 1);
    c->batches = TEST_BOARD_CAP(rng_int(r, 1, 8), 4);
    /* Small targets: batches of at most bs + 17 tokens (still 1..2 windows). */
    const int64_t longest = TEST_BOARD_SIZE(3 * c->bs + 17, c->bs + 17);
    for (int64_t b = 0; b < c->batches; b++) {
        int64_t kind = rng_int(r, 0, 5);
        c->len[b] = kind == 0 || c->bs == 1 ? 0 : kind == 1 ? rng_int(r, 1, c->bs - 1) : rng_int(r, c->bs, longest);
    }
    cap_small(c);
    c->strided = rng_int(r, 0, 2) == 0;
    finish(c);
}

void nsac_case_any(nsac_case *c, int i, rng *r)
{
    static const spa_dtype dts[3] = {SPA_FLOAT32, SPA_FLOAT16, SPA_BFLOAT16};
    /* head dims: a vector tail on every layer (1, 100, 300), none on some
     * (48), one past the largest kernel tile (1030: two channel slices) */
    static const int64_t dims[8] = {48, 100, 1, 300, 7, 33, 1030, 100};
    /* block / stride: 24/8, 7/7, 5/3, 20/2 (ten windows a token: more than
     * the grad keeps on its stack), 1/1, 9/4 */
    static const int64_t blocks[8][2] = {{24, 8}, {7, 7}, {5, 3}, {20, 2}, {1, 1}, {9, 4}, {24, 8}, {5, 3}};
    c->dt = dts[i % 3];
    c->d = dims[i % 8];
    c->bs = blocks[(i / 3 + i) % 8][0];
    c->st = blocks[(i / 3 + i) % 8][1];
    c->n = c->d > 300 ? 1 : rng_int(r, 1, 3);
    c->seq_type = rng_int(r, 0, 1);
    c->batches = rng_int(r, 1, 4);
    /* lengths not multiples of anything, some shorter than the block */
    const int64_t longest = c->d > 300 ? 2 * c->bs + 3 : 4 * c->bs + 13;
    for (int64_t b = 0; b < c->batches; b++)
        c->len[b] = rng_int(r, 0, 3) == 0 ? rng_int(r, 0, c->bs) : rng_int(r, c->bs, longest);
    cap_small(c);
    c->strided = i % 4 == 1;
    finish(c);
}

bool nsac_case_on_npu_grid(const nsac_case *c)
{
    return c->d % 16 == 0 && c->d >= 16 && c->d <= 256 && c->n <= 128 && c->bs % 16 == 0 &&
           c->st % 16 == 0 && c->bs <= 128;
}

void nsac_case_fixed(nsac_case *c, spa_dtype dt, int64_t n, int64_t d, int64_t bs, int64_t st,
                     int64_t batches, const int64_t *lens, int64_t seq_type)
{
    c->dt = dt;
    c->n = n;
    c->d = d;
    c->bs = bs;
    c->st = st;
    c->seq_type = seq_type;
    c->batches = batches;
    for (int64_t b = 0; b < batches; b++)
        c->len[b] = lens[b];
    c->strided = false;
    finish(c);
}

ref_batches nsac_case_batches(const nsac_case *c)
{
    ref_batches bt = {c->batches, c->start, c->len};
    return bt;
}

void nsac_case_describe(const nsac_case *c, char *buf, size_t size)
{
    int k = snprintf(buf, size, "%s T=%lld N=%lld D=%lld bs=%lld st=%lld type=%lld%s lens=",
                     dtype_name(c->dt), (long long)c->tokens, (long long)c->n, (long long)c->d,
                     (long long)c->bs, (long long)c->st, (long long)c->seq_type,
                     c->strided ? " strided" : "");
    for (int64_t b = 0; b < c->batches && k > 0 && (size_t)k < size; b++)
        k += snprintf(buf + k, size - (size_t)k, "%lld,", (long long)c->len[b]);
}
