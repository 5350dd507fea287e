/* Shared planning of NsaCompress and NsaCompressGrad. */
#include <string.h>

#include "nsa_compress_plan.h"

int64_t spa_nsac_windows(int64_t len, int64_t bs, int64_t st)
{
    return len >= bs ? (len - bs) / st + 1 : 0;
}

spa_status spa_nsac_check_common(const spa_tensor *input, const spa_tensor *weight,
                                 const spa_int_array *seq, const char *layout, int64_t bs,
                                 int64_t st, int64_t seq_type, spa_nsac_shape *shape)
{
    SPA_TRY(spa_tensor_check(input, 3));
    SPA_TRY(spa_tensor_check(weight, 2));
    SPA_REQUIRE(spa_is_float_dtype(input->dtype) /* a float dtype, not one this build left out (DTYPES) */);
    SPA_REQUIRE(weight->dtype == input->dtype);
    /* NULL means the op's default, "TND" (spec/nsa.md 1.3 rule 3). */
    SPA_REQUIRE(layout == NULL || spa_layout_is_tnd(layout));
    int64_t total;
    SPA_TRY(spa_seq_check(seq, seq_type, &total));
    /* Any window and step with windows that cover their step: the NPU's
     * multiples of 16 and bs <= 128 are the aclnn layer's rules. */
    SPA_REQUIRE(bs > 0);
    SPA_REQUIRE(st > 0);
    SPA_REQUIRE(bs >= st);
    /* Any head count and head dim (the NPU's N <= 128, D in 16..256 step
     * 16 are the aclnn layer's); heads wider than a kernel tile run as
     * channel slices (spa_nsac_slice). */
    const int64_t n = input->dims[1], d = input->dims[2];
    SPA_REQUIRE(n >= 1);
    SPA_REQUIRE(d >= 1);
    SPA_REQUIRE(weight->dims[0] == bs);
    SPA_REQUIRE(weight->dims[1] == n);
    SPA_REQUIRE(total == input->dims[0]);
    /* One pass with a running start (linear in the batch count). */
    int64_t windows = 0, start = 0;
    for (uint64_t b = 0; b < seq->size; b++) {
        const int64_t len = seq_type == 0 ? seq->data[b] - start : seq->data[b];
        start += len;                             /* <= total, checked above */
        windows += spa_nsac_windows(len, bs, st); /* <= T: no overflow */
    }
    shape->tokens = input->dims[0];
    shape->heads = n;
    shape->dim = d;
    shape->windows = windows;
    shape->batches = (int64_t)seq->size;
    return SPA_OK;
}

void spa_nsac_table_take(spa_ws *ws, int64_t batches, spa_nsac_table *tab)
{
    tab->start = spa_ws_take(ws, (uint64_t)batches + 1, sizeof(int64_t));
    tab->row = spa_ws_take(ws, (uint64_t)batches + 1, sizeof(int64_t));
    tab->batches = batches;
}

spa_status spa_nsac_table_fill(const spa_int_array *seq, int64_t seq_type, int64_t bs, int64_t st,
                               const spa_nsac_shape *shape, spa_nsac_table *tab)
{
    const volatile int64_t *src = seq->data; /* one read per element, whatever the compiler */
    int64_t start = 0, row = 0;
    SPA_REQUIRE(tab->batches == shape->batches);
    SPA_REQUIRE((uint64_t)tab->batches == seq->size);
    for (int64_t b = 0; b < tab->batches; b++) {
        const int64_t v = src[b];
        const int64_t len = seq_type == 0 ? v - start : v;
        /* start <= tokens < 2^62 and v >= 0 here, so nothing overflows */
        SPA_REQUIRE(v >= 0);
        SPA_REQUIRE(len >= 0);
        SPA_REQUIRE(len <= shape->tokens - start);
        tab->start[b] = start;
        tab->row[b] = row;
        start += len;
        row += spa_nsac_windows(len, bs, st);
    }
    SPA_REQUIRE(start == shape->tokens);
    SPA_REQUIRE(row == shape->windows);
    tab->start[tab->batches] = start;
    tab->row[tab->batches] = row;
    return SPA_OK;
}

int64_t spa_nsac_batch_of(const int64_t *ends, int64_t batches, int64_t at)
{
    int64_t lo = 0, hi = batches; /* answer in [lo, hi] */
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (ends[mid] <= at)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int64_t spa_nsac_split(int64_t units, int64_t granule, uint32_t *blocks)
{
    int64_t per = (units + SPA_NSAC_MAX_BLOCKS - 1) / SPA_NSAC_MAX_BLOCKS;
    per = (per + granule - 1) / granule * granule;
    if (per < granule)
        per = granule;
    *blocks = (uint32_t)((units + per - 1) / per);
    return per;
}

spa_nsac_args spa_nsac_args_of(const spa_tensor *x, const spa_tensor *w, const spa_tensor *y,
                               const spa_tensor *dx, int64_t bs, int64_t st)
{
    spa_nsac_args a;
    memset(&a, 0, sizeof a);
    a.x = x->data;
    a.xs0 = x->strides[0];
    a.xs1 = x->strides[1];
    a.xs2 = x->strides[2];
    a.w = w->data;
    a.ws0 = w->strides[0];
    a.ws1 = w->strides[1];
    a.y = y->data;
    a.ys0 = y->strides[0];
    a.ys1 = y->strides[1];
    a.ys2 = y->strides[2];
    if (dx != NULL) {
        a.dx = dx->data;
        a.dxs0 = dx->strides[0];
        a.dxs1 = dx->strides[1];
        a.dxs2 = dx->strides[2];
    }
    a.n = x->dims[1];
    a.d = x->dims[2];
    a.bs = bs;
    a.st = st;
    return a;
}
