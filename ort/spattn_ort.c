/* libspattn_ort.so: an ONNX Runtime custom-operator library running spattn's
 * multi-scale deformable attention for the node torch.onnx.export writes
 * (spattn's binding, and mmdeploy's exports of mmcv / Deformable-DETR /
 * DINO): domain "mmdeploy", op "MMCVMultiScaleDeformableAttention", inputs
 * value [bs, nk, nh, C], value_spatial_shapes [nl, 2], value_level_start_index
 * [nl] (int64 or int32), sampling_locations [bs, nq, nh, nl, np, 2],
 * attention_weights [bs, nq, nh, nl, np], float32 or float16; output
 * [bs, nq, nh * C] in the inputs' float type; attribute im2col_step (CUDA's
 * batching, accepted and not needed here).
 *
 * Registered the standard way: SessionOptions.register_custom_ops_library
 * (Python), RegisterCustomOpsLibrary_V2 (C / C++), which call
 * RegisterCustomOps below. Built against ONNX Runtime's C API header and
 * asking for API version SPA_ORT_API (1.17, the first with
 * KernelContext_ParallelFor), so any runtime from 1.17 loads it. The blocks
 * of spattn's phase 2 run on ONNX Runtime's intra-op threads; results are
 * the same for any thread count. A call spattn refuses fails the node with
 * ORT_INVALID_ARGUMENT and spattn's reason, naming the input. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnxruntime_c_api.h"
#include "spattn/executor.h"
#include "spattn/msda.h"

#define SPA_ORT_API 17

static const OrtApi *ort;

/* One op per float type: ONNX Runtime picks the one whose input types match. */
typedef struct msda_op {
    OrtCustomOp op;
    ONNXTensorElementDataType type;
} msda_op;

static const char *op_name(const OrtCustomOp *op)
{
    (void)op;
    return "MMCVMultiScaleDeformableAttention";
}

static const char *op_provider(const OrtCustomOp *op)
{
    (void)op;
    return "CPUExecutionProvider";
}

static size_t op_inputs(const OrtCustomOp *op)
{
    (void)op;
    return 5;
}

static size_t op_outputs(const OrtCustomOp *op)
{
    (void)op;
    return 1;
}

/* The index inputs take int64 or int32 (UNDEFINED: any type; compute checks). */
static ONNXTensorElementDataType op_input_type(const OrtCustomOp *op, size_t i)
{
    return i == 1 || i == 2 ? ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED : ((const msda_op *)(const void *)op)->type;
}

static ONNXTensorElementDataType op_output_type(const OrtCustomOp *op, size_t i)
{
    (void)i;
    return ((const msda_op *)(const void *)op)->type;
}

static OrtCustomOpInputOutputCharacteristic op_required(const OrtCustomOp *op, size_t i)
{
    (void)op, (void)i;
    return INPUT_OUTPUT_REQUIRED;
}

static OrtMemType op_input_memory(const OrtCustomOp *op, size_t i)
{
    (void)op, (void)i;
    return OrtMemTypeDefault;
}

static OrtStatusPtr fail(const char *what, spa_status st, const spa_executor *ex)
{
    char msg[512];
    const char *context = "";
    const char *reason = ex != NULL ? spa_executor_reason(ex, &context) : "";
    snprintf(msg, sizeof msg, "spattn MMCVMultiScaleDeformableAttention: %s (status %ld)%s%s%s%s", what, (long)st,
             reason[0] ? ": " : "", reason, context[0] ? "; in " : "", context);
    return ort->CreateStatus(ORT_INVALID_ARGUMENT, msg);
}

/* Input i as a contiguous spattn tensor. */
static OrtStatusPtr input_tensor(OrtKernelContext *ctx, size_t i, spa_tensor *t)
{
    static const char *names[5] = {"value", "value_spatial_shapes", "value_level_start_index",
                                   "sampling_locations", "attention_weights"};
    const OrtValue *v = NULL;
    OrtTensorTypeAndShapeInfo *info = NULL;
    OrtStatusPtr s = ort->KernelContext_GetInput(ctx, i, &v);
    if (s == NULL)
        s = ort->GetTensorTypeAndShape(v, &info);
    if (s != NULL)
        return s;
    size_t rank = 0;
    ONNXTensorElementDataType type = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
    int64_t dims[SPA_MAX_RANK];
    s = ort->GetDimensionsCount(info, &rank);
    if (s == NULL && rank > SPA_MAX_RANK) {
        ort->ReleaseTensorTypeAndShapeInfo(info);
        char msg[160];
        snprintf(msg, sizeof msg, "spattn MMCVMultiScaleDeformableAttention: %s has rank %zu", names[i], rank);
        return ort->CreateStatus(ORT_INVALID_ARGUMENT, msg);
    }
    if (s == NULL)
        s = ort->GetDimensions(info, dims, rank);
    if (s == NULL)
        s = ort->GetTensorElementType(info, &type);
    ort->ReleaseTensorTypeAndShapeInfo(info);
    if (s != NULL)
        return s;
    void *data = NULL;
    if ((s = ort->GetTensorMutableData((OrtValue *)(uintptr_t)v, &data)) != NULL)
        return s;
    spa_dtype dt;
    switch (type) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: dt = SPA_FLOAT32; break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16: dt = SPA_FLOAT16; break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64: dt = SPA_INT64; break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32: dt = SPA_INT32; break;
    default: {
        char msg[160];
        snprintf(msg, sizeof msg, "spattn MMCVMultiScaleDeformableAttention: %s has element type %d", names[i],
                 (int)type);
        return ort->CreateStatus(ORT_INVALID_ARGUMENT, msg);
    }
    }
    spa_tensor_init(t, dt, (int32_t)rank, dims, data);
    return NULL;
}

