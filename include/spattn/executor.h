/* spattn: running any executor, and why a call refused.
 *
 * A refused call returns its status (161001, 161002, 161003) and writes no
 * tensor; phase 1 (spa_<op>_get_workspace_size) also records, in the last
 * bytes of the executor it was given (its own output, never part of a plan:
 * an executor planned before stays runnable), which rule failed.
 * spa_executor_run does the same for phase 2, whose own entry points take
 * the executor read-only. */
#ifndef SPATTN_EXECUTOR_H
#define SPATTN_EXECUTOR_H

#include "spattn/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The refusal record: the last bytes of a spa_executor. */
#define SPA_REFUSAL_BYTES 32u

/* The rule behind the refusal last recorded in executor, as static text:
 * "src/<file>.c:<line>: <condition> does not hold" for a rule of the spec,
 * "src/<file>.c:<line>: <check>(...) failed" for a check that says no more,
 * or a sentence (a NULL argument, a workspace too small). When the rule lies
 * in a check shared by the ops, *context (if context is not NULL) is the
 * op's call of it, in the same form, which names the argument; otherwise "".
 * "" when executor is NULL or records no refusal (a successful phase 1 or
 * spa_executor_run clears it). */
const char *spa_executor_reason(const spa_executor *executor, const char **context);

/* Phase 2 of the op executor was planned for: the same as spa_<op>(), except
 * that a refusal is recorded in executor for spa_executor_reason (and a
 * success clears it). */
spa_status spa_executor_run(void *workspace, uint64_t workspace_size, spa_executor *executor,
                            const spa_runner *runner);

#ifdef __cplusplus
}
#endif
#endif
