m4_divert(-1)
The same fast-buffer budget as the hard-float build of this core.
m4_include(`targets/cortex-m55/budget.m4')m4_dnl
m4_divert(0)m4_dnl
