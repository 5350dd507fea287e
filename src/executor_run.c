/* spa_executor_run: phase 2 of whichever op planned the executor, recording
 * the reason of a refusal in it as phase 1 does. Links every op. */
#include <string.h>

#include "refusal.h"
#include "spattn/executor.h"

static spa_phase2_fn *phase2_of(uint32_t op)
{
    switch (op) {
    case SPA_OP_NSA_COMPRESS:
        return spa_nsa_compress_phase2;
    case SPA_OP_NSA_COMPRESS_GRAD:
        return spa_nsa_compress_grad_phase2;
    case SPA_OP_NSA_SELECT:
        return spa_nsa_select_phase2;
    case SPA_OP_NSA_SELECT_GRAD:
        return spa_nsa_select_grad_phase2;
    case SPA_OP_MSDA:
        return spa_msda_phase2;
    case SPA_OP_MSDA_GRAD:
        return spa_msda_grad_phase2;
    default:
        return NULL;
    }
}

/* The op is read from the unverified header only to pick the phase 2 that
 * then verifies the whole executor. */
static spa_status run(void *workspace, uint64_t workspace_size, const spa_executor *executor,
                      const spa_runner *runner, uint32_t op)
{
    spa_phase2_fn *phase2 = phase2_of(op);
    SPA_REQUIRE(phase2 != NULL /* the executor holds a plan of phase 1 */);
    return phase2(workspace, workspace_size, executor, runner); /* its sites, not this call's */
}

spa_status spa_executor_run(void *workspace, uint64_t workspace_size, spa_executor *executor,
                            const spa_runner *runner)
{
    if (executor == NULL)
        return SPA_ERR_NULLPTR;
    spa_exec_head head;
    memcpy(&head, executor->u.bytes, sizeof head);
    const spa_status st = run(workspace, workspace_size, executor, runner, head.op);
    if (st == SPA_OK)
        spa_refusal_clear(executor);
    return spa_refusal_record(st, executor, head.op, 2);
}
