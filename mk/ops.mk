# The operators a build holds (OPS=, default all): each public operator's
# driver sources (src/<family>/), the kernels it calls (templates/, per
# dtype; the f64 ones where DTYPES has f64) and the test suites that check
# it. A build with fewer ops compiles only their sources and kernels; the
# public functions of an op left out are stubs that refuse in phase 1 with
# 161002, "not built" (src/core/absent_ops.c, SPA_BUILT_<OP> of the
# generated spa_ops.h). A suite runs only where every op it calls is built.
ALL_OPS := msda msda_grad nsa_compress nsa_compress_grad nsa_compress_attention \
  nsa_compress_attention_grad nsa_select nsa_select_grad swa swa_grad nsa_select_infer \
  nsa_compress_attention_infer nsa_compress_with_cache dsa_lightning_indexer dsa_sparse_attention \
  dsa_sparse_attention_grad dsa_lightning_indexer_grad
OPS ?= $(ALL_OPS)
ifneq ($(filter-out $(ALL_OPS),$(OPS)),)
$(error OPS: no operator '$(filter-out $(ALL_OPS),$(OPS))': pick from $(ALL_OPS))
endif

# sources (relative to src/), kernels, f64 kernels (their f64 drivers call both directions)
OP_SRC_msda := msda/msda.c msda/msda_plan.c msda/msda_f64.c
OP_KERNELS_msda := msda
OP_F64_msda := msda msda_grad
OP_SRC_msda_grad := msda/msda_grad.c msda/msda_plan.c msda/msda_f64.c
OP_KERNELS_msda_grad := msda_grad
OP_F64_msda_grad := msda msda_grad
OP_SRC_nsa_compress := nsa/nsa_compress.c nsa/nsa_compress_plan.c nsa/nsa_compress_f64.c
OP_KERNELS_nsa_compress := nsa_compress
OP_F64_nsa_compress := nsa_compress nsa_compress_grad
OP_SRC_nsa_compress_grad := nsa/nsa_compress_grad.c nsa/nsa_compress_plan.c nsa/nsa_compress_f64.c
OP_KERNELS_nsa_compress_grad := nsa_compress_grad
OP_F64_nsa_compress_grad := nsa_compress nsa_compress_grad
OP_SRC_nsa_compress_with_cache := nsa/nsa_compress_cache.c nsa/nsa_compress_plan.c nsa/nsa_compress_f64.c
OP_KERNELS_nsa_compress_with_cache := nsa_compress
OP_F64_nsa_compress_with_cache := nsa_compress nsa_compress_grad
CATTN_SRC := nsa/nsa_compress_attention_plan.c nsa/attn_plan.c nsa/nsa_select_plan.c nsa/nsa_select_pack.c
OP_SRC_nsa_compress_attention := nsa/nsa_compress_attention.c $(CATTN_SRC)
OP_KERNELS_nsa_compress_attention := nsa_compress_attention
OP_F64_nsa_compress_attention := nsa_compress_attention
OP_SRC_nsa_compress_attention_grad := nsa/nsa_compress_attention_grad.c $(CATTN_SRC)
OP_KERNELS_nsa_compress_attention_grad := nsa_compress_attention_grad
OP_F64_nsa_compress_attention_grad := nsa_compress_attention_grad
OP_SRC_nsa_compress_attention_infer := nsa/nsa_compress_attention_infer.c nsa/nsa_select_plan.c
OP_KERNELS_nsa_compress_attention_infer := nsa_compress_attention
OP_F64_nsa_compress_attention_infer := nsa_compress_attention
SELECT_SRC := nsa/nsa_select_plan.c nsa/nsa_select_pack.c nsa/nsa_select_f64.c nsa/attn_plan.c
OP_SRC_nsa_select := nsa/nsa_select.c $(SELECT_SRC)
OP_KERNELS_nsa_select := nsa_select
OP_F64_nsa_select := nsa_select nsa_select_grad
OP_SRC_nsa_select_grad := nsa/nsa_select_grad.c $(SELECT_SRC)
OP_KERNELS_nsa_select_grad := nsa_select_grad
OP_F64_nsa_select_grad := nsa_select nsa_select_grad
OP_SRC_nsa_select_infer := nsa/nsa_select_infer.c nsa/nsa_select_plan.c nsa/nsa_select_f64.c nsa/attn_parts.c
OP_KERNELS_nsa_select_infer := nsa_select
OP_F64_nsa_select_infer := nsa_select nsa_select_grad
OP_SRC_swa := nsa/swa.c nsa/swa_plan.c nsa/attn_plan.c
OP_KERNELS_swa := swa
OP_F64_swa := swa
OP_SRC_swa_grad := nsa/swa_grad.c nsa/swa_plan.c nsa/attn_plan.c
OP_KERNELS_swa_grad := swa_grad
OP_F64_swa_grad := swa_grad
OP_SRC_dsa_lightning_indexer := dsa/dsa_lightning_indexer.c dsa/dsa_kv.c
OP_KERNELS_dsa_lightning_indexer := dsa_lightning_indexer
OP_F64_dsa_lightning_indexer :=
OP_SRC_dsa_lightning_indexer_grad := dsa/dsa_lightning_indexer_grad.c dsa/dsa_grad_rows.c dsa/dsa_kv.c
OP_KERNELS_dsa_lightning_indexer_grad := dsa_lightning_indexer_grad
OP_F64_dsa_lightning_indexer_grad :=
OP_SRC_dsa_sparse_attention := dsa/dsa_sparse_attention.c dsa/dsa_sfa_args.c dsa/dsa_sfa_gather.c dsa/dsa_kv.c nsa/nsa_select_plan.c nsa/attn_parts.c
OP_KERNELS_dsa_sparse_attention := nsa_select
OP_F64_dsa_sparse_attention := nsa_select nsa_select_grad
OP_SRC_dsa_sparse_attention_grad := dsa/dsa_sparse_attention_grad.c dsa/dsa_sfa_args.c dsa/dsa_sfa_gather.c \
  dsa/dsa_grad_rows.c dsa/dsa_kv.c \
  nsa/nsa_select_plan.c
