/* spa_executor_reason: the texts of the sites an executor's refusal record
 * names. Its own object, so that only programs asking for reasons link the
 * table of rule texts (build/<target>/gen/spa_reasons.c). */
#include "refusal.h"
#include "spattn/executor.h"

static const char *site_text(uint32_t site)
{
    const char *t = site != 0 ? spa_site_text(site) : NULL;
    return t != NULL ? t : "";
}

const char *spa_executor_reason(const spa_executor *executor, const char **context)
{
    spa_refusal r;
    if (context != NULL)
        *context = "";
    if (!spa_refusal_read(executor, &r))
        return "";
    if (context != NULL)
        *context = site_text(r.payload >> 15 & 0x7FFFu);
    const char *rule = site_text(r.payload & 0x7FFFu);
    if (*rule != '\0')
        return rule;
    /* ifs, not a switch a compiler may turn into a table of pointers
     * (relocated data in a position-independent build) */
    if (r.status == SPA_ERR_NULLPTR)
        return "a required pointer argument is NULL";
    if (r.status == SPA_ERR_WORKSPACE)
        return "the workspace is smaller than phase 1 asked for";
    return "an argument breaks a rule of the op";
}
