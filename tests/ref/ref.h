/* fp64 reference implementations, written from the spec (spec/nsa.md,
 * spec/msda.md) and sharing no code with the library. Tensors are dense
 * row-major double arrays; each reference also returns, per output element,
 * the magnitude sum(|term|) that bounds its rounding error. */
#ifndef SPA_REF_H
#define SPA_REF_H

#include <stdint.h>

/* Independent decoders of the stored bits (IEEE binary16, bfloat16). */
double ref_f16_to_double(uint16_t h);
double ref_bf16_to_double(uint16_t h);

/* Batch b spans tokens [start[b], start[b] + len[b]). */
typedef struct ref_batches {
    int64_t count;
    const int64_t *start;
    const int64_t *len;
} ref_batches;

/* spec/nsa.md 1.2. x [T,N,D], w [bs,N]; out/mag [M,N,D], M = sum of windows. */
int64_t ref_nsa_compress_windows(const ref_batches *bt, int64_t bs, int64_t st);
void ref_nsa_compress(const double *x, const double *w, const ref_batches *bt, int64_t n,
                      int64_t d, int64_t bs, int64_t st, double *out, double *mag);
/* spec/nsa.md 2.2. dy [M,N,D]; dx/dx_mag [T,N,D]; dw/dw_mag [bs,N]. */
void ref_nsa_compress_grad(const double *dy, const double *x, const double *w,
                           const ref_batches *bt, int64_t t, int64_t n, int64_t d, int64_t bs,
                           int64_t st, double *dx, double *dx_mag, double *dw, double *dw_mag);

#endif