OP_KERNELS_dsa_sparse_attention_grad := nsa_select_grad
OP_F64_dsa_sparse_attention_grad := nsa_select nsa_select_grad

# kernels that read f32 rows whatever the dtype (the driver widens them):
# generated once, with the f32 kernels
F32_ONLY_KERNELS := dsa_lightning_indexer dsa_lightning_indexer_grad

# the ops each suite calls (a suite not listed calls every op)
SUITE_OPS_msda := msda
SUITE_OPS_msda_grad := msda msda_grad
SUITE_OPS_f64_msda := msda msda_grad
SUITE_OPS_nsa_compress := nsa_compress
SUITE_OPS_nsa_compress_grad := nsa_compress nsa_compress_grad
SUITE_OPS_nsa_compress_cache := nsa_compress nsa_compress_with_cache
SUITE_OPS_nsa_compress_attention := nsa_compress_attention nsa_compress_attention_grad
SUITE_OPS_nsa_cattn_infer := nsa_compress_attention_infer
SUITE_OPS_nsa_select := nsa_select
SUITE_OPS_nsa_select_grad := nsa_select nsa_select_grad
SUITE_OPS_nsa_select_infer := nsa_select_infer
SUITE_OPS_swa := swa swa_grad
SUITE_OPS_dsa_lightning_indexer := dsa_lightning_indexer
SUITE_OPS_dsa_sparse_attention := dsa_sparse_attention
SUITE_OPS_dsa_sparse_attention_grad := dsa_sparse_attention dsa_sparse_attention_grad
SUITE_OPS_dsa_lightning_indexer_grad := dsa_lightning_indexer dsa_lightning_indexer_grad
SUITE_OPS_half :=

BUILT_OPS_ALL := $(if $(filter-out $(OPS),$(ALL_OPS)),,1)
OPS_SRC := $(sort $(foreach o,$(OPS),$(addprefix src/,$(OP_SRC_$(o)))))
OPS_KERNELS := $(sort $(foreach o,$(OPS),$(OP_KERNELS_$(o))))
OPS_F64 := $(sort $(foreach o,$(OPS),$(OP_F64_$(o))))
# suite s runs when its ops are built (every op, for a suite not listed)
suite_built = $(if $(filter undefined,$(origin SUITE_OPS_$(1))),$(BUILT_OPS_ALL),$(if $(filter-out $(OPS),$(SUITE_OPS_$(1))),,1))
