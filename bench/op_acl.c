/* The aclnn compatibility layer around NsaCompress at shape `bench` (as in
 * op_nsa_compress.c: T 65536 in 4 batches, N 4, D 128, blockSize 32,
 * stride 16): each timed call is a whole aclnn call, phase 1 (descriptor
 * conversion, checks, executor allocation) plus phase 2 on a stream of n
 * threads, so the lines compare directly with op=nsa_compress. */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

#ifdef SPA_HAVE_ACL
#include "acl/acl.h"
#include "aclnnop/aclnn_nsa_compress.h"

enum { T = 65536, B = 4, N = 4, D = 128, BS = 32, ST = 16 };

typedef struct acl_bench {
    aclTensor *x, *w, *y;
    aclIntArray *seq;
    void *ws;
    uint64_t ws_size;
    aclrtStream stream;
} acl_bench;

static void run_once(void *arg)
{
    acl_bench *b = arg;
    char layout[] = "TND";
    uint64_t size;
    aclOpExecutor *ex;
    if (aclnnNsaCompressGetWorkspaceSize(b->x, b->w, b->seq, layout, BS, ST, 0, b->y, &size, &ex) !=
            ACLNN_SUCCESS ||
        size > b->ws_size || aclnnNsaCompress(b->ws, size, ex, b->stream) != ACLNN_SUCCESS) {
        fprintf(stderr, "acl_nsa_compress bench: call failed\n");
        exit(1);
    }
}

static aclTensor *tensor(aclDataType dt, uint64_t rank, const int64_t *dims, void *data)
{
    return aclCreateTensor(dims, rank, dt, NULL, 0, ACL_FORMAT_ND, dims, rank, data);
}

static void bench_dtype(spa_dtype dt)
{
    if (!bench_wanted(dt, "bench"))
        return;
    const int64_t seq_vals[B] = {T / 4, T / 2, 3 * T / 4, T};
    const int64_t windows = B * ((T / B - BS) / ST + 1);
    const size_t es = bench_dtype_size(dt);
    const int64_t xd[3] = {T, N, D}, wd[2] = {BS, N}, yd[3] = {windows, N, D};
    void *x = bench_alloc_random(dt, (size_t)(T * N * D), 1);
    void *w = bench_alloc_random(dt, (size_t)(BS * N), 2);
    void *y = bench_alloc_random(dt, (size_t)(windows * N * D), 3);
    acl_bench b;
    b.x = tensor((aclDataType)dt, 3, xd, x);
    b.w = tensor((aclDataType)dt, 2, wd, w);
    b.y = tensor((aclDataType)dt, 3, yd, y);
    b.seq = aclCreateIntArray(seq_vals, B);
    char layout[] = "TND";
    aclOpExecutor *ex;
    if (aclnnNsaCompressGetWorkspaceSize(b.x, b.w, b.seq, layout, BS, ST, 0, b.y, &b.ws_size, &ex) !=
        ACLNN_SUCCESS) {
        fprintf(stderr, "acl_nsa_compress bench: phase 1 failed\n");
        exit(1);
    }
    aclDestroyAclOpExecutor(ex);
    b.ws = bench_alloc_zero(b.ws_size);
    const double bytes = (double)(T * N * D + BS * N + windows * N * D) * (double)es;
    const double flops = 2.0 * (double)windows * BS * N * D;
    unsigned threads[8];
    int nt = bench_thread_counts(threads, 8);
    for (int i = 0; i < nt; i++) {
        char count[16];
        snprintf(count, sizeof count, "%u", threads[i]);
        setenv("SPATTN_STREAM_THREADS", count, 1); /* read when the stream is created */
        if (aclrtCreateStream(&b.stream) != ACL_SUCCESS) {
            fprintf(stderr, "acl_nsa_compress bench: no stream\n");
            exit(1);
        }
        bench_report("acl_nsa_compress", dt, "bench", threads[i], bench_time_ms(run_once, &b), bytes,
                     flops);
        aclrtDestroyStream(b.stream);
    }
    aclDestroyTensor(b.x);
    aclDestroyTensor(b.w);
    aclDestroyTensor(b.y);
    aclDestroyIntArray(b.seq);
    free(b.ws);
    free(x);
    free(w);
    free(y);
}

#endif

void bench_acl_nsa_compress(void)
{
#ifdef SPA_HAVE_ACL
    static const spa_dtype dts[3] = {SPA_FLOAT32, SPA_FLOAT16, SPA_BFLOAT16};
    for (int k = 0; k < 3; k++)
        bench_dtype(dts[k]);
#else
    fprintf(stderr, "acl_nsa_compress bench: no compat layer on this target\n");
#endif
}
