m4_divert(-1)
The neon instruction set (src/isa/neon.h): lanes of f32 per vector and the
vector registers the micro-kernels' register tiles are sized from.
m4_define(`SPA_ISA', `neon')
m4_define(`SPA_VL', 4)
m4_define(`SPA_VREGS', 32)
m4_divert(0)m4_dnl
