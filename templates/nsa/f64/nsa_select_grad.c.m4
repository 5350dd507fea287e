SPA_STAMP
/* NsaSelectedAttentionGrad in float64 (spec/nsa.md 4.2, f64 throughout, no
 * roundings of P or dS): per query token t of kv head n2, the G heads h of
 * the group together (the lanes of the register tiles, nsa_select_mk.m4),
 * over the positions c of its selected blocks (spa_nsas_f64_segments, rows
 * r_c), with m and l the given softmaxMax / softmaxSum:
 *     P_c  = exp(z_c - m) / l          (z_c as the forward; none if l <= 0; NaN if l is)
 *     Dt   = sum_e dy[t][h][e] * o[t][h][e]
 *     dS_c = P_c * (sum_e dy[t][h][e] * v[r_c][n2][e] - Dt)   (0 where masked)
 *     dq[t][h] = scale * sum_c dS_c * k[r_c][n2]              (c ascending)
 *     dkp[r_c - kvlo] += sum_h dS_c * q[t][h],  dvp[r_c - kvlo] += sum_h P_c * dy[t][h]
 * The partial rows take tokens ascending, then c, then the heads in order:
 * a fixed order per range. Any D, Dv >= 1 and any strides (the tiles
 * broadcast key and value elements through their strides; the query, dY
 * and dq rows go through the scratch). */
#include <stddef.h>
#include <stdint.h>

#include "half.h"
#include "f64_exp.h"
#include "f64_rows.h"
#include "nsa_select_f64.h"

