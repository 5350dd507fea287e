m4_divert(-1)
A microcontroller: the fast buffer is on-chip SRAM (TCM), not the A2's
192 KiB UB. 144 KiB is the smallest vector-buffer budget in which every
kernel still has a tile (NsaCompress f32 stages 128 rows of D 256 for one
window: 130 KiB), so the tiles, and the per-block scratch phase 1 asks for,
shrink to what such a core keeps close. The cube buffers (L1, L0) keep the A2
sizes: they only bound tile shapes, nothing is staged in them here.
m4_include(`gen/budget_a2.m4')m4_dnl
m4_define(`SPA_BUDGET_NAME', `cortex-m-sram')
m4_define(`SPA_UB_BYTES', 147456)
m4_divert(0)m4_dnl
