/* The workspace phase 1 asks for a few typical firmware calls (f32), printed
 * one per line. The same source runs twice in `make TARGET=<t> sizing-check`:
 * on the target (under its emulator) against the target's libspattn.a, and
 * on the build machine against libspattn_sizing.a, the target's phase 1
 * compiled for the host; the two outputs must be equal. Phase 1 reads no
 * float element, so the float tensors point at addresses that are never
 * dereferenced (distinct, so the overlap rules see separate tensors); the
 * index tensors and sequence arrays are real. */
#include <stdint.h>
#include <stdio.h>

#include "spattn/msda.h"
#include "spattn/nsa.h"
#include "spattn/nsa_infer.h"

static uintptr_t next_address = 0x10000000u;

/* A distinct, 64-byte aligned range of bytes that no call reads. */
static void *untouched(uint64_t bytes)
{
    void *p = (void *)next_address;
    next_address += (uintptr_t)((bytes + 63u) & ~(uint64_t)63u);
    return p;
}

static spa_tensor f32_tensor(int32_t rank, const int64_t *dims)
{
    uint64_t n = 4;
    for (int32_t i = 0; i < rank; i++)
        n *= (uint64_t)dims[i];
    spa_tensor t;
    spa_tensor_init(&t, SPA_FLOAT32, rank, dims, untouched(n));
    return t;
}

/* report(name, st, &size) after the call: the call must run before size is read. */
static int report(const char *name, spa_status st, const uint64_t *size)
{
    if (st != SPA_OK) {
        printf("%s: phase 1 refused (%ld)\n", name, (long)st);
        return 1;
    }
    printf("%s: %llu bytes\n", name, (unsigned long long)*size);
    return 0;
}

/* Deformable-DETR's encoder shape, scaled to a small image: 2 levels. */
static int msda(void)
{
    enum { B = 1, LEN = 32 * 32 + 16 * 16, NH = 8, CH = 32, NQ = 300, NL = 2, NP = 4 };
    static const int64_t shapes[NL * 2] = {32, 32, 16, 16}, starts[NL] = {0, 32 * 32};
    const int64_t vd[4] = {B, LEN, NH, CH}, sd[2] = {NL, 2}, ld[1] = {NL},
                  locd[6] = {B, NQ, NH, NL, NP, 2}, ad[5] = {B, NQ, NH, NL, NP}, od[3] = {B, NQ, NH * CH};
    spa_tensor v = f32_tensor(4, vd), loc = f32_tensor(6, locd), a = f32_tensor(5, ad), o = f32_tensor(3, od);
    spa_tensor ts, tl;
    spa_tensor_init(&ts, SPA_INT64, 2, sd, (void *)shapes);
    spa_tensor_init(&tl, SPA_INT64, 1, ld, (void *)starts);
    uint64_t size = 0;
    spa_executor ex;
    int bad = report("msda", spa_msda_get_workspace_size(&v, &ts, &tl, &loc, &a, &o, &size, &ex), &size);
    spa_tensor go = f32_tensor(3, od), gv = f32_tensor(4, vd), gl = f32_tensor(6, locd), ga = f32_tensor(5, ad);
    bad |= report("msda_grad",
                  spa_msda_grad_get_workspace_size(&v, &ts, &tl, &loc, &a, &go, &gv, &gl, &ga, &size, &ex),
                  &size);
    return bad;
}

/* NSA compression of 1024 tokens, one kv head of D 128, l 32 / d 16. */
static int nsa_compress(void)
{
    enum { T = 1024, N = 1, D = 128, L = 32, STRIDE = 16 };
    static const int64_t ends[1] = {T};
    const spa_int_array seq = {ends, 1};
    const int64_t id[3] = {T, N, D}, wd[2] = {L, N}, od[3] = {(T - L) / STRIDE + 1, N, D};
    spa_tensor in = f32_tensor(3, id), w = f32_tensor(2, wd), o = f32_tensor(3, od);
    uint64_t size = 0;
    spa_executor ex;
    return report("nsa_compress",
                  spa_nsa_compress_get_workspace_size(&in, &w, &seq, "TND", L, STRIDE, 0, &o, &size, &ex), &size);
}

/* Selected attention over 1024 tokens: 16 query heads on 1 kv head, D 128,
 * 16 blocks of 64 (the whole prefix here), causal. */
enum { ST = 1024, SN1 = 16, SD = 128, SBS = 64, SK = 16 };
static int32_t select_topk[ST * SK];

static int nsa_select(void)
{
    for (int t = 0; t < ST; t++)
        for (int i = 0; i < SK; i++)
            select_topk[t * SK + i] = i;
    static const int64_t seq[1] = {ST};
    static uint8_t mask[1] = {1};
    const spa_int_array sq = {seq, 1}, skv = {seq, 1};
    const int64_t qd[3] = {ST, SN1, SD}, kd[3] = {ST, 1, SD}, td[3] = {ST, 1, SK}, sd[3] = {ST, SN1, 8},
                  md[2] = {1, 1};
    spa_tensor q = f32_tensor(3, qd), k = f32_tensor(3, kd), v = f32_tensor(3, kd), mx = f32_tensor(3, sd),
               sm = f32_tensor(3, sd), o = f32_tensor(3, qd), tt, tm;
    spa_tensor_init(&tt, SPA_INT32, 3, td, select_topk);
    spa_tensor_init(&tm, SPA_UINT8, 2, md, mask);
    uint64_t size = 0;
    spa_executor ex;
    return report("nsa_select",
                  spa_nsa_select_get_workspace_size(&q, &k, &v, &tt, &tm, &sq, &skv, 0.088, SN1, "TND", 2, SBS,
                                                    SK, &mx, &sm, &o, &size, &ex),
                  &size);
}

/* One decode step at an 8k context: 16 query heads on 1 kv head, D 128,
 * 16 selected blocks of 64, a contiguous cache. */
static int nsa_select_infer(void)
{
    enum { L = 8192, N1 = 16, D = 128, BS = 64, K = 16 };
    static int32_t topk[K];
    for (int i = 0; i < K; i++)
        topk[i] = (L / BS - 1) - 5 * i;
    static const int64_t lens[1] = {L};
    const spa_int_array skv = {lens, 1};
    const int64_t qd[3] = {1, N1, D}, kd[4] = {1, L, 1, D}, td[3] = {1, 1, K};
    spa_tensor q = f32_tensor(3, qd), k = f32_tensor(4, kd), v = f32_tensor(4, kd), o = f32_tensor(3, qd), tt;
    spa_tensor_init(&tt, SPA_INT32, 3, td, topk);
    uint64_t size = 0;
    spa_executor ex;
    return report("nsa_select_infer",
                  spa_nsa_select_infer_get_workspace_size(&q, &k, &v, &tt, NULL, NULL, &skv, 0.088, BS, &o, &size,
                                                          &ex),
                  &size);
}

int main(void)
{
    int bad = msda();
    bad |= nsa_compress();
    bad |= nsa_select();
    bad |= nsa_select_infer();
    return bad;
}
