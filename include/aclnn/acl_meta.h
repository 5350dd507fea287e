/* spattn aclnn compatibility layer: aclTensor, aclIntArray and aclOpExecutor.
 *
 * aclTensor is a strided view of memory: element (i0..ik) lives at
 * tensorData + (offset + sum(ij * stride[j])) * elementSize, and the view must
 * stay inside storageDims (checked when an operator is planned). Strides are
 * in elements; NULL strides mean contiguous row-major. aclIntArray owns a copy
 * of its values. */
#ifndef OP_API_INC_ACL_META_H_
#define OP_API_INC_ACL_META_H_

#include <stddef.h>
#include <stdint.h>

#include "acl/acl_base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef int32_t aclnnStatus;

typedef struct aclOpExecutor aclOpExecutor;
typedef struct aclTensor aclTensor;
typedef struct aclIntArray aclIntArray;

/* NULL when the description cannot be represented (viewDimsNum or
 * storageDimsNum above 25, a NULL dims array with a non-zero count) or on
 * allocation failure. Everything else (more than 8 dimensions, negative
 * sizes, strides or offset, a view outside its storage or its aclrtMalloc
 * block, a private format) is refused with 161002 by the operator using it. */
ACL_FUNC_VISIBILITY aclTensor *aclCreateTensor(const int64_t *viewDims, uint64_t viewDimsNum,
                                               aclDataType dataType, const int64_t *stride,
                                               int64_t offset, aclFormat format,
                                               const int64_t *storageDims,
                                               uint64_t storageDimsNum, void *tensorData);
ACL_FUNC_VISIBILITY aclnnStatus aclDestroyTensor(const aclTensor *tensor);

ACL_FUNC_VISIBILITY aclIntArray *aclCreateIntArray(const int64_t *value, uint64_t size);
ACL_FUNC_VISIBILITY aclnnStatus aclDestroyIntArray(const aclIntArray *array);
ACL_FUNC_VISIBILITY aclnnStatus aclGetIntArraySize(const aclIntArray *array, uint64_t *size);

#ifdef __cplusplus
}
#endif
#endif
