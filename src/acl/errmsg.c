/* aclGetRecentErrMsg: each thread keeps the message of its latest failed
 * aclnn call (CANN's default, thread-level mode). Reading it clears it; the
 * text read stays valid until the thread's next read. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "acl_internal.h"

#define SPA_ACL_MSG_BYTES 1024

static _Thread_local char pending[SPA_ACL_MSG_BYTES];
static _Thread_local char handed_out[SPA_ACL_MSG_BYTES];

void spa_acl_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pending, sizeof pending, fmt, ap);
    va_end(ap);
}

static const char *status_name(spa_status st)
{
    switch (st) {
    case SPA_ERR_NULLPTR:
        return "ACLNN_ERR_PARAM_NULLPTR";
    case SPA_ERR_INVALID:
        return "ACLNN_ERR_PARAM_INVALID";
    case SPA_ERR_WORKSPACE:
        return "workspace too small";
    default:
        return "error";
    }
}

void spa_acl_error_refusal(const char *api, spa_status st, const spa_executor *native)
{
    const char *context = "";
    const char *rule = native != NULL ? spa_executor_reason(native, &context) : "";
    if (*rule == '\0')
        rule = st == SPA_ERR_NULLPTR ? "a required pointer argument is NULL" : "refused";
    spa_acl_error("%s: %d (%s): %s%s%s%s", api, (int)st, status_name(st), rule,
                  *context != '\0' ? " (in " : "", context, *context != '\0' ? ")" : "");
}

const char *aclGetRecentErrMsg(void)
{
    if (pending[0] == '\0')
        return NULL;
    memcpy(handed_out, pending, sizeof handed_out);
    pending[0] = '\0';
    return handed_out;
}
