// aclnnNsaSelectedAttention as a CANN user calls it: two batches of
// different lengths, GQA (4 query heads over 2 kv heads), causal masking
// (sparseMode 2 with a mask tensor), fp16. The outputs are compared with the
// formulas of spec/nsa.md 3.2 evaluated on the host in double.
// requires: spa_nsa_select spa_nsa_select_get_workspace_size
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <vector>

#include "acl/acl.h"
#include "aclnnop/aclnn_nsa_selected_attention.h"

#define CHECK_RET(cond, expr) \
    do {                      \
        if (!(cond)) {        \
            expr;             \
        }                     \
    } while (0)

static int64_t Numel(const std::vector<int64_t> &shape)
{
    int64_t n = 1;
    for (int64_t d : shape)
        n *= d;
    return n;
}

// Device copy of host data and a contiguous ND aclTensor over it.
template <typename T>
static int CreateAclTensor(const std::vector<T> &host, const std::vector<int64_t> &shape,
                           aclDataType dtype, void **dev, aclTensor **tensor)
{
    size_t bytes = host.size() * sizeof(T);
    auto ret = aclrtMalloc(dev, bytes, ACL_MEM_MALLOC_HUGE_FIRST);
    CHECK_RET(ret == ACL_SUCCESS, printf("aclrtMalloc failed: %d\n", ret); return ret);
    ret = aclrtMemcpy(*dev, bytes, host.data(), bytes, ACL_MEMCPY_HOST_TO_DEVICE);
    CHECK_RET(ret == ACL_SUCCESS, printf("aclrtMemcpy failed: %d\n", ret); return ret);
    std::vector<int64_t> strides(shape.size(), 1);
    for (int64_t i = (int64_t)shape.size() - 2; i >= 0; i--)
        strides[i] = shape[i + 1] * strides[i + 1];
    *tensor = aclCreateTensor(shape.data(), shape.size(), dtype, strides.data(), 0, ACL_FORMAT_ND,
                              shape.data(), shape.size(), *dev);
    return *tensor ? ACL_SUCCESS : ACL_ERROR_INVALID_PARAM;
}

template <typename T>
static std::vector<T> CopyBack(void *dev, int64_t n)
{
    std::vector<T> host(n);
    aclrtMemcpy(host.data(), n * sizeof(T), dev, n * sizeof(T), ACL_MEMCPY_DEVICE_TO_HOST);
    return host;
}

// Deterministic values that are exact in fp16: multiples of 1/64 in [-1, 1].
static float Pattern(uint32_t i, uint32_t salt)
{
    uint32_t x = i * 2654435761u + salt * 40503u + 12345u;
    x ^= x >> 13;
    x *= 0x5bd1e995u;
    x ^= x >> 15;
    return (float)((int)(x % 129u) - 64) / 64.0f;
}

