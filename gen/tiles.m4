m4_divert(-1)
Tile arithmetic shared by the per-op tile files in gen/tiles/.

SPA_FIT_POW2(`bytes_macro', start, budget): the largest power of two t <= start
for which bytes_macro(t) <= budget; 1 if none fits (and the op's check fails).
m4_define(`SPA_FIT_POW2',
  `m4_ifelse(m4_eval(($2 <= 1) || ($1($2) <= $3)), 1, $2,
    `SPA_FIT_POW2(`$1', m4_eval($2 / 2), $3)')')

SPA_REQUIRE_FITS(what, bytes, budget): stop the generator when a tile cannot fit.
m4_define(`SPA_REQUIRE_FITS',
  `m4_ifelse(m4_eval($2 <= $3), 1, `',
    `m4_errprint(`spattn gen: no tile of '$1` fits the budget ('SPA_BUDGET_NAME`): '$2` > '$3`
')m4_m4exit(1)')')
SPA_ADD_DECL(`text'): appends an op's declarations to the kernel list that
gen/kernels.m4 emits, so adding an op touches no shared file.
m4_define(`SPA_DECLS', `')
m4_define(`SPA_ADD_DECL', `m4_define(`SPA_DECLS', m4_defn(`SPA_DECLS')`$1
')')
m4_divert(0)m4_dnl
