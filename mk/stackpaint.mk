# ---- stack painting (bare-metal Arm targets): the suite's thin case set
# run once more with every public phase function behind a painting thunk
# (tools/stack_paint.sh), its deepest measured stack set against the static
# bound of make size (GCC's call graphs, the compiler-runtime helpers
# included): painted <= static for every op and phase, phase 2 under
# STACK_LIMIT. The table: target | op | phase-1 static | painted | phase-2
# static | painted. ----
PAINT := $(B)/stackpaint
# The thin case set: the quick one with fewer random draws, the same paths
# (TEST_PARTS: only those of its TEST_SHARDS parts).
PAINT_CASES ?= thin
.PHONY: stackpaint
stackpaint: $(TEST_OBJ) $(TEST_EXTRA_OBJ) $(LIB) $(if $(CUNIT_FROM_SOURCE),$(B)/cunit/libcunit.a)
ifeq ($(BOARD),)
	@echo "stackpaint: bare-metal Arm targets only (make TARGET=cortex-m55 stackpaint)"
else
	@tools/stack_paint.sh $(NM) $(LIB) $(PAINT)
	@$(CC) $(TARGET_CFLAGS) -c $(PAINT)/thunks.S -o $(PAINT)/thunks.o
	@$(CC) $(CFLAGS_TEST) -c $(PAINT)/names.c -o $(PAINT)/names.o
	@$(CC) $(CFLAGS_TEST) -c tests/stackpaint/report.c -o $(PAINT)/report.o
	@$(CC) $(TARGET_CFLAGS) $(TEST_LDFLAGS) $$(cat $(PAINT)/wrap.flags) $(filter %.o,$^) $(PAINT)/thunks.o \
	  $(PAINT)/names.o $(PAINT)/report.o $(LIB) -o $(PAINT)/spattn_tests $(TEST_LDLIBS)
	@TEST_PARTS='$(TEST_PARTS)' tools/run_tests.sh '$(RUN)' $(PAINT)/spattn_tests $(TEST_SHARDS) $(PAINT)/log $(PAINT_CASES) > $(PAINT)/run.log 2>&1 || \
	  { tail -20 $(PAINT)/run.log; echo "stackpaint: the painted suite failed"; exit 1; }
	@tools/size.sh $(TARGET) $(LIB) $(B)/obj '$(SIZE)' '$(NM)' '$(DTYPES)' '$(CC) $(TARGET_CFLAGS)' > $(PAINT)/static.md
	@awk -v target=$(TARGET) -v lim=$(STACK_LIMIT) -v runner=32 -f tools/stack_paint.awk $(PAINT)/static.md $(PAINT)/run.log
endif
