/* Refusals on their way out: the internal status that carries the sites of
 * the failed rule and its context, the public status it stands for, and the
 * record phase 1 (and spa_executor_run) leaves in the executor for
 * spa_executor_reason.
 *
 * Internal status = -1 - payload, payload = kind << 30 | context << 15 |
 * rule (sites of 15 bits), so every refusal is negative and every public
 * status (0, 161001..161003) is not. */
#include <string.h>

#include "internal.h"
#include "refusal.h"

#define SITE_MASK 0x7FFFu
#define KIND_NULLPTR 1u

static spa_status encode(uint32_t kind, uint32_t context, uint32_t rule)
{
    const uint32_t payload = kind << 30 | (context & SITE_MASK) << 15 | (rule & SITE_MASK);
    return -1 - (spa_status)payload;
}

uint32_t spa_refusal_payload(spa_status st)
{
    return st < 0 ? (uint32_t)(-1 - st) : 0;
}

spa_status spa_refuse(spa_status st, uint32_t site)
{
    if (st >= 0) {
        if (st == SPA_ERR_WORKSPACE || st == SPA_OK)
            return st; /* "too small" needs no rule */
        return encode(st == SPA_ERR_NULLPTR ? KIND_NULLPTR : 0, 0, site);
    }
    const uint32_t p = spa_refusal_payload(st), rule = p & SITE_MASK;
    const uint32_t context = p >> 15 & SITE_MASK;
    if (context != 0 || site >> SPA_SITE_LINE_BITS == rule >> SPA_SITE_LINE_BITS)
        return st;
    return encode(p >> 30, site, rule);
}

spa_status spa_public_status(spa_status st)
{
    if (st >= 0)
        return st;
    return spa_refusal_payload(st) >> 30 == KIND_NULLPTR ? SPA_ERR_NULLPTR : SPA_ERR_INVALID;
}

static uint32_t record_check(const spa_refusal *r)
{
    return (r->magic ^ (uint32_t)r->status ^ r->payload ^ r->where) * 2654435761u;
}

spa_status spa_refusal_record(spa_status st, spa_executor *ex, uint32_t op, uint32_t phase)
{
    const spa_status pub = spa_public_status(st);
    if (pub == SPA_OK || ex == NULL)
        return pub;
    if (phase == 1)
        spa_exec_disarm(ex, op);
    spa_refusal r;
    memset(&r, 0, sizeof r);
    r.magic = SPA_REFUSAL_MAGIC;
    r.status = pub;
    r.payload = spa_refusal_payload(st); /* 0 for a plain status: no site */
    r.where = op << 8 | phase;
    r.check = record_check(&r);
    memcpy(ex->u.bytes + SPA_EXECUTOR_BYTES - SPA_REFUSAL_BYTES, &r, sizeof r);
    return pub;
}

void spa_refusal_clear(spa_executor *ex)
{
    memset(ex->u.bytes + SPA_EXECUTOR_BYTES - SPA_REFUSAL_BYTES, 0, SPA_REFUSAL_BYTES);
}

bool spa_refusal_read(const spa_executor *ex, spa_refusal *r)
{
    if (ex == NULL)
        return false;
    memcpy(r, ex->u.bytes + SPA_EXECUTOR_BYTES - SPA_REFUSAL_BYTES, sizeof *r);
    return r->magic == SPA_REFUSAL_MAGIC && r->check == record_check(r);
}
