/* The set of live handles and allocations: a sorted array of address ranges
 * under one mutex. Handles and allocations are distinct live heap blocks, so
 * ranges never overlap and the entry holding an address is the last one that
 * starts at or below it. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "acl_internal.h"

typedef struct entry {
    uintptr_t addr;
    uint64_t size;
    int kind;
    uint32_t pins; /* memory blocks: live executors (and runs) using the block */
    void *obj;     /* executor handles: the record behind the handle */
} entry;

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static entry *reg;
static size_t reg_n, reg_cap;

void spa_acl_lock(void)
{
    pthread_mutex_lock(&reg_lock);
}

void spa_acl_unlock(void)
{
    pthread_mutex_unlock(&reg_lock);
}

void spa_acl_wait_locked(pthread_cond_t *cond)
{
    pthread_cond_wait(cond, &reg_lock);
}

/* Index of the first entry with addr > a. */
static size_t upper(uintptr_t a)
{
    size_t lo = 0, hi = reg_n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (reg[mid].addr <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Index of the entry starting exactly at a with that kind, or reg_n. */
static size_t find(uintptr_t a, int kind)
{
    size_t i = upper(a);
    if (i > 0 && reg[i - 1].addr == a && reg[i - 1].kind == kind)
        return i - 1;
    return reg_n;
}

bool spa_acl_reg_add_obj_locked(const void *p, uint64_t size, int kind, void *obj)
{
    if (reg_n == reg_cap) {
        size_t cap = reg_cap ? reg_cap * 2 : 64;
        entry *grown = realloc(reg, cap * sizeof *grown);
        if (grown == NULL)
            return false;
        reg = grown;
        reg_cap = cap;
    }
    uintptr_t a = (uintptr_t)p;
    size_t i = upper(a);
    memmove(reg + i + 1, reg + i, (reg_n - i) * sizeof *reg);
    reg[i] = (entry){a, size, kind, 0, obj};
    reg_n++;
    return true;
}

bool spa_acl_reg_add(const void *p, uint64_t size, int kind)
{
    spa_acl_lock();
    bool ok = spa_acl_reg_add_obj_locked(p, size, kind, NULL);
    spa_acl_unlock();
    return ok;
}

void *spa_acl_reg_obj_locked(const void *p, int kind)
{
    size_t i = find((uintptr_t)p, kind);
    return p != NULL && i != reg_n ? reg[i].obj : NULL;
}

/* The memory block (aclrtMalloc or aclrtMallocHost) holding address a, or reg_n. */
static size_t block_of(uintptr_t a)
{
    size_t i = upper(a);
    if (i == 0)
        return reg_n;
    const entry *e = &reg[i - 1];
    if ((e->kind != SPA_ACL_DEVICE_MEM && e->kind != SPA_ACL_HOST_MEM) ||
        (uint64_t)(a - e->addr) >= e->size)
        return reg_n;
    return i - 1;
}

const void *spa_acl_pin_locked(const void *p)
{
    size_t i = p != NULL ? block_of((uintptr_t)p) : reg_n;
    if (i == reg_n)
        return NULL;
    reg[i].pins++;
    return (const void *)reg[i].addr;
}

void spa_acl_unpin_locked(const void *block)
{
    size_t i = block != NULL ? block_of((uintptr_t)block) : reg_n;
    if (i != reg_n && reg[i].addr == (uintptr_t)block && reg[i].pins > 0)
        reg[i].pins--;
}

bool spa_acl_reg_pinned_locked(const void *p, int kind)
{
    size_t i = find((uintptr_t)p, kind);
    return p != NULL && i != reg_n && reg[i].pins > 0;
}

bool spa_acl_reg_remove_locked(const void *p, int kind)
{
    size_t i = find((uintptr_t)p, kind);
    if (p == NULL || i == reg_n)
        return false;
    memmove(reg + i, reg + i + 1, (reg_n - i - 1) * sizeof *reg);
    reg_n--;
    return true;
}

bool spa_acl_reg_remove(const void *p, int kind)
{
    spa_acl_lock();
    bool ok = spa_acl_reg_remove_locked(p, kind);
    spa_acl_unlock();
    return ok;
}

bool spa_acl_reg_has_locked(const void *p, int kind)
{
    return p != NULL && find((uintptr_t)p, kind) != reg_n;
}

bool spa_acl_reg_has(const void *p, int kind)
{
    spa_acl_lock();
    bool ok = spa_acl_reg_has_locked(p, kind);
    spa_acl_unlock();
    return ok;
}

static int range_of(const void *p, uint64_t len, bool host_too)
{
    uintptr_t a = (uintptr_t)p;
    int where = SPA_ACL_RANGE_UNTRACKED;
    spa_acl_lock();
    size_t i = upper(a);
    if (i > 0 && (reg[i - 1].kind == SPA_ACL_DEVICE_MEM ||
                  (host_too && reg[i - 1].kind == SPA_ACL_HOST_MEM))) {
        const entry *e = &reg[i - 1];
        uint64_t at = (uint64_t)(a - e->addr);
        if (at < e->size)
            where = len <= e->size - at ? SPA_ACL_RANGE_INSIDE : SPA_ACL_RANGE_OVERRUN;
    }
    spa_acl_unlock();
    return where;
}

int spa_acl_device_range(const void *p, uint64_t len)
{
    return range_of(p, len, false);
}

int spa_acl_alloc_range(const void *p, uint64_t len)
{
    return range_of(p, len, true);
}
