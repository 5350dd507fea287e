// aclnnNsaSelectedAttentionGrad as a CANN user calls it: the gradients of
// selected attention for one batch of 48 queries over 64 keys, GQA (4 query
// heads over 2 kv heads), no mask, fp16. The forward quantities it needs
// (attentionOut, softmaxMax, softmaxSum) come from the spec formulas
// evaluated on the host, and dq, dk, dv are compared with spec/nsa.md 4.2
// evaluated in double.
// requires: spa_nsa_select_grad spa_nsa_select_grad_get_workspace_size
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <vector>

#include "acl/acl.h"
#include "aclnnop/aclnn_nsa_selected_attention_grad.h"

#define CHECK_RET(cond, expr) \
    do {                      \
        if (!(cond)) {        \
            expr;             \
        }                     \
    } while (0)

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

    std::vector<int64_t> seqQ = {48}, seqKv = {64};
    const int64_t t1 = 48, t2 = 64, n2 = 2, g = 2, n1 = n2 * g, d = 32, dv = 32;
    const int64_t blockSize = 16, blockCount = 2, sparseMode = 0, n = blockCount * blockSize;
    const double scale = 1.0 / std::sqrt((double)d);

    std::vector<aclFloat16> q(t1 * n1 * d), k(t2 * n2 * d), v(t2 * n2 * dv), dy(t1 * n1 * dv);
    for (size_t i = 0; i < q.size(); i++)
        q[i] = aclFloatToFloat16(Pattern((uint32_t)i, 11));
    for (size_t i = 0; i < k.size(); i++)
        k[i] = aclFloatToFloat16(Pattern((uint32_t)i, 12));
    for (size_t i = 0; i < v.size(); i++)
        v[i] = aclFloatToFloat16(Pattern((uint32_t)i, 13));
    for (size_t i = 0; i < dy.size(); i++)
        dy[i] = aclFloatToFloat16(Pattern((uint32_t)i, 14));
    std::vector<int32_t> topk(t1 * n2 * blockCount);
    for (int64_t t = 0; t < t1; t++)
        for (int64_t h = 0; h < n2; h++) {
            topk[(t * n2 + h) * blockCount] = (int32_t)((t + h) % 4);
            topk[(t * n2 + h) * blockCount + 1] = (int32_t)((t / 3 + 2 * h + 1) % 4);
        }

    auto Q = [&](int64_t t, int64_t h, int64_t e) { return (double)aclFloat16ToFloat(q[(t * n1 + h) * d + e]); };
    auto K = [&](int64_t r, int64_t h, int64_t e) { return (double)aclFloat16ToFloat(k[(r * n2 + h) * d + e]); };
    auto V = [&](int64_t r, int64_t h, int64_t e) { return (double)aclFloat16ToFloat(v[(r * n2 + h) * dv + e]); };
    auto DY = [&](int64_t t, int64_t h, int64_t e) { return (double)aclFloat16ToFloat(dy[(t * n1 + h) * dv + e]); };
    auto Row = [&](int64_t t, int64_t kvh, int64_t i) {
        return (int64_t)topk[(t * n2 + kvh) * blockCount + i / blockSize] * blockSize + i % blockSize;
    };

    // Forward on the host (spec 3.2): attentionOut (fp16), softmaxMax/Sum (8 lanes).
    std::vector<aclFloat16> o(t1 * n1 * dv);
    std::vector<float> mx(t1 * n1 * 8), sm(t1 * n1 * 8);
    std::vector<double> z(t1 * n1 * n);
    for (int64_t t = 0; t < t1; t++)
        for (int64_t h = 0; h < n1; h++) {
            double m = -DBL_MAX, l = 0.0;
            double *zr = &z[(t * n1 + h) * n];
            for (int64_t i = 0; i < n; i++) {
                double acc = 0.0;
                for (int64_t e = 0; e < d; e++)
                    acc += Q(t, h, e) * K(Row(t, h / g, i), h / g, e);
                zr[i] = scale * acc;
                m = zr[i] > m ? zr[i] : m;
            }
            for (int64_t i = 0; i < n; i++)
                l += std::exp(zr[i] - m);
            for (int64_t lane = 0; lane < 8; lane++) {
                mx[(t * n1 + h) * 8 + lane] = (float)m;
                sm[(t * n1 + h) * 8 + lane] = (float)l;
            }
            for (int64_t e = 0; e < dv; e++) {
                double acc = 0.0;
                for (int64_t i = 0; i < n; i++)
                    acc += std::exp(zr[i] - m) / l * V(Row(t, h / g, i), h / g, e);
                o[(t * n1 + h) * dv + e] = aclFloatToFloat16((float)acc);
            }
        }

    std::vector<aclFloat16> dq(q.size()), dk(k.size()), dvOut(v.size());
    void *qDev, *kDev, *vDev, *oDev, *dyDev, *mxDev, *smDev, *topkDev, *dqDev, *dkDev, *dvDev;
    aclTensor *qT, *kT, *vT, *oT, *dyT, *mxT, *smT, *topkT, *dqT, *dkT, *dvT;
    CHECK_RET(CreateAclTensor(q, {t1, n1, d}, ACL_FLOAT16, &qDev, &qT) == 0, return 1);
    CHECK_RET(CreateAclTensor(k, {t2, n2, d}, ACL_FLOAT16, &kDev, &kT) == 0, return 1);
    CHECK_RET(CreateAclTensor(v, {t2, n2, dv}, ACL_FLOAT16, &vDev, &vT) == 0, return 1);
    CHECK_RET(CreateAclTensor(o, {t1, n1, dv}, ACL_FLOAT16, &oDev, &oT) == 0, return 1);
    CHECK_RET(CreateAclTensor(dy, {t1, n1, dv}, ACL_FLOAT16, &dyDev, &dyT) == 0, return 1);
    CHECK_RET(CreateAclTensor(mx, {t1, n1, 8}, ACL_FLOAT, &mxDev, &mxT) == 0, return 1);
    CHECK_RET(CreateAclTensor(sm, {t1, n1, 8}, ACL_FLOAT, &smDev, &smT) == 0, return 1);
    CHECK_RET(CreateAclTensor(topk, {t1, n2, blockCount}, ACL_INT32, &topkDev, &topkT) == 0,
              return 1);
    CHECK_RET(CreateAclTensor(dq, {t1, n1, d}, ACL_FLOAT16, &dqDev, &dqT) == 0, return 1);
    CHECK_RET(CreateAclTensor(dk, {t2, n2, d}, ACL_FLOAT16, &dkDev, &dkT) == 0, return 1);
    CHECK_RET(CreateAclTensor(dvOut, {t2, n2, dv}, ACL_FLOAT16, &dvDev, &dvT) == 0, return 1);
    aclIntArray *seqQArr = aclCreateIntArray(seqQ.data(), seqQ.size());
    aclIntArray *seqKvArr = aclCreateIntArray(seqKv.data(), seqKv.size());

    char layout[] = "TND";
    uint64_t workspaceSize = 0;
    aclOpExecutor *executor = nullptr;
    ret = aclnnNsaSelectedAttentionGradGetWorkspaceSize(
        qT, kT, vT, oT, dyT, mxT, smT, topkT, seqQArr, seqKvArr, nullptr, scale, blockSize,
        blockCount, n1, layout, sparseMode, dqT, dkT, dvT, &workspaceSize, &executor);
    CHECK_RET(ret == ACL_SUCCESS,
              printf("aclnnNsaSelectedAttentionGradGetWorkspaceSize failed: %d\n", ret); return 1);
    void *workspace = nullptr;
    if (workspaceSize > 0) {
        ret = aclrtMalloc(&workspace, workspaceSize, ACL_MEM_MALLOC_HUGE_FIRST);
        CHECK_RET(ret == ACL_SUCCESS, printf("workspace allocation failed: %d\n", ret); return 1);
    }
    ret = aclnnNsaSelectedAttentionGrad(workspace, workspaceSize, executor, stream);
    CHECK_RET(ret == ACL_SUCCESS, printf("aclnnNsaSelectedAttentionGrad failed: %d\n", ret);
              return 1);
    ret = aclrtSynchronizeStream(stream);
    CHECK_RET(ret == ACL_SUCCESS, printf("aclrtSynchronizeStream failed: %d\n", ret); return 1);
    auto dqHost = CopyBack<aclFloat16>(dqDev, (int64_t)dq.size());
    auto dkHost = CopyBack<aclFloat16>(dkDev, (int64_t)dk.size());
    auto dvHost = CopyBack<aclFloat16>(dvDev, (int64_t)dvOut.size());

    // Reference gradients (spec 4.2), with the magnitude of their terms.
    std::vector<double> rdq(dq.size(), 0.0), rdk(dk.size(), 0.0), rdv(dvOut.size(), 0.0);
    std::vector<double> mdq(dq.size(), 0.0), mdk(dk.size(), 0.0), mdv(dvOut.size(), 0.0);
    for (int64_t t = 0; t < t1; t++)
        for (int64_t h = 0; h < n1; h++) {
            const int64_t kvh = h / g;
            const double m = mx[(t * n1 + h) * 8], l = sm[(t * n1 + h) * 8];
            double dt = 0.0;
            for (int64_t e = 0; e < dv; e++)
                dt += DY(t, h, e) * (double)aclFloat16ToFloat(o[(t * n1 + h) * dv + e]);
            for (int64_t i = 0; i < n; i++) {
                const int64_t r = Row(t, kvh, i);
                const double p = std::exp(z[(t * n1 + h) * n + i] - m) / l;
                double dp = 0.0;
                for (int64_t e = 0; e < dv; e++)
                    dp += DY(t, h, e) * V(r, kvh, e);
                const double ds = p * (dp - dt);
                for (int64_t e = 0; e < d; e++) {
                    rdq[(t * n1 + h) * d + e] += scale * ds * K(r, kvh, e);
                    mdq[(t * n1 + h) * d + e] += std::fabs(scale * ds * K(r, kvh, e));
                    rdk[(r * n2 + kvh) * d + e] += scale * ds * Q(t, h, e);
                    mdk[(r * n2 + kvh) * d + e] += std::fabs(scale * ds * Q(t, h, e));
                }
                for (int64_t e = 0; e < dv; e++) {
                    rdv[(r * n2 + kvh) * dv + e] += p * DY(t, h, e);
                    mdv[(r * n2 + kvh) * dv + e] += std::fabs(p * DY(t, h, e));
                }
            }
        }
    int bad = 0;
    double worst = 0.0;
    auto compare = [&](const std::vector<aclFloat16> &got, const std::vector<double> &ref,
                       const std::vector<double> &mag) {
        for (size_t i = 0; i < got.size(); i++) {
            double err = std::fabs((double)aclFloat16ToFloat(got[i]) - ref[i]);
            worst = err > worst ? err : worst;
            bad += err > 4e-3 * mag[i] + 2e-3 * std::fabs(ref[i]) + 1e-6;
        }
    };
    compare(dqHost, rdq, mdq);
    compare(dkHost, rdk, mdk);
    compare(dvHost, rdv, mdv);

    for (aclTensor *t : {qT, kT, vT, oT, dyT, mxT, smT, topkT, dqT, dkT, dvT})
        aclDestroyTensor(t);
    aclDestroyIntArray(seqQArr);
    aclDestroyIntArray(seqKvArr);
    for (void *p : {qDev, kDev, vDev, oDev, dyDev, mxDev, smDev, topkDev, dqDev, dkDev, dvDev})
        aclrtFree(p);
    if (workspaceSize > 0)
        aclrtFree(workspace);
    aclrtDestroyStream(stream);
    aclrtResetDevice(deviceId);
    aclFinalize();

    if (bad != 0) {
        printf("NsaSelectedAttentionGrad: %d values off (max |err| %g)\n", bad, worst);
        return 1;
    }
    printf("NsaSelectedAttentionGrad dq [%lld,%lld,%lld], dk, dv [%lld,%lld,%lld]: match the spec "
           "formulas (max |err| %g)\n",
           (long long)t1, (long long)n1, (long long)d, (long long)t2, (long long)n2, (long long)dv,
           worst);
    return 0;
}
