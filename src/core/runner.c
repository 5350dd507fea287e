/* Handing the blocks of one phase to the caller's runner. */
#include "internal.h"

void spa_run_blocks(const spa_runner *r, spa_task_fn task, void *arg, uint32_t n)
{
    if (n == 0)
        return;
    if (r == NULL || r->run == NULL) {
        for (uint32_t i = 0; i < n; i++)
            task(arg, i);
        return;
    }
    r->run(r->ctx, task, arg, n);
}

spa_runner spa_runner_copy(const spa_runner *r)
{
    spa_runner c = {NULL, NULL};
    if (r != NULL)
        c = *r;
    return c;
}
