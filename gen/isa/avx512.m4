m4_divert(-1)
The avx512 instruction set (src/isa/avx512.h): lanes of f32 per vector and the
vector registers the micro-kernels' register tiles are sized from.
m4_define(`SPA_ISA', `avx512')
m4_define(`SPA_VL', 16)
m4_define(`SPA_VREGS', 32)
m4_divert(0)m4_dnl
