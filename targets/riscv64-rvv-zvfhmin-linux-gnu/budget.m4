m4_divert(-1)
An application core: the default Atlas A2 budget.
m4_include(`gen/budget_a2.m4')m4_dnl
m4_divert(0)m4_dnl
