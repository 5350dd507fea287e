m4_divert(-1)
The scalar instruction set (src/isa/scalar.h): lanes of f32 per vector and the
vector registers the micro-kernels' register tiles are sized from.
m4_define(`SPA_ISA', `scalar')
m4_define(`SPA_VL', 1)
m4_define(`SPA_VREGS', 16)
m4_divert(0)m4_dnl
