m4_divert(-1)
The neon_bf16 instruction set (src/isa/neon_bf16.h): the neon facts, under
its own name (kernel symbols carry it); only the layer's bf16 narrowing
(bfcvtn) and its bf16 dot product (bfdot) differ, which no tile depends on.
m4_include(`gen/isa/neon.m4')m4_dnl
m4_divert(-1)
m4_define(`SPA_ISA', `neon_bf16')
bfcvtn narrows bf16 exactly at the cost of the form for numbers.
m4_undefine(`SPA_NUM_BF16')
bfdot: the bf16 selected-attention forward on bf16 pairs
(templates/nsa/nsa_select_dot.m4).
m4_define(`SPA_BF16_DOT', 1)
m4_divert(0)m4_dnl
