m4_divert(-1)
MultiScaleDeformableAttnFunction, float64 (templates/msda/f64/msda.c.m4): the
combine keeps MSDAD_NB accumulator vectors of SPA_VDL doubles (a block of
MSDAD_NB * SPA_VDL channels of one query) in registers while it walks the
query's live samples, then the smaller blocks and a partial vector for what
is left of C. Four: with the four corner loads, the weights and the sample
sum, well inside 16 vector registers (the scalar layers: four doubles).
m4_define(`MSDAD_NB', 4)
m4_define(`MSDAD_KSYM', `SPA_KSYM(`msda', `v'MSDAD_NB)')
m4_divert(0)m4_dnl
SPA_ADD_DECL(`#include "msda_f64.h"
#define SPA_KMACRO(`msda') MSDAD_KSYM
spa_msda_f64_fwd_kernel MSDAD_KSYM;')m4_dnl
