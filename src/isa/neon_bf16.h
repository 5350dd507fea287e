/* The neon_bf16 instruction set layer: the neon layer (src/isa/neon.h) on
 * ARMv8.6-A cores, or any core with FEAT_BF16 (Neoverse V1 / N2 / V2,
 * Graviton 3 and 4, Cortex-A510 / A710 and later, Apple M2 and later),
 * whose bf16 narrowing is one instruction (bfcvtn, src/isa/neon_bfcvt.h)
 * instead of integer adds. Everything else is the neon layer's. Reached only
 * through half.h. */
#ifndef SPA_ISA_NEON_BF16_H
#define SPA_ISA_NEON_BF16_H

#if !defined(__ARM_FEATURE_BF16_VECTOR_ARITHMETIC)
#error "ISA neon_bf16 needs a compiler targeting AArch64 with FEAT_BF16 (-march=armv8.6-a or +bf16)"
#endif

#define SPA_ISA_NAME "neon_bf16"
#define SPA_NEON_BFCVT 1
#include "neon.h"

#endif
