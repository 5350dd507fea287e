# spattn: one entry point.
#   make [TARGET=host] [all|gen|check|bench|demo|examples|size|install|clean]
#   make bench OP=nsa_compress      one operator's benchmark lines
#   make TARGET=<t> check           any targets/<t>/ (toolchain, flags, budget, runner)
#   make SANITIZE=1 CC=clang check  ASan + UBSan; make valgrind; make fuzz FUZZ_SECONDS=N
# Outputs go to $(BUILDROOT)/$(TARGET)/ (build/host/ by default).

# Every core, unless the command line gives -j: `make check` and `make demo`
# build and test in parallel as they are (their steps are sub-makes, which
# take the flag from here).
ifeq ($(filter -j%,$(MAKEFLAGS)),)
MAKEFLAGS += -j$(shell nproc 2>/dev/null || echo 1)
endif

TARGET ?= host
BUILDROOT ?= build
B := $(BUILDROOT)/$(TARGET)

ifeq ($(wildcard targets/$(TARGET)/target.mk),)
$(error no target '$(TARGET)': pick one of $(patsubst targets/%/target.mk,%,$(wildcard targets/*/target.mk)))
endif
# What a target.mk may set (see targets/host/target.mk):
#   CC AR NM SIZE      its tools          TARGET_CFLAGS  library and tests
#   LIB_CFLAGS         library only       TEST_CFLAGS    tests only
#   TEST_LDFLAGS TEST_LDLIBS TEST_EXTRA_SRC  how the test program links
#   CUNIT_FROM_SOURCE  1: build CUnit for the target from Debian's source package
#   HAVE_PTHREAD       1: build the pthread runner and test with it
#   RUN                how to start a target program (qemu-..., empty on the host)
#   SYMCHECK_ALLOW     more imports libspattn.a may have (compiler runtime helpers)
#   TARGET_DEPS        what `make deps` installs: command-or-file:package ...
#   RUN_FETCH          a command `make deps` runs after installing: fetches what
#                      RUN needs beyond packages (qemu from backports)
#   INSN_COUNT_BY      trace: `make insn` counts from qemu's execution log (a
#                      qemu built without plugins) instead of the insncount plugin
#   INSN_LIMITS        the limits file of `make insn` (default tools/insn/<isa>.limits)
#   ISA                the instruction set layer its kernels are generated for:
#                      src/isa/<isa>.h + gen/isa/<isa>.m4 (scalar when unset)
SIZE ?= size
include targets/$(TARGET)/target.mk
ISA ?= scalar
# The element types the kernels are generated for. f64 (SPA_FLOAT64) has
# kernels of its own (templates/f64/) over the layer's double lanes (spa_vd);
# a target may leave it out (the Cortex-M targets do, to save flash): the
# generated spa_dtypes.h then says SPA_HAVE_F64 0 and every op refuses
# float64 tensors in phase 1 (161002).
DTYPES ?= f32 f16 bf16 f64
ifeq ($(wildcard gen/isa/$(ISA).m4 src/isa/$(ISA).h),)
$(error no ISA '$(ISA)': pick one of $(patsubst gen/isa/%.m4,%,$(wildcard gen/isa/*.m4)))
endif

# src/, templates/ and tests/ are grouped by operator family (src/core,
# src/msda, src/nsa, ...; src/isa and src/acl are the ISA layers and the
# aclnn layer): the family folders are found, never listed, and each is on
# the include path so sources include each other by name.
SRC_DIRS := src $(filter-out src/acl src/isa,$(patsubst %/,%,$(sort $(dir $(wildcard src/*/*.c src/*/*.h)))))
SRC_H := $(foreach d,$(SRC_DIRS),$(wildcard $(d)/*.h))
TEMPLATE_DIRS := templates $(filter-out templates/f64,$(patsubst %/,%,$(sort $(dir $(wildcard templates/*/*.m4)))))
# tests/ort, tests/cmake, tests/sizing, tests/stackpaint: programs of their own checks (ort-check,
# cmake-install-check, dtypes-check, sizing-check, stackpaint), not parts of the CUnit suite
TEST_DIRS := tests $(filter-out tests/seeds tests/ort tests/cmake tests/sizing tests/stackpaint,$(patsubst %/,%,$(sort $(dir $(wildcard tests/*/*.c tests/*/*.h)))))

WARN := -std=c11 -Wall -Wextra -Wconversion -Werror
CFLAGS_LIB := $(WARN) $(TARGET_CFLAGS) $(LIB_CFLAGS) $(EXTRA_CFLAGS) -Iinclude $(addprefix -I,$(SRC_DIRS)) -I$(B)/gen
CFLAGS_TEST := $(WARN) $(TARGET_CFLAGS) $(TEST_CFLAGS) $(EXTRA_CFLAGS) -Iinclude $(addprefix -I,$(TEST_DIRS)) -I$(B)/gen $(addprefix -I,$(SRC_DIRS)) \
	$(if $(CUNIT_FROM_SOURCE),-I$(B)/cunit/include)

# Per-function stack use beside each library object (make size): GCC writes
# the call graph with it (.ci), clang only the frames (.su).
STACK_INFO := $(if $(findstring clang,$(notdir $(CC))),-fstack-usage,-fcallgraph-info=su)

# Objects depend on the tools and flags they were built with, so that
# `make CC=clang check` after `make check` rebuilds instead of reusing.
CONFIG_ID := $(CC) | $(ISA) | $(DTYPES) | $(OPS) | $(REASONS) | $(CFLAGS_LIB) | $(CFLAGS_TEST) | $(TEST_LDFLAGS) $(TEST_LDLIBS)
CONFIG := $(B)/config.id
$(shell mkdir -p $(B) && { [ -f $(CONFIG) ] && [ "$$(cat $(CONFIG))" = '$(CONFIG_ID)' ] || printf '%s\n' '$(CONFIG_ID)' > $(CONFIG); })

