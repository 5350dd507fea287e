/* Sealing the caller-owned executor: phase 1 copies its plan in with a
 * checksum; phase 2 copies it out only if header and checksum agree. A
 * refused phase 1 disarms the executor: a plan made before it would
 * otherwise still run, for arguments the caller has since replaced. */
#include <string.h>

#include "internal.h"

#define SPA_EXEC_MAGIC 0x53504131u    /* "SPA1" */
#define SPA_EXEC_DISARMED 0x53504130u /* "SPA0": the last phase 1 into it was refused */

/* FNV-1a over the struct with the checksum field taken as zero. */
static uint32_t exec_checksum(const unsigned char *p, uint32_t bytes)
{
    uint32_t h = 2166136261u;
    for (uint32_t i = 0; i < bytes; i++) {
        bool in_sum = i >= offsetof(spa_exec_head, checksum) &&
                      i < offsetof(spa_exec_head, checksum) + sizeof(uint32_t);
        h = (h ^ (in_sum ? 0u : p[i])) * 16777619u;
    }
    return h;
}

void spa_exec_seal(spa_executor *ex, void *internal, uint32_t bytes, uint32_t op)
{
    spa_exec_head *head = internal;
    head->magic = SPA_EXEC_MAGIC;
    head->op = op;
    head->bytes = bytes;
    head->checksum = 0;
    head->checksum = exec_checksum(internal, bytes);
    memset(ex, 0, sizeof *ex);
    memcpy(ex->u.bytes, internal, bytes);
}

void spa_exec_disarm(spa_executor *ex, uint32_t op)
{
    spa_exec_head head;
    memset(&head, 0, sizeof head);
    head.magic = SPA_EXEC_DISARMED;
    head.op = op; /* spa_executor_run then reaches this op's phase 2, which names the rule */
    memset(ex->u.bytes, 0, sizeof ex->u.bytes - SPA_REFUSAL_BYTES);
    memcpy(ex->u.bytes, &head, sizeof head);
}

spa_status spa_exec_open(const spa_executor *ex, void *internal, uint32_t bytes, uint32_t op)
{
    if (ex == NULL)
        return SPA_ERR_NULLPTR;
    spa_exec_head head;
    memcpy(&head, ex->u.bytes, sizeof head);
    SPA_REQUIRE(head.magic != SPA_EXEC_DISARMED /* the last phase 1 into this executor was
                refused: nothing runs until one succeeds */);
    if (head.magic != SPA_EXEC_MAGIC || head.op != op || head.bytes != bytes ||
        bytes > sizeof ex->u.bytes)
        return SPA_ERR_INVALID;
    if (exec_checksum(ex->u.bytes, bytes) != head.checksum)
        return SPA_ERR_INVALID;
    memcpy(internal, ex->u.bytes, bytes);
    return SPA_OK;
}
