// aclnnNsaCompress as a CANN user calls it: acl runtime set-up, device
// buffers, aclTensor views (the input is a non-contiguous view of a padded
// buffer), the two-phase call on a stream, copy back. The result is compared
// with the formula of spec/nsa.md 1.2 evaluated on the host in double.
#include <cmath>
#include <cstdio>
#include <vector>

#include "acl/acl.h"
#include "aclnnop/aclnn_nsa_compress.h"

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

int main()
{
    int32_t deviceId = 0;
    aclrtContext context;
    aclrtStream stream;
    auto ret = aclInit(nullptr);
    CHECK_RET(ret == ACL_SUCCESS, printf("aclInit failed: %d\n", ret); return 1);
    ret = aclrtSetDevice(deviceId);
    CHECK_RET(ret == ACL_SUCCESS, printf("aclrtSetDevice failed: %d\n", ret); return 1);
    ret = aclrtCreateContext(&context, deviceId);
    CHECK_RET(ret == ACL_SUCCESS, printf("aclrtCreateContext failed: %d\n", ret); return 1);
    ret = aclrtSetCurrentContext(context);
    CHECK_RET(ret == ACL_SUCCESS, printf("aclrtSetCurrentContext failed: %d\n", ret); return 1);
    ret = aclrtCreateStream(&stream);
    CHECK_RET(ret == ACL_SUCCESS, printf("aclrtCreateStream failed: %d\n", ret); return 1);

    // Three batches of 80, 40 and 17 tokens (cumulative ends), 4 heads of 32.
    const int64_t heads = 4, dim = 32, padded = 48, blockSize = 32, stride = 16;
    std::vector<int64_t> actSeqLen = {80, 120, 137};
    const int64_t tokens = actSeqLen.back();
    int64_t windows = 0, prev = 0;
    for (int64_t end : actSeqLen) {
        int64_t len = end - prev;
        windows += len >= blockSize ? (len - blockSize) / stride + 1 : 0;
        prev = end;
    }

    // Host data, exact in fp16: multiples of 1/8 and 1/16.
    std::vector<aclFloat16> inputHost(tokens * heads * padded, aclFloatToFloat16(0.0f));
    std::vector<aclFloat16> weightHost(blockSize * heads);
    auto inputAt = [&](int64_t t, int64_t n, int64_t d) {
        return (float)(((t * 7 + n * 3 + d) % 17) - 8) / 8.0f;
    };
    auto weightAt = [&](int64_t j, int64_t n) { return (float)(((j * 5 + n) % 9) - 4) / 16.0f; };
    for (int64_t t = 0; t < tokens; t++)
        for (int64_t n = 0; n < heads; n++)
            for (int64_t d = 0; d < dim; d++)
                inputHost[(t * heads + n) * padded + d] = aclFloatToFloat16(inputAt(t, n, d));
    for (int64_t j = 0; j < blockSize; j++)
        for (int64_t n = 0; n < heads; n++)
            weightHost[j * heads + n] = aclFloatToFloat16(weightAt(j, n));

    // Device buffers.
    std::vector<int64_t> inputStorage = {tokens, heads, padded};
    std::vector<int64_t> inputView = {tokens, heads, dim};
    std::vector<int64_t> inputStrides = {heads * padded, padded, 1};
    std::vector<int64_t> weightShape = {blockSize, heads};
    std::vector<int64_t> outputShape = {windows, heads, dim};
    void *inputDev = nullptr, *weightDev = nullptr, *outputDev = nullptr;
    size_t inputBytes = Numel(inputStorage) * sizeof(aclFloat16);
    size_t weightBytes = Numel(weightShape) * sizeof(aclFloat16);
    size_t outputBytes = Numel(outputShape) * sizeof(aclFloat16);
    ret = aclrtMalloc(&inputDev, inputBytes, ACL_MEM_MALLOC_HUGE_FIRST);
    CHECK_RET(ret == ACL_SUCCESS, printf("aclrtMalloc failed: %d\n", ret); return 1);
    ret = aclrtMalloc(&weightDev, weightBytes, ACL_MEM_MALLOC_HUGE_FIRST);
    CHECK_RET(ret == ACL_SUCCESS, printf("aclrtMalloc failed: %d\n", ret); return 1);
    ret = aclrtMalloc(&outputDev, outputBytes, ACL_MEM_MALLOC_HUGE_FIRST);
    CHECK_RET(ret == ACL_SUCCESS, printf("aclrtMalloc failed: %d\n", ret); return 1);
    ret = aclrtMemcpy(inputDev, inputBytes, inputHost.data(), inputBytes, ACL_MEMCPY_HOST_TO_DEVICE);
    CHECK_RET(ret == ACL_SUCCESS, printf("aclrtMemcpy failed: %d\n", ret); return 1);
    ret = aclrtMemcpy(weightDev, weightBytes, weightHost.data(), weightBytes,
                      ACL_MEMCPY_HOST_TO_DEVICE);
    CHECK_RET(ret == ACL_SUCCESS, printf("aclrtMemcpy failed: %d\n", ret); return 1);

    // The input is a view of the padded rows: strides skip the last 16 columns.
    aclTensor *input = aclCreateTensor(inputView.data(), inputView.size(), ACL_FLOAT16,
                                       inputStrides.data(), 0, ACL_FORMAT_ND, inputStorage.data(),
                                       inputStorage.size(), inputDev);
    aclTensor *weight = aclCreateTensor(weightShape.data(), weightShape.size(), ACL_FLOAT16,
                                        nullptr, 0, ACL_FORMAT_ND, weightShape.data(),
                                        weightShape.size(), weightDev);
    aclTensor *output = aclCreateTensor(outputShape.data(), outputShape.size(), ACL_FLOAT16,
                                        nullptr, 0, ACL_FORMAT_ND, outputShape.data(),
                                        outputShape.size(), outputDev);
    aclIntArray *seq = aclCreateIntArray(actSeqLen.data(), actSeqLen.size());
    CHECK_RET(input && weight && output && seq, printf("creating tensors failed\n"); return 1);

    char layout[] = "TND";
    uint64_t workspaceSize = 0;
    aclOpExecutor *executor = nullptr;
    ret = aclnnNsaCompressGetWorkspaceSize(input, weight, seq, layout, blockSize, stride, 0, output,
                                           &workspaceSize, &executor);
    CHECK_RET(ret == ACL_SUCCESS, printf("aclnnNsaCompressGetWorkspaceSize failed: %d\n", ret);
              return 1);
    void *workspace = nullptr;
    if (workspaceSize > 0) {
        ret = aclrtMalloc(&workspace, workspaceSize, ACL_MEM_MALLOC_HUGE_FIRST);
        CHECK_RET(ret == ACL_SUCCESS, printf("workspace allocation failed: %d\n", ret); return 1);
    }
    ret = aclnnNsaCompress(workspace, workspaceSize, executor, stream);
    CHECK_RET(ret == ACL_SUCCESS, printf("aclnnNsaCompress failed: %d\n", ret); return 1);
    ret = aclrtSynchronizeStream(stream);
    CHECK_RET(ret == ACL_SUCCESS, printf("aclrtSynchronizeStream failed: %d\n", ret); return 1);

    std::vector<aclFloat16> outputHost(Numel(outputShape));
    ret = aclrtMemcpy(outputHost.data(), outputBytes, outputDev, outputBytes,
                      ACL_MEMCPY_DEVICE_TO_HOST);
    CHECK_RET(ret == ACL_SUCCESS, printf("aclrtMemcpy failed: %d\n", ret); return 1);

    // Reference: output[O_b + i][n][d] = sum_j weight[j][n] * input[start_b + i*stride + j][n][d].
    double worst = 0.0;
    int bad = 0;
    int64_t row = 0, start = 0;
    for (int64_t end : actSeqLen) {
        for (int64_t s = start; s + blockSize <= end; s += stride, row++)
            for (int64_t n = 0; n < heads; n++)
                for (int64_t d = 0; d < dim; d++) {
                    double ref = 0.0;
                    for (int64_t j = 0; j < blockSize; j++)
                        ref += (double)weightAt(j, n) * (double)inputAt(s + j, n, d);
                    double got = aclFloat16ToFloat(outputHost[(row * heads + n) * dim + d]);
                    double err = std::fabs(got - ref);
                    worst = err > worst ? err : worst;
                    if (err > std::fabs(ref) * 0x1p-10 + 1e-7)
                        bad++;
                }
        start = end;
    }
    printf("output[0][0][0..3] = %f %f %f %f\n", aclFloat16ToFloat(outputHost[0]),
           aclFloat16ToFloat(outputHost[1]), aclFloat16ToFloat(outputHost[2]),
           aclFloat16ToFloat(outputHost[3]));

    aclDestroyTensor(input);
    aclDestroyTensor(weight);
    aclDestroyTensor(output);
    aclDestroyIntArray(seq);
    aclrtFree(inputDev);
    aclrtFree(weightDev);
    aclrtFree(outputDev);
    if (workspaceSize > 0)
        aclrtFree(workspace);
    aclrtDestroyStream(stream);
    aclrtDestroyContext(context);
    aclrtResetDevice(deviceId);
    aclFinalize();

    if (row != windows || bad != 0) {
        printf("NsaCompress: %d of %lld values off (max |err| %g)\n", bad,
               (long long)(windows * heads * dim), worst);
        return 1;
    }
    printf("NsaCompress [%lld,%lld,%lld] from %lld tokens: matches the spec formula "
           "(max |err| %g)\n",
           (long long)windows, (long long)heads, (long long)dim, (long long)tokens, worst);
    return 0;
}
