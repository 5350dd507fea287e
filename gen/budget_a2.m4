m4_divert(-1)
Default buffer budget: the Atlas A2 AI core (spec/nsa.md 0.6), in bytes.
A target overrides any of these in targets/<t>/budget.m4 after including this file.
m4_define(`SPA_BUDGET_NAME', `atlas-a2')
m4_define(`SPA_UB_BYTES', 196608)
m4_define(`SPA_L1_BYTES', 524288)
m4_define(`SPA_L0A_BYTES', 65536)
m4_define(`SPA_L0B_BYTES', 65536)
m4_define(`SPA_L0C_BYTES', 131072)
m4_divert(0)m4_dnl
