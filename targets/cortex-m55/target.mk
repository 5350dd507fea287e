# Cortex-M55 (Armv8.1-M with MVE and the FPU), hard-float ABI, as on QEMU's
# mps3-an547 board, which runs the tests. -mcpu=cortex-m55 means
# armv8.1-m.main+mve.fp+fp.dp: Helium with floating point (MVE-F), which the
# hard-float ABI (FLOAT_ABI; targets/cortex-m55-softfp builds the same with
# softfp) computes with; either ABI compiles arm_mve.h's float vectors.
# hard unless targets/<core>-softfp set FLOAT_ABI in its file before
# including this one (never from the environment or the command line).
ifneq ($(origin FLOAT_ABI),file)
override FLOAT_ABI := hard
endif
ARCH_FLAGS := -mcpu=cortex-m55 -mfloat-abi=$(FLOAT_ABI) -mthumb
BOARD := mps3-an547
BOARD_LD := targets/cortex-m55/mps3-an547.ld
# Kernels on the Helium layer (src/isa/mve.h, gen/isa/mve.m4).
ISA := mve
include targets/bare-arm/semihost.mk
# No float64 kernels: they would add flash for a dtype these boards' models
# do not train in; float64 tensors are refused (161002).
DTYPES := f32 f16 bf16
# The NSA kernels without GCC's scheduling before register allocation: with
# eight Q registers it hoists the loads of a micro-kernel's unrolled steps
# and spills the accumulators (more instructions, and a third more stack).
$(B)/obj/gen/nsa_%.o: CFLAGS_LIB += -fno-schedule-insns
# NsaCompressGrad also without the pass that makes pre/post-incremented
# addresses: its tile reads rows at a few offsets from one pointer, and the
# pass copies the pointer per access.
$(B)/obj/gen/nsa_compress_grad_%.o: CFLAGS_LIB += -fno-auto-inc-dec
# The same for the NsaCompress forward: its ring tile reads a row at two
# offsets from one pointer, stepped by the row pitch.
$(foreach dt,f32 f16 bf16,$(B)/obj/gen/nsa_compress_$(dt).o): CFLAGS_LIB += -fno-auto-inc-dec
# The same for deformable attention's combine (four accumulators, the
# sample's chain in two registers).
$(B)/obj/gen/msda_%.o: CFLAGS_LIB += -fno-schedule-insns
# Deformable attention's forward combine: auto-inc-dec copies each corner
# pointer to post-increment its first load (a move per corner and sample).
$(foreach dt,f32 f16 bf16,$(B)/obj/gen/msda_$(dt).o): CFLAGS_LIB += -fno-auto-inc-dec
