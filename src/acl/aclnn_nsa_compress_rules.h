/* The NPU's limits on NsaCompress and NsaCompressGrad that the native API
 * does not keep (spec/nsa.md 1.3 rules 5-6, 2.3): the aclnn layer keeps
 * CANN's contract, so ported CANN code sees 161002 where the NPU refuses. */
#ifndef SPA_ACLNN_NSA_COMPRESS_RULES_H
#define SPA_ACLNN_NSA_COMPRESS_RULES_H

#include <stdbool.h>

#include "acl_internal.h"

/* The first NPU-only limit input (x, as the native view) and the window
 * break, or NULL. Shapes the native checks refuse anyway (rank, N or D < 1,
 * bs or st < 1) are left to them, so their rule is the one named. */
static inline const char *spa_acl_nsac_npu_rule(const spa_tensor *x, int64_t bs, int64_t st)
{
    if (bs >= 1 && bs % 16 != 0)
        return "compressBlockSize % 16 == 0";
    if (bs > 128)
        return "compressBlockSize <= 128";
    if (st >= 1 && st % 16 != 0)
        return "compressStride % 16 == 0";
    if (x == NULL || x->rank != 3)
        return NULL;
    const int64_t n = x->dims[1], d = x->dims[2];
    if (n > 128)
        return "N <= 128";
    if (d >= 1 && d % 16 != 0)
        return "D % 16 == 0";
    if (d > 256)
        return "D <= 256";
    return NULL;
}

/* 161002 and the message for an NPU-only limit, before the native phase 1
 * runs (nothing is allocated yet); ACLNN_SUCCESS when none applies. Only
 * once every pointer the native phase 1 requires is there: a NULL keeps
 * the native 161001. */
static inline aclnnStatus spa_acl_nsac_npu_check(const char *api, bool pointers_given, const aclTensor *input,
                                                 int64_t bs, int64_t st)
{
    if (!pointers_given)
        return ACLNN_SUCCESS;
    spa_tensor view;
    const char *rule = spa_acl_nsac_npu_rule(spa_acl_tensor(input, &view), bs, st);
    if (rule == NULL)
        return ACLNN_SUCCESS;
    spa_acl_error("%s: %d (ACLNN_ERR_PARAM_INVALID): %s (an NPU limit the aclnn layer keeps)", api,
                  (int)ACLNN_ERR_PARAM_INVALID, rule);
    return ACLNN_ERR_PARAM_INVALID;
}

#endif
