/* Shared planning of sliding-window attention and its grad. */
#include <math.h>
#include <string.h>

#include "swa_plan.h"

/* Query lanes of the micro-kernels for a sub-group of g heads (8 only where
 * vectors hold at most 8 f32, as selected attention). */
static int64_t lanes_for(int64_t g)
{
    const int64_t min = SPA_VL <= 8 ? 8 : 16;
    return g <= min ? min : g <= 16 ? 16 : 32;
}

/* 1/sqrt(d) in double without libm's sqrt (not among the core's imports):
 * sqrtf's estimate refined by two Newton steps. */
static double inv_sqrt(int64_t d)
{
    const double x = (double)d;
    double r = (double)sqrtf((float)x);
    r = 0.5 * (r + x / r);
    r = 0.5 * (r + x / r);
    return 1.0 / r;
}

static spa_status check_stat(const spa_tensor *s, bool out, int32_t dt, int64_t t, int64_t n1)
{
    if (s->rank == 2) {
        SPA_TRY(out ? spa_tensor_check_output(s, 2) : spa_tensor_check(s, 2));
        const int64_t dims[2] = {t, n1};
        SPA_REQUIRE(spa_tensor_dims_are(s, 2, dims));
    } else {
        SPA_TRY(out ? spa_tensor_check_output(s, 3) : spa_tensor_check(s, 3));
        const int64_t dims[3] = {t, n1, 8};
        SPA_REQUIRE(spa_tensor_dims_are(s, 3, dims));
    }
    SPA_REQUIRE(s->dtype == (dt == SPA_FLOAT64 ? SPA_FLOAT64 : SPA_FLOAT32));
    return SPA_OK;
}

spa_status spa_swa_check_shapes(const spa_tensor *q, const spa_tensor *k, const spa_tensor *v,
                                const spa_tensor *mx, const spa_tensor *sm, bool stats_out,
                                const spa_int_array *seq, int64_t seq_type, double scale,
                                int64_t head_num, const char *layout, int64_t window,
                                int64_t window_type, spa_swa_shape *sh)
{
    memset(sh, 0, sizeof *sh);
    SPA_REQUIRE(layout == NULL || spa_layout_is_tnd(layout));
    SPA_REQUIRE(seq_type == 0 || seq_type == 1);
    SPA_REQUIRE(window_type == SPA_SWA_WINDOW_KEYS_ || window_type == SPA_SWA_WINDOW_LEFT_);
    if (window_type == SPA_SWA_WINDOW_KEYS_)
        SPA_REQUIRE(window >= 1);
    else
        SPA_REQUIRE(window >= -1);
    SPA_REQUIRE(!isinf(scale));
    SPA_TRY(spa_tensor_check(q, 3));
    SPA_TRY(spa_tensor_check(k, 3));
    SPA_TRY(spa_tensor_check(v, 3));
    const int32_t dt = q->dtype;
    SPA_REQUIRE(spa_is_float_dtype(dt) /* a float dtype, not one this build left out (DTYPES) */);
    SPA_REQUIRE(dt != SPA_FLOAT64 || SPA_FLOAT64_SWA);
    SPA_REQUIRE(k->dtype == dt);
    SPA_REQUIRE(v->dtype == dt);
    const int64_t t = q->dims[0], n1 = q->dims[1], d = q->dims[2];
    const int64_t n2 = k->dims[1], dv = v->dims[2];
    SPA_REQUIRE(n2 >= 1);
    SPA_REQUIRE(n1 >= 1);
    SPA_REQUIRE(n1 % n2 == 0);
    SPA_REQUIRE(head_num == n1);
    SPA_REQUIRE(d >= 1);
    SPA_REQUIRE(dv >= 1);
    /* bounds that keep every per-block size of the plan far from overflow */
    SPA_REQUIRE(d <= SPA_SWA_DIM_MAX);
    SPA_REQUIRE(dv <= SPA_SWA_DIM_MAX);
    const int64_t k_dims[3] = {t, n2, d};
    SPA_REQUIRE(spa_tensor_dims_are(k, 3, k_dims));
    SPA_REQUIRE(v->dims[0] == t);
    SPA_REQUIRE(v->dims[1] == n2);
    SPA_TRY(check_stat(mx, stats_out, dt, t, n1));
    SPA_TRY(check_stat(sm, stats_out, dt, t, n1));
    SPA_REQUIRE(sm->rank == mx->rank);
    SPA_TRY(spa_seq_check_size(seq));
    sh->t = t;
    sh->n1 = n1;
    sh->n2 = n2;
    sh->g = n1 / n2;
    sh->gp = lanes_for(sh->g < SPA_SWA_SUBGROUP ? sh->g : SPA_SWA_SUBGROUP);
    sh->d = d;
    sh->dv = dv;
    /* d, dv: element counts of tensors whose spans fit in int64 */
    sh->dp = (d + SPA_SWA_DIM_STEP - 1) / SPA_SWA_DIM_STEP * SPA_SWA_DIM_STEP;
    sh->dvp = (dv + SPA_SWA_DIM_STEP - 1) / SPA_SWA_DIM_STEP * SPA_SWA_DIM_STEP;
    sh->batches = (int64_t)seq->size;
    sh->seq_type = seq_type;
    sh->left = window_type == SPA_SWA_WINDOW_KEYS_ ? window - 1 : window < 0 ? INT64_MAX : window;
    sh->lanes = mx->rank == 3 ? 8 : 1;
    sh->scale = isnan(scale) ? inv_sqrt(d) : scale;
    return SPA_OK;
}

