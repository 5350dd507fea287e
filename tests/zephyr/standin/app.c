/* A caller of the module's archive (tests/zephyr/standin): the umbrella
 * header through the module's include path, phase 1 of MSDA, and the
 * refusal text the REASONS option decides. Linked only, never run. */
#include <stddef.h>

#include "spattn/spattn.h"

int main(void)
{
    spa_executor executor;
    uint64_t workspace_size = 0;
    spa_status status = spa_msda_get_workspace_size(NULL, NULL, NULL, NULL, NULL, NULL,
                                                    &workspace_size, &executor);
    const char *context = NULL;
    const char *reason = spa_executor_reason(&executor, &context);
    if (status != 0)
        return reason != NULL ? 1 : 2;
    return (int)spa_msda(NULL, workspace_size, &executor, NULL);
}
