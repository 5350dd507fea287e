m4_divert(-1)
The avx2 instruction set (src/isa/avx2.h): lanes of f32 per vector and the
vector registers the micro-kernels' register tiles are sized from.
m4_define(`SPA_ISA', `avx2')
m4_define(`SPA_VL', 8)
Lanes of double per spa_vd (the float64 kernels; __m256d).
m4_define(`SPA_VDL', 4)
m4_define(`SPA_VREGS', 16)
Software prefetch of the rows the compress kernels read next: the x86 cores
these builds were measured on gained from it.
m4_define(`SPA_PREFETCH_SW', 1)
NsaCompress ring tiles hold 4 vectors (32 channels) of a 128-channel head:
each row of a pass prefetches the lines the next pass reads of it (two
prefetches), so the passes after the first find their rows in the caches
(bench shape, 2 threads: 1.43x the AVX-512 time without, 1.19x with).
m4_define(`SPA_NSAC_PF_NEXT', 1)
m4_divert(0)m4_dnl
