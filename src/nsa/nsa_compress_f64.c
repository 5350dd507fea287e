/* NsaCompressGrad's phase 2 for float64 tensors (nsa_compress_f64.h): the
 * steps of the f32 driver in nsa_compress_grad.c, with double partials. */
#include "nsa_compress_f64.h"

#include "f64.h"
#include "spa_kernels.h"

#if SPA_FLOAT64_NSA_COMPRESS_GRAD

typedef struct nsacg_f64_run {
    spa_nsac_args args;
    const spa_nsac_table *tab;
    const spa_nsac_shape *sh;
    int64_t per_block;
    uint32_t blocks;
    double *wpart;
    const spa_tensor *wg;
} nsacg_f64_run;

/* Step 1, one block of tokens, split where it crosses a batch boundary. */
static void run_token_block(void *arg, uint32_t blk)
{
    const nsacg_f64_run *r = arg;
    const int64_t wlen = r->args.bs * r->sh->heads;
    double *wpart = r->wpart + (uint64_t)blk * (uint64_t)wlen;
    for (int64_t i = 0; i < wlen; i++)
        wpart[i] = 0.0;
    int64_t t = (int64_t)blk * r->per_block;
    const int64_t end = t + r->per_block < r->sh->tokens ? t + r->per_block : r->sh->tokens;
    int64_t b = spa_nsac_batch_of(r->tab->start + 1, r->sh->batches, t);
    while (t < end) {
        const int64_t batch_end = r->tab->start[b + 1] < end ? r->tab->start[b + 1] : end;
        if (batch_end > t)
            SPA_K_NSA_COMPRESS_GRAD_F64(&r->args, r->tab->start[b], r->tab->row[b],
                                        r->tab->row[b + 1] - r->tab->row[b], t, batch_end, wpart);
        t = batch_end;
        b++;
    }
}

/* Step 2, weightGrad row j: partials summed in block order. */
static void run_weight_row(void *arg, uint32_t j)
{
    const nsacg_f64_run *r = arg;
    const int64_t heads = r->sh->heads, wlen = r->args.bs * heads;
    double *out = r->wg->data;
    for (int64_t h = 0; h < heads; h++) {
        double sum = 0.0;
        for (uint32_t blk = 0; blk < r->blocks; blk++)
            sum += r->wpart[(uint64_t)blk * (uint64_t)wlen + (uint64_t)j * (uint64_t)heads + (uint64_t)h];
        out[(int64_t)j * r->wg->strides[0] + h * r->wg->strides[1]] = sum;
    }
}

void spa_nsac_grad_f64_run(const spa_runner *rn, const spa_nsac_args *args,
                           const spa_nsac_table *tab, const spa_nsac_shape *sh, int64_t per_block,
                           uint32_t blocks, double *wpart, const spa_tensor *weight_grad)
{
    nsacg_f64_run r = {*args, tab, sh, per_block, blocks, wpart, weight_grad};
    spa_run_blocks(rn, run_token_block, &r, blocks);
    spa_run_blocks(rn, run_weight_row, &r, (uint32_t)args->bs);
}

#endif
