/* NsaSelectedAttention(+Grad) phase 2 for float64 tensors
 * (nsa_select_f64.h): the block splits of the f32 drivers in nsa_select.c
 * and nsa_select_grad.c, with key and value read in place and double
 * partials. */
#include "nsa_select_f64.h"

#include "f64.h"
#include "spa_kernels.h"

#if SPA_FLOAT64_NSA_SELECT || SPA_FLOAT64_NSA_SELECT_GRAD
spa_nsas_f64_args spa_nsas_f64_args_of(const spa_nsas_args *a, const spa_tensor *k,
                                       const spa_tensor *v, double scale)
{
    spa_nsas_f64_args f;
    f.a = *a;
    f.k = k->data, f.ks0 = k->strides[0], f.ks1 = k->strides[1], f.ks2 = k->strides[2];
    f.v = v->data, f.vs0 = v->strides[0], f.vs1 = v->strides[1], f.vs2 = v->strides[2];
    f.scale = scale;
    return f;
}

/* The piece of tokens [t, end) in t's batch: [t, stop), its queries from
 * qs, its klen KV rows from ks (the trusted copies). */
typedef struct nsas_f64_piece {
    int64_t t, stop, qs, ks, klen;
} nsas_f64_piece;
static void next_piece(const spa_nsas_trusted *tr, int64_t t, int64_t end, nsas_f64_piece *pc)
{
    const int64_t b = spa_nsas_batch_of(&tr->sqa, t);
    int64_t qs, qe, ks, ke;
    spa_nsas_batch(&tr->sqa, b, &qs, &qe);
    spa_nsas_batch(&tr->skva, b, &ks, &ke);
    pc->t = t, pc->stop = qe < end ? qe : end, pc->qs = qs, pc->ks = ks, pc->klen = ke - ks;
}
#endif

#if SPA_FLOAT64_NSA_SELECT
typedef struct nsas_f64_run {
    const spa_nsas_f64_args *f;
    const spa_nsas_trusted *tr;
    int64_t t1, per_block;
    double *scratch;
} nsas_f64_run;

/* One block of query tokens, every kv head; each (token, head) writes only
 * its own rows. */
static void run_fwd_block(void *arg, uint32_t blk)
{
    const nsas_f64_run *r = arg;
    const spa_nsas_args *a = &r->f->a;
    double *scratch = r->scratch + (uint64_t)blk * (uint64_t)SPA_NSAS_F64_FWD_SCRATCH(a->g, a->d, a->dv, a->kc, a->bs);
    const int64_t t0 = (int64_t)blk * r->per_block;
    const int64_t end = t0 + r->per_block < r->t1 ? t0 + r->per_block : r->t1;
    for (int64_t n2 = 0; n2 < a->n2; n2++) {
        nsas_f64_piece pc;
        for (int64_t t = t0; t < end; t = pc.stop) {
            next_piece(r->tr, t, end, &pc);
            SPA_K_NSA_SELECT_F64(r->f, n2, pc.t, pc.stop, pc.qs, pc.ks, pc.klen, scratch);
        }
    }
}

void spa_nsas_f64_forward(const spa_runner *rn, const spa_nsas_f64_args *f,
                          const spa_nsas_trusted *tr, int64_t t1, int64_t per_block,
                          uint32_t blocks, double *scratch)
{
    nsas_f64_run r = {f, tr, t1, per_block, scratch};
    spa_run_blocks(rn, run_fwd_block, &r, blocks);
}
#endif

#if SPA_FLOAT64_NSA_SELECT_GRAD
typedef struct nsasg_f64_run {
    const spa_nsas_f64_args *f;
    const spa_nsas_trusted *tr;
    const spa_nsas_f64_grad_plan *gp;
    int64_t n2;
} nsasg_f64_run;

/* Step 1, token range `range` of kv head r->n2: zero its partial, then its
 * tokens batch by batch. */
static void run_grad_range(void *arg, uint32_t range)
{
    const nsasg_f64_run *r = arg;
    const spa_nsas_f64_grad_plan *gp = r->gp;
    const spa_nsas_args *a = &r->f->a;
    const int64_t lo = gp->kvlo[range], nrows = gp->kvhi[range] - lo;
    double *dkp = gp->partial + gp->offset[range], *dvp = dkp + nrows * a->d;
    for (int64_t i = 0; i < nrows * (a->d + a->dv); i++)
        dkp[i] = 0.0;
    double *scratch = gp->scratch + (uint64_t)range * (uint64_t)SPA_NSAS_F64_GRAD_SCRATCH(a->g, a->d, a->dv, a->kc, a->bs);
    const int64_t t0 = (int64_t)range * gp->per_range;
    const int64_t end = t0 + gp->per_range < gp->t1 ? t0 + gp->per_range : gp->t1;
    nsas_f64_piece pc;
    for (int64_t t = t0; t < end; t = pc.stop) {
        next_piece(r->tr, t, end, &pc);
        SPA_K_NSA_SELECT_GRAD_F64(r->f, r->n2, pc.t, pc.stop, pc.qs, pc.ks, pc.klen, lo, dkp, dvp,
                                  scratch);
    }
}

enum { NSASG_F64_ROWS_PER_TASK = 64 };

/* Step 2: KV rows of kv head r->n2, each the sum of the partials covering it
 * in range order (dk times scale); rows no range covers come out +0. */
static void run_grad_reduce(void *arg, uint32_t task)
{
    const nsasg_f64_run *r = arg;
    const spa_nsas_f64_grad_plan *gp = r->gp;
    const spa_nsas_args *a = &r->f->a;
    const int64_t row0 = (int64_t)task * NSASG_F64_ROWS_PER_TASK;
    const int64_t row1 = row0 + NSASG_F64_ROWS_PER_TASK < gp->t2 ? row0 + NSASG_F64_ROWS_PER_TASK : gp->t2;
    for (int64_t row = row0; row < row1; row++) {
        for (int part = 0; part < 2; part++) {
            const int64_t n = part == 0 ? a->d : a->dv;
            const spa_nsas_grad_out *out = part == 0 ? gp->dk : gp->dv;
            double *dst = (double *)out->data + row * out->s0 + r->n2 * out->s1;
            for (int64_t i = 0; i < n; i++) {
                double acc = 0.0;
                for (int64_t rg = 0; rg < gp->ranges; rg++) {
                    const int64_t lo = gp->kvlo[rg], hi = gp->kvhi[rg];
                    if (row < lo || row >= hi)
                        continue;
                    const double *src = gp->partial + gp->offset[rg] +
                                        (part == 0 ? (row - lo) * a->d : (hi - lo) * a->d + (row - lo) * a->dv);
                    acc += src[i];
                }
                dst[i * out->s2] = part == 0 ? r->f->scale * acc + 0.0 : acc;
            }
        }
    }
}

void spa_nsas_f64_grad(const spa_runner *rn, const spa_nsas_f64_args *f,
                       const spa_nsas_trusted *tr, const spa_nsas_f64_grad_plan *gp)
{
    nsasg_f64_run r = {f, tr, gp, 0};
    const int64_t tasks = (gp->t2 + NSASG_F64_ROWS_PER_TASK - 1) / NSASG_F64_ROWS_PER_TASK;
    for (r.n2 = 0; r.n2 < f->a.n2; r.n2++) {
        if (gp->t1 > 0)
            spa_run_blocks(rn, run_grad_range, &r, (uint32_t)gp->ranges);
        spa_run_blocks(rn, run_grad_reduce, &r, (uint32_t)tasks);
    }
}
#endif
