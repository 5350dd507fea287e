/* Checks what the seed pages' usage examples print, against expectations
 * derived from the spec by hand (this program shares no code with spattn).
 *
 *   seedcheck <page> <exit status> < output
 *
 * 003 (NsaCompress): B=1, 64 tokens, N=4, D=32, bs=st=32, every input and
 *     weight 1.0 -> 2 windows, every output element 32.0 (spec/nsa.md 1.5);
 *     the page prints 256 lines "mean result[i] is: 32.000000".
 * 000 (NsaCompressGrad): the page fills float host buffers but declares the
 *     tensors FLOAT16, so the library sees the float bytes as fp16 pairs:
 *     element 2i is the low half of float i (0x0000 for 1.0f) and element
 *     2i+1 its high half (0x3F80 = 1.875). Every shape is valid, so the op
 *     must succeed on these values: outputGrad[w][n][d] = (d odd ? 1.875 : 0),
 *     weight[j][n] = (n odd ? 1.875 : 0), hence
 *     inputGrad[t][n][d] = cover(t) * 1.875^2 for odd n and odd d, else +0,
 *     with cover(t) the number of windows (bs=32, st=16, lengths {0,128,272})
 *     holding token t. The page then reads the fp16 result back as floats:
 *     float i of the first half packs elements 2i (low) and 2i+1 (high); the
 *     second half of its float-sized buffer still holds the zeros it copied in.
 * 004 (MultiScaleDeformableAttentionGrad): spatialShape is declared INT32 but
 *     filled with float 1.0 bytes, so H = W = 1065353216 and the level
 *     overruns value (and gradOutput is 4-D where the op takes 3-D): phase 1
 *     must refuse with 161002, which the page prints before returning it
 *     (exit status 161002 & 255 = 234).
 * 004i: the same page with its spatialShape and levelStartIndex host data
 *     written as int32 (tools/acl_seeds.sh edits the two declarations only):
 *     H = W = 1, 32 queries sample level 0 at location (0, 0) with weight 1
 *     and gradOutput 1 (4-D, as the page's table gives it), so each query
 *     puts a quarter on pixel (0, 0) (the sample sits at pixel coordinate
 *     (-0.5, -0.5): one of its four corners is in the map): every gradValue
 *     element is 32 / 4 = 8; the page prints 8 lines "result[i] is: 8.000000". */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fails;

static void fail(const char *what, long line)
{
    if (fails++ < 10)
        fprintf(stderr, "seedcheck: line %ld: %s\n", line, what);
}

/* Exact fp16 encoding of a value known to be representable (normal range). */
static uint16_t f16_bits_exact(double v)
{
    if (v == 0.0)
        return 0;
    int e;
    double m = frexp(fabs(v), &e); /* v = m * 2^e, m in [0.5, 1) */
    int exp16 = e - 1 + 15;
    double frac = (m * 2.0 - 1.0) * 1024.0;
    if (exp16 < 1 || exp16 > 30 || frac != floor(frac)) {
        fprintf(stderr, "seedcheck: %g is not an exact fp16 normal\n", v);
        exit(2);
    }
    return (uint16_t)((v < 0 ? 0x8000u : 0u) | (unsigned)exp16 << 10 | (unsigned)frac);
}

static double f16_value(uint16_t h)
{
    int e = (h >> 10) & 31;
    double m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : ldexp(1024.0 + m, e - 25);
    return (h & 0x8000) ? -v : v;
}

/* Every line "<label>[i] is: <value>", count of them, exit status 0. */
static int check_result_lines(const char *label, const char *value, long count, int status)
{
    char line[256], want[96];
    long n = 0;
    while (fgets(line, sizeof line, stdin)) {
        snprintf(want, sizeof want, "%s[%ld] is: %s\n", label, n, value);
        if (strcmp(line, want) != 0)
            fail("unexpected result line", n);
        n++;
    }
    if (n != count)
        fail("unexpected number of result lines", n);
    if (status != 0)
        fail("exit status not 0", n);
    return fails;
}

static int check_003(int status)
{
    return check_result_lines("mean result", "32.000000", 2 * 4 * 32, status);
}

enum { T0 = 272, N0 = 64, D0 = 128, BS0 = 32, ST0 = 16 };

static int check_000(int status)
{
    static const long ends[] = {0, 128, 272};
    static int cover[T0];
    long start = 0;
    for (int b = 0; b < 3; b++) {
        long len = ends[b] - start;
        for (long s = start; len >= BS0 && s + BS0 <= ends[b]; s += ST0)
            for (long j = 0; j < BS0; j++)
                cover[s + j]++;
        start = ends[b];
    }
    const double half = f16_value(0x3F80); /* the high half of 1.0f */
    const long elems = (long)T0 * N0 * D0;  /* fp16 elements of inputGrad */
    char line[256], want[64];
    long n = 0;
    while (fgets(line, sizeof line, stdin)) {
        uint32_t bits = 0;
        if (n < elems / 2) {
            for (int part = 0; part < 2; part++) {
                long e = 2 * n + part;
                long t = e / (N0 * D0), hd = (e / D0) % N0, d = e % D0;
                double v = (hd % 2 == 1 && d % 2 == 1) ? cover[t] * half * half : 0.0;
                bits |= (uint32_t)f16_bits_exact(v) << (16 * part);
            }
        }
        float f;
        memcpy(&f, &bits, sizeof f);
        snprintf(want, sizeof want, "result[%ld] is: %f\n", n, (double)f);
        if (strcmp(line, want) != 0)
            fail(want, n);
        n++;
    }
    if (n != elems)
        fail("expected T*N*D result lines", n);
    if (status != 0)
        fail("exit status not 0", n);
    return fails;
}

static int check_004(int status)
{
    char line[256];
    long n = 0;
    while (fgets(line, sizeof line, stdin)) {
        if (n == 0 && strcmp(line, "aclnnMultiScaleDeformableAttentionGradGetWorkspaceSize "
                                   "failed. ERROR: 161002\n") != 0)
            fail("expected the phase-1 refusal 161002", n);
        n++;
    }
    if (n != 1)
        fail("expected exactly one line", n);
    if (status != (161002 & 255))
        fail("exit status not 161002 & 255", n);
    return fails;
}

static int check_004i(int status)
{
    return check_result_lines("result", "8.000000", 8, status);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: seedcheck <000|003|004|004i> <exit status> < output\n");
        return 2;
    }
    int status = atoi(argv[2]);
    int bad;
    if (strcmp(argv[1], "000") == 0)
        bad = check_000(status);
    else if (strcmp(argv[1], "003") == 0)
        bad = check_003(status);
    else if (strcmp(argv[1], "004") == 0)
        bad = check_004(status);
    else if (strcmp(argv[1], "004i") == 0)
        bad = check_004i(status);
    else {
        fprintf(stderr, "seedcheck: unknown page %s\n", argv[1]);
        return 2;
    }
    return bad ? 1 : 0;
}
