m4_divert(-1)
The mve instruction set (src/isa/mve.h, Armv8.1-M Helium): lanes of f32 per
vector and the vector registers the micro-kernels' register tiles are sized
from (eight Q registers).
m4_define(`SPA_ISA', `mve')
m4_define(`SPA_VL', 4)
m4_define(`SPA_VREGS', 8)
m4_divert(0)m4_dnl