include mk/ops.mk
OP_TEMPLATES := $(foreach d,$(TEMPLATE_DIRS),$(wildcard $(d)/*.c.m4))
KERNEL_OPS := $(filter $(OPS_KERNELS),$(notdir $(OP_TEMPLATES:.c.m4=)))
# The ops with a float64 path: one template each in templates/f64/, expanded
# per ISA against the layer's spa_vd part, with its declarations in
# gen/tiles/f64/<op>.m4 (the f32-compute tiles of gen/tiles/ do not apply).
F64_TEMPLATES := $(foreach d,$(TEMPLATE_DIRS),$(wildcard $(d)/f64/*.c.m4))
F64_OPS := $(filter $(OPS_F64),$(notdir $(F64_TEMPLATES:.c.m4=)))
# PITCH_CONSTANTS 0 (a target.mk's choice: the sanitizer builds): no
# constant-pitch copies of the select tiles (templates/nsa/nsa_select_mk.m4).
PITCH_CONSTANTS ?= 1
M4 := m4 -P -E -DSPA_PITCH_CONSTANTS=$(PITCH_CONSTANTS) # -E: an m4 warning (a bad eval, say) fails the build
M4_IN := gen/isa/$(ISA).m4 targets/$(TARGET)/budget.m4 gen/tiles.m4 templates/common.m4 $(sort $(wildcard gen/tiles/*.m4))
# micro-kernel templates the op templates include (m4_include)
M4_INC := $(filter-out templates/common.m4 %.c.m4,$(foreach d,$(TEMPLATE_DIRS),$(wildcard $(d)/*.m4)))
M4_IN_F64 := gen/isa/$(ISA).m4 targets/$(TARGET)/budget.m4 gen/tiles.m4 templates/common.m4 $(sort $(wildcard gen/tiles/f64/*.m4))
M4_INC_F64 := $(filter-out %.c.m4,$(foreach d,$(TEMPLATE_DIRS),$(wildcard $(d)/f64/*.m4)))
ISA_H := $(wildcard src/isa/*.h)

# an op of F32_ONLY_KERNELS (mk/ops.mk) has one kernel for every dtype, on f32 rows
GEN_C := $(foreach op,$(KERNEL_OPS),$(foreach dt,$(if $(filter $(op),$(F32_ONLY_KERNELS)),f32,$(filter-out f64,$(DTYPES))),$(B)/gen/$(op)_$(dt).c)) \
	$(if $(filter f64,$(DTYPES)),$(foreach op,$(F64_OPS),$(B)/gen/$(op)_f64.c))
ABSENT_HALF := $(filter-out $(DTYPES),f16 bf16)
ifeq ($(filter f32,$(DTYPES)),)
$(error DTYPES must include f32 (the kernels of every op; f16, bf16 and f64 are optional))
endif
GEN_H := $(foreach dt,$(DTYPES),$(B)/gen/spa_kernels_$(dt).h) $(foreach dt,$(ABSENT_HALF),$(B)/gen/spa_kernels_absent_$(dt).h) \
	$(B)/gen/spa_kernels.h $(B)/gen/spa_isa.h \
	$(B)/gen/spa_dtypes.h $(B)/gen/spa_ops.h
# src/core, and the drivers of the ops built (mk/ops.mk)
LIB_SRC := $(sort $(wildcard src/core/*.c) $(OPS_SRC))
# The rule behind every refusal site (tools/reasons.awk): each source with
# a site (an SPA_REQUIRE or SPA_TRY) is compiled with its number, SPA_SRC_ID
# (31 at most: the sites travel in 15 bits), and the table maps (number,
# line) to the rule's text; the sources without one are compiled with 0.
# Objects depend on the list, so that a file added or removed renumbers them.
REASONS_C := $(B)/gen/spa_reasons.c
SRC_LIST := $(B)/gen/sources.list
SITE_SRC := $(sort $(shell grep -l -E '^[[:space:]]*SPA_(REQUIRE|TRY)[^A-Za-z0-9_]' $(LIB_SRC)))
$(foreach s,$(LIB_SRC),$(eval SRC_ID_$(s) := 0))
$(foreach s,$(SITE_SRC),$(eval SRC_ID_$(s) := $(words $(SRC_ID_SEEN) x))$(eval SRC_ID_SEEN += x))
$(shell mkdir -p $(B)/gen && { [ -f $(SRC_LIST) ] && [ "$$(cat $(SRC_LIST))" = '$(SITE_SRC)' ] || printf '%s\n' '$(SITE_SRC)' > $(SRC_LIST); })
LIB_OBJ := $(LIB_SRC:%.c=$(B)/obj/%.o) $(GEN_C:$(B)/gen/%.c=$(B)/obj/gen/%.o) $(B)/obj/gen/spa_reasons.o
LIB := $(B)/lib/libspattn.a
RUNNER_LIB := $(B)/lib/libspattn_runner.a
RUNNER_OBJ := $(patsubst %.c,$(B)/obj/%.o,$(wildcard runner/*.c))
# aclnn compatibility layer (mk/acl.mk): hosted targets only
ACL_LIB := $(if $(HAVE_PTHREAD),$(if $(BUILT_OPS_ALL),$(B)/lib/libspattn_acl.a))

TEST_SRC := $(foreach d,$(TEST_DIRS),$(wildcard $(d)/*.c))
TEST_SUITE_SRC := $(foreach f,$(TEST_SRC),$(if $(filter test_%.c,$(notdir $(f))),$(if $(call suite_built,$(patsubst test_%.c,%,$(notdir $(f)))),$(f))))
# the helpers and the suites of the ops built
TEST_SKIPPED_SRC := $(foreach f,$(TEST_SRC),$(if $(filter test_%.c,$(notdir $(f))),$(if $(filter $(f),$(TEST_SUITE_SRC)),,$(f))))
TEST_OBJ := $(patsubst %.c,$(B)/obj/%.o,$(filter-out $(TEST_SKIPPED_SRC),$(TEST_SRC)))
TEST_SUITES := $(patsubst test_%.c,%,$(notdir $(TEST_SUITE_SRC)))
TEST_BIN := $(B)/tests/spattn_tests
BENCH_BIN := $(B)/bench/spattn_bench
EXAMPLES := $(patsubst examples/%.c,$(B)/examples/%,$(wildcard examples/*.c))

.PHONY: print-isa dtypes-check headercheck insn edge-ws all shared ort ort-check ort-bench python-check python-demo python-bench gen check test symcheck gencheck bench demo examples deps clean valgrind size size-all stackcheck fuzz fuzz-run
.SECONDARY:

all: $(LIB) $(if $(HAVE_PTHREAD),$(RUNNER_LIB)) $(ACL_LIB)

# The ISA layer this configuration builds (CI picks the other x86 layer for a
# sanitizer step with it).
print-isa:
	@echo $(ISA)

deps:
	@tools/deps.sh $(TARGET_DEPS)
	@$(if $(RUN_FETCH),$(RUN_FETCH))

# ---- generation: one m4 expansion per (op, dtype), plus the kernel list ----
gen: $(GEN_C) $(GEN_H)

define gen_rules
$(B)/gen/$(1)_$(2).c: $(filter %/$(1).c.m4,$(OP_TEMPLATES)) $(M4_IN) $(M4_INC) $(CONFIG)
	@mkdir -p $$(@D)
	$(M4) -DSPA_DT=$(2) -DSPA_OP=$(1) $(M4_IN) $$< > $$@.tmp && mv $$@.tmp $$@
endef
$(foreach op,$(KERNEL_OPS),$(foreach dt,$(filter-out f64,$(DTYPES)),$(eval $(call gen_rules,$(op),$(dt)))))

# float64: templates/<family>/f64/<op>.c.m4 against the f64 tile declarations.
define gen_rules_f64
$(B)/gen/$(1)_f64.c: $(filter %/$(1).c.m4,$(F64_TEMPLATES)) $(M4_IN_F64) $(M4_INC_F64) $(CONFIG)
	@mkdir -p $$(@D)
	$(M4) -DSPA_DT=f64 -DSPA_OP=$(1) $(M4_IN_F64) $$< > $$@.tmp && mv $$@.tmp $$@
endef
$(foreach op,$(F64_OPS),$(eval $(call gen_rules_f64,$(op))))

$(B)/gen/spa_kernels_f64.h: gen/kernels.m4 $(M4_IN_F64) $(CONFIG)
	@mkdir -p $(@D)
	$(M4) -DSPA_DT=f64 -DSPA_OP=kernels $(M4_IN_F64) $< > $@.tmp && mv $@.tmp $@

$(B)/gen/spa_kernels_%.h: gen/kernels.m4 $(M4_IN) $(CONFIG)
	@mkdir -p $(@D)
	$(M4) -DSPA_DT=$* -DSPA_OP=kernels $(M4_IN) $< > $@.tmp && mv $@.tmp $@

# A half dtype left out of DTYPES (a firmware image that calls f32 only):
# its kernel and tile names stand for the f32 ones, so the drivers compile
# unchanged and carry no f16 / bf16 code, and phase 1 refuses the dtype
# (spa_is_float_dtype: SPA_HAVE_F16 / SPA_HAVE_BF16 of spa_dtypes.h).
$(B)/gen/spa_kernels_absent_%.h: $(B)/gen/spa_kernels_f32.h
	@mkdir -p $(@D)
	{ echo '/* Generated: $* is not in DTYPES; its names stand for the f32 kernels (never called). */'; \
	  sed -n 's/^#define \([A-Z0-9_]*\)_F32\([ (].*\)*$$/#define \1_$(shell echo $* | tr a-z A-Z) \1_F32/p' $<; } > $@.tmp && mv $@.tmp $@

$(B)/gen/spa_kernels.h: Makefile $(CONFIG)
	@mkdir -p $(@D)
	printf '/* Generated: every kernel of every dtype. */\n#include "spa_dtypes.h"\n$(foreach dt,$(DTYPES),#include "spa_kernels_$(dt).h"\n)$(foreach dt,$(ABSENT_HALF),#include "spa_kernels_absent_$(dt).h"\n)' > $@

# Which element types this build has kernels for (src/core/f64.h, the tests).
$(B)/gen/spa_dtypes.h: Makefile $(CONFIG)
	@mkdir -p $(@D)
	printf '/* Generated: the element types of this build (DTYPES $(DTYPES)). */\n#define SPA_HAVE_F64 $(if $(filter f64,$(DTYPES)),1,0)\n#define SPA_HAVE_F16 $(if $(filter f16,$(DTYPES)),1,0)\n#define SPA_HAVE_BF16 $(if $(filter bf16,$(DTYPES)),1,0)\n' > $@

# The operators of this build (OPS, mk/ops.mk): SPA_BUILT_<OP> 1 or 0.
$(B)/gen/spa_ops.h: Makefile mk/ops.mk $(CONFIG)
	@mkdir -p $(@D)
	{ printf '/* Generated: the operators of this build (OPS $(OPS)). */\n'; \
	  $(foreach o,$(ALL_OPS),printf '#define SPA_BUILT_%s %d\n' $(shell echo $(o) | tr a-z A-Z) $(if $(filter $(o),$(OPS)),1,0);) \
	  printf '#define SPA_BUILT_ALL %d\n' $(if $(BUILT_OPS_ALL),1,0); } > $@.tmp.$$$$ && mv $@.tmp.$$$$ $@

# The ISA layer the target's kernels use (src/isa/<isa>.h): included by
# half.h, never by operator code.
$(B)/gen/spa_isa.h: Makefile $(CONFIG)
	@mkdir -p $(@D)
	printf '/* Generated: the instruction set layer of this build (ISA $(ISA)). */\n#include "isa/$(ISA).h"\n' > $@

# ---- core archive ----
$(B)/obj/src/%.o: src/%.c $(GEN_H) $(SRC_H) $(wildcard include/spattn/*.h) $(ISA_H) $(CONFIG) $(SRC_LIST)
	@mkdir -p $(@D)
	@rm -f $(@:.o=.ci) $(@:.o=.su)
	$(CC) $(CFLAGS_LIB) -DSPA_SRC_ID=$(SRC_ID_$<) $(STACK_INFO) -c $< -o $@

# REASONS=0 (flash-tight firmware): no rule texts; spa_executor_reason then
# answers the status's generic text, the codes stay as they are.
REASONS ?= 1
$(REASONS_C): $(LIB_SRC) tools/reasons.awk $(SRC_LIST) $(CONFIG)
	@mkdir -p $(@D)
	$(if $(filter 0,$(REASONS)),printf '/* Generated (REASONS=0): no rule texts. */\n#include <stddef.h>\n#include <stdint.h>\n\nconst char *spa_site_text(uint32_t site);\n\nconst char *spa_site_text(uint32_t site)\n{\n    (void)site;\n    return NULL;\n}\n' > $@.tmp,awk -v line_bits=10 -f tools/reasons.awk $(SITE_SRC) > $@.tmp) && mv $@.tmp $@

$(B)/obj/gen/%.o: $(B)/gen/%.c $(B)/gen/spa_isa.h $(SRC_H) $(ISA_H) $(CONFIG)
	@mkdir -p $(@D)
	@rm -f $(@:.o=.ci) $(@:.o=.su)
	$(CC) $(CFLAGS_LIB) $(STACK_INFO) -c $< -o $@

$(LIB): $(LIB_OBJ)
	@mkdir -p $(@D)
	rm -f $@ && $(AR) rcs $@ $^

# ---- pthread runner (hosted targets only) ----
$(B)/obj/runner/%.o: runner/%.c include/spattn/runner.h include/spattn/types.h $(CONFIG)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_LIB) -D_POSIX_C_SOURCE=200809L -c $< -o $@

$(RUNNER_LIB): $(RUNNER_OBJ)
	@mkdir -p $(@D)
	rm -f $@ && $(AR) rcs $@ $^

# ---- shared library (hosted targets): core + pthread runner, position
# independent, for callers that load it at run time (python/spattn). The
# archives stay the product; this is built from its own PIC objects and
# exports only the functions of the public headers. ----
SHARED_LIB := $(B)/lib/libspattn.so
PIC_OBJ := $(patsubst $(B)/obj/%,$(B)/pic/%,$(LIB_OBJ) $(RUNNER_OBJ))
SHARED_MAP := $(B)/pic/libspattn.map

$(B)/pic/src/%.o: src/%.c $(GEN_H) $(SRC_H) $(wildcard include/spattn/*.h) $(ISA_H) $(CONFIG) $(SRC_LIST)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_LIB) -fPIC -DSPA_SRC_ID=$(SRC_ID_$<) -c $< -o $@

$(B)/pic/gen/%.o: $(B)/gen/%.c $(B)/gen/spa_isa.h $(SRC_H) $(ISA_H) $(CONFIG)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_LIB) -fPIC -c $< -o $@

$(B)/pic/runner/%.o: runner/%.c include/spattn/runner.h include/spattn/types.h $(CONFIG)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_LIB) -fPIC -D_POSIX_C_SOURCE=200809L -c $< -o $@

# The exported names: every spa_ function the public headers declare.
$(SHARED_MAP): $(wildcard include/spattn/*.h)
	@mkdir -p $(@D)
	{ echo '{ global:'; sed -n 's/^[a-z_ ]*[ *]\(spa_[a-z0-9_]*\)(.*/  \1;/p' include/spattn/*.h | sort -u; \
	  echo 'local: *; };'; } > $@.tmp && mv $@.tmp $@

$(SHARED_LIB): $(PIC_OBJ) $(SHARED_MAP)
	@mkdir -p $(@D)
	$(CC) $(TARGET_CFLAGS) -shared -Wl,--version-script=$(SHARED_MAP) -Wl,--no-undefined \
	  -Wl,-soname,libspattn.so $(PIC_OBJ) -o $@ -lpthread -lm

ifneq ($(HAVE_PTHREAD),)
shared: $(SHARED_LIB)
# where it is (python/setup.py copies it into the installed package)
.PHONY: shared-path
shared-path:
	@echo $(abspath $(SHARED_LIB))
else
shared:
	@echo "make shared: target $(TARGET) has no threads (the runner needs them)"; exit 1
endif

# ---- the PyTorch binding (python/spattn over libspattn.so): its tests, its
# demo line and its benchmark, where Debian's python3-torch (or any torch)
# imports; skipped with a message elsewhere. Host target, no sanitizers (the
# interpreter does not load their runtimes). ----
PYTHON ?= $(firstword $(wildcard /usr/bin/python3) python3)
PY_RUN = PYTHONPATH=python SPATTN_LIBRARY=$(abspath $(SHARED_LIB)) $(PYTHON)
PY_HAS_TORCH = $(PYTHON) -c 'import torch' >/dev/null 2>&1
PY_SKIP = "$(PYTHON) cannot import torch (apt-get install python3-torch)"
PY_HOSTED := $(and $(filter host,$(TARGET)),$(if $(SANITIZE),,1))
# PY_TESTS=0: make check leaves the binding's tests out (CI runs them in the
# native builds only; elsewhere the C suites cover all the binding calls).
PY_TESTS ?= 1

python-check:
ifeq ($(PY_HOSTED),)
	@echo "python-check: skipped on target $(TARGET)$(if $(SANITIZE), with sanitizers)"
else ifeq ($(PY_TESTS),0)
	@echo "python-check: skipped (PY_TESTS=0)"
else
	@if $(PY_HAS_TORCH); then $(MAKE) --no-print-directory $(SHARED_LIB) >/dev/null && \
	  echo "python-check: python/tests with $$($(PYTHON) -c 'import torch; print("torch", torch.__version__)')" && \
	  $(PY_RUN) -m unittest discover -s python/tests; \
	else echo "python-check: skipped, "$(PY_SKIP); fi
endif

python-demo:
	@if $(PY_HAS_TORCH); then $(MAKE) --no-print-directory -s $(SHARED_LIB) && $(PY_RUN) python/demo.py; \
	else echo "torch ms_deform_attn: skipped, "$(PY_SKIP); fi

# One line per op: forward and forward+backward, spattn against the pure
# PyTorch path, BENCH_THREADS (default 2) threads.
python-bench:
	@if $(PY_HAS_TORCH); then $(MAKE) --no-print-directory -s $(SHARED_LIB) && $(PY_RUN) python/bench.py $(OP); \
	else echo "python-bench: skipped, "$(PY_SKIP); fi

# ---- ONNX Runtime: libspattn_ort.so (ort/spattn_ort.c over the PIC objects
# of the core; it exports RegisterCustomOps only) and its check: graphs the
# binding exports (tests/ort/export_cases.py) run in ONNX Runtime and compared
# with the PyTorch modules and float64 formulations (tests/ort/test_ort.c).
# ONNX Runtime's header and runtime are fetched into $(BUILDROOT)/deps/ort by
# tools/ort_deps.sh (nothing installed); where it cannot fetch them, or torch
# does not import, the check says so and is skipped. Host target, no
# sanitizers, with the binding's tests (PY_TESTS=1). ----
ORT_DIR := $(BUILDROOT)/deps/ort
ORT_LIB := $(B)/lib/libspattn_ort.so
ORT_TEST := $(B)/ort/test_ort

$(ORT_DIR)/include/onnxruntime_c_api.h: tools/ort_deps.sh
	tools/ort_deps.sh $(ORT_DIR)

$(B)/ort/spattn_ort.map:
	@mkdir -p $(@D)
	echo '{ global: RegisterCustomOps; local: *; };' > $@

$(ORT_LIB): ort/spattn_ort.c $(ORT_DIR)/include/onnxruntime_c_api.h $(PIC_OBJ) $(B)/ort/spattn_ort.map $(wildcard include/spattn/*.h)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_LIB) -fPIC -shared -I$(ORT_DIR)/include -Wl,--version-script=$(B)/ort/spattn_ort.map \
	  -Wl,--no-undefined -Wl,-soname,libspattn_ort.so ort/spattn_ort.c $(PIC_OBJ) -o $@ -lpthread -lm

$(ORT_TEST): tests/ort/test_ort.c $(ORT_DIR)/include/onnxruntime_c_api.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_TEST) -D_POSIX_C_SOURCE=200809L -I$(ORT_DIR)/include $< -L$(ORT_DIR)/lib -l:libonnxruntime.so.1 \
	  -Wl,-rpath,$(abspath $(ORT_DIR)/lib) -o $@ -lm

ort: $(ORT_LIB)

# The exported DETR encoder shape (tests/ort/export_cases.py --bench) in ONNX
# Runtime: the operator alone and a whole encoder layer, as spattn's node and
# lowered to GridSample, on 1 and 2 threads (ORT_BENCH_RUNS timed runs each).
ORT_BENCH_RUNS ?= 5
ort-bench: $(ORT_DIR)/include/onnxruntime_c_api.h
	@$(MAKE) --no-print-directory $(ORT_LIB) $(ORT_TEST) $(SHARED_LIB) >/dev/null
	@rm -rf $(B)/ort/bench && $(PY_RUN) tests/ort/export_cases.py --bench $(B)/ort/bench
	@$(ORT_TEST) --bench $(ORT_BENCH_RUNS) $(abspath $(ORT_LIB)) \
	  $(addprefix $(B)/ort/bench/,bench_op bench_op_grid_sample bench_encoder bench_encoder_grid_sample)

ort-check:
ifeq ($(PY_HOSTED),)
	@echo "ort-check: skipped on target $(TARGET)$(if $(SANITIZE), with sanitizers)"
else ifeq ($(PY_TESTS),0)
	@echo "ort-check: skipped (PY_TESTS=0)"
else
	@if ! $(PY_HAS_TORCH); then echo "ort-check: skipped, "$(PY_SKIP); \
	elif ! $(MAKE) --no-print-directory $(ORT_DIR)/include/onnxruntime_c_api.h; then \
	  echo "ort-check: skipped, ONNX Runtime could not be fetched (tools/ort_deps.sh: network, apt-get, curl)"; \
	else $(MAKE) --no-print-directory $(ORT_LIB) $(ORT_TEST) $(SHARED_LIB) >/dev/null && \
	  rm -rf $(B)/ort/cases && $(PY_RUN) tests/ort/export_cases.py $(B)/ort/cases && \
	  $(ORT_TEST) $(abspath $(ORT_LIB)) $(addprefix $(B)/ort/cases/,encoder encoder_grid_sample mmcv op_f16); fi
endif

# ---- tests ----
$(B)/tests/suites.inc: Makefile $(TEST_SUITE_SRC)
	@mkdir -p $(@D)
	printf '$(foreach s,$(TEST_SUITES),SPA_SUITE($(s))\n)' > $@

$(B)/obj/tests/%.o: tests/%.c $(foreach d,$(TEST_DIRS),$(wildcard $(d)/*.h)) $(wildcard include/spattn/*.h) $(SRC_H) $(ISA_H) $(B)/gen/spa_isa.h $(B)/gen/spa_dtypes.h \
		$(B)/tests/suites.inc $(CONFIG) \
		| $(if $(CUNIT_FROM_SOURCE),$(B)/cunit/libcunit.a)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_TEST) -D_POSIX_C_SOURCE=200809L -I$(B)/tests -c $< -o $@

# The fp64 references (tests/ref/) with the target's REF_CFLAGS: the
# sanitizer builds compile them uninstrumented (test code that no sanitizer
# needs to watch; instrumented, they took four fifths of the selected
# attention grad suite's time there).
$(B)/obj/tests/ref/%.o: CFLAGS_TEST += $(REF_CFLAGS)

# Target support code linked into the test program only (startup files).
TEST_EXTRA_OBJ := $(patsubst %.c,$(B)/obj/%.o,$(TEST_EXTRA_SRC))
$(B)/obj/targets/%.o: targets/%.c $(CONFIG)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_TEST) -c $< -o $@

$(TEST_BIN): $(TEST_OBJ) $(TEST_EXTRA_OBJ) $(ACL_LIB) $(LIB) $(if $(HAVE_PTHREAD),$(RUNNER_LIB)) \
		$(if $(CUNIT_FROM_SOURCE),$(B)/cunit/libcunit.a)
	@mkdir -p $(@D)
	$(CC) $(TARGET_CFLAGS) $(TEST_LDFLAGS) $(filter %.o,$^) $(ACL_LIB) $(LIB) $(if $(HAVE_PTHREAD),$(RUNNER_LIB)) -o $@ $(TEST_LDLIBS)

# TEST_SHARDS parts of the suite at once (tools/run_tests.sh): a test program
# is mostly one thread (under an emulator or valgrind always), and CI's
# machines have two cores. 2 natively; 4 under an emulator or valgrind, where
# a few tests take most of the time: four interleaved parts on two cores
# leave less of it to whichever part draws them (the Cortex-M55 suite: its
# slowest part 79 s instead of 100 s). TEST_FILTER: only the suites whose
# name contains it. TEST_CASES: full, or quick (tests/core/util.h: the sizes
# of a small target, every named case kept) where a target.mk or CI asks.
# TEST_PARTS: which of the TEST_SHARDS parts run (default all; CI shares the
# RVV layer's tests between its two targets this way).
TEST_SHARDS ?= $(if $(RUN),4,2)
TEST_CASES ?= full
TEST_PARTS ?=
test: $(TEST_BIN)
	TEST_PARTS='$(TEST_PARTS)' tools/run_tests.sh '$(RUN)' $(TEST_BIN) $(TEST_SHARDS) $(B)/tests/log $(TEST_CASES) $(TEST_FILTER)

# ---- CUnit for targets without a packaged one: Debian's source package,
# fetched at build time (never committed), compiled with the target's compiler.
CUNIT_SRC := $(BUILDROOT)/cunit-src
CUNIT_FILES := Framework/CUError Framework/MyMem Framework/TestDB Framework/TestRun Framework/Util Basic/Basic
$(CUNIT_SRC)/.fetched:
	@tools/cunit-src.sh $(CUNIT_SRC)

$(B)/cunit/libcunit.a: $(CUNIT_SRC)/.fetched $(CONFIG)
	@rm -rf $(B)/cunit && mkdir -p $(B)/cunit/include/CUnit $(B)/cunit/obj
	cp /usr/include/CUnit/*.h $(B)/cunit/include/CUnit/  # the packaged headers: the tarball's CUnit.h is stale
	for f in $(CUNIT_FILES); do \
	  $(CC) $(TARGET_CFLAGS) -O2 -w -I$(B)/cunit/include/CUnit -c $(CUNIT_SRC)/CUnit/Sources/$$f.c \
	    -o $(B)/cunit/obj/$$(basename $$f).o || exit 1; done
	$(AR) rcs $@ $(B)/cunit/obj/*.o

# Generated sources must be reproducible byte for byte and stamped.
gencheck: $(GEN_C) $(GEN_H) $(REASONS_C)
	@rm -rf $(B)/gen-again && mkdir -p $(B)/gen-again
	@$(MAKE) --no-print-directory -s B=$(B)/gen-again/tree $(patsubst $(B)/%,$(B)/gen-again/tree/%,$(GEN_C) $(GEN_H) $(REASONS_C)) >/dev/null
	@for f in $(GEN_C) $(GEN_H) $(REASONS_C); do cmp -s $$f $(B)/gen-again/tree/$${f#$(B)/} || { echo "gencheck: $$f is not reproducible"; exit 1; }; \
	  grep -q 'Generated' $$f || { echo "gencheck: $$f has no stamp"; exit 1; }; done
	@echo "gencheck: $(words $(GEN_C) $(GEN_H) $(REASONS_C)) generated files reproducible"

symcheck: $(LIB)
	@NM=$(NM) SYMCHECK_ALLOW='$(SYMCHECK_ALLOW)' SYMCHECK_STATE_ALLOW='$(SYMCHECK_STATE_ALLOW)' tools/symcheck.sh $(LIB)

# Every public header alone, as C11 and C++17, with gcc and clang
# (tools/headercheck.sh); host checks only: the headers are the same on every
# target.
PUBLIC_H := $(wildcard include/*/*.h)
headercheck:
	@tools/headercheck.sh $(B)/headercheck $(PUBLIC_H)

# The public headers compile alone whatever the build: checked once, in the
# host's own build (not again in its sanitizer and per-ISA builds).
HEADERCHECK_HERE := $(and $(filter host,$(TARGET)),$(filter native,$(HOST_MARCH)),$(if $(SANITIZE),,1))
check: deps
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory gencheck symcheck $(if $(STACK_LIMIT),stackcheck) $(if $(HEADERCHECK_HERE),headercheck dtypes-check)
	@$(MAKE) --no-print-directory test
	@$(MAKE) --no-print-directory acl-check
	@$(if $(BOARD),$(MAKE) --no-print-directory cmake-cross-check sizing-check $(if $(filter cortex-m55,$(TARGET)),zephyr-module-check))
	@$(MAKE) --no-print-directory python-check
	@$(MAKE) --no-print-directory ort-check

# ---- DTYPES=f32 (a firmware image calling f32 operators alone): the archive
# builds with no f16 / bf16 / f64 kernel (checked with nm), runs f32 and
# refuses float16 and bfloat16 in phase 1 (tests/cmake/msda_ramp.c). Host,
# native, no sanitizers: a separate tree under $(BUILDROOT)/f32-only. ----
F32_ONLY_LIB := $(patsubst $(BUILDROOT)/%,$(BUILDROOT)/f32-only/%,$(LIB))
OPS_ONLY_LIB := $(patsubst $(BUILDROOT)/%,$(BUILDROOT)/ops-only/%,$(LIB))
dtypes-check:
ifeq ($(HEADERCHECK_HERE),)
	@echo "dtypes-check: runs in the host's native build"
else
	@$(MAKE) --no-print-directory -s BUILDROOT=$(BUILDROOT)/f32-only DTYPES=f32 $(F32_ONLY_LIB) >/dev/null
	@n=$$($(NM) $(F32_ONLY_LIB) | grep -cE ' T spa_k_[a-z_]*_(f16|bf16|f64)_') || true; \
	  echo "dtypes-check: DTYPES=f32 archive: $$n f16 / bf16 / f64 kernels, $$(wc -c < $(F32_ONLY_LIB)) bytes"; \
	  [ "$$n" = 0 ]
	@$(CC) $(CFLAGS_TEST) -DHALVES_REFUSED=1 tests/cmake/msda_ramp.c $(F32_ONLY_LIB) \
	  -o $(dir $(F32_ONLY_LIB))msda_ramp -lm && $(dir $(F32_ONLY_LIB))msda_ramp
	@$(MAKE) --no-print-directory -s BUILDROOT=$(BUILDROOT)/ops-only DTYPES=f32 OPS="nsa_select msda" $(OPS_ONLY_LIB) >/dev/null
	@k=$$($(NM) $(OPS_ONLY_LIB) | grep -E ' T spa_k_' | grep -cvE ' T spa_k_(msda|nsa_select)_f32_') || true; \
	  d=$$($(NM) $(OPS_ONLY_LIB) | grep -cE ' T spa_[a-z_]*_phase2$$') || true; \
	  echo "ops-check: OPS=\"nsa_select msda\" DTYPES=f32 archive: $$k other kernels, $$d phase-2 drivers (2 wanted), $$(wc -c < $(OPS_ONLY_LIB)) bytes"; \
	  [ "$$k" = 0 ] && [ "$$d" = 2 ]
	@$(CC) $(CFLAGS_TEST) -DHALVES_REFUSED=1 -DABSENT_REFUSED=1 tests/cmake/msda_ramp.c $(OPS_ONLY_LIB) \
	  -o $(dir $(OPS_ONLY_LIB))msda_ramp -lm && $(dir $(OPS_ONLY_LIB))msda_ramp
endif

# ---- code size per op and worst-case stack of each phase (tools/size.sh) ----
SIZE_HEADER := | target | op | text | data | bss | phase-1 stack | phase-2 stack |\n|---|---|---:|---:|---:|---:|---:|
size: $(LIB)
	@printf '$(SIZE_HEADER)\n'
	@tools/size.sh $(TARGET) $(LIB) $(B)/obj '$(SIZE)' '$(NM)' '$(DTYPES)' '$(CC) $(TARGET_CFLAGS)'

# Targets with a stack budget (STACK_LIMIT in target.mk): phase 2 of every op
# must stay under it (static call-graph bound; libc's memcpy/memset frames
# are not in it: measured, they add under 64 bytes on Cortex-M7).
stackcheck: $(LIB)
	@tools/size.sh $(TARGET) $(LIB) $(B)/obj '$(SIZE)' '$(NM)' '$(DTYPES)' '$(CC) $(TARGET_CFLAGS)' | awk -F'|' -v lim=$(STACK_LIMIT) ' \
	  $$3 ~ /core|libspattn/ { next } \
	  { op = $$3; gsub(/ /, "", op); s = $$8; gsub(/ /, "", s); \
	    if (s == "?" || s == "n/a") { print "stackcheck: " op " phase 2 stack unknown (" s ")"; next } \
	    if (s + 0 >= lim) { print "stackcheck: " op " phase 2 needs " s " bytes of stack, limit " lim; bad = 1 } \
	    else ok = ok " " op "=" s } \
	  END { if (!bad) print "stackcheck: phase 2 stack under " lim " bytes:" ok; exit bad }'

# Every target whose compiler is installed, one table.
SIZE_TARGETS ?= $(patsubst targets/%/target.mk,%,$(wildcard targets/*/target.mk))
size-all:
	@printf '$(SIZE_HEADER)\n'
	@for t in $(SIZE_TARGETS); do \
	  $(MAKE) --no-print-directory -s TARGET=$$t all >/dev/null 2>&1 || { echo "| $$t | (toolchain missing) | | | | | |"; continue; }; \
	  $(MAKE) --no-print-directory -s TARGET=$$t size | tail -n +3; done

# The Zephyr module (zephyr/): its Kconfig-to-make mapping and its archive
# build, with stand-ins for Zephyr's CMake functions (tests/zephyr/check.sh).
.PHONY: zephyr-module-check
zephyr-module-check:
	@tests/zephyr/check.sh

# The two size tables of docs/targets.md, regenerated (tools/size_doc.sh):
# size-all of the Cortex-M targets and three one-op Cortex-M55 images.
.PHONY: size-doc
size-doc:
	+@tools/size_doc.sh docs/targets.md $(BUILDROOT)

# ---- memcheck of the host suite; valgrind stops at AVX-512, hence the march.
# What it finds that the sanitizers cannot is a read of uninitialised memory:
# the thin case set (the quick one with fewer random draws: util.h) at a
# fraction of the 30-50x valgrind costs per operation; VALGRIND_CASES=quick
# reaches every library line (tools/case_coverage.sh), =full runs the full
# set. ----
VALGRIND_MARCH ?= x86-64-v3
VALGRIND_CASES ?= thin
valgrind:
	@tools/deps.sh valgrind:valgrind
	@$(MAKE) --no-print-directory TARGET=host HOST_MARCH=$(VALGRIND_MARCH) TEST_CASES=$(VALGRIND_CASES) test \
	  RUN='valgrind -q --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite,indirect'

# ---- fuzzing: one libFuzzer harness per op (fuzz/fuzz_<op>.c), built only
# when libspattn.a defines spa_<op>_get_workspace_size; each runs
# FUZZ_SECONDS from the committed seeds (fuzz/corpus/<op>/) and any finding
# (crash, sanitizer report, broken contract) fails the target. The harnesses
# run FUZZ_JOBS at a time (each is one process on one core), each one's
# report printed whole when it ends. The library is the SANITIZE=fuzz build
# (ASan + UBSan + the coverage hooks): CI runs the C suites against that same
# build first (make CC=clang SANITIZE=fuzz check), so its clang sanitizer
# checks and the fuzzers share one build per instruction set.
FUZZ_SECONDS ?= 10
FUZZ_JOBS ?= 2
FUZZ_OPS := $(patsubst fuzz/fuzz_%.c,%,$(wildcard fuzz/fuzz_*.c))
fuzz: deps
	@$(MAKE) --no-print-directory TARGET=host CC=clang SANITIZE=fuzz deps
	@$(MAKE) --no-print-directory TARGET=host CC=clang SANITIZE=fuzz fuzz-run

fuzz-run: $(LIB)
	@$(MAKE) --no-print-directory -j$(FUZZ_JOBS) $(addprefix fuzz-run-,$(FUZZ_OPS))

fuzz-run-%: $(LIB)
	@if ! $(NM) -g --defined-only $(LIB) | grep -q " T spa_$*_get_workspace_size$$"; then \
	  echo "fuzz $*: skipped, libspattn.a has no spa_$*_get_workspace_size"; exit 0; fi; \
	$(MAKE) --no-print-directory -s $(B)/fuzz/fuzz_$* >/dev/null || exit 1; \
	mkdir -p $(B)/fuzz/corpus/$* $(B)/fuzz/findings; \
	$(B)/fuzz/fuzz_$* -max_total_time=$(FUZZ_SECONDS) -timeout=20 -rss_limit_mb=2048 -max_len=256 \
	  -print_final_stats=1 -artifact_prefix=$(B)/fuzz/findings/$*- \
	  $(B)/fuzz/corpus/$* fuzz/corpus/$* 2>$(B)/fuzz/$*.log || \
	  { tail -n 40 $(B)/fuzz/$*.log; echo "fuzz $*: FINDING, see $(B)/fuzz/findings/"; exit 1; }; \
	echo "fuzz $*: $(FUZZ_SECONDS) s, $$(grep -E "stat::number_of_executed_units|stat::new_units_added" $(B)/fuzz/$*.log | tr '\n' ' ')"

FZ_SRC := tests/core/fz_engine.c tests/core/fz_ops.c
$(B)/fuzz/fuzz_%: fuzz/fuzz_%.c $(FZ_SRC) tests/core/fz_engine.h $(LIB)
	@mkdir -p $(@D)
	$(CC) $(WARN) $(TARGET_CFLAGS) -fsanitize=fuzzer -Iinclude -Itests/core fuzz/fuzz_$*.c $(FZ_SRC) $(LIB) -o $@ -lm

# ---- benchmark: bench/op_<file>.c define bench_<name>() for each op they time ----
BENCH_OPS := $(shell sed -n 's/^void bench_\([a-z0-9_]*\)(void)$$/\1/p' $(wildcard bench/op_*.c))
$(B)/bench/bench_ops.inc: Makefile $(wildcard bench/op_*.c)
	@mkdir -p $(@D)
	printf '$(foreach o,$(BENCH_OPS),SPA_BENCH($(o))\n)' > $@

$(BENCH_BIN): $(wildcard bench/*.c bench/*.h) $(B)/bench/bench_ops.inc $(ACL_LIB) $(LIB) $(RUNNER_LIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_TEST) -D_POSIX_C_SOURCE=200809L $(if $(ACL_LIB),-DSPA_HAVE_ACL=1) -I$(B)/bench $(filter %.c,$^) $(ACL_LIB) $(LIB) $(RUNNER_LIB) -o $@ -lpthread -lm

bench: deps
	@$(MAKE) --no-print-directory $(BENCH_BIN)
	$(RUN) $(BENCH_BIN) $(OP)

# ---- executed instructions per op call under qemu (Linux cross targets under
# qemu-user, Cortex-M targets under qemu-system-arm with semihosting):
# the insncount plugin (INSNCOUNT, built once into $(BUILDROOT)/insncount)
# counts a run of tools/insn/insn_case.c with one call and with two; a count
# above tools/insn/<isa>.limits fails. INSN_OPS / INSN_DTYPES narrow it. ----
INSNCOUNT ?= ../shared/tools/insncount
INSN_BIN := $(B)/insn/spattn_insn
INSN_OPS ?= nsa_select nsa_select_grad nsa_compress nsa_compress_grad msda msda_grad \
  nsa_compress_attention nsa_compress_attention_grad swa swa_grad
# (f64 has no instruction limits: its kernels are not tuned per ISA yet)
INSN_DTYPES ?= $(filter-out f64,$(DTYPES))
# the limits a count must pass: the ISA's, unless the target names its own
INSN_LIMITS ?= $(wildcard tools/insn/$(ISA).limits)
$(INSN_BIN): tools/insn/insn_case.c $(LIB) $(TEST_EXTRA_OBJ)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_TEST) $(TEST_LDFLAGS) $< $(TEST_EXTRA_OBJ) $(LIB) -o $@ -lm

insn: deps
	@case '$(RUN)' in *qemu-*) ;; *) echo "insn: target $(TARGET) does not run under qemu"; exit 1;; esac
	@test -f $(INSNCOUNT)/build.sh || { echo "insn: no insncount tool at $(INSNCOUNT)"; exit 1; }
	@$(MAKE) --no-print-directory $(INSN_BIN)
	$(if $(filter trace,$(INSN_COUNT_BY)),,@test -f $(BUILDROOT)/insncount/insncount.so || INSNCOUNT_DIR=$(BUILDROOT)/insncount $(INSNCOUNT)/build.sh >/dev/null)
	@INSN_COUNT_BY=$(INSN_COUNT_BY) tools/insn/insn.sh '$(RUN)' $(BUILDROOT)/insncount/insncount.so $(INSN_BIN) $(ISA) '$(INSN_OPS)' '$(INSN_DTYPES)' \
	  $(INSN_LIMITS)

# ---- the workspace phase 1 asks for at typical edge shapes, per op and
# dtype, on the target (tools/insn/edge_ws.c; under qemu where emulated) ----
EDGE_WS_BIN := $(B)/insn/spattn_edge_ws
$(EDGE_WS_BIN): tools/insn/edge_ws.c $(LIB) $(TEST_EXTRA_OBJ)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_TEST) $(TEST_LDFLAGS) $< $(TEST_EXTRA_OBJ) $(LIB) -o $@ -lm

edge-ws: deps
	@$(MAKE) --no-print-directory $(EDGE_WS_BIN)
	@$(RUN) $(EDGE_WS_BIN)

# ---- examples ----
$(B)/examples/%: examples/%.c $(LIB) $(RUNNER_LIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_TEST) -D_POSIX_C_SOURCE=200809L $< $(LIB) $(RUNNER_LIB) -o $@ -lpthread -lm

examples: $(EXAMPLES)

demo: deps
	@$(MAKE) --no-print-directory -s all examples
	@printf '%-20s %-5s %-28s %-4s %-16s %11s  %11s\n' op dtype shape ok check time throughput
	@for e in $(EXAMPLES); do $(RUN) $$e || exit 1; done
	@$(if $(PY_HOSTED),$(MAKE) --no-print-directory -s python-demo)

clean:
	rm -rf $(BUILDROOT)

include mk/sizing.mk
include mk/stackpaint.mk
include mk/acl.mk
