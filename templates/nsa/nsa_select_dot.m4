m4_divert(-1)
The bf16 dot-product micro-kernels of the NsaSelectedAttention forward, for
layers with a bf16 dot product (SPA_BF16_DOT: spa_vbp, spa_vbq,
spa_vf_dotq_bf16; avx512bf16's vdpbf16ps, neon_bf16's bfdot by element),
included by the op template for bf16 only. The
operands are bf16 pairs, one word (uint32_t) holding elements 2i and 2i+1
of the reduction, the first in its low half: each instruction adds two
exact products per f32 lane, so a tile does twice the products of the f32
tile of the same registers and reads half the bytes. The tiles, their rows
and operand vectors are those of the f32 tiles (NSAS_R<gp>, NSAS_NV<gp>,
templates/nsa/nsa_select_mk.m4); the accumulators are f32.
Per output element the pairs are added in one fixed order (ascending)
whatever the tile, so the tile never changes a result.
m4_define(`NSAD_LDB', `                    const spa_vbp b$1 = spa_vbp_load(bp + $1 * SPA_VL);
')
Quads (spa_vbq: four consecutive words, used by lane: one register on NEON,
four broadcasts from memory on x86): the scores read four words of each key
row at once (q<r>), the accumulate four value columns of one pair row.
m4_define(`NSAD_LDQ', `                const spa_vbq q$1 = spa_vbq_load(a0 + $1 * lda + i0);
')
m4_define(`NSAD_DOTQ', `                    c$1_$2 = spa_vf_dotq_bf16(c$1_$2, b$2, q$1, NSAD_DD);
')
m4_define(`NSAD_QSTEP', `m4_define(`NSAD_DD', $1)m4_dnl
                {
                    const uint32_t *bp = bt + (i0 + $1) * gp + l0;
SPA_FOR(NSAD_NV, `NSAD_LDB')m4_dnl
SPA_FOR2(NSAD_R, NSAD_NV, `NSAD_DOTQ')m4_dnl
                }
')
m4_define(`NSAD_LDQA', `                    const spa_vbq q$1 = spa_vbq_load(xp + 4 * $1);
')
m4_define(`NSAD_DOTQA', `                    c$1_$2 = spa_vf_dotq_bf16(c$1_$2, b$2, q`'m4_eval($1 / 4), m4_eval($1 % 4));
')

NSAD_SCORES_TILE(R, NV, GP): out[j][l] = sum_i dot(a[j*lda + i], bt[i*gp + l])
over the n / 2 words of a row (n elements, a multiple of 16).
m4_define(`NSAD_SCORES_TILE', `m4_define(`NSAD_R', $1)m4_define(`NSAD_NV', $2)
/* scores on bf16 pairs, one register tile: gp, rows x head lanes as in the name */
SPA_NSAS_INLINE void spa_mk_nsas_scores_dot_`'NSAS_TILE_NAME($1, $2, $3)(const uint32_t *a, int64_t lda_, int64_t rows_,
        const uint32_t *bt, int64_t n_, int64_t gp_, float *out, spa_nsas_pf *pf)
{
    SPA_NSAS_INDICES
    const ptrdiff_t words = n / 2;
    for (ptrdiff_t l0 = 0; l0 < gp; l0 += m4_eval($2 * SPA_VL))
        for (ptrdiff_t j0 = 0; j0 < rows; j0 += $1) {
            const uint32_t *a0 = a + j0 * lda;
            float *cb = out + j0 * gp + l0;
            const ptrdiff_t cs = gp;
SPA_FOR2($1, $2, `NSAS_ZERO')m4_dnl
            for (ptrdiff_t i0 = 0; i0 < words; i0 += 4) { /* words is a multiple of 8 */
                spa_nsas_pf_row(pf);
SPA_FOR($1, `NSAD_LDQ')m4_dnl
SPA_FOR(4, `NSAD_QSTEP')m4_dnl
            }
SPA_FOR2($1, $2, `NSAS_STC')m4_dnl
        }
}
')

NSAD_ACCUM_TILE(R, NV, GP): acc[e][l] += sum_i dot(a[i*lda + e], p[i*gp + l])
over the rows / 2 pair rows (rows a multiple of 16), e < n; R a multiple of 4.
m4_define(`NSAD_ACCUM_TILE', `m4_ifelse(m4_eval($1 % 4), 0, `', `m4_errprint(`spattn gen: the bf16 dot accumulate needs tiles of a multiple of 4 rows
')m4_m4exit(1)')
/* transposed accumulate on bf16 pairs, one register tile: gp, rows x head
 * lanes as in the name */
SPA_NSAS_INLINE void spa_mk_nsas_accum_dot_`'NSAS_TILE_NAME($1, $2, $3)(const uint32_t *a, int64_t lda_, int64_t rows_,
        const uint32_t *p, int64_t n_, int64_t gp_, float *acc, spa_nsas_pf *pf)
{
    SPA_NSAS_INDICES
    const ptrdiff_t pairs = rows / 2;
    for (ptrdiff_t l0 = 0; l0 < gp; l0 += m4_eval($2 * SPA_VL))
        for (ptrdiff_t e0 = 0; e0 < n; e0 += $1) {
            float *cb = acc + e0 * gp + l0;
            const ptrdiff_t cs = gp;
SPA_FOR2($1, $2, `NSAS_LDC')m4_dnl
            for (ptrdiff_t i0 = 0; i0 < pairs; i0 += 4) { /* pairs is a multiple of 8 */
                spa_nsas_pf_row(pf);
#pragma GCC unroll 4
                for (ptrdiff_t i = i0; i < i0 + 4; i++) {
                    const uint32_t *bp = p + i * gp + l0, *xp = a + i * lda + e0;
SPA_FOR($2, `NSAD_LDB')m4_dnl
SPA_FOR(m4_eval($1 / 4), `NSAD_LDQA')m4_dnl
SPA_FOR2($1, $2, `NSAD_DOTQA')m4_dnl
                }
            }
SPA_FOR2($1, $2, `NSAS_STC')m4_dnl
        }
}
')
m4_define(`NSAD_DISPATCH', `m4_ifelse(NSAS_GP8, 1, `    if (gp == 8)
        spa_mk_nsas_$1_`'NSAS_MK_TILE(8)($2, 8, $3);
    else ')    if (gp == 16)
        spa_mk_nsas_$1_`'NSAS_MK_TILE(16)($2, 16, $3);
    else
        spa_mk_nsas_$1_`'NSAS_MK_TILE(32)($2, 32, $3);
')
m4_divert(0)m4_dnl
/* ---- bf16 dot-product micro-kernels (templates/nsa/nsa_select_dot.m4) ---- */
m4_ifelse(NSAS_GP8, 1, `NSAD_SCORES_TILE(NSAS_R8, NSAS_NV8, 8)')m4_dnl
NSAD_SCORES_TILE(NSAS_R16, NSAS_NV16, 16)m4_dnl
NSAD_SCORES_TILE(NSAS_R32, NSAS_NV32, 32)m4_dnl

/* scores on bf16 pairs: out[j][l] = sum_i dot(a[j*lda + i], bt[i*gp + l]),
 * a = key rows of lda words, bt = the query heads transposed, [n / 2][gp]
 * words; rows a multiple of 16, n (elements) of 16. */
SPA_NSAS_INLINE void spa_nsas_scores_dot(const uint32_t *a, int64_t lda, int64_t rows, const uint32_t *bt,
                                         int64_t n, int64_t gp, float *out, spa_nsas_pf *pf)
{
NSAD_DISPATCH(`scores_dot', `a, lda, rows, bt, n', `out, pf')m4_dnl
}
NSAS_SCORES_MAX_FN(`spa_nsas_scores_max_dot', `uint32_t', `uint32_t', `spa_nsas_scores_dot')m4_dnl
m4_ifelse(NSAS_GP8, 1, `NSAD_ACCUM_TILE(NSAS_R8, NSAS_NV8, 8)')m4_dnl
NSAD_ACCUM_TILE(NSAS_R16, NSAS_NV16, 16)m4_dnl
NSAD_ACCUM_TILE(NSAS_R32, NSAS_NV32, 32)m4_dnl

/* P V on bf16 pairs: acc[e][l] += sum_i dot(a[i*lda + e], p[i*gp + l]),
 * a = value rows in pairs (lda words a pair row), p = P in pairs [rows / 2][gp]
 * words; rows a multiple of 16, e < n, a multiple of 16. */
SPA_NSAS_INLINE void spa_nsas_accum_dot(const uint32_t *a, int64_t lda, int64_t rows, const uint32_t *p,
                                        int64_t n, int64_t gp, float *acc, spa_nsas_pf *pf)
{
NSAD_DISPATCH(`accum_dot', `a, lda, rows, p, n', `acc, pf')m4_dnl
}

/* A query row (n elements, qs apart) as bf16 pairs into qt, words gp apart:
 * dp / 2 words, the elements past n 0. */
static void nsas_q_pairs(uint32_t *qt, int64_t gp, const uint16_t *qr, int64_t qs, int64_t n, int64_t dp)
{
    int64_t i = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (qs == 1) /* a dense row holds its words already: element 2i in the low half */
        for (; 2 * i + 1 < n; i++) {
            uint32_t w;
            memcpy(&w, qr + 2 * i, sizeof w);
            qt[i * gp] = w;
        }
#endif
    for (; i < dp / 2; i++) {
        const uint32_t lo = 2 * i < n ? qr[2 * i * qs] : 0, hi = 2 * i + 1 < n ? qr[(2 * i + 1) * qs] : 0;
        qt[i * gp] = lo | hi << 16;
    }
}

/* P = x * s rounded to bf16 (as spa_nsas_scale_round does) and paired in
 * place: word (i, l) = rows 2i and 2i+1 of lane l, at float (i, l); rows
 * even. Row i is written after rows 2i and 2i+1 of the same lanes are read. */
SPA_NSAS_INLINE uint32_t *spa_nsas_scale_round_pairs(float *x, int64_t rows_, int64_t gp_, const float *s)
{
    const ptrdiff_t rows = (ptrdiff_t)rows_, gp = (ptrdiff_t)gp_;
    uint32_t *w = (uint32_t *)(void *)x;
    for (ptrdiff_t l0 = 0; l0 < gp; l0 += SPA_VL) {
        const spa_vf sv = spa_vf_load(s + l0);
        for (ptrdiff_t i = 0; i < rows / 2; i++) {
            const spa_vf lo = spa_vf_mul(spa_vf_load(x + 2 * i * gp + l0), sv);
            const spa_vf hi = spa_vf_mul(spa_vf_load(x + (2 * i + 1) * gp + l0), sv);
            spa_vbp_store_bf16_pairs(w + i * gp + l0, lo, hi);
        }
    }
    return w;
}
