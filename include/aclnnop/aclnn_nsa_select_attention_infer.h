/* spattn aclnn compatibility layer: the header name CANN's sample program
 * for NsaSelectedAttentionInfer includes. */
#ifndef OP_API_INC_LEVEL2_ACLNN_NSA_SELECT_ATTENTION_INFER_H_
#define OP_API_INC_LEVEL2_ACLNN_NSA_SELECT_ATTENTION_INFER_H_
#include "aclnnop/aclnn_nsa_selected_attention_infer.h"
#endif