/* spa_runner over ONNX Runtime's intra-op threads. */
typedef struct ort_job {
    const OrtKernelContext *ctx;
    spa_task_fn task;
    void *arg;
} ort_job;

static void ort_task(void *job, size_t i)
{
    const ort_job *j = job;
    j->task(j->arg, (uint32_t)i);
}

static void ort_run(void *ctx, spa_task_fn task, void *arg, uint32_t n)
{
    ort_job *j = ctx;
    ort_job call = *j;
    call.task = task, call.arg = arg;
    OrtStatusPtr s = ort->KernelContext_ParallelFor(j->ctx, ort_task, n, 0, &call);
    if (s != NULL) { /* no thread pool: the blocks on this thread, in order */
        ort->ReleaseStatus(s);
        for (uint32_t i = 0; i < n; i++)
            task(arg, i);
    }
}

static OrtStatusPtr compute(void *kernel, OrtKernelContext *ctx)
{
    (void)kernel;
    spa_tensor in[5];
    for (size_t i = 0; i < 5; i++) {
        OrtStatusPtr s = input_tensor(ctx, i, &in[i]);
        if (s != NULL)
            return s;
    }
    const spa_tensor *value = &in[0], *loc = &in[3];
    if (value->rank != 4 || loc->rank != 6)
        return fail("value must be [bs, num_keys, num_heads, channels] and sampling_locations "
                    "[bs, num_queries, num_heads, num_levels, num_points, 2]",
                    SPA_ERR_INVALID, NULL);
    if (value->dims[3] != 0 && value->dims[2] > INT64_MAX / value->dims[3]) /* dims are >= 0 */
        return fail("num_heads * channels overflows", SPA_ERR_INVALID, NULL);
    int64_t odims[3] = {loc->dims[0], loc->dims[1], value->dims[2] * value->dims[3]};
    OrtValue *out = NULL;
    OrtStatusPtr s = ort->KernelContext_GetOutput(ctx, 0, odims, 3, &out);
    void *odata = NULL;
    if (s == NULL)
        s = ort->GetTensorMutableData(out, &odata);
    if (s != NULL)
        return s;
    spa_tensor o;
    spa_tensor_init(&o, (spa_dtype)value->dtype, 3, odims, odata);
    spa_executor ex;
    uint64_t size = 0;
    spa_status st = spa_msda_get_workspace_size(&in[0], &in[1], &in[2], &in[3], &in[4], &o, &size, &ex);
    if (st != SPA_OK)
        return fail("refused", st, &ex);
    void *ws = malloc(size != 0 ? size : 1);
    if (ws == NULL)
        return ort->CreateStatus(ORT_FAIL, "spattn MMCVMultiScaleDeformableAttention: no memory for the workspace");
    ort_job job = {ctx, NULL, NULL};
    const spa_runner runner = {ort_run, &job};
    st = spa_executor_run(ws, size, &ex, &runner);
    free(ws);
    return st == SPA_OK ? NULL : fail("refused in phase 2", st, &ex);
}

static OrtStatusPtr create_kernel(const OrtCustomOp *op, const OrtApi *api, const OrtKernelInfo *info,
                                  void **kernel)
{
    (void)op, (void)api;
    int64_t step = 0; /* im2col_step: optional; any value gives the same result here */
    OrtStatusPtr s = ort->KernelInfoGetAttribute_int64(info, "im2col_step", &step);
    if (s != NULL)
        ort->ReleaseStatus(s);
    *kernel = (void *)(uintptr_t)1; /* stateless */
    return NULL;
}

static void destroy_kernel(void *kernel)
{
    (void)kernel;
}

static void op_init(msda_op *m, ONNXTensorElementDataType type)
{
    memset(m, 0, sizeof *m);
    m->type = type;
    m->op.version = SPA_ORT_API;
    m->op.GetName = op_name;
    m->op.GetExecutionProviderType = op_provider;
    m->op.GetInputType = op_input_type;
    m->op.GetInputTypeCount = op_inputs;
    m->op.GetOutputType = op_output_type;
    m->op.GetOutputTypeCount = op_outputs;
    m->op.KernelDestroy = destroy_kernel;
    m->op.GetInputCharacteristic = op_required;
    m->op.GetOutputCharacteristic = op_required;
    m->op.GetInputMemoryType = op_input_memory;
    m->op.CreateKernelV2 = create_kernel;
    m->op.KernelComputeV2 = compute;
}

/* The library's entry point (ONNX Runtime's name): registers the op for
 * float32 and float16 in domain "mmdeploy". */
__attribute__((visibility("default"))) OrtStatus *RegisterCustomOps(OrtSessionOptions *options,
                                                                    const OrtApiBase *api_base);
OrtStatus *RegisterCustomOps(OrtSessionOptions *options, const OrtApiBase *api_base)
{
    static msda_op ops[2]; /* static: ONNX Runtime keeps pointers to them */
    static OrtCustomOpDomain *domain;
    const OrtApi *api = api_base->GetApi(SPA_ORT_API);
    if (api == NULL)
        return NULL; /* a runtime older than 1.17: it cannot report an error either */
    ort = api;
    if (domain == NULL) {
        OrtStatusPtr s = api->CreateCustomOpDomain("mmdeploy", &domain);
        if (s != NULL)
            return s;
        op_init(&ops[0], ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT);
        op_init(&ops[1], ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16);
        for (int i = 0; i < 2; i++)
            if ((s = api->CustomOpDomain_Add(domain, &ops[i].op)) != NULL)
                return s;
    }
    return api->AddCustomOpDomain(options, domain);
}