int main()
{
    int32_t deviceId = 0;
    aclrtStream stream;
    auto ret = aclInit(nullptr);
    CHECK_RET(ret == ACL_SUCCESS, printf("aclInit failed: %d\n", ret); return 1);
    ret = aclrtSetDevice(deviceId);
    CHECK_RET(ret == ACL_SUCCESS, printf("aclrtSetDevice failed: %d\n", ret); return 1);
    ret = aclrtCreateStream(&stream);
    CHECK_RET(ret == ACL_SUCCESS, printf("aclrtCreateStream failed: %d\n", ret); return 1);

    // Batches: queries {40, 24}, keys/values {64, 48} (cumulative ends).
    std::vector<int64_t> seqQ = {40, 64}, seqKv = {64, 112};
    const int64_t t1 = 64, t2 = 112, n2 = 2, g = 2, n1 = n2 * g, d = 32, dv = 16;
    const int64_t blockSize = 16, blockCount = 3, sparseMode = 2;
    const double scale = 1.0 / std::sqrt((double)d);

    std::vector<aclFloat16> q(t1 * n1 * d), k(t2 * n2 * d), v(t2 * n2 * dv);
    for (size_t i = 0; i < q.size(); i++)
        q[i] = aclFloatToFloat16(Pattern((uint32_t)i, 1));
    for (size_t i = 0; i < k.size(); i++)
        k[i] = aclFloatToFloat16(Pattern((uint32_t)i, 2));
    for (size_t i = 0; i < v.size(); i++)
        v[i] = aclFloatToFloat16(Pattern((uint32_t)i, 3));
    // Block numbers inside each batch's KV: block 0 (always visible), the
    // query's own block and the next one (partly or wholly in the future).
    std::vector<int32_t> topk(t1 * n2 * blockCount);
    for (int64_t b = 0, qs = 0, ks = 0; b < 2; qs = seqQ[b], ks = seqKv[b], b++) {
        int64_t blocks = (seqKv[b] - ks) / blockSize;
        for (int64_t t = qs; t < seqQ[b]; t++)
            for (int64_t h = 0; h < n2; h++) {
                int64_t own = ((t - qs) / blockSize) % blocks;
                int32_t *row = &topk[(t * n2 + h) * blockCount];
                row[0] = 0;
                row[1] = (int32_t)own;
                row[2] = (int32_t)((own + 1 + h) % blocks);
            }
    }
    std::vector<uint8_t> mask(64 * 64, 1); // its presence selects causal; never read
    std::vector<float> softmaxMax(t1 * n1 * 8), softmaxSum(t1 * n1 * 8);
    std::vector<aclFloat16> out(t1 * n1 * dv);

    void *qDev, *kDev, *vDev, *topkDev, *maskDev, *maxDev, *sumDev, *outDev;
    aclTensor *qT, *kT, *vT, *topkT, *maskT, *maxT, *sumT, *outT;
    CHECK_RET(CreateAclTensor(q, {t1, n1, d}, ACL_FLOAT16, &qDev, &qT) == 0, return 1);
    CHECK_RET(CreateAclTensor(k, {t2, n2, d}, ACL_FLOAT16, &kDev, &kT) == 0, return 1);
    CHECK_RET(CreateAclTensor(v, {t2, n2, dv}, ACL_FLOAT16, &vDev, &vT) == 0, return 1);
    CHECK_RET(CreateAclTensor(topk, {t1, n2, blockCount}, ACL_INT32, &topkDev, &topkT) == 0,
              return 1);
    CHECK_RET(CreateAclTensor(mask, {64, 64}, ACL_BOOL, &maskDev, &maskT) == 0, return 1);
    CHECK_RET(CreateAclTensor(softmaxMax, {t1, n1, 8}, ACL_FLOAT, &maxDev, &maxT) == 0, return 1);
    CHECK_RET(CreateAclTensor(softmaxSum, {t1, n1, 8}, ACL_FLOAT, &sumDev, &sumT) == 0, return 1);
    CHECK_RET(CreateAclTensor(out, {t1, n1, dv}, ACL_FLOAT16, &outDev, &outT) == 0, return 1);
    aclIntArray *seqQArr = aclCreateIntArray(seqQ.data(), seqQ.size());
    aclIntArray *seqKvArr = aclCreateIntArray(seqKv.data(), seqKv.size());

    char layout[] = "TND";
    uint64_t workspaceSize = 0;
    aclOpExecutor *executor = nullptr;
    ret = aclnnNsaSelectedAttentionGetWorkspaceSize(qT, kT, vT, topkT, maskT, seqQArr, seqKvArr, scale,
                                                    n1, layout, sparseMode, blockSize, blockCount,
                                                    maxT, sumT, outT, &workspaceSize, &executor);
    CHECK_RET(ret == ACL_SUCCESS,
              printf("aclnnNsaSelectedAttentionGetWorkspaceSize failed: %d\n", ret); return 1);
    void *workspace = nullptr;
    if (workspaceSize > 0) {
        ret = aclrtMalloc(&workspace, workspaceSize, ACL_MEM_MALLOC_HUGE_FIRST);
        CHECK_RET(ret == ACL_SUCCESS, printf("workspace allocation failed: %d\n", ret); return 1);
    }
    ret = aclnnNsaSelectedAttention(workspace, workspaceSize, executor, stream);
    CHECK_RET(ret == ACL_SUCCESS, printf("aclnnNsaSelectedAttention failed: %d\n", ret); return 1);
    ret = aclrtSynchronizeStream(stream);
    CHECK_RET(ret == ACL_SUCCESS, printf("aclrtSynchronizeStream failed: %d\n", ret); return 1);

    auto outHost = CopyBack<aclFloat16>(outDev, Numel({t1, n1, dv}));
    auto maxHost = CopyBack<float>(maxDev, Numel({t1, n1, 8}));
    auto sumHost = CopyBack<float>(sumDev, Numel({t1, n1, 8}));

    // Reference, spec/nsa.md 3.2 (causal, masked scores -FLT_MAX after scaling).
    int bad = 0;
    double worst = 0.0;
    for (int64_t b = 0, qs = 0, ks = 0; b < 2; qs = seqQ[b], ks = seqKv[b], b++)
        for (int64_t t = qs; t < seqQ[b]; t++)
            for (int64_t h = 0; h < n1; h++) {
                const int64_t kvh = h / g, s = t - qs, n = blockCount * blockSize;
                std::vector<double> z(n);
                std::vector<int64_t> rows(n);
                double m = -DBL_MAX;
                for (int64_t i = 0; i < blockCount; i++)
                    for (int64_t j = 0; j < blockSize; j++) {
                        int64_t p = topk[(t * n2 + kvh) * blockCount + i] * blockSize + j;
                        int64_t r = ks + p, at = i * blockSize + j;
                        double acc = 0.0;
                        for (int64_t e = 0; e < d; e++)
                            acc += (double)aclFloat16ToFloat(q[(t * n1 + h) * d + e]) *
                                   (double)aclFloat16ToFloat(k[(r * n2 + kvh) * d + e]);
                        z[at] = p > s ? -FLT_MAX : scale * acc;
                        rows[at] = r;
                        m = z[at] > m ? z[at] : m;
                    }
                double l = 0.0;
                for (int64_t i = 0; i < n; i++)
                    l += std::exp(z[i] - m);
                for (int64_t lane = 0; lane < 8; lane++) {
                    double gm = maxHost[(t * n1 + h) * 8 + lane], gl = sumHost[(t * n1 + h) * 8 + lane];
                    bad += std::fabs(gm - m) > 1e-4 * (1.0 + std::fabs(m));
                    bad += std::fabs(gl - l) > 1e-4 * l;
                }
                for (int64_t e = 0; e < dv; e++) {
                    double ref = 0.0;
                    for (int64_t i = 0; i < n; i++)
                        ref += std::exp(z[i] - m) / l *
                               (double)aclFloat16ToFloat(v[(rows[i] * n2 + kvh) * dv + e]);
                    double got = aclFloat16ToFloat(outHost[(t * n1 + h) * dv + e]);
                    double err = std::fabs(got - ref);
                    worst = err > worst ? err : worst;
                    bad += err > 4e-3 + 4e-3 * std::fabs(ref);
                }
            }

    aclDestroyTensor(qT);
    aclDestroyTensor(kT);
    aclDestroyTensor(vT);
    aclDestroyTensor(topkT);
    aclDestroyTensor(maskT);
    aclDestroyTensor(maxT);
    aclDestroyTensor(sumT);
    aclDestroyTensor(outT);
    aclDestroyIntArray(seqQArr);
    aclDestroyIntArray(seqKvArr);
    for (void *p : {qDev, kDev, vDev, topkDev, maskDev, maxDev, sumDev, outDev})
        aclrtFree(p);
    if (workspaceSize > 0)
        aclrtFree(workspace);
    aclrtDestroyStream(stream);
    aclrtResetDevice(deviceId);
    aclFinalize();

    if (bad != 0) {
        printf("NsaSelectedAttention: %d values off (max |err| %g)\n", bad, worst);
        return 1;
    }
    printf("NsaSelectedAttention [%lld,%lld,%lld], causal, 2 batches: matches the spec formula "
           "(max |err| %g)\n",
           (long long)t1, (long long)n1, (long long)dv, worst);
    return 0;
}
