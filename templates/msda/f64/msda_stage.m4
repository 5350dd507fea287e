m4_divert(-1)
What the float64 kernels of MultiScaleDeformableAttention share (m4_include'd
by templates/msda/f64/msda.c.m4 and msda_grad.c.m4): MSDAD_SAMPLE, the C text
that takes one (level, point) sample of spec/msda.md 5 in double. Before it:
lq (the element offset of location[b, q, h, 0, 0, 0]), l, p, lv (level l of
the validated table), fw, fh ((double)W, (double)H); it defines xl, yl (the
location), x, y and,
when the sample passes the range check (NaN and +-Inf fail it), lx, ly, hx,
hy, the four corner keys' validity in[4] (each corner checked against both
bounds of its axis) and k00, the key of corner 00; a failed check runs
$1 (a statement: `continue;' or the grad's zero writes and `continue;'). Location is read in dtype ldt
(a constant where the caller's dtype is float64, so that the reads fold).
m4_define(`MSDAD_SAMPLE', `const int64_t lo = lq + l * a->ls[3] + p * a->ls[4];
            const double xl = spa_msda_f64_get(a->loc, ldt, lo), yl = spa_msda_f64_get(a->loc, ldt, lo + a->ls[5]);
            const double x = xl * fw - 0.5, y = yl * fh - 0.5;
            if (!(y > -1.0 && x > -1.0 && y < fh && x < fw)) {
                $1
            }
            const double x0f = floor(x), y0f = floor(y);
            const int64_t x0 = (int64_t)x0f, y0 = (int64_t)y0f; /* in [-1, W-1] and [-1, H-1] here */
            const double lx = x - x0f, ly = y - y0f, hx = 1.0 - lx, hy = 1.0 - ly;
            const bool in_x0 = (uint64_t)x0 < (uint64_t)lv->w, in_x1 = (uint64_t)(x0 + 1) < (uint64_t)lv->w;
            const bool in_y0 = (uint64_t)y0 < (uint64_t)lv->h, in_y1 = (uint64_t)(y0 + 1) < (uint64_t)lv->h;
            const bool in[4] = {in_y0 && in_x0, in_y0 && in_x1, in_y1 && in_x0, in_y1 && in_x1};
            const int64_t k00 = lv->start + y0 * lv->w + x0;
            const int64_t key[4] = {k00, k00 + 1, k00 + lv->w, k00 + lv->w + 1};')
m4_divert(0)m4_dnl