m4_include(`templates/nsa/f64/nsa_select_mk.m4')m4_dnl
m4_divert(-1)
NSASD_UPD(name, R): part[r*pn + x] += sum_g w[r*gp + g] * src[g*sn + x] for
the R rows r and the nd (<= NSASD_UNV vectors) channels x of one chunk,
g < G ascending after the value already there.
m4_define(`NSASD_UNV', 4)
m4_define(`NSASD_UCH', m4_eval(NSASD_UNV * SPA_VDL))
m4_define(`NSASD_UZ', `    spa_vd c$1_$2 = spa_f64_ld(part + $1 * pn, $2, nd);
')
m4_define(`NSASD_UB', `        const spa_vd b$1 = spa_f64_ld(sp, $1, nd);
')
m4_define(`NSASD_UX', `        const spa_vd x$1 = spa_vd_set1(w[$1 * gp + g]);
')
m4_define(`NSASD_UST', `    spa_f64_st(part + $1 * pn, $2, nd, c$1_$2);
')
m4_define(`NSASD_UPD', `
SPA_ISA_INLINE void nsasd_upd_$1(double *part, int64_t pn, const double *w, int64_t gp,
                                 const double *src, int64_t sn, int64_t G, int64_t nd)
{
SPA_FOR2($2, NSASD_UNV, `NSASD_UZ')m4_dnl
    for (int64_t g = 0; g < G; g++) {
        const double *sp = src + g * sn;
SPA_FOR(NSASD_UNV, `NSASD_UB')m4_dnl
SPA_FOR($2, `NSASD_UX')m4_dnl
SPA_FOR2($2, NSASD_UNV, `NSASD_FMA')m4_dnl
    }
SPA_FOR2($2, NSASD_UNV, `NSASD_UST')m4_dnl
}
')
m4_divert(0)m4_dnl
NSASD_UPD(`tile', NSASD_RU)m4_dnl
NSASD_UPD(`row', 1)m4_dnl

/* Rows [j0, j1) of one block (row 0 of part is its first row, rows pn
 * apart): part[j] += sum_g w[j][g] * src_g over the n channels. */
static void nsasd_upd_rows(double *part, int64_t pn, const double *w, int64_t gp, const double *src,
                           int64_t G, int64_t n, int64_t j0, int64_t j1)
{
    int64_t j = j0;
    for (; j + NSASD_RU <= j1; j += NSASD_RU) {
        int64_t x = 0;
        for (; x + NSASD_UCH <= n; x += NSASD_UCH)
            nsasd_upd_tile(part + j * pn + x, pn, w + j * gp, gp, src + x, n, G, NSASD_UCH);
        if (x < n)
            nsasd_upd_tile(part + j * pn + x, pn, w + j * gp, gp, src + x, n, G, n - x);
    }
    for (; j < j1; j++) {
        int64_t x = 0;
        for (; x + NSASD_UCH <= n; x += NSASD_UCH)
            nsasd_upd_row(part + j * pn + x, pn, w + j * gp, gp, src + x, n, G, NSASD_UCH);
        if (x < n)
            nsasd_upd_row(part + j * pn + x, pn, w + j * gp, gp, src + x, n, G, n - x);
    }
}

/* The head rows of a group, unit stride: dst[g*n + x] = src_g[x*s2]. */
static void nsasd_copy_in(double *dst, const double *src, int64_t gs, int64_t s2, int64_t G, int64_t n)
{
    for (int64_t g = 0; g < G; g++)
        for (int64_t x = 0; x < n; x++)
            dst[g * n + x] = src[g * gs + x * s2];
}

void NSASG64_KSYM`'(const spa_nsas_f64_args *f, int64_t n2, int64_t t0, int64_t t1, int64_t qstart,
                  int64_t kstart, int64_t klen, int64_t kvlo, double *dkp, double *dvp,
                  double *scratch)
{
    const spa_nsas_args *a = &f->a;
    const double *q = a->q, *o = a->o, *mx = a->mx, *sm = a->sm, *dy = a->dy;
    double *dq = a->dq;
    const double *kh = f->k + n2 * f->ks1, *vh = f->v + n2 * f->vs1;
    const int64_t G = a->g, GP = (G + SPA_VDL - 1) / SPA_VDL * SPA_VDL, D = a->d, DV = a->dv;
    const int64_t KB = a->kc * a->bs;
    double *qt = scratch;      /* [D][GP] query rows, transposed */
    double *dqt = qt + D * GP; /* [D][GP] dq before the scale */
    double *dyt = dqt + D * GP; /* [DV][GP] dY rows, transposed */
    double *qn = dyt + DV * GP; /* [G][D] query rows, unit stride */
    double *dyn = qn + G * D;   /* [G][DV] dY rows, unit stride */
    double *pt = dyn + G * DV;  /* [KB][GP] S, then P */
    double *dst = pt + KB * GP; /* [KB][GP] dP, then dS */
    double *mrow = dst + KB * GP, *lrow = mrow + GP, *drow = lrow + GP;
    spa_nsas_f64_seg *seg = (spa_nsas_f64_seg *)(void *)(drow + GP);
    const spa_f64_expk ek = spa_f64_expk_set();
    const spa_vd sc = spa_vd_set1(f->scale), one = spa_vd_set1(1.0), zero = spa_vd_zero();
    const spa_vd masked = spa_vd_set1(SPA_NSAS_F64_MASKED);

    /* lanes past G: zero rows, m 0, l 1, D 0 (finite, never written out) */
    for (int64_t i = 0; i < D * GP; i++)
        qt[i] = 0.0;
    for (int64_t i = 0; i < DV * GP; i++)
        dyt[i] = 0.0;
    for (int64_t l = G; l < GP; l++)
        mrow[l] = 0.0, lrow[l] = 1.0, drow[l] = 0.0;
    for (int64_t t = t0; t < t1; t++) {
        int64_t cnt;
        const int64_t ns = spa_nsas_f64_segments(a, n2, t, qstart, kstart, klen, seg, &cnt);
        const double *qg = q + t * a->qs0 + n2 * G * a->qs1, *dyg = dy + t * a->dys0 + n2 * G * a->dys1;
        int64_t live = 0; /* heads with l > 0 or NaN (l <= 0: no position, or bad statistics;
                           * a NaN l, a NaN row's, makes its gradients NaN) */
        for (int64_t g = 0; g < G; g++) {
            const int64_t h = n2 * G + g;
            mrow[g] = mx[t * a->ms0 + h * a->ms1];
            lrow[g] = sm[t * a->ss0 + h * a->ss1];
            live += !(lrow[g] <= 0.0);
        }
        if (cnt == 0 || live == 0) { /* no gradient: dq = +0 */
            for (int64_t g = 0; g < G; g++) {
                double *dqh = dq + t * a->dqs0 + (n2 * G + g) * a->dqs1;
                for (int64_t x = 0; x < D; x++)
                    dqh[x * a->dqs2] = 0.0;
            }
            continue;
        }
        for (int64_t g = 0; g < G; g++) {
            const int64_t h = n2 * G + g;
            drow[g] = spa_f64_dot(dyg + g * a->dys1, a->dys2, o + t * a->os0 + h * a->os1, a->os2, DV);
        }
        nsasd_transpose_in(qt, GP, qg, a->qs1, a->qs2, G, D);
        nsasd_transpose_in(dyt, GP, dyg, a->dys1, a->dys2, G, DV);
        nsasd_copy_in(qn, qg, a->qs1, a->qs2, G, D);
        nsasd_copy_in(dyn, dyg, a->dys1, a->dys2, G, DV);
        /* S = scale K Qt and dP = V dYt, block by block */
        for (int64_t s = 0, c = 0; s < ns; c += seg[s].len, s++) {
            nsasd_dot_rows(kh + seg[s].row * f->ks0, f->ks0, f->ks2, qt, GP, D, sc, seg[s].len, pt + c * GP);
            nsasd_dot_rows(vh + seg[s].row * f->vs0, f->vs0, f->vs2, dyt, GP, DV, one, seg[s].len, dst + c * GP);
        }
        /* P and dS; a masked score is a constant: no gradient through it (a
         * fully masked row still averages the values: dV gets P dY) */
        for (int64_t l = 0; l < GP; l += SPA_VDL) {
            const spa_vd m = spa_vd_load(mrow + l), lv = spa_vd_load(lrow + l), dt = spa_vd_load(drow + l);
            for (int64_t s = 0, c = 0; s < ns; c += seg[s].len, s++)
                for (int64_t j = 0; j < seg[s].len; j++) {
                    double *pc = pt + (c + j) * GP + l, *dc = dst + (c + j) * GP + l;
                    const int vis = j < seg[s].valid;
                    const spa_vd p = spa_vd_div(spa_f64_expv(spa_vd_sub(vis ? spa_vd_load(pc) : masked, m), &ek), lv);
                    spa_vd_store(pc, p);
                    spa_vd_store(dc, vis ? spa_vd_mul(p, spa_vd_sub(spa_vd_load(dc), dt)) : zero);
                }
        }
        if (live < G) /* heads with l <= 0 take no gradient */
            for (int64_t g = 0; g < G; g++)
                if (lrow[g] <= 0.0)
                    for (int64_t c = 0; c < cnt; c++)
                        pt[c * GP + g] = 0.0, dst[c * GP + g] = 0.0;
        /* dq = scale dS K */
        nsasd_acc_rows(seg, ns, kh, f->ks0, f->ks2, D, dst, GP, dqt);
        for (int64_t g = 0; g < G; g++) {
            double *dqh = dq + t * a->dqs0 + (n2 * G + g) * a->dqs1;
            for (int64_t x = 0; x < D; x++)
                dqh[x * a->dqs2] = f->scale * dqt[x * GP + g];
        }
        /* the partial rows: dS q and P dY over every row of the block (a
         * masked row's dS is +0: it adds nothing but what 0 * q gives, NaN
         * for a NaN q, as the f32 kernels and the reference's arithmetic) */
        for (int64_t s = 0, c = 0; s < ns; c += seg[s].len, s++) {
            const int64_t r0 = seg[s].row - kvlo;
            nsasd_upd_rows(dkp + r0 * D, D, dst + c * GP, GP, qn, G, D, 0, seg[s].len);
            nsasd_upd_rows(dvp + r0 * DV, DV, pt + c * GP, GP, dyn, G, DV, 0, seg[s].len);
        }
    }
}
