/* The CANN-only rules of NsaSelectedAttention(+Grad), shared by both wrappers. */
#include "aclnn_nsa_selected_rules.h"

static const char *head_dim_rule(const spa_tensor *q, const spa_tensor *v)
{
    const int64_t d = q->dims[2], dv = v->dims[2];
    if (d % 16 != 0)
        return "D % 16 == 0";
    if (dv % 16 != 0)
        return "Dv % 16 == 0";
    if (dv < 16)
        return "Dv >= 16";
    if (dv > d)
        return "Dv <= D";
    return NULL;
}

const char *spa_acl_nsas_cann_rule(const spa_tensor *q, const spa_tensor *v,
                                   const spa_tensor *topk, const spa_int_array *seq_q,
                                   const spa_int_array *seq_kv, int64_t block_size)
{
    const char *rule = head_dim_rule(q, v);
    if (rule != NULL)
        return rule;
    const int32_t *idx = topk->data;
    const int64_t n2 = topk->dims[1], kc = topk->dims[2];
    if (n2 > 0 && q->dims[1] / n2 > 32) /* the native API runs any group in chunks of 32 heads */
        return "N1 / N2 <= 32";
    if (kc > 32)
        return "selectedBlockCount <= 32";
    for (uint64_t b = 0; b < seq_q->size; b++) {
        const int64_t qs = b == 0 ? 0 : seq_q->data[b - 1], qe = seq_q->data[b];
        const int64_t kv_len = seq_kv->data[b] - (b == 0 ? 0 : seq_kv->data[b - 1]);
        for (int64_t t = qs; t < qe; t++)
            for (int64_t h = 0; h < n2; h++)
                for (int64_t i = 0; i < kc; i++) {
                    const int64_t x = idx[t * topk->strides[0] + h * topk->strides[1] +
                                          i * topk->strides[2]];
                    if (x < 0)
                        return "topkIndices >= 0";
                    if ((x + 1) * block_size > kv_len)
                        return "(topkIndices + 1) * selectedBlockSize <= Skv_b";
                }
    }
    return NULL;
}

static bool empty(const spa_tensor *t)
{
    for (int32_t k = 0; k < t->rank && k < SPA_MAX_RANK; k++)
        if (t->dims[k] == 0)
            return true;
    return false;
}

bool spa_acl_nsas_noop(const spa_tensor *mx, const spa_tensor *sm, const spa_tensor *o)
{
    return empty(mx) && empty(sm) && empty(o);
}
