m4_divert(-1)
The register tiles of the float64 selected attention (both templates/f64/
nsa_select*.c.m4 include this), over the layer double lanes (spa_vd,
SPA_VDL). Head lanes: a group of G query heads padded to GP (a multiple of
SPA_VDL), laid out [row][GP]; a tile covers two vectors of lanes (the x2
tiles) or one (x1, the last odd vector). Rows: NSASD_R per tile, or one.
Every output element is one fused (or multiply-add) chain in a fixed order
(the head dim ascending, or the positions ascending), whatever the tile, so
the tile never changes a result.

NSASD_DOT(name, R, NV): out[r*gp + l] = sc * sum_x kb[r*ks0 + x*ks2] *
bt[x*gp + l], r < R, l < NV*SPA_VDL (x < n ascending): scores S = scale K Qt
(and dP = V dYt with sc 1) for R consecutive key rows of one block.
m4_define(`NSASD_Z', `    spa_vd c$1_$2 = spa_vd_zero();
')
m4_define(`NSASD_B', `        const spa_vd b$1 = spa_vd_load(bp + $1 * SPA_VDL);
')
m4_define(`NSASD_FMA', `        c$1_$2 = spa_vd_fma(c$1_$2, x$1, b$2);
')
m4_define(`NSASD_DOT_X', `        const spa_vd x$1 = spa_vd_set1(kp[$1 * ks0]);
')
m4_define(`NSASD_DOT_ST', `    spa_vd_store(out + $1 * gp + $2 * SPA_VDL, spa_vd_mul(sc, c$1_$2));
')
m4_define(`NSASD_DOT', `
SPA_ISA_INLINE void nsasd_dot_$1(const double *kb, int64_t ks0, int64_t ks2, const double *bt,
                                 int64_t gp, int64_t n, spa_vd sc, double *out)
{
SPA_FOR2($2, $3, `NSASD_Z')m4_dnl
    for (int64_t x = 0; x < n; x++) {
        const double *bp = bt + x * gp, *kp = kb + x * ks2;
SPA_FOR($3, `NSASD_B')m4_dnl
SPA_FOR($2, `NSASD_DOT_X')m4_dnl
SPA_FOR2($2, $3, `NSASD_FMA')m4_dnl
    }
SPA_FOR2($2, $3, `NSASD_DOT_ST')m4_dnl
}
')

NSASD_ACC(name, R, NV): out[r*gp + l] = sum_c vb[row_c*vs0 + r*vs2] *
p[c*gp + l], over the positions c of the blocks seg[0..ns) in order: the
output O = P V (and dQ = dS K) for R consecutive channels.
m4_define(`NSASD_ACC_X', `        const spa_vd x$1 = spa_vd_set1(vr[$1 * vs2]);
')
m4_define(`NSASD_ACC_ST', `    spa_vd_store(out + $1 * gp + $2 * SPA_VDL, c$1_$2);
')
m4_define(`NSASD_ACC', `
SPA_ISA_INLINE void nsasd_acc_$1(const spa_nsas_f64_seg *seg, int64_t ns, const double *vb,
                                 int64_t vs0, int64_t vs2, const double *p, int64_t gp, double *out)
{
SPA_FOR2($2, $3, `NSASD_Z')m4_dnl
    const double *bp = p;
    for (int64_t s = 0; s < ns; s++) {
        const double *vr = vb + seg[s].row * vs0;
        for (int64_t j = 0; j < seg[s].len; j++, vr += vs0, bp += gp) {
SPA_FOR($3, `NSASD_B')m4_dnl
SPA_FOR($2, `NSASD_ACC_X')m4_dnl
SPA_FOR2($2, $3, `NSASD_FMA')m4_dnl
        }
    }
SPA_FOR2($2, $3, `NSASD_ACC_ST')m4_dnl
}
')
m4_divert(0)m4_dnl
NSASD_DOT(`tile2', NSASD_R, 2)m4_dnl
NSASD_DOT(`tile1', NSASD_R, 1)m4_dnl
NSASD_DOT(`row2', 1, 2)m4_dnl
NSASD_DOT(`row1', 1, 1)m4_dnl
NSASD_ACC(`tile2', NSASD_R, 2)m4_dnl
NSASD_ACC(`tile1', NSASD_R, 1)m4_dnl
NSASD_ACC(`row2', 1, 2)m4_dnl
NSASD_ACC(`row1', 1, 1)m4_dnl

/* The scores (or dP) of the len rows of one block from kb, every lane:
 * tiles of NSASD_R rows, then single rows; out rows gp apart. */
static void nsasd_dot_rows(const double *kb, int64_t ks0, int64_t ks2, const double *bt, int64_t gp,
                           int64_t n, spa_vd sc, int64_t len, double *out)
{
    int64_t j = 0;
    for (; j + NSASD_R <= len; j += NSASD_R) {
        int64_t l = 0;
        for (; l + 2 * SPA_VDL <= gp; l += 2 * SPA_VDL)
            nsasd_dot_tile2(kb + j * ks0, ks0, ks2, bt + l, gp, n, sc, out + j * gp + l);
        if (l < gp)
            nsasd_dot_tile1(kb + j * ks0, ks0, ks2, bt + l, gp, n, sc, out + j * gp + l);
    }
    for (; j < len; j++) {
        int64_t l = 0;
        for (; l + 2 * SPA_VDL <= gp; l += 2 * SPA_VDL)
            nsasd_dot_row2(kb + j * ks0, ks0, ks2, bt + l, gp, n, sc, out + j * gp + l);
        if (l < gp)
            nsasd_dot_row1(kb + j * ks0, ks0, ks2, bt + l, gp, n, sc, out + j * gp + l);
    }
}

/* out[e][l] = sum_c vb[row_c][e] * p[c][l] for the n channels e of the
 * rows of seg[0..ns) (channel stride vs2), every lane: tiles of NSASD_R
 * channels, then single ones; out rows gp apart. */
static void nsasd_acc_rows(const spa_nsas_f64_seg *seg, int64_t ns, const double *vb, int64_t vs0,
                           int64_t vs2, int64_t n, const double *p, int64_t gp, double *out)
{
    int64_t e = 0;
    for (; e + NSASD_R <= n; e += NSASD_R) {
        int64_t l = 0;
        for (; l + 2 * SPA_VDL <= gp; l += 2 * SPA_VDL)
            nsasd_acc_tile2(seg, ns, vb + e * vs2, vs0, vs2, p + l, gp, out + e * gp + l);
        if (l < gp)
            nsasd_acc_tile1(seg, ns, vb + e * vs2, vs0, vs2, p + l, gp, out + e * gp + l);
    }
    for (; e < n; e++) {
        int64_t l = 0;
        for (; l + 2 * SPA_VDL <= gp; l += 2 * SPA_VDL)
            nsasd_acc_row2(seg, ns, vb + e * vs2, vs0, vs2, p + l, gp, out + e * gp + l);
        if (l < gp)
            nsasd_acc_row1(seg, ns, vb + e * vs2, vs0, vs2, p + l, gp, out + e * gp + l);
    }
}

/* The head rows of a group, transposed: dst[x*gp + g] = src_g[x*s2], the
 * rows gs apart, x < n, g < G (lanes past G untouched). */
static void nsasd_transpose_in(double *dst, int64_t gp, const double *src, int64_t gs, int64_t s2,
                               int64_t G, int64_t n)
{
    for (int64_t g = 0; g < G; g++)
        for (int64_t x = 0; x < n; x++)
            dst[x * gp + g] = src[g * gs + x * s2];
}
