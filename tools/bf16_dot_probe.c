/* Whether this core runs the AVX512-BF16 dot product (vdpbf16ps zmm, two
 * products per f32 lane) at least at 0.8x the instruction rate of the f32
 * FMA (vfmadd231ps zmm, one product): then the bf16 kernels of the
 * avx512bf16 layer do more products per second than the f32 ones, and the
 * host build picks that layer (targets/host/target.mk). Measured, not read
 * from the CPU model: AMD Zen 4 runs both at the same rate, Intel Sapphire
 * Rapids the dot product at a quarter of it (docs/kernels.md). Prints 1 or 0
 * and the two rates. Build with the -march of the build being configured. */
#include <stdio.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* 12 independent accumulators: more than latency x issue width on the cores
 * known, so the loops measure throughput. */
#define OP12(op)                                                                                   \
    op " %%zmm14,%%zmm15,%%zmm0\n\t" op " %%zmm14,%%zmm15,%%zmm1\n\t" op " %%zmm14,%%zmm15,%%zmm2\n\t" \
    op " %%zmm14,%%zmm15,%%zmm3\n\t" op " %%zmm14,%%zmm15,%%zmm4\n\t" op " %%zmm14,%%zmm15,%%zmm5\n\t" \
    op " %%zmm14,%%zmm15,%%zmm6\n\t" op " %%zmm14,%%zmm15,%%zmm7\n\t" op " %%zmm14,%%zmm15,%%zmm8\n\t" \
    op " %%zmm14,%%zmm15,%%zmm9\n\t" op " %%zmm14,%%zmm15,%%zmm10\n\t" op " %%zmm14,%%zmm15,%%zmm11\n\t"
#define CLOBBER "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", \
                "xmm10", "xmm11", "xmm14", "xmm15"

static double fma_rate(long n)
{
    const double t0 = now();
    __asm__ volatile("vpxord %%zmm14,%%zmm14,%%zmm14\n\tvpxord %%zmm15,%%zmm15,%%zmm15\n\t"
                     "1:\n\t" OP12("vfmadd231ps") "dec %0\n\tjnz 1b\n\t"
                     : "+r"(n)
                     :
                     : CLOBBER, "cc");
    return now() - t0;
}

static double dot_rate(long n)
{
    const double t0 = now();
    __asm__ volatile("vpxord %%zmm14,%%zmm14,%%zmm14\n\tvpxord %%zmm15,%%zmm15,%%zmm15\n\t"
                     "1:\n\t" OP12("vdpbf16ps") "dec %0\n\tjnz 1b\n\t"
                     : "+r"(n)
                     :
                     : CLOBBER, "cc");
    return now() - t0;
}

int main(void)
{
    const long n = 2000000; /* 24 M instructions a loop: a few ms each */
    double best_fma = 1e9, best_dot = 1e9;
    for (int rep = 0; rep < 5; rep++) { /* the best of five: the least disturbed */
        const double f = fma_rate(n), d = dot_rate(n);
        best_fma = f < best_fma ? f : best_fma;
        best_dot = d < best_dot ? d : best_dot;
    }
    const double gf = 12.0 * (double)n / best_fma / 1e9, gd = 12.0 * (double)n / best_dot / 1e9;
    printf("%d %.2f %.2f\n", gd >= 0.8 * gf, gf, gd);
    return 0;
}
