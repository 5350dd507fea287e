# ---- workspace sizing ahead of time: libspattn_sizing.a, this target's
# phase 1 built for the build machine ----
# A firmware sizes its static workspace before it runs: the bytes phase 1
# asks depend on the target's tiles (its budget.m4), its block limits
# (-DSPA_*_BLOCKS_MAX in its target.mk) and its dtypes, not on the machine
# that asks. This archive is the target's drivers, core and generated tile
# headers compiled by the build machine's compiler (SIZING_CC), so a host
# program (a build step, a configurator) calls spa_<op>_get_workspace_size
# with the firmware's shapes and gets the target's answer, as CMSIS-NN's
# *_get_buffer_size_mve() does. The ISA layer is the scalar one: a plan sees
# the layer only through SPA_VL <= 8 (the head padding of selected and
# sliding-window attention), which holds for every cross target's layer
# (the #error below checks it). Phase 2 of this archive computes nothing:
# its kernels are traps (kernel_traps.c). sizing-check runs the same calls
# on the target and here and compares the sizes.
SIZING_CC ?= cc
SIZING := $(B)/sizing
SIZING_LIB := $(SIZING)/libspattn_sizing.a
SIZING_VL := $(shell sed -n 's/^\#define SPA_VL \([0-9]*\).*/\1/p' src/isa/$(ISA).h)
# The target's data model, which the scratch records hold (pointers) and the
# structs are laid out in: a 32-bit target is sized by -m32 code with
# 8-byte-aligned int64 and double (AAPCS), and short enums where the target
# has them (arm-none-eabi). A host program linking this archive is built
# with the same flags (SIZING_ABI; the installed spattn-sizing-<t>.pc).
SIZING_MODEL = $(shell echo | $(CC) $(TARGET_CFLAGS) -dM -E - 2>/dev/null | \
	sed -n 's/^\#define \(__SIZEOF_POINTER__\|__ARM_SIZEOF_MINIMAL_ENUM\) \([0-9]*\)$$/\1=\2/p')
SIZING_ABI = $(if $(filter __SIZEOF_POINTER__=4,$(SIZING_MODEL)),-m32 -malign-double) \
	$(if $(filter __ARM_SIZEOF_MINIMAL_ENUM=1,$(SIZING_MODEL)),-fshort-enums)
SIZING_CFLAGS = $(WARN) -O1 $(SIZING_ABI) $(filter -D%,$(TARGET_CFLAGS) $(LIB_CFLAGS) $(EXTRA_CFLAGS)) -Iinclude \
	$(addprefix -I,$(SRC_DIRS)) -I$(SIZING)/gen -I$(B)/gen
SIZING_OBJ := $(LIB_SRC:%.c=$(SIZING)/obj/%.o) $(SIZING)/obj/spa_reasons.o $(SIZING)/obj/kernel_traps.o

# The objects depend on the flags they were built with (rewritten only when they change).
$(SIZING)/flags: FORCE
	@mkdir -p $(@D)
	@f='$(SIZING_CC) $(SIZING_CFLAGS)'; [ -f $@ ] && [ "$$(cat $@)" = "$$f" ] || printf '%s\n' "$$f" > $@
.PHONY: FORCE
FORCE:

$(SIZING)/gen/spa_isa.h: $(CONFIG)
	@mkdir -p $(@D)
	printf '/* Generated: the sizing build of target $(TARGET) (ISA $(ISA), SPA_VL $(SIZING_VL)). */\n#if $(or $(SIZING_VL),1) > 8\n#error "a plan pads heads by SPA_VL <= 8: this target'"'"'s layer is wider than the scalar one stands for"\n#endif\n#include "isa/scalar.h"\n' > $@

# Every kernel the drivers name, defined as a trap (nothing calls it in phase 1).
$(SIZING)/gen/kernel_traps.c: $(GEN_H)
	@mkdir -p $(@D)
	{ printf '/* Generated: the kernels of target $(TARGET), as traps (libspattn_sizing.a computes no phase 2). */\n'; \
	  sed -n 's/^spa_[a-z0-9_]* \(spa_k_[a-z0-9_]*\);$$/\1/p' $(GEN_H) | sort -u | \
	  while read k; do printf 'void %s(void);\nvoid %s(void) { __builtin_trap(); }\n' $$k $$k; done; } > $@

$(SIZING)/obj/src/%.o: src/%.c $(SIZING)/flags $(GEN_H) $(SIZING)/gen/spa_isa.h $(SRC_H) $(wildcard include/spattn/*.h) $(CONFIG) $(SRC_LIST)
	@mkdir -p $(@D)
	$(SIZING_CC) $(SIZING_CFLAGS) -DSPA_SRC_ID=$(SRC_ID_$<) -c $< -o $@

$(SIZING)/obj/spa_reasons.o: $(REASONS_C) $(SIZING)/flags
	@mkdir -p $(@D)
	$(SIZING_CC) $(SIZING_CFLAGS) -c $< -o $@

$(SIZING)/obj/kernel_traps.o: $(SIZING)/gen/kernel_traps.c $(SIZING)/flags
	@mkdir -p $(@D)
	$(SIZING_CC) -std=c11 -O1 $(SIZING_ABI) -c $< -o $@

$(SIZING_LIB): $(SIZING_OBJ)
	rm -f $@ && ar rcs $@ $^

.PHONY: sizing sizing-check
sizing: $(SIZING_LIB)

# tests/sizing/wsize_cases.c on the target (its archive, under RUN) and on
# the build machine (the sizing archive): the same bytes for every call.
sizing-check: $(SIZING_LIB) $(LIB)
	@$(SIZING_CC) $(WARN) $(SIZING_ABI) -Iinclude tests/sizing/wsize_cases.c $(SIZING_LIB) -lm -o $(SIZING)/wsize_cases_here
	@$(CC) $(WARN) $(TARGET_CFLAGS) $(TEST_CFLAGS) -Iinclude $(TEST_LDFLAGS) tests/sizing/wsize_cases.c \
	  $(TEST_EXTRA_SRC) $(LIB) -o $(SIZING)/wsize_cases_target $(filter-out %libcunit.a -lcunit,$(TEST_LDLIBS))
	@$(SIZING)/wsize_cases_here > $(SIZING)/here.txt
	@$(RUN) $(SIZING)/wsize_cases_target > $(SIZING)/target.txt
	@if cmp -s $(SIZING)/here.txt $(SIZING)/target.txt; then \
	  echo "sizing-check: libspattn_sizing.a sizes $(TARGET)'s calls as the target does:"; sed 's/^/  /' $(SIZING)/here.txt; \
	else echo "sizing-check: the build machine and $(TARGET) disagree:"; diff $(SIZING)/here.txt $(SIZING)/target.txt; exit 1; fi