spa_status spa_swa_check_seq(const spa_int_array *seq, const spa_swa_shape *sh, int64_t *copy)
{
    int64_t total;
    SPA_TRY(spa_seq_check_copy(seq, sh->seq_type, &total, copy));
    SPA_REQUIRE(total == sh->t);
    return SPA_OK;
}

int64_t spa_swa_batch_of(const int64_t *end, int64_t n, int64_t t)
{
    int64_t lo = 0, hi = n - 1; /* first b with end[b] > t */
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (end[mid] <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static bool pack_needed(const spa_tensor *t)
{
    return t->dtype != SPA_FLOAT32 || t->strides[2] != 1 || t->dims[2] % SPA_SWA_DIM_STEP != 0;
}

static int64_t padded_dim(const spa_tensor *t)
{
    return (t->dims[2] + SPA_SWA_DIM_STEP - 1) / SPA_SWA_DIM_STEP * SPA_SWA_DIM_STEP;
}

uint64_t spa_swa_pack_floats(const spa_tensor *t, const spa_swa_shape *sh)
{
    if (t->dtype == SPA_FLOAT64 || !pack_needed(t))
        return 0;
    uint64_t n = 0;
    int64_t m;
    if (spa_mul_ok(sh->t, padded_dim(t), &m))
        n = (uint64_t)m;
    else
        n = UINT64_MAX / 8; /* the workspace plan overflows and is refused */
    return n;
}

#define SWA_PACK_ROWS 256

typedef struct swa_pack {
    const spa_tensor *t;
    int64_t rows, h, pitch;
    float *dst;
} swa_pack;

static void pack_task(void *arg, uint32_t task)
{
    const swa_pack *p = arg;
    const int64_t r0 = (int64_t)task * SWA_PACK_ROWS;
    const int64_t r1 = r0 + SWA_PACK_ROWS < p->rows ? r0 + SWA_PACK_ROWS : p->rows;
    const spa_tensor *t = p->t;
    const int64_t n = t->dims[2], s = t->strides[2];
    for (int64_t r = r0; r < r1; r++) {
        float *dst = p->dst + r * p->pitch;
        const size_t off = (size_t)(r * t->strides[0] + p->h * t->strides[1]);
        if (t->dtype == SPA_FLOAT32) {
            const float *f = (const float *)t->data + off;
            for (int64_t i = 0; i < n; i++)
                dst[i] = f[i * s];
        } else {
            const uint16_t *u = (const uint16_t *)t->data + off;
            if (s == 1 && t->dtype == SPA_FLOAT16)
                spa_f16_widen_run(dst, u, n);
            else if (s == 1)
                spa_bf16_widen_run(dst, u, n);
            else
                for (int64_t i = 0; i < n; i++)
                    dst[i] = t->dtype == SPA_FLOAT16 ? spa_f16_to_f32(u[i * s])
                                                     : spa_bf16_to_f32(u[i * s]);
        }
        for (int64_t i = n; i < p->pitch; i++)
            dst[i] = 0.0f;
    }
}

static const float *head_rows(const spa_tensor *t, const spa_swa_shape *sh, float *dst, int64_t h,
                              const spa_runner *runner, int64_t *pitch)
{
    if (!pack_needed(t)) {
        *pitch = t->strides[0];
        return (const float *)t->data + h * t->strides[1];
    }
    const swa_pack p = {t, sh->t, h, padded_dim(t), dst};
    spa_run_blocks(runner, pack_task, (void *)&p,
                   (uint32_t)((sh->t + SWA_PACK_ROWS - 1) / SWA_PACK_ROWS));
    *pitch = p.pitch;
    return dst;
}

void spa_swa_attach_head(spa_swa_args *a, const spa_swa_shape *sh, const spa_tensor *k,
                         const spa_tensor *v, float *kpack, float *vpack, int64_t h2,
                         const spa_runner *runner)
{
    a->kf = head_rows(k, sh, kpack, h2, runner, &a->kfr);
    a->vf = head_rows(v, sh, vpack, h2, runner, &a->vfr);
}

spa_swa_args spa_swa_args_of(const spa_swa_shape *sh, const spa_tensor *q, const spa_tensor *k,
                             const spa_tensor *v, const spa_tensor *o, const spa_tensor *mx,
                             const spa_tensor *sm, const spa_tensor *dy, const spa_tensor *dq)
{
    spa_swa_args a;
    memset(&a, 0, sizeof a);
    a.q = q->data;
    a.qs0 = q->strides[0], a.qs1 = q->strides[1], a.qs2 = q->strides[2];
    a.k = k->data;
    a.ks0 = k->strides[0], a.ks1 = k->strides[1], a.ks2 = k->strides[2];
    a.v = v->data;
    a.vs0 = v->strides[0], a.vs1 = v->strides[1], a.vs2 = v->strides[2];
    a.o = o->data;
    a.os0 = o->strides[0], a.os1 = o->strides[1], a.os2 = o->strides[2];
    a.mx = mx->data;
    a.ms0 = mx->strides[0], a.ms1 = mx->strides[1], a.ms2 = mx->rank == 3 ? mx->strides[2] : 0;
    a.sm = sm->data;
    a.ss0 = sm->strides[0], a.ss1 = sm->strides[1], a.ss2 = sm->rank == 3 ? sm->strides[2] : 0;
    a.lanes = sh->lanes;
    if (dy != NULL) {
        a.dy = dy->data;
        a.dys0 = dy->strides[0], a.dys1 = dy->strides[1], a.dys2 = dy->strides[2];
    }
    if (dq != NULL) {
        a.dq = dq->data;
        a.dqs0 = dq->strides[0], a.dqs1 = dq->strides[1], a.dqs2 = dq->strides[2];
    }
    a.g = sh->g;
    a.gp = sh->gp;
    a.d = sh->d;
    a.dv = sh->dv;
    a.dp = sh->dp;
    a.dvp = sh->dvp;
    a.left = sh->left;
    a.scale = (float)sh->scale;
    a.scale64 = sh->scale;
    return a;
}
