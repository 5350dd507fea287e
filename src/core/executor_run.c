/* spa_executor_run: phase 2 of whichever op planned the executor, recording
 * the reason of a refusal in it as phase 1 does. Links every op built. */
#include <string.h>

#include "refusal.h"
#include "spa_ops.h"
#include "spattn/executor.h"

/* The op is read from the unverified header only to pick the phase 2 that
 * then verifies the whole executor. Calls, not a table of pointers: such a
 * table would be relocated data in a position-independent build. */
static spa_status run(void *workspace, uint64_t workspace_size, const spa_executor *executor,
                      const spa_runner *runner, uint32_t op)
{
    SPA_REQUIRE(op >= SPA_OP_NSA_COMPRESS && op <= SPA_OP_DSA_LIGHTNING_INDEXER_GRAD /* a plan of phase 1 */);
    /* the sites of the refusal are those of the op's phase 2, not this call's */
    switch (op) {
#if SPA_BUILT_NSA_COMPRESS
    case SPA_OP_NSA_COMPRESS:
        return spa_nsa_compress_phase2(workspace, workspace_size, executor, runner);
#endif
#if SPA_BUILT_NSA_COMPRESS_GRAD
    case SPA_OP_NSA_COMPRESS_GRAD:
        return spa_nsa_compress_grad_phase2(workspace, workspace_size, executor, runner);
#endif
#if SPA_BUILT_NSA_SELECT
    case SPA_OP_NSA_SELECT:
        return spa_nsa_select_phase2(workspace, workspace_size, executor, runner);
#endif
#if SPA_BUILT_NSA_SELECT_GRAD
    case SPA_OP_NSA_SELECT_GRAD:
        return spa_nsa_select_grad_phase2(workspace, workspace_size, executor, runner);
#endif
#if SPA_BUILT_SWA
    case SPA_OP_SWA:
        return spa_swa_phase2(workspace, workspace_size, executor, runner);
#endif
#if SPA_BUILT_SWA_GRAD
    case SPA_OP_SWA_GRAD:
        return spa_swa_grad_phase2(workspace, workspace_size, executor, runner);
#endif
#if SPA_BUILT_MSDA
    case SPA_OP_MSDA:
        return spa_msda_phase2(workspace, workspace_size, executor, runner);
#endif
#if SPA_BUILT_NSA_COMPRESS_ATTENTION
    case SPA_OP_NSA_CATTN:
        return spa_nsa_cattn_phase2(workspace, workspace_size, executor, runner);
#endif
#if SPA_BUILT_NSA_COMPRESS_ATTENTION_GRAD
    case SPA_OP_NSA_CATTN_GRAD:
        return spa_nsa_cattn_grad_phase2(workspace, workspace_size, executor, runner);
#endif
#if SPA_BUILT_NSA_SELECT_INFER
    case SPA_OP_NSA_SELECT_INFER:
        return spa_nsa_select_infer_phase2(workspace, workspace_size, executor, runner);
#endif
#if SPA_BUILT_NSA_COMPRESS_WITH_CACHE
    case SPA_OP_NSA_COMPRESS_CACHE:
        return spa_nsa_compress_cache_phase2(workspace, workspace_size, executor, runner);
#endif
#if SPA_BUILT_NSA_COMPRESS_ATTENTION_INFER
    case SPA_OP_NSA_CATTN_INFER:
        return spa_nsa_cattn_infer_phase2(workspace, workspace_size, executor, runner);
#endif
#if SPA_BUILT_DSA_LIGHTNING_INDEXER
    case SPA_OP_DSA_LIGHTNING_INDEXER:
        return spa_dsa_lightning_indexer_phase2(workspace, workspace_size, executor, runner);
#endif
#if SPA_BUILT_DSA_SPARSE_ATTENTION
    case SPA_OP_DSA_SPARSE_ATTENTION:
        return spa_dsa_sparse_attention_phase2(workspace, workspace_size, executor, runner);
#endif
#if SPA_BUILT_DSA_SPARSE_ATTENTION_GRAD
    case SPA_OP_DSA_SPARSE_ATTENTION_GRAD:
        return spa_dsa_sparse_attention_grad_phase2(workspace, workspace_size, executor, runner);
#endif
#if SPA_BUILT_DSA_LIGHTNING_INDEXER_GRAD
    case SPA_OP_DSA_LIGHTNING_INDEXER_GRAD:
        return spa_dsa_lightning_indexer_grad_phase2(workspace, workspace_size, executor, runner);
#endif
#if SPA_BUILT_MSDA_GRAD
    case SPA_OP_MSDA_GRAD:
        return spa_msda_grad_phase2(workspace, workspace_size, executor, runner);
#endif
    default: /* an op this build leaves out (OPS=): phase 1 planned no executor for it */
        SPA_REQUIRE(0 /* operator not built: it is not in this build's OPS */);
        return SPA_OK;
    }
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
