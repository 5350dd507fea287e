/* Runs the graphs tests/ort/export_cases.py exported (the binding's
 * torch.onnx.export) in ONNX Runtime, with libspattn_ort.so registered the
 * standard way (RegisterCustomOpsLibrary_V2), on 1 and 3 intra-op threads,
 * and compares the output with the PyTorch module's and with the float64
 * formulation's:
 *   test_ort LIBSPATTN_ORT CASEDIR...
 *   test_ort --bench RUNS LIBSPATTN_ORT CASEDIR...   (make ort-bench)
 * Passes when, for each case and thread count, |ort - ref| <= tol * max|ref|
 * (tol: 1e-5 for float32, 2e-3 for float16) and the outputs of the two
 * thread counts are bit-identical; prints the differences either way. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "onnxruntime_c_api.h"

enum { MAX_IN = 8, MAX_RANK = 8 };

static const OrtApi *ort;

typedef struct arr {
    char name[64], type[8];
    int64_t rank, dims[MAX_RANK];
    size_t count, esize;
    void *data;
} arr;

static int check(OrtStatus *s, const char *what)
{
    if (s == NULL)
        return 0;
    fprintf(stderr, "test_ort: %s: %s\n", what, ort->GetErrorMessage(s));
    ort->ReleaseStatus(s);
    return 1;
}

static void *read_file(const char *dir, const char *name, size_t bytes)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    void *p = malloc(bytes ? bytes : 1);
    if (f == NULL || p == NULL || fread(p, 1, bytes, f) != bytes) {
        fprintf(stderr, "test_ort: cannot read %zu bytes of %s\n", bytes, path);
        exit(2);
    }
    fclose(f);
    return p;
}

static size_t esize_of(const char *type)
{
    return strcmp(type, "f32") == 0 ? 4 : strcmp(type, "f16") == 0 ? 2 : 8;
}

static ONNXTensorElementDataType onnx_type(const char *type)
{
    return strcmp(type, "f32") == 0   ? ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT
           : strcmp(type, "f16") == 0 ? ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16
                                      : ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64;
}

static double half_to_double(uint16_t h)
{
    const int e = h >> 10 & 31, m = h & 1023;
    const double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
    return h >> 15 ? -v : v;
}

static double value_at(const arr *a, const void *data, size_t i)
{
    if (strcmp(a->type, "f32") == 0)
        return ((const float *)data)[i];
    return half_to_double(((const uint16_t *)data)[i]);
}

/* Reads case.txt: the inputs, then the output. */
static int read_case(const char *dir, arr *in, int *nin, arr *out)
{
    char path[1024], kind[16];
    snprintf(path, sizeof path, "%s/case.txt", dir);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    *nin = 0;
    while (fscanf(f, "%15s", kind) == 1) {
        if (strcmp(kind, "input") == 0 && *nin == MAX_IN)
            return -1;
        arr *a = strcmp(kind, "input") == 0 ? &in[(*nin)++] : out;
        if (a != out && fscanf(f, "%63s", a->name) != 1)
            return -1;
        if (fscanf(f, "%7s %lld", a->type, (long long *)&a->rank) != 2 || a->rank < 0 || a->rank > MAX_RANK)
            return -1;
        a->count = 1;
        for (int64_t k = 0; k < a->rank; k++) {
            if (fscanf(f, "%lld", (long long *)&a->dims[k]) != 1)
                return -1;
            a->count *= (size_t)a->dims[k];
        }
        a->esize = esize_of(a->type);
    }
    fclose(f);
    return 0;
}

/* A case: case.txt, every input's file and the PyTorch output (torch.bin);
 * -1 when case.txt is unreadable or names no output. */
static int load_case(const char *dir, arr *in, int *nin, arr *out, void **torch_out)
{
    memset(in, 0, MAX_IN * sizeof *in), memset(out, 0, sizeof *out);
    *nin = 0;
    if (read_case(dir, in, nin, out) != 0 || out->count == 0)
        return -1;
    char file[96];
    for (int i = 0; i < *nin; i++) {
        snprintf(file, sizeof file, "%.63s.bin", in[i].name);
        in[i].data = read_file(dir, file, in[i].count * in[i].esize);
    }
    *torch_out = read_file(dir, "torch.bin", out->count * out->esize);
    return 0;
}

