m4_divert(-1)
The avx512bf16 instruction set (src/isa/avx512bf16.h): the avx512 facts,
under its own name (kernel symbols carry it), and the bf16 dot product
(vdpbf16ps: two bf16 products per f32 lane and instruction) that the bf16
kernels of selected attention use for Q Kᵀ and P V (SPA_BF16_DOT).
m4_include(`gen/isa/avx512.m4')m4_dnl
m4_divert(-1)
m4_define(`SPA_ISA', `avx512bf16')
m4_define(`SPA_BF16_DOT', 1)
m4_divert(0)m4_dnl
