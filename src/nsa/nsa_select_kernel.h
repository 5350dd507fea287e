/* Contract between src/nsa_select*.c and the generated kernels of
 * templates/nsa_select*.c.m4. All strides are in elements. */
#ifndef SPA_NSA_SELECT_KERNEL_H
#define SPA_NSA_SELECT_KERNEL_H

#include <stdint.h>

#include "half.h"

/* Query heads of a group are padded to gp lanes: 16 or 32, or 8 where the
 * ISA's vectors hold at most 8 f32 (so that a group of 8 heads, common in
 * GQA, computes no padded lanes there). */
#define SPA_NSAS_GP_MIN (SPA_VL <= 8 ? 8 : 16)

typedef struct spa_nsas_args {
    const void *q; /* query [T1, N1, D] */
    int64_t qs0, qs1, qs2;
    const float *kf; /* key rows of the kv head being run, as f32: kernel row r
                      * (nsa_select_plan.h) at kf + r * kfr, dp floats of which
                      * the kernels read (a tail past d is 0) */
    int64_t kfr;
    const float *vf; /* value rows of that head, the same way */
    int64_t vfr;
    /* The bf16 forward on a layer with the bf16 dot product (SPA_ISA_BF16_DOT,
     * nsa_select_pack.h): kb non-NULL, and the rows read as bf16 pairs
     * instead of kf / vf, a word (uint32_t) holding two elements, the first
     * in its low half: key row r at kb + r * kbr (dp / 2 words, elements 2i
     * and 2i+1 in word i, a tail past d 0), value rows 2i and 2i+1 as one
     * row of dvp words at vp + i * vpr (element e of both in word e). */
    const uint32_t *kb;
    int64_t kbr;
    const uint32_t *vp;
    int64_t vpr;
    const int32_t *idx; /* topkIndices [T1, N2, K], already checked; -1: padding */
    int64_t is0, is1, is2;
    void *o; /* attentionOut [T1, N1, Dv]: forward writes, grad reads */
    int64_t os0, os1, os2;
    void *mx; /* softmaxMax f32 [T1, N1, 8] */
    int64_t ms0, ms1, ms2;
    void *sm; /* softmaxSum f32 [T1, N1, 8] */
    int64_t ss0, ss1, ss2;
    const void *dy; /* grad: attentionOutGrad [T1, N1, Dv] */
    int64_t dys0, dys1, dys2;
    void *dq; /* grad: dqOut [T1, N1, D] */
    int64_t dqs0, dqs1, dqs2;
    int64_t n2;  /* kv heads */
    int64_t g;   /* query heads per kv head */
    int64_t gp;  /* g padded to the lanes of the micro-kernels (SPA_NSAS_GP_MIN, 16 or 32) */
    int64_t d;   /* q/k head dim */
    int64_t dv;  /* v head dim */
    int64_t dp, dvp; /* d, dv rounded up to 16: the micro-kernels' head dims */
    int64_t bs;  /* selectedBlockSize */
    int64_t kc;  /* selectedBlockCount */
    float scale;
    int causal;
    int gathered; /* the decode path (nsa_select_infer.c): kf / vf hold only the
                   * blocks one token selects, its n-th selected slot at rows
                   * n * bs (f64: k / v the same way); idx still gives their
                   * positions in the sequence */
    int split; /* the decode path's parts of a half-dtype row, whose P is
                * rounded after dividing by the whole row's sum, which a part
                * does not know (G <= 32: one chunk of heads): 0, the whole
                * row; SPA_NSAS_SPLIT_STATS, the part's scores, its max and
                * sum into mx / sm (f32, per head), st = exp(z' - m) kept in
                * the scratch; SPA_NSAS_SPLIT_FINISH, with the same scratch,
                * P = st * pscale rounded to the dtype and the part's P Vsel
                * into o as f32 [G][Dv] (os0 0, os1 Dv, os2 1) */
    const float *pscale; /* SPA_NSAS_SPLIT_FINISH: per head lane, exp(m - M) / L
                          * with M, L the whole row's max and sum */
} spa_nsas_args;

enum { SPA_NSAS_SPLIT_STATS = 1, SPA_NSAS_SPLIT_FINISH = 2 };

/* Forward: query tokens [t0, t1) of kv head n2, all in the batch whose
 * queries start at token qstart and whose KV (kvlen rows) starts at kernel
 * row kstart. Kernel rows past kvlen (up to the end of the last block) are
 * read but not attended. */
typedef void spa_nsas_fwd_kernel(const spa_nsas_args *a, int64_t n2, int64_t t0, int64_t t1,
                                 int64_t qstart, int64_t kstart, int64_t kvlen, float *scratch);

/* Grad: query tokens [t0, t1) of one batch, kv head n2. Writes dq of those
 * tokens and adds the dK / dV rows they select into the f32 partials dkp
 * [rows][dp] and dvp [rows][dvp], whose row 0 is kernel row kvlo. */
typedef void spa_nsas_grad_kernel(const spa_nsas_args *a, int64_t n2, int64_t t0, int64_t t1,
                                  int64_t qstart, int64_t kstart, int64_t kvlen, int64_t kvlo,
                                  float *dkp, float *dvp, float *scratch);

#endif