static void free_case(arr *in, int nin, void *torch_out)
{
    for (int i = 0; i < nin; i++)
        free(in[i].data);
    free(torch_out);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The case on `threads` intra-op threads, run 1 + runs times (runs > 0: the
 * median of the timed runs in *ms); the last output copied to *got. */
static int run_case(OrtEnv *env, const char *lib, const char *dir, arr *in, int nin, const arr *out,
                    int threads, int runs, double *ms, void **got)
{
    OrtSessionOptions *so = NULL;
    OrtSession *sess = NULL;
    OrtMemoryInfo *mem = NULL;
    OrtValue *vin[MAX_IN] = {0}, *vout = NULL;
    const char *names[MAX_IN];
    char model[1024];
    snprintf(model, sizeof model, "%s/model.onnx", dir);
    int bad = check(ort->CreateSessionOptions(&so), "CreateSessionOptions") ||
              check(ort->SetIntraOpNumThreads(so, threads), "SetIntraOpNumThreads") ||
              check(ort->RegisterCustomOpsLibrary_V2(so, lib), "RegisterCustomOpsLibrary_V2") ||
              check(ort->CreateSession(env, model, so, &sess), "CreateSession") ||
              check(ort->CreateCpuMemoryInfo(OrtArenaAllocator, OrtMemTypeDefault, &mem), "CreateCpuMemoryInfo");
    for (int i = 0; i < nin && !bad; i++) {
        names[i] = in[i].name;
        bad = check(ort->CreateTensorWithDataAsOrtValue(mem, in[i].data, in[i].count * in[i].esize, in[i].dims,
                                                        (size_t)in[i].rank, onnx_type(in[i].type), &vin[i]),
                    "CreateTensorWithDataAsOrtValue");
    }
    const char *oname = "out";
    double *t = calloc((size_t)runs + 1, sizeof(double));
    for (int r = 0; r <= runs && !bad; r++) { /* run 0: the warm-up */
        if (vout != NULL)
            ort->ReleaseValue(vout), vout = NULL;
        const double t0 = now_ms();
        bad = check(ort->Run(sess, NULL, names, (const OrtValue *const *)vin, (size_t)nin, &oname, 1, &vout),
                    "Run");
        t[r] = now_ms() - t0;
    }
    if (!bad && runs > 0) {
        qsort(t + 1, (size_t)runs, sizeof(double), cmp_double);
        *ms = t[1 + runs / 2];
    }
    free(t);
    if (!bad) {
        OrtTensorTypeAndShapeInfo *info = NULL;
        size_t rank = 0, count = 0;
        int64_t dims[MAX_RANK];
        void *data = NULL;
        bad = check(ort->GetTensorTypeAndShape(vout, &info), "GetTensorTypeAndShape") ||
              check(ort->GetDimensionsCount(info, &rank), "GetDimensionsCount") ||
              (rank <= MAX_RANK && check(ort->GetDimensions(info, dims, rank), "GetDimensions")) ||
              check(ort->GetTensorShapeElementCount(info, &count), "GetTensorShapeElementCount") ||
              check(ort->GetTensorMutableData(vout, &data), "GetTensorMutableData");
        if (info != NULL)
            ort->ReleaseTensorTypeAndShapeInfo(info);
        if (!bad && (rank != (size_t)out->rank || count != out->count ||
                     memcmp(dims, out->dims, rank * sizeof dims[0]) != 0)) {
            fprintf(stderr, "test_ort: %s: output shape differs from the module's\n", dir);
            bad = 1;
        }
        if (!bad) {
            *got = malloc(count * out->esize);
            memcpy(*got, data, count * out->esize);
        }
    }
    if (vout != NULL)
        ort->ReleaseValue(vout);
    for (int i = 0; i < nin; i++)
        if (vin[i] != NULL)
            ort->ReleaseValue(vin[i]);
    if (mem != NULL)
        ort->ReleaseMemoryInfo(mem);
    if (sess != NULL)
        ort->ReleaseSession(sess);
    if (so != NULL)
        ort->ReleaseSessionOptions(so);
    return bad;
}

static const char *base_name(const char *dir)
{
    const char *b = strrchr(dir, '/');
    return b != NULL ? b + 1 : dir;
}

/* --bench: each case's median time on 1 and 2 threads, and each case X's
 * against X_grid_sample's (the same model lowered to GridSample). */
static int bench(OrtEnv *env, const char *lib, int runs, int ncase, char **dirs)
{
    double ms[64][2];
    int failed = 0;
    for (int c = 0; c < ncase && c < 64; c++) {
        arr in[MAX_IN], out;
        int nin;
        void *torch_out;
        if (load_case(dirs[c], in, &nin, &out, &torch_out) != 0)
            return 1;
        for (int th = 1; th <= 2; th++) {
            void *got = NULL;
            if (run_case(env, lib, dirs[c], in, nin, &out, th, runs, &ms[c][th - 1], &got) != 0)
                return 1;
            double scale = 0, err = 0;
            for (size_t i = 0; i < out.count; i++) {
                const double w = value_at(&out, torch_out, i);
                scale = fmax(scale, fabs(w));
                err = fmax(err, fabs(value_at(&out, got, i) - w));
            }
            free(got);
            printf("ort_bench case=%s threads=%d median_ms=%.2f (|ort - torch| %.1e of max %.3g)\n",
                   base_name(dirs[c]), th, ms[c][th - 1], err / scale, scale);
            failed |= !(err <= 1e-4 * scale);
        }
        free_case(in, nin, torch_out);
    }
    for (int c = 0; c < ncase && c < 64; c++)
        for (int d = 0; d < ncase && d < 64; d++) {
            char want[256];
            snprintf(want, sizeof want, "%s_grid_sample", base_name(dirs[c]));
            if (strcmp(base_name(dirs[d]), want) == 0)
                for (int th = 0; th < 2; th++)
                    printf("ort_bench %s threads=%d: spattn's node %.2f ms, GridSample lowering %.2f ms: %.1fx\n",
                           base_name(dirs[c]), th + 1, ms[c][th], ms[d][th], ms[d][th] / ms[c][th]);
        }
    return failed;
}

int main(int argc, char **argv)
{
    int runs = 0;
    if (argc > 2 && strcmp(argv[1], "--bench") == 0) {
        runs = atoi(argv[2]);
        argc -= 2, argv += 2;
    }
    if (argc < 3) {
        fprintf(stderr, "usage: test_ort [--bench RUNS] LIBSPATTN_ORT CASEDIR...\n");
        return 2;
    }
    const char *lib = argv[1];
    ort = OrtGetApiBase()->GetApi(17);
    if (ort == NULL) {
        fprintf(stderr, "test_ort: the runtime has no C API version 17\n");
        return 1;
    }
    printf("test_ort: ONNX Runtime %s\n", OrtGetApiBase()->GetVersionString());
    OrtEnv *env = NULL;
    if (check(ort->CreateEnv(ORT_LOGGING_LEVEL_WARNING, "spattn", &env), "CreateEnv"))
        return 1;
    if (runs > 0) {
        const int failed = bench(env, lib, runs, argc - 2, argv + 2);
        ort->ReleaseEnv(env);
        return failed;
    }
    int failed = 0;
    for (int c = 2; c < argc; c++) {
        const char *dir = argv[c];
        arr in[MAX_IN], out;
        int nin;
        void *torch_out;
        if (load_case(dir, in, &nin, &out, &torch_out) != 0) {
            fprintf(stderr, "test_ort: %s/case.txt unreadable\n", dir);
            failed = 1;
            continue;
        }
        double *ref = read_file(dir, "ref.bin", out.count * sizeof(double));
        const double tol = strcmp(out.type, "f32") == 0 ? 1e-5 : 2e-3;
        void *first = NULL;
        for (int threads = 1; threads <= 3; threads += 2) {
            void *got = NULL;
            if (run_case(env, lib, dir, in, nin, &out, threads, 0, NULL, &got) != 0) {
                failed = 1;
                break;
            }
            double scale = 0, err_ref = 0, err_torch = 0;
            for (size_t i = 0; i < out.count; i++)
                scale = fmax(scale, fabs(ref[i]));
            for (size_t i = 0; i < out.count; i++) {
                const double g = value_at(&out, got, i);
                err_ref = fmax(err_ref, fabs(g - ref[i]) / scale);
                err_torch = fmax(err_torch, fabs(g - value_at(&out, torch_out, i)) / scale);
                if (g != g)
                    err_ref = INFINITY;
            }
            const int same = first == NULL || memcmp(first, got, out.count * out.esize) == 0;
            const int ok = err_ref <= tol && err_torch <= tol && same;
            printf("test_ort: %s, %d thread%s: max |ort - float64 ref| %.2e, |ort - torch| %.2e of max|ref| %.3g "
                   "(tol %.0e)%s: %s\n",
                   dir, threads, threads > 1 ? "s" : "", err_ref, err_torch, scale, tol,
                   first == NULL ? "" : same ? ", bit-identical to 1 thread" : ", DIFFERS from 1 thread",
                   ok ? "ok" : "FAILED");
            failed |= !ok;
            if (first == NULL)
                first = got;
            else
                free(got);
        }
        free(first), free(ref);
        free_case(in, nin, torch_out);
    }
    ort->ReleaseEnv(env);
    printf("test_ort: %s\n", failed ? "FAILED" : "all cases passed");
    return failed;
}
