/* Which host-only instruction sets a fast path may use, decided by the
 * target's compiler flags alone (targets/<t>/target.mk: -march=...). A fast
 * path is written
 *     #include "isa.h"
 *     #if SPA_ISA_AVX512F
 *         ... intrinsics ...
 *     #else
 *         ... the portable C loop, which every other target compiles ...
 *     #endif
 * and the portable path stays tested: cross targets never define these, and
 * on the host `make HOST_MARCH=x86-64 check` or `make PORTABLE=1 check`
 * (which defines SPA_PORTABLE) builds without them. */
#ifndef SPA_ISA_H
#define SPA_ISA_H

#if !defined(SPA_PORTABLE) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define SPA_ISA_AVX512F 1
#else
#define SPA_ISA_AVX512F 0
#endif

#if SPA_ISA_AVX512F && defined(__AVX512BF16__)
#define SPA_ISA_AVX512BF16 1
#else
#define SPA_ISA_AVX512BF16 0
#endif

#if !defined(SPA_PORTABLE) && defined(__F16C__) && defined(__AVX2__)
#define SPA_ISA_F16C 1
#else
#define SPA_ISA_F16C 0
#endif

#if !defined(SPA_PORTABLE) && defined(__AVX2__) && defined(__FMA__)
#define SPA_ISA_AVX2 1
#else
#define SPA_ISA_AVX2 0
#endif

#endif
