/* Helpers of the aclnn compatibility suites (tests/acl): aclTensors over
 * test tensors, and a client's device buffers. Built with the suites that
 * have the compat layer (SPA_HAVE_ACL). */
#ifndef SPA_TEST_ACL_UTIL_H
#define SPA_TEST_ACL_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "acl/acl.h"
#include "aclnn/aclnn_base.h"
#include "spattn/spattn.h"
#include "util.h"

/* The aclTensor of t's view (dtype, dims, strides, data) over a 1-D storage
 * just large enough (0 elements for an empty view). */
aclTensor *acl_of(const spa_tensor *t);

/* A contiguous [B, S, ..] tensor as [B * S, ..] (the native view of a BSND
 * tensor). */
spa_tensor merged(const spa_tensor *t);
/* Some element of t is not 0. */
bool any_nonzero(const ttensor *t);

/* An aclnn phase 2 (aclnnXxx(workspace, size, executor, stream)). */
typedef aclnnStatus (*aclnn_phase2_fn)(void *workspace, uint64_t workspace_size, aclOpExecutor *executor,
                                       aclrtStream stream);
/* Phase 2 on the host after a phase 1 that answered phase1 (a refusal is
 * passed through): a malloc'd workspace (none for size 0), the NULL stream. */
aclnnStatus host_phase2(aclnnStatus phase1, aclnn_phase2_fn run, uint64_t size, aclOpExecutor *ex);
/* A native phase 2 with a malloc'd workspace, inline. */
spa_status native_phase2(spa_status (*run)(void *, uint64_t, const spa_executor *, const spa_runner *),
                         uint64_t size, const spa_executor *ex);

/* The aclTensors made for one call and the tensors a test made to replace
 * some of its arguments, freed together. */
#define ACL_ARENA_MADE 24
#define ACL_ARENA_ALTS 4
typedef struct acl_arena {
    aclTensor *made[ACL_ARENA_MADE];
    int nmade;
    ttensor alts[ACL_ARENA_ALTS];
    int nalts;
} acl_arena;
/* acl_of(t), destroyed with the arena. */
const aclTensor *arena_of(acl_arena *a, const spa_tensor *t);
/* A tensor like `like` but of dtype dt and, unless axis is -1, of dim axis
 * `size`: random floats, zero integers; freed with the arena. */
const aclTensor *arena_alt(acl_arena *a, const ttensor *like, spa_dtype dt, int32_t axis, int64_t size);
void arena_free(acl_arena *a);

/* One phase 1, run(arg) with its executor slot *ex, expected to answer
 * code: a refusal leaves no executor, a success's is destroyed; the n
 * outputs (filled with the canary first) are untouched either way. A
 * failure is reported at the caller's line. */
#define expect_phase1(run, arg, ex, outs, n, code) expect_phase1_at(run, arg, ex, outs, n, code, __FILE__, __LINE__)
void expect_phase1_at(aclnnStatus (*run)(void *arg), void *arg, aclOpExecutor *const *ex, ttensor *const *outs,
                      int n, aclnnStatus code, const char *file, unsigned line);

/* One phase 1 of a suite's call type T on case c, the statements after
 * code (a is the call) changing its arguments first, expected to answer
 * code with nothing written (expect_phase1). The suite names its pieces
 * so: call_of(c, a) fills a T (an acl_arena ar, the executor slot ex),
 * phase1(void *a) runs it, outputs_of(c, outs) lists up to 8 outputs and
 * returns their count. */
#define EXPECT_CALL(T, c, code, ...) \
    do { \
        T call_; \
        call_of((c), &call_); \
        T *a = &call_; \
        __VA_ARGS__; \
        ttensor *outs_[8]; \
        const int nouts_ = outputs_of((c), outs_); \
        expect_phase1(phase1, a, &a->ex, outs_, nouts_, (code)); \
        arena_free(&a->ar); \
    } while (0)

/* A client's set-up (aclInit, device 0, a context made current, a stream)
 * and its tear-down, as CANN's examples do them. */
void client_open(aclrtContext *ctx, aclrtStream *stream);
void client_close(aclrtContext ctx, aclrtStream stream);
/* A client's phase 2: the workspace from aclrtMalloc (none for size 0), the
 * run on stream, a synchronize, the workspace freed; each step succeeds. */
void client_phase2(aclnn_phase2_fn run, uint64_t size, aclOpExecutor *ex, aclrtStream stream);

/* A client's device buffer: aclrtMalloc'd, filled with aclrtMemcpy from
 * host (or the canary byte 0xA5 where host is NULL), and described as
 * CANN's examples do (contiguous ND over its own shape). */
typedef struct dev_buf {
    void *p;
    size_t bytes;
    aclTensor *t;
} dev_buf;
void dev_make(dev_buf *d, const int64_t *shape, uint64_t rank, aclDataType dt, const void *host);
void dev_free(dev_buf *d);
/* Every element of a FLOAT16 device buffer, read back, equal to want. */
bool dev_all(const dev_buf *d, float want);
/* A FLOAT16 device buffer read back as floats (malloc'd). */
float *dev_floats(const dev_buf *d);

#endif
