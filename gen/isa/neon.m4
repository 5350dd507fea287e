m4_divert(-1)
The neon instruction set (src/isa/neon.h): lanes of f32 per vector and the
vector registers the micro-kernels' register tiles are sized from.
m4_define(`SPA_ISA', `neon')
m4_define(`SPA_VL', 4)
Lanes of double per spa_vd (the float64 kernels; float64x2_t).
m4_define(`SPA_VDL', 2)
m4_define(`SPA_VREGS', 32)
No software prefetch: the compress kernels walk token-major rows, one
sequential stream that the hardware prefetchers of these cores follow; each
hint would be instructions issued for nothing.
m4_define(`SPA_PREFETCH_SW', 0)
The bf16 narrowing for numbers (a bit test and two adds per vector) costs
less than the exact one, which fixes NaN lanes: NsaCompressGrad narrows its
two-window rows by it where the inputs are finite. (fcvtn narrows f16
exactly at the same cost.)
m4_define(`SPA_NUM_BF16', 1)
Deformable attention folds the attention weight into the corner weights at
staging (templates/msda/msda.c.m4): four fmla by element per vector of a sample
instead of five, with eight channel vectors (32 channels) to interleave the
accumulators' chains.
m4_define(`SPA_MSDA_FOLD', 1)
m4_divert(0)m4_dnl
