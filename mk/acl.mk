# The aclnn compatibility layer (included by the Makefile): libspattn_acl.a
# from src/acl/, the CANN-path headers, the C++ examples in examples/aclnn/,
# the seed pages' usage examples, installation and pkg-config files.
# Hosted targets only (it needs threads and the heap); the core archive
# never contains any of it.

ACL_OBJ := $(patsubst %.c,$(B)/obj/%.o,$(wildcard src/acl/*.c))
ACL_HDR := $(wildcard include/acl/*.h include/aclnn/*.h include/aclnnop/*.h)
ACL_OPS_H := $(B)/acl/spa_acl_ops.h
ACL_EXAMPLES := $(wildcard examples/aclnn/*.cpp)
SEEDCHECK := $(B)/acl/seedcheck
SEEDS ?= ../shared/seeds
CXX_WARN := -Wall -Wextra
# Sanitized archives need the same runtime in the C++ programs (clang's with clang).
ACL_SAN := $(filter -fsanitize% -fno-sanitize%,$(TARGET_CFLAGS))
ACL_CXX := $(if $(ACL_SAN),$(if $(findstring clang,$(notdir $(CC))),clang++,$(CXX)),$(CXX))
ACL_CXXFLAGS := -std=c++17 -O2 $(CXX_WARN) -Werror $(ACL_SAN) -Iinclude
ACL_LDLIBS := $(ACL_SAN) $(ACL_LIB) $(LIB) $(RUNNER_LIB) -lpthread -lm

PREFIX ?= /usr/local
DESTDIR ?=
VERSION := 0.1.0
STAGE := $(B)/stage

.PHONY: acl acl-check acl-examples acl-seeds acl-install-check cmake-install-check cmake-cross-check install

$(B)/obj/src/acl/%.o: src/acl/%.c $(wildcard src/acl/*.h) $(filter %/half.h,$(SRC_H)) $(B)/gen/spa_isa.h $(ISA_H) $(ACL_HDR) $(wildcard include/spattn/*.h) $(CONFIG)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_LIB) -D_POSIX_C_SOURCE=200809L -c $< -o $@

$(B)/lib/libspattn_acl.a: $(ACL_OBJ)
	@mkdir -p $(@D)
	rm -f $@ && $(AR) rcs $@ $^

acl: $(ACL_LIB)

# Which operators the core defines: the compat tests of the others are skipped.
$(ACL_OPS_H): $(LIB) tools/acl_ops.sh
	@mkdir -p $(@D)
	NM=$(NM) tools/acl_ops.sh $(LIB) > $@.tmp && mv $@.tmp $@

ACL_TEST_OBJ := $(patsubst %.c,$(B)/obj/%.o,$(foreach f,$(TEST_SRC),$(if $(filter test_acl.c test_acl_ops.c test_acl_infer.c test_acl_dsa.c test_acl_dsa_sfa.c test_acl_dsa_sfa_grad.c test_acl_dsa_li_grad.c acl_util.c,$(notdir $(f))),$(f))))
$(ACL_TEST_OBJ): $(ACL_OPS_H) $(ACL_HDR)
$(ACL_TEST_OBJ): CFLAGS_TEST += -I$(B)/acl $(if $(ACL_LIB),-DSPA_HAVE_ACL=1)

$(SEEDCHECK): tests/seeds/seedcheck.c
	@mkdir -p $(@D)
	$(CC) $(WARN) -O2 $< -o $@ -lm

# The C++ programs are built for the host (the compat tests in the CUnit
# suite run on every target with threads).
ifeq ($(ACL_LIB),)
acl-check:
	@echo "acl: target $(TARGET) has no threads; compat layer not built"
else ifneq ($(TARGET),host)
acl-check:
	@echo "acl: C++ examples, seed pages and install check run on the host target only"
else
acl-check: acl-examples acl-seeds acl-install-check cmake-install-check
endif

acl-examples: $(ACL_LIB) $(LIB) $(RUNNER_LIB)
	@CXX="$(ACL_CXX)" CXXFLAGS="$(ACL_CXXFLAGS)" LDLIBS="$(ACL_LDLIBS)" CORE_LIB=$(LIB) NM=$(NM) \
	  OUT=$(B)/examples/aclnn RUN="$(RUN)" tools/acl_examples.sh $(ACL_EXAMPLES)

acl-seeds: $(ACL_LIB) $(LIB) $(RUNNER_LIB) $(SEEDCHECK)
	@SEEDS="$(SEEDS)" CXX="$(ACL_CXX)" LDLIBS="$(ACL_LDLIBS)" CORE_LIB=$(LIB) NM=$(NM) \
	  OUT=$(B)/seeds RUN="$(RUN)" SEEDCHECK=$(SEEDCHECK) tools/acl_seeds.sh

# ---- installation: archives, every header, pkg-config files (spattn,
# spattn-runner, spattn-acl) and the CMake package (lib/cmake/spattn:
# spattn::spattn, spattn::runner, spattn::acl), both carrying the target and
# its compile flags ----
# One prefix holds the host build (lib/, spattn.pc) and any number of cross
# targets (lib/spattn/<target>/, spattn-<target>.pc), each with its CMake
# description (lib/cmake/spattn/spattn-<target>.cmake), a toolchain file for
# a cross target (lib/cmake/spattn/toolchains/<target>.cmake) and, for a
# bare-metal one, its QEMU board (share/spattn/boards/<board>/: reset code
# and linker script, spattn::board).
INSTALL_LIBDIR := $(if $(filter host,$(TARGET)),lib,lib/spattn/$(TARGET))
PC_SUFFIX := $(if $(filter host,$(TARGET)),,-$(TARGET))
CMAKE_SYSTEM := $(if $(BOARD),Generic,Linux)
CMAKE_PROCESSOR := $(or $(if $(filter cortex-%,$(TARGET)),arm),$(if $(filter aarch64%,$(TARGET)),aarch64),$(if $(filter riscv64%,$(TARGET)),riscv64),$(shell uname -m))
INSTALL_SED = sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' \
  -e 's|@VERSION_MAJOR@|$(firstword $(subst ., ,$(VERSION)))|' -e 's|@TARGET@|$(TARGET)|' \
  -e 's|@TARGET_CFLAGS@|$(strip $(TARGET_CFLAGS))|' -e 's|@LIBDIR@|$(INSTALL_LIBDIR)|' \
  -e 's|@PC_SUFFIX@|$(PC_SUFFIX)|' -e 's|@DTYPES@|$(DTYPES)|' -e 's|@OPS@|$(OPS)|' -e 's|@BOARD@|$(BOARD)|' \
  -e 's|@RUN@|$(RUN)|' -e 's|@CC@|$(CC)|' -e 's|@CMAKE_SYSTEM@|$(CMAKE_SYSTEM)|' \
  -e 's|@CMAKE_PROCESSOR@|$(CMAKE_PROCESSOR)|'
INSTALL_CMAKE := $(DESTDIR)$(PREFIX)/lib/cmake/spattn
install: all $(if $(filter-out host,$(TARGET)),$(SIZING_LIB))
	@echo "install: $(TARGET)$(if $(HOST_MARCH), built with -march=$(HOST_MARCH)) ($(ISA) kernels) into $(DESTDIR)$(PREFIX)/$(INSTALL_LIBDIR)"
	install -d $(DESTDIR)$(PREFIX)/$(INSTALL_LIBDIR) $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include/spattn
	install -m 644 $(LIB) $(DESTDIR)$(PREFIX)/$(INSTALL_LIBDIR)/
	install -m 644 include/spattn/*.h $(DESTDIR)$(PREFIX)/include/spattn/
	$(INSTALL_SED) tools/spattn.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/spattn$(PC_SUFFIX).pc
	install -d $(INSTALL_CMAKE)
	$(INSTALL_SED) tools/spattnConfig.cmake.in > $(INSTALL_CMAKE)/spattnConfig.cmake
	$(INSTALL_SED) tools/spattnConfigVersion.cmake.in > $(INSTALL_CMAKE)/spattnConfigVersion.cmake
	$(INSTALL_SED) tools/spattn-target.cmake.in > $(INSTALL_CMAKE)/spattn-$(TARGET).cmake
ifneq ($(TARGET),host)
	install -d $(INSTALL_CMAKE)/toolchains
	$(INSTALL_SED) tools/spattn-toolchain.cmake.in > $(INSTALL_CMAKE)/toolchains/$(TARGET).cmake
	install -d $(DESTDIR)$(PREFIX)/$(INSTALL_LIBDIR)/sizing
	install -m 644 $(SIZING_LIB) $(DESTDIR)$(PREFIX)/$(INSTALL_LIBDIR)/sizing/
	$(INSTALL_SED) -e 's|@SIZING_ABI@|$(strip $(SIZING_ABI))|' tools/spattn-sizing.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/spattn-sizing$(PC_SUFFIX).pc
endif
ifneq ($(BOARD),)
	install -d $(DESTDIR)$(PREFIX)/share/spattn/boards/$(BOARD)
	install -m 644 targets/bare-arm/startup.c targets/bare-arm/sections.ld $(DESTDIR)$(PREFIX)/share/spattn/boards/$(BOARD)/
	sed 's|^INCLUDE targets/bare-arm/sections.ld|INCLUDE sections.ld|' $(BOARD_LD) > $(DESTDIR)$(PREFIX)/share/spattn/boards/$(BOARD)/$(BOARD).ld
endif
ifneq ($(HAVE_PTHREAD),)
	install -m 644 $(RUNNER_LIB) $(DESTDIR)$(PREFIX)/$(INSTALL_LIBDIR)/
	$(INSTALL_SED) tools/spattn-runner.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/spattn-runner$(PC_SUFFIX).pc
endif
ifneq ($(ACL_LIB),)
	install -m 644 $(ACL_LIB) $(DESTDIR)$(PREFIX)/$(INSTALL_LIBDIR)/
	for d in acl aclnn aclnnop; do \
	  install -d $(DESTDIR)$(PREFIX)/include/$$d && \
	  install -m 644 include/$$d/*.h $(DESTDIR)$(PREFIX)/include/$$d/ || exit 1; done
	$(INSTALL_SED) tools/spattn-acl.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/spattn-acl$(PC_SUFFIX).pc
endif

# A CMake project of a user (tests/cmake) finds the staged install with
# find_package(spattn CONFIG) and runs an operator through spattn::spattn and
# spattn::runner (host, no sanitizers; skipped where cmake is not installed).
cmake-install-check:
ifneq ($(SANITIZE),)
	@echo "cmake-install-check: skipped with sanitizers (the consumer is built without them)"
else
	@if ! command -v cmake >/dev/null; then echo "cmake-install-check: skipped, no cmake (apt-get install cmake)"; \
	else rm -rf $(STAGE)-cmake && \
	  $(MAKE) --no-print-directory -s install HOST_MARCH=$(HOST_MARCH) DESTDIR=$(abspath $(STAGE)-cmake) PREFIX=/opt/spattn >/dev/null && \
	  cmake -S tests/cmake -B $(STAGE)-cmake/build -DCMAKE_C_COMPILER=$(CC) \
	    -DCMAKE_PREFIX_PATH=$(abspath $(STAGE)-cmake)/opt/spattn >$(STAGE)-cmake/configure.log && \
	  grep "spattn .* for target" $(STAGE)-cmake/configure.log | sed 's/^-- /cmake-install-check: /' && \
	  cmake --build $(STAGE)-cmake/build >$(STAGE)-cmake/build.log && \
	  $(STAGE)-cmake/build/msda_ramp && $(STAGE)-cmake/build/msda_runner; fi
endif

# Several targets under one prefix: the host and this cross target staged
# into one install, then the same CMake project (tests/cmake) configured for
# each: natively, and with the installed toolchain file of this target, whose
# image (spattn::board on bare metal) runs under $(RUN). Skipped where cmake
# is not installed.
cmake-cross-check:
ifeq ($(TARGET),host)
	@echo "cmake-cross-check: for a cross target (make TARGET=cortex-m55 cmake-cross-check)"
else
	@if ! command -v cmake >/dev/null; then echo "cmake-cross-check: skipped, no cmake (apt-get install cmake)"; \
	else rm -rf $(STAGE)-cross && \
	  $(MAKE) --no-print-directory -s TARGET=host HOST_MARCH=native install DESTDIR=$(abspath $(STAGE)-cross) PREFIX=/opt/spattn >/dev/null && \
	  $(MAKE) --no-print-directory -s install DESTDIR=$(abspath $(STAGE)-cross) PREFIX=/opt/spattn >/dev/null && \
	  p=$(abspath $(STAGE)-cross)/opt/spattn && \
	  cmake -S tests/cmake -B $(STAGE)-cross/host -DCMAKE_PREFIX_PATH=$$p >$(STAGE)-cross/host.log && \
	  cmake --build $(STAGE)-cross/host >>$(STAGE)-cross/host.log && $(STAGE)-cross/host/msda_ramp | sed 's/^/cmake-cross-check: host: /' && \
	  cmake -S tests/cmake -B $(STAGE)-cross/$(TARGET) -DCMAKE_TOOLCHAIN_FILE=$$p/lib/cmake/spattn/toolchains/$(TARGET).cmake \
	    >$(STAGE)-cross/$(TARGET).log && \
	  grep "spattn .* for target" $(STAGE)-cross/$(TARGET).log | sed 's/^-- /cmake-cross-check: /' && \
	  cmake --build $(STAGE)-cross/$(TARGET) >>$(STAGE)-cross/$(TARGET).log && \
	  $(RUN) $(STAGE)-cross/$(TARGET)/msda_ramp | sed 's/^/cmake-cross-check: $(TARGET): /' && \
	  echo "cmake-cross-check: one prefix: $$(cd $$p && ls lib/cmake/spattn/spattn-*.cmake lib/pkgconfig/*.pc | tr '\n' ' ')"; fi
endif

# The installed tree alone must be enough: stage an install under build/ and
# build an example with nothing but what pkg-config reports for it.
acl-install-check:
	@rm -rf $(STAGE)
	@$(MAKE) --no-print-directory -s install HOST_MARCH=$(HOST_MARCH) DESTDIR=$(abspath $(STAGE)) PREFIX=/usr/local >/dev/null
	@flags=$$(PKG_CONFIG_PATH= PKG_CONFIG_LIBDIR=$(abspath $(STAGE))/usr/local/lib/pkgconfig \
	  PKG_CONFIG_SYSROOT_DIR=$(abspath $(STAGE)) pkg-config --cflags --libs spattn-acl) && \
	  echo "acl install: pkg-config --cflags --libs spattn-acl = $$flags" && \
	  $(ACL_CXX) -std=c++17 -O2 $(CXX_WARN) -Werror $(ACL_SAN) examples/aclnn/nsa_compress.cpp $$flags \
	    -o $(STAGE)/nsa_compress && \
	  $(RUN) $(STAGE)/nsa_compress > $(STAGE)/nsa_compress.log && \
	  echo "acl install: staged example: $$(tail -n 1 $(STAGE)/nsa_compress.log)"
