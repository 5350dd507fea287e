m4_divert(-1)
The scalar instruction set (src/isa/scalar.h): lanes of f32 per vector and the
vector registers the micro-kernels' register tiles are sized from.
m4_define(`SPA_ISA', `scalar')
m4_define(`SPA_VL', 1)
Lanes of double per spa_vd (the float64 kernels; one double).
m4_define(`SPA_VDL', 1)
m4_define(`SPA_VREGS', 16)
No software prefetch: the compress kernels walk token-major rows, one
sequential stream that the hardware prefetchers of these cores follow; each
hint would be instructions issued for nothing.
m4_define(`SPA_PREFETCH_SW', 0)
m4_divert(0)m4_dnl
