/* Contract between src/nsa_compress*.c and the generated kernels of
 * templates/nsa_compress*.c.m4. All strides are in elements. */
#ifndef SPA_NSA_COMPRESS_KERNEL_H
#define SPA_NSA_COMPRESS_KERNEL_H

#include <stdint.h>

typedef struct spa_nsac_args {
    const void *x; /* input [T, N, D] */
    int64_t xs0, xs1, xs2;
    const void *w; /* weight [bs, N] */
    int64_t ws0, ws1;
    void *y; /* forward: output [M, N, D]; grad: outputGrad (read) */
    int64_t ys0, ys1, ys2;
    void *dx; /* grad: inputGrad [T, N, D] */
    int64_t dxs0, dxs1, dxs2;
    int64_t n, d, bs, st;
    /* grad, chosen at plan time (spa_nsacg_rows): tokens per tile, the
     * outputGrad rows a tile stages at most, windows per token at most */
    int64_t tt, dy_rows, nw_max;
} spa_nsac_args;

/* Channels [c0, c0 + width) of every head, as the arguments of their own
 * call (elem: bytes per element). The ops are independent per channel (the
 * grad's weight partials add up over the slices), so heads wider than a
 * kernel tile run slice by slice and the scratch stays the tile's. */
static inline void spa_nsac_slice(spa_nsac_args *s, int64_t c0, int64_t width, int64_t elem)
{
    /* channel c0 of the first token and head: inside every tensor (c0 < D) */
    s->x = (const char *)s->x + c0 * s->xs2 * elem;
    s->y = (char *)s->y + c0 * s->ys2 * elem;
    if (s->dx != NULL)
        s->dx = (char *)s->dx + c0 * s->dxs2 * elem;
    s->d = width;
}

/* Grad: windows covering one token at most, and outputGrad rows touching
 * tt consecutive tokens at most (bs <= T, so nothing overflows). */
static inline int64_t spa_nsacg_nw_max(int64_t bs, int64_t st)
{
    return (bs - 1) / st + 1;
}
static inline int64_t spa_nsacg_rows(int64_t tt, int64_t bs, int64_t st)
{
    return (tt + bs - 1) / st + 1;
}
/* Grad: windows per token the kernel holds on its stack; more (bs > 8 st)
 * take their dot-product lanes, weights and row pointers from the scratch. */
#define SPA_NSACG_NW_STACK 8

/* Heads processed together: as many whole heads as fit the tile's channel
 * count tc (at least one), so a token row is read in contiguous runs. */
static inline int64_t spa_nsac_head_group(int64_t heads, int64_t d, int64_t tc)
{
    int64_t g = tc / d;
    return g < 1 ? 1 : g < heads ? g : heads;
}

/* Scratch floats per block (d: the channels of a slice, <= tc): forward TW
 * accumulator rows + one input row; grad the staged outputGrad rows + input
 * row + accumulator row, and where nw_max > SPA_NSACG_NW_STACK its lanes,
 * weights and row pointers (spa_nsacg_big). A multiple of 16 floats, so
 * every block's scratch keeps the workspace's alignment. */
static inline int64_t spa_nsac_fwd_scratch(int64_t heads, int64_t d, int64_t tw, int64_t tc)
{
    return ((tw + 1) * spa_nsac_head_group(heads, d, tc) * d + 15) / 16 * 16;
}
static inline int64_t spa_nsacg_ptr_floats(void)
{
    return (int64_t)((sizeof(void *) + sizeof(float) - 1) / sizeof(float));
}
static inline int64_t spa_nsac_grad_scratch(int64_t heads, int64_t d, int64_t rows, int64_t nw_max, int64_t tc)
{
    int64_t f = (rows + 2) * spa_nsac_head_group(heads, d, tc) * d;
    if (nw_max > SPA_NSACG_NW_STACK)
        f += nw_max * (16 + 1 + spa_nsacg_ptr_floats()) + 2;
    return (f + 15) / 16 * 16;
}

/* Forward: windows [0, nwin) starting at token tok0 (window k covers tokens
 * tok0 + k*st .. + bs-1) go to output rows row0 + k. scratch: f32 tile. */
typedef void spa_nsac_fwd_kernel(const spa_nsac_args *a, int64_t tok0, int64_t row0, int64_t nwin,
                                 float *scratch);

/* Grad: tokens [t0, t1) of one batch (first token bstart, nwin windows whose
 * outputGrad rows start at row0): writes inputGrad for those tokens and adds
 * sum_d dY*x into wpart[j*n + h] for every (window, j) landing on them. */
typedef void spa_nsac_grad_kernel(const spa_nsac_args *a, int64_t bstart, int64_t row0,
                                  int64_t nwin, int64_t t0, int64_t t1, float *wpart,
                                  float *scratch);

#endif
