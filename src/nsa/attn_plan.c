/* What the attention ops of the NSA layer share (attn_plan.h). */
#include "attn_plan.h"

#include "f64.h"

spa_status spa_attn_grad_check_tensors(const spa_attn_grad_tensors *g)
{
    SPA_TRY(spa_tensor_check(g->o, 3));
    SPA_TRY(spa_tensor_check(g->dy, 3));
    if (g->mx != NULL) {
        SPA_TRY(spa_tensor_check(g->mx, 3));
        SPA_TRY(spa_tensor_check(g->sm, 3));
    }
    SPA_TRY(spa_tensor_check_output(g->dq, 3));
    SPA_TRY(spa_tensor_check_output(g->dk, 3));
    SPA_TRY(spa_tensor_check_output(g->dv, 3));
    const int32_t dt = g->q->dtype;
    SPA_REQUIRE(g->o->dtype == dt);
    SPA_REQUIRE(g->dy->dtype == dt);
    SPA_REQUIRE(g->dq->dtype == dt);
    SPA_REQUIRE(g->dk->dtype == dt);
    SPA_REQUIRE(g->dv->dtype == dt);
    if (g->mx != NULL) {
        SPA_REQUIRE(g->mx->dtype == spa_nsas_stat_dtype(dt));
        SPA_REQUIRE(g->sm->dtype == spa_nsas_stat_dtype(dt));
    }
    return SPA_OK;
}

spa_status spa_attn_grad_check_dims(const spa_attn_grad_tensors *g, int64_t t, int64_t n1,
                                    int64_t dv)
{
    const int64_t o_dims[3] = {t, n1, dv}, stat_dims[3] = {t, n1, 8};
    SPA_REQUIRE(spa_tensor_dims_are(g->o, 3, o_dims));
    SPA_REQUIRE(spa_tensor_dims_are(g->dy, 3, o_dims));
    if (g->mx != NULL) {
        SPA_REQUIRE(spa_tensor_dims_are(g->mx, 3, stat_dims));
        SPA_REQUIRE(spa_tensor_dims_are(g->sm, 3, stat_dims));
    }
    SPA_REQUIRE(spa_tensor_dims_are(g->dq, 3, g->q->dims));
    SPA_REQUIRE(spa_tensor_dims_are(g->dk, 3, g->k->dims));
    SPA_REQUIRE(spa_tensor_dims_are(g->dv, 3, g->v->dims));
    return SPA_OK;
}

void spa_attn_carve(spa_ws *ws, uint64_t blocks, uint64_t scratch_floats, uint64_t kpack_floats,
                    uint64_t vpack_floats, spa_attn_slices *s)
{
    s->scratch = spa_ws_take(ws, blocks * scratch_floats, sizeof(float));
    s->kpack = spa_ws_take(ws, kpack_floats, sizeof(float));
    s->vpack = spa_ws_take(ws, vpack_floats, sizeof(float));
}

void spa_attn_grad_carve(spa_ws *ws, uint64_t ranges, uint64_t scratch_floats,
                         uint64_t partial_floats, uint64_t kpack_floats, uint64_t vpack_floats,
                         spa_attn_grad_slices *s)
{
    s->scratch = spa_ws_take(ws, ranges * scratch_floats, sizeof(float));
    s->partial = spa_ws_take(ws, partial_floats, sizeof(float));
    s->offset = spa_ws_take(ws, ranges, sizeof(uint64_t));
    s->lo = spa_ws_take(ws, ranges, sizeof(int64_t));
    s->hi = spa_ws_take(ws, ranges, sizeof(int64_t));
    s->kpack = spa_ws_take(ws, kpack_floats, sizeof(float));
    s->vpack = spa_ws_take(ws, vpack_floats, sizeof(float));
}
