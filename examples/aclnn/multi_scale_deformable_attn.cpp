// aclnnMultiScaleDeformableAttnFunction as a CANN user calls it (the
// forward of Deformable DETR's attention): 2 images, two feature levels of
// 4x6 and 2x3, 2 heads of 8 channels, 32 queries with 2 sampling points per
// level, fp32, INT64 level tables. Locations reach outside the maps, so
// border samples and skipped samples are exercised. The output is compared
// with spec/msda.md 5 evaluated on the host.
// requires: spa_msda spa_msda_get_workspace_size
#include <cmath>
#include <cstdio>
#include <vector>

#include "acl/acl.h"
#include "aclnnop/aclnn_multi_scale_deformable_attn_function.h"

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

// Deterministic values in [lo, hi].
static float Uniform(uint32_t i, uint32_t salt, float lo, float hi)
{
    uint32_t x = i * 2654435761u + salt * 40503u + 977u;
    x ^= x >> 13;
    x *= 0x5bd1e995u;
    x ^= x >> 15;
    return lo + (hi - lo) * (float)(x % 10007u) / 10006.0f;
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

    const int64_t bs = 2, nh = 2, channels = 8, nq = 32, nl = 2, np = 2;
    std::vector<int64_t> spatial = {4, 6, 2, 3}; // (H, W) per level
    std::vector<int64_t> levelStart = {0, 24};
    const int64_t nk = 4 * 6 + 2 * 3;

    std::vector<float> value(bs * nk * nh * channels), location(bs * nq * nh * nl * np * 2),
        attn(bs * nq * nh * nl * np), output(bs * nq * nh * channels, 0.0f);
    for (size_t i = 0; i < value.size(); i++)
        value[i] = Uniform((uint32_t)i, 1, -1.0f, 1.0f);
    for (size_t i = 0; i < location.size(); i++)
        location[i] = Uniform((uint32_t)i, 2, -0.2f, 1.2f); // (x, y), normalised
    for (size_t i = 0; i < attn.size(); i++)
        attn[i] = Uniform((uint32_t)i, 3, 0.0f, 1.0f);

    void *valueDev, *shapeDev, *startDev, *locDev, *attnDev, *outDev;
    aclTensor *valueT, *shapeT, *startT, *locT, *attnT, *outT;
    CHECK_RET(CreateAclTensor(value, {bs, nk, nh, channels}, ACL_FLOAT, &valueDev, &valueT) == 0,
              return 1);
    CHECK_RET(CreateAclTensor(spatial, {nl, 2}, ACL_INT64, &shapeDev, &shapeT) == 0, return 1);
    CHECK_RET(CreateAclTensor(levelStart, {nl}, ACL_INT64, &startDev, &startT) == 0, return 1);
    CHECK_RET(CreateAclTensor(location, {bs, nq, nh, nl, np, 2}, ACL_FLOAT, &locDev, &locT) == 0,
              return 1);
    CHECK_RET(CreateAclTensor(attn, {bs, nq, nh, nl, np}, ACL_FLOAT, &attnDev, &attnT) == 0,
              return 1);
    CHECK_RET(CreateAclTensor(output, {bs, nq, nh * channels}, ACL_FLOAT, &outDev, &outT) == 0,
              return 1);

    uint64_t workspaceSize = 0;
    aclOpExecutor *executor = nullptr;
    ret = aclnnMultiScaleDeformableAttnFunctionGetWorkspaceSize(valueT, shapeT, startT, locT, attnT,
                                                                outT, &workspaceSize, &executor);
    CHECK_RET(ret == ACL_SUCCESS,
              printf("aclnnMultiScaleDeformableAttnFunctionGetWorkspaceSize failed: %d\n", ret);
              return 1);
    void *workspace = nullptr;
    if (workspaceSize > 0) {
        ret = aclrtMalloc(&workspace, workspaceSize, ACL_MEM_MALLOC_HUGE_FIRST);
        CHECK_RET(ret == ACL_SUCCESS, printf("workspace allocation failed: %d\n", ret); return 1);
    }
    ret = aclnnMultiScaleDeformableAttnFunction(workspace, workspaceSize, executor, stream);
    CHECK_RET(ret == ACL_SUCCESS,
              printf("aclnnMultiScaleDeformableAttnFunction failed: %d\n", ret); return 1);
    ret = aclrtSynchronizeStream(stream);
    CHECK_RET(ret == ACL_SUCCESS, printf("aclrtSynchronizeStream failed: %d\n", ret); return 1);
    auto outHost = CopyBack<float>(outDev, (int64_t)output.size());

    // Reference (spec/msda.md 5): bilinear sampling with zero padding, the
    // sample skipped unless x in (-1, W) and y in (-1, H).
    int bad = 0, skipped = 0, border = 0;
    double worst = 0.0;
    for (int64_t b = 0; b < bs; b++)
        for (int64_t qi = 0; qi < nq; qi++)
            for (int64_t h = 0; h < nh; h++)
                for (int64_t c = 0; c < channels; c++) {
                    double acc = 0.0;
                    for (int64_t l = 0; l < nl; l++) {
                        const int64_t H = spatial[2 * l], W = spatial[2 * l + 1], s = levelStart[l];
                        for (int64_t p = 0; p < np; p++) {
                            const int64_t at = (((b * nq + qi) * nh + h) * nl + l) * np + p;
                            const float x = location[2 * at] * (float)W - 0.5f;
                            const float y = location[2 * at + 1] * (float)H - 0.5f;
                            if (!(y > -1.0f && x > -1.0f && y < (float)H && x < (float)W)) {
                                skipped += c == 0;
                                continue;
                            }
                            const double x0 = std::floor(x), y0 = std::floor(y);
                            const double lx = x - x0, ly = y - y0;
                            auto v = [&](double yy, double xx) {
                                if (yy < 0 || yy > H - 1 || xx < 0 || xx > W - 1)
                                    return 0.0;
                                int64_t key = s + (int64_t)yy * W + (int64_t)xx;
                                return (double)value[((b * nk + key) * nh + h) * channels + c];
                            };
                            border += c == 0 && (x0 < 0 || y0 < 0 || x0 + 1 > W - 1 || y0 + 1 > H - 1);
                            double samp = (1 - ly) * (1 - lx) * v(y0, x0) + (1 - ly) * lx * v(y0, x0 + 1) +
                                          ly * (1 - lx) * v(y0 + 1, x0) + ly * lx * v(y0 + 1, x0 + 1);
                            acc += (double)attn[at] * samp;
                        }
                    }
                    double got = outHost[(b * nq + qi) * nh * channels + h * channels + c];
                    double err = std::fabs(got - acc);
                    worst = err > worst ? err : worst;
                    bad += err > 1e-5 + 1e-5 * std::fabs(acc);
                }

    for (aclTensor *t : {valueT, shapeT, startT, locT, attnT, outT})
        aclDestroyTensor(t);
    for (void *p : {valueDev, shapeDev, startDev, locDev, attnDev, outDev})
        aclrtFree(p);
    if (workspaceSize > 0)
        aclrtFree(workspace);
    aclrtDestroyStream(stream);
    aclrtResetDevice(deviceId);
    aclFinalize();

    if (bad != 0) {
        printf("MultiScaleDeformableAttnFunction: %d values off (max |err| %g)\n", bad, worst);
        return 1;
    }
    printf("MultiScaleDeformableAttnFunction [%lld,%lld,%lld] (%d border, %d skipped samples): "
           "matches the spec formula (max |err| %g)\n",
           (long long)bs, (long long)nq, (long long)(nh * channels), border, skipped, worst);
    return 0;
}
