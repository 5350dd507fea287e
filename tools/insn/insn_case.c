/* One operator call, or two, at a shape small enough for an emulator: the
 * program `make insn` runs under qemu with the insncount plugin. The
 * instructions of one call are (two calls) - (one call): set-up, input
 * generation and phase 1 cancel out.
 *   spattn_insn <op> <f32|f16|bf16> <calls>
 * prints "case op=<op> dtype=<dt> shape=<name> flops=<n>" (useful FLOPs of
 * one call: the products only, a multiply-add counted as 2, as bench/ does;
 * msda: 8 per sample and channel, msda_grad 38, see msda()).
 * Shapes (named insn): nsa_select(_grad) T 256, N1 16 / N2 2, D = Dv = 128,
 * blockSize 64, K 4; nsa_compress(_grad) T 8192, N 4, D 128, 32 / 16 (T 2048 on
 * the boards, SPA_TEST_SMALL: x and its grad must fit their 15 MiB); msda(_grad)
 * levels 32x32, 16x16, 8x8, 4x4, nq = nk = 1360, 8 heads, C 32, 4 points;
 * nsa_compress_attention(_grad) T 1024 (512 on the boards), N1 8 / N2 1,
 * D = Dv = 128, compress block 32 / stride 16 (C = 63 keys), select block 64,
 * K 8, causal; swa(_grad) T 384, N1 8 / N2 1, D = Dv = 128, window 256;
 * nsa_select_infer, nsa_compress_attention_infer, dsa_lightning_indexer: see
 * those functions below. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spattn/spattn.h"

static uint64_t seed_state = 0x9E3779B97F4A7C15ull;

static float rnd(void) /* [-1, 1) */
{
    seed_state = seed_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(seed_state >> 40) * 0x1p-23 - 1.0);
}

static size_t esize(spa_dtype dt)
{
    return dt == SPA_FLOAT32 ? 4 : 2;
}

/* count values of dt: uniform in [lo, hi); the first PERIOD generated, the
 * rest copies of them (set-up is most of what an emulator runs otherwise) */
enum { PERIOD = 4099 };
static void *fill(spa_dtype dt, size_t count, float lo, float hi)
{
    unsigned char *p = calloc(count ? count : 1, esize(dt));
    if (p == NULL)
        exit(2);
    const size_t n = count < PERIOD ? count : PERIOD;
    for (size_t i = 0; i < n; i++) {
        const float v = lo + (hi - lo) * 0.5f * (rnd() + 1.0f);
        uint32_t u;
        memcpy(&u, &v, 4);
        if (dt == SPA_FLOAT32) {
            memcpy(p + 4 * i, &v, 4);
        } else if (dt == SPA_BFLOAT16) {
            const uint16_t h = (uint16_t)(u >> 16);
            memcpy(p + 2 * i, &h, 2);
        } else { /* |v| < 1: an f16 of the same sign with 10 bits of mantissa, or 0 */
            const int e = (int)((u >> 23) & 0xFF) - 127;
            const uint16_t h = e < -14 ? 0 : (uint16_t)(((u >> 16) & 0x8000u) | (uint32_t)(e + 15) << 10 | ((u >> 13) & 0x3FFu));
            memcpy(p + 2 * i, &h, 2);
        }
    }
    for (size_t done = n; done < count;) { /* doubling copies */
        const size_t c = done < count - done ? done : count - done;
        memcpy(p + done * esize(dt), p, c * esize(dt));
        done += c;
    }
    return p;
}

static spa_tensor tensor(spa_dtype dt, int32_t rank, const int64_t *dims, void *data)
{
    spa_tensor t;
    spa_tensor_init(&t, dt, rank, dims, data);
    return t;
}

static void run(spa_status (*fn)(void *, uint64_t, const spa_executor *, const spa_runner *),
                uint64_t ws_size, const spa_executor *ex, int calls)
{
    void *ws = ws_size <= SIZE_MAX ? calloc(ws_size ? (size_t)ws_size : 1, 1) : NULL;
    for (int i = 0; i < calls; i++)
        if (ws == NULL || fn(ws, ws_size, ex, NULL) != SPA_OK) {
            fprintf(stderr, "insn: run failed\n");
            exit(1);
        }
    free(ws);
}

static double nsa_select(spa_dtype dt, int grad, int calls)
{
    enum { T = 256, N1 = 16, N2 = 2, D = 128, DV = 128, BS = 64, KC = 4 };
    const int64_t seq_vals[1] = {T};
    const spa_int_array seq = {seq_vals, 1};
    const int64_t qd[3] = {T, N1, D}, kd[3] = {T, N2, D}, vd[3] = {T, N2, DV}, id[3] = {T, N2, KC},
                  od[3] = {T, N1, DV}, sd[3] = {T, N1, 8};
    int32_t *idx = malloc(sizeof(int32_t) * T * N2 * KC);
    for (int i = 0; i < T * N2; i++)
        for (int k = 0; k < KC; k++)
            idx[i * KC + k] = (int32_t)((i + k) % (T / BS));
    void *q = fill(dt, (size_t)T * N1 * D, -1, 1), *k = fill(dt, (size_t)T * N2 * D, -1, 1);
    void *v = fill(dt, (size_t)T * N2 * DV, -1, 1), *o = fill(dt, (size_t)T * N1 * DV, 0, 0);
    float *mx = calloc((size_t)T * N1 * 8, 4), *sm = calloc((size_t)T * N1 * 8, 4);
    spa_tensor tq = tensor(dt, 3, qd, q), tk = tensor(dt, 3, kd, k), tv = tensor(dt, 3, vd, v),
               ti = tensor(SPA_INT32, 3, id, idx), to = tensor(dt, 3, od, o),
               tmx = tensor(SPA_FLOAT32, 3, sd, mx), tsm = tensor(SPA_FLOAT32, 3, sd, sm);
    uint64_t ws;
    spa_executor ex;
    if (spa_nsa_select_get_workspace_size(&tq, &tk, &tv, &ti, NULL, &seq, &seq, 0.088, N1, "TND", 0,
                                          BS, KC, &tmx, &tsm, &to, &ws, &ex) != SPA_OK)
        exit(1);
    const double pairs = (double)T * N1 * KC * BS;
    if (!grad) {
        run(spa_nsa_select, ws, &ex, calls);
        return 2 * pairs * (D + DV);
    }
    run(spa_nsa_select, ws, &ex, 1);
    void *dy = fill(dt, (size_t)T * N1 * DV, -1, 1), *dq = fill(dt, (size_t)T * N1 * D, 0, 0);
    void *dk = fill(dt, (size_t)T * N2 * D, 0, 0), *dvv = fill(dt, (size_t)T * N2 * DV, 0, 0);
    spa_tensor tdy = tensor(dt, 3, od, dy), tdq = tensor(dt, 3, qd, dq), tdk = tensor(dt, 3, kd, dk),
               tdv = tensor(dt, 3, vd, dvv);
    if (spa_nsa_select_grad_get_workspace_size(&tq, &tk, &tv, &to, &tdy, &tmx, &tsm, &ti, &seq, &seq,
                                               NULL, 0.088, BS, KC, N1, "TND", 0, &tdq, &tdk, &tdv,
                                               &ws, &ex) != SPA_OK)
        exit(1);
    run(spa_nsa_select_grad, ws, &ex, calls);
    return 2 * pairs * (3 * D + 2 * DV);
}

static double nsa_compress(spa_dtype dt, int grad, int calls)
{
#if defined(SPA_TEST_SMALL)
    enum { T = 2048, N = 4, D = 128, BS = 32, ST = 16, M = (T - BS) / ST + 1 };
#else
    enum { T = 8192, N = 4, D = 128, BS = 32, ST = 16, M = (T - BS) / ST + 1 };
#endif
    const int64_t seq_vals[1] = {T};
    const spa_int_array seq = {seq_vals, 1};
    const int64_t xd[3] = {T, N, D}, wd[2] = {BS, N}, yd[3] = {M, N, D};
    void *x = fill(dt, (size_t)T * N * D, -1, 1), *w = fill(dt, (size_t)BS * N, -1, 1);
    void *y = fill(dt, (size_t)M * N * D, -1, 1);
    spa_tensor tx = tensor(dt, 3, xd, x), tw = tensor(dt, 2, wd, w), ty = tensor(dt, 3, yd, y);
    uint64_t ws;
    spa_executor ex;
    const double macs = (double)M * BS * N * D;
    if (!grad) {
        if (spa_nsa_compress_get_workspace_size(&tx, &tw, &seq, "TND", BS, ST, 0, &ty, &ws, &ex) != SPA_OK)
            exit(1);
        run(spa_nsa_compress, ws, &ex, calls);
        return 2 * macs;
    }
    void *dx = fill(dt, (size_t)T * N * D, 0, 0), *dw = fill(dt, (size_t)BS * N, 0, 0);
    spa_tensor tdx = tensor(dt, 3, xd, dx), tdw = tensor(dt, 2, wd, dw);
    if (spa_nsa_compress_grad_get_workspace_size(&ty, &tx, &tw, &seq, BS, ST, 0, "TND", &tdx, &tdw,
                                                 &ws, &ex) != SPA_OK)
        exit(1);
    run(spa_nsa_compress_grad, ws, &ex, calls);
    return 4 * macs;
}

/* NsaCompressAttention (docs/nsa_compress_attention.md): queries of one
 * sequence of T tokens against the C = (T - l)/d + 1 compressed keys of it,
 * under the causal rule (sparse_mode 2: key c visible to the query at s iff
 * c d + l - 1 <= s). FLOPs = the products the op must compute: per visible
 * (query, head, key) pair QK^T (D) and PV (Dv) in the forward; S = QK^T
 * (D), dP = dY V^T (Dv), dV = P^T dY (Dv), dQ = dS K (D), dK = dS^T Q (D) in
 * the grad. Causally masked pairs are not counted (the kernel skips the
 * keys past the last visible one of a lane group, up to its 16-row tiles,
 * and those count as overhead). The first l - 1 tokens see no key: their
 * rows are the uniform mean of the C values, so P V (forward) and
 * dV = P^T dY (grad) over every key are counted for them (C Dv each); their
 * QK^T, dP, dQ and dK are not needed (constant scores, dS = 0). The block
 * importance and the top-K are sums and compares: no FLOPs. */
static double nsa_compress_attention(spa_dtype dt, int grad, int calls)
{
#if defined(SPA_TEST_SMALL)
    enum { T = 512 }; /* the grad f32 tensors must fit the boards' 15 MiB heap */
#else
    enum { T = 1024 };
#endif
    enum { N1 = 8, N2 = 1, D = 128, DV = 128, L = 32, ST = 16, LS = 64, KC = 8, C = (T - L) / ST + 1 };
    const int64_t q_vals[1] = {T}, c_vals[1] = {C};
    const spa_int_array aq = {q_vals, 1}, ac = {c_vals, 1};
    const int64_t qd[3] = {T, N1, D}, kd[3] = {C, N2, D}, vd[3] = {C, N2, DV}, od[3] = {T, N1, DV},
                  sd[3] = {T, N1, 8}, id[3] = {T, N2, KC};
    void *q = fill(dt, (size_t)T * N1 * D, -1, 1), *k = fill(dt, (size_t)C * N2 * D, -1, 1);
    void *v = fill(dt, (size_t)C * N2 * DV, -1, 1), *o = fill(dt, (size_t)T * N1 * DV, 0, 0);
    float *mx = calloc((size_t)T * N1 * 8, 4), *sm = calloc((size_t)T * N1 * 8, 4);
    int32_t *idx = calloc((size_t)T * N2 * KC, 4);
    spa_tensor tq = tensor(dt, 3, qd, q), tk = tensor(dt, 3, kd, k), tv = tensor(dt, 3, vd, v),
               to = tensor(dt, 3, od, o), tmx = tensor(SPA_FLOAT32, 3, sd, mx),
               tsm = tensor(SPA_FLOAT32, 3, sd, sm), ti = tensor(SPA_INT32, 3, id, idx);
    uint64_t ws;
    spa_executor ex;
    if (spa_nsa_compress_attention_get_workspace_size(&tq, &tk, &tv, NULL, NULL, &aq, &ac, NULL, 0.088, N1,
                                                      "TND", 2, L, ST, LS, KC, &tmx, &tsm, &to, &ti, &ws,
                                                      &ex) != SPA_OK)
        exit(1);
    double pairs = 0, blind = 0; /* visible (query, key) pairs; queries that see no key */
    for (int s = 0; s < T; s++)
        if (s < L - 1)
            blind++;
        else
            pairs += (s - L + 1) / ST + 1 < C ? (s - L + 1) / ST + 1 : C;
    pairs *= N1;
    blind *= N1;
    if (!grad) {
        run(spa_nsa_compress_attention, ws, &ex, calls);
        return 2 * pairs * (D + DV) + 2 * blind * C * DV;
    }
    run(spa_nsa_compress_attention, ws, &ex, 1);
    void *dy = fill(dt, (size_t)T * N1 * DV, -1, 1), *dq = fill(dt, (size_t)T * N1 * D, 0, 0);
    void *dk = fill(dt, (size_t)C * N2 * D, 0, 0), *dvv = fill(dt, (size_t)C * N2 * DV, 0, 0);
    spa_tensor tdy = tensor(dt, 3, od, dy), tdq = tensor(dt, 3, qd, dq), tdk = tensor(dt, 3, kd, dk),
               tdv = tensor(dt, 3, vd, dvv);
    if (spa_nsa_compress_attention_grad_get_workspace_size(&tq, &tk, &tv, &to, &tdy, &tmx, &tsm, NULL, &aq,
                                                           &ac, 0.088, N1, "TND", 2, L, ST, &tdq, &tdk,
                                                           &tdv, &ws, &ex) != SPA_OK)
        exit(1);
    run(spa_nsa_compress_attention_grad, ws, &ex, calls);
    return 2 * pairs * (3 * D + 2 * DV) + 2 * blind * C * DV;
}

/* Sliding-window attention (docs/sliding_window_attention.md): one sequence
 * of T tokens, the query at t sees keys max(0, t - W + 1) .. t. FLOPs = the
 * products of the pairs in the band only (keys outside it are never
 * computed): QK^T (D) and PV (Dv) per pair in the forward; S = QK^T (D),
 * dP = dY V^T (Dv), dV = P^T dY (Dv), dQ = dS K (D), dK = dS^T Q (D) in the
 * grad. */
static double swa(spa_dtype dt, int grad, int calls)
{
    enum { T = 384, N1 = 8, N2 = 1, D = 128, DV = 128, W = 256 };
    const int64_t seq_vals[1] = {T};
    const spa_int_array seq = {seq_vals, 1};
    const int64_t qd[3] = {T, N1, D}, kd[3] = {T, N2, D}, vd[3] = {T, N2, DV}, od[3] = {T, N1, DV},
                  sd[3] = {T, N1, 8};
    void *q = fill(dt, (size_t)T * N1 * D, -1, 1), *k = fill(dt, (size_t)T * N2 * D, -1, 1);
    void *v = fill(dt, (size_t)T * N2 * DV, -1, 1), *o = fill(dt, (size_t)T * N1 * DV, 0, 0);
    float *mx = calloc((size_t)T * N1 * 8, 4), *sm = calloc((size_t)T * N1 * 8, 4);
    spa_tensor tq = tensor(dt, 3, qd, q), tk = tensor(dt, 3, kd, k), tv = tensor(dt, 3, vd, v),
               to = tensor(dt, 3, od, o), tmx = tensor(SPA_FLOAT32, 3, sd, mx),
               tsm = tensor(SPA_FLOAT32, 3, sd, sm);
    uint64_t ws;
    spa_executor ex;
    if (spa_swa_get_workspace_size(&tq, &tk, &tv, &seq, 0, SPA_SWA_SCALE_DEFAULT, N1, "TND", W,
                                   SPA_SWA_WINDOW_KEYS, &tmx, &tsm, &to, &ws, &ex) != SPA_OK)
        exit(1);
    double pairs = 0;
    for (int t = 0; t < T; t++)
        pairs += t + 1 < W ? t + 1 : W;
    pairs *= N1;
    if (!grad) {
        run(spa_swa, ws, &ex, calls);
        return 2 * pairs * (D + DV);
    }
    run(spa_swa, ws, &ex, 1);
    void *dy = fill(dt, (size_t)T * N1 * DV, -1, 1), *dq = fill(dt, (size_t)T * N1 * D, 0, 0);
    void *dk = fill(dt, (size_t)T * N2 * D, 0, 0), *dvv = fill(dt, (size_t)T * N2 * DV, 0, 0);
    spa_tensor tdy = tensor(dt, 3, od, dy), tdq = tensor(dt, 3, qd, dq), tdk = tensor(dt, 3, kd, dk),
               tdv = tensor(dt, 3, vd, dvv);
    if (spa_swa_grad_get_workspace_size(&tq, &tk, &tv, &to, &tdy, &tmx, &tsm, &seq, 0, SPA_SWA_SCALE_DEFAULT,
                                        N1, "TND", W, SPA_SWA_WINDOW_KEYS, &tdq, &tdk, &tdv, &ws,
                                        &ex) != SPA_OK)
        exit(1);
    run(spa_swa_grad, ws, &ex, calls);
    return 2 * pairs * (3 * D + 2 * DV);
}

static double msda(spa_dtype dt, int grad, int calls)
{
    enum { BS = 1, NH = 8, C = 32, NL = 4, NP = 4, NK = 1360, NQ = NK };
    static const int64_t hw[NL] = {32, 16, 8, 4};
    int64_t ss[NL * 2], lsi[NL], start = 0;
    for (int l = 0; l < NL; l++) {
        ss[2 * l] = ss[2 * l + 1] = hw[l];
        lsi[l] = start;
        start += hw[l] * hw[l];
    }
    const int64_t vd[4] = {BS, NK, NH, C}, ssd[2] = {NL, 2}, lsid[1] = {NL};
    const int64_t ld[6] = {BS, NQ, NH, NL, NP, 2}, ad[5] = {BS, NQ, NH, NL, NP}, od[3] = {BS, NQ, NH * C};
    const size_t nv = (size_t)BS * NK * NH * C, na = (size_t)BS * NQ * NH * NL * NP, no = (size_t)BS * NQ * NH * C;
    void *v = fill(dt, nv, -1, 1), *loc = fill(dt, 2 * na, 0, 1), *att = fill(dt, na, 0, 1);
    void *o = fill(dt, no, -1, 1);
    spa_tensor tv = tensor(dt, 4, vd, v), tss = tensor(SPA_INT64, 2, ssd, ss), tlsi = tensor(SPA_INT64, 1, lsid, lsi),
               tl = tensor(dt, 6, ld, loc), ta = tensor(dt, 5, ad, att), to = tensor(dt, 3, od, o);
    uint64_t ws;
    spa_executor ex;
    const double per_ch = (double)na * C;
    if (!grad) {
        if (spa_msda_get_workspace_size(&tv, &tss, &tlsi, &tl, &ta, &to, &ws, &ex) != SPA_OK)
            exit(1);
        run(spa_msda, ws, &ex, calls);
        /* per (sample, channel) four corners times a multiply-add: the
         * attention weight is folded into the corner weights once per
         * sample, not counted per channel */
        return 2 * 4 * per_ch;
    }
    void *gv = fill(dt, nv, 0, 0), *gl = fill(dt, 2 * na, 0, 0), *ga = fill(dt, na, 0, 0);
    spa_tensor tgv = tensor(dt, 4, vd, gv), tgl = tensor(dt, 6, ld, gl), tga = tensor(dt, 5, ad, ga);
    if (spa_msda_grad_get_workspace_size(&tv, &tss, &tlsi, &tl, &ta, &to, &tgv, &tgl, &tga, &ws, &ex) != SPA_OK)
        exit(1);
    run(spa_msda_grad, ws, &ex, calls);
    /* the same derivation (the attention weight folded into the per-sample
     * weights): per (sample, channel) 4 multiply-adds into gradValue (folded
     * corner weight times gradOutput), 4 for the unweighted sample (for
     * gradAttnWeight), 4 each for the x and y derivatives of the bilinear
     * sum (folded derivative weights), and 3 reductions against gradOutput
     * (attention weight, x, y): 19 multiply-adds, 38 FLOPs */
    return 2 * 19 * per_ch;
}

/* NsaSelectedAttentionInfer: decode steps, one query per batch of 4
 * sequences of 2048 rows in a contiguous cache, N1 16 / N2 1 (G 16), D = Dv =
 * 128, blockSize 64, K 16 blocks (the query's own and 15 before it). */
static double nsa_select_infer(spa_dtype dt, int calls)
{
    enum { B = 4, S = 2048, N1 = 16, N2 = 1, D = 128, DV = 128, BS = 64, KC = 16 };
    const int64_t len_vals[B] = {S, S, S, S};
    const spa_int_array len = {len_vals, B};
    const int64_t qd[3] = {B, N1, D}, kd[4] = {B, S, N2, D}, vd[4] = {B, S, N2, DV}, id[3] = {B, N2, KC},
                  od[3] = {B, N1, DV};
    int32_t *idx = malloc(sizeof(int32_t) * B * N2 * KC);
    for (int i = 0; i < B * N2; i++)
        for (int k = 0; k < KC; k++)
            idx[i * KC + k] = (int32_t)(S / BS - 1 - k);
    void *q = fill(dt, (size_t)B * N1 * D, -1, 1), *k = fill(dt, (size_t)B * S * N2 * D, -1, 1);
    void *v = fill(dt, (size_t)B * S * N2 * DV, -1, 1), *o = fill(dt, (size_t)B * N1 * DV, 0, 0);
    spa_tensor tq = tensor(dt, 3, qd, q), tk = tensor(dt, 4, kd, k), tv = tensor(dt, 4, vd, v),
               ti = tensor(SPA_INT32, 3, id, idx), to = tensor(dt, 3, od, o);
    uint64_t ws;
    spa_executor ex;
    if (spa_nsa_select_infer_get_workspace_size(&tq, &tk, &tv, &ti, NULL, NULL, &len, 0.088, BS, &to, &ws,
                                                &ex) != SPA_OK) {
        fprintf(stderr, "insn: nsa_select_infer refused\n");
        exit(1);
    }
    run(spa_nsa_select_infer, ws, &ex, calls);
    free(q), free(k), free(v), free(o), free(idx);
    /* Q Kᵀ and P V over the K * bs keys of each query head */
    return 2.0 * B * N1 * (double)KC * BS * (D + DV);
}

/* NsaCompressAttentionInfer: decode steps, one query per batch of 4
 * sequences of 16384 tokens, their 1023 compressed keys (l 32, stride d 16)
 * in a contiguous cache, N1 16 / N2 1 (G 16), D = Dv = 128, selection blocks
 * l' 64, K 16, causal: two parts of keys per sequence (the split passes). */
static double nsa_compress_attention_infer(spa_dtype dt, int calls)
{
    enum { B = 4, L = 16384, CL = 32, ST = 16, C = (L - CL) / ST + 1, N1 = 16, N2 = 1, D = 128, DV = 128, LS = 64,
           KC = 16 };
    const int64_t cmp_vals[B] = {C, C, C, C}, len_vals[B] = {L, L, L, L};
    const spa_int_array cmp = {cmp_vals, B}, len = {len_vals, B};
    const int64_t qd[3] = {B, N1, D}, kd[4] = {B, C, N2, D}, vd[4] = {B, C, N2, DV}, od[3] = {B, N1, DV},
                  id[3] = {B, N2, KC};
    void *q = fill(dt, (size_t)B * N1 * D, -1, 1), *k = fill(dt, (size_t)B * C * N2 * D, -1, 1);
    void *v = fill(dt, (size_t)B * C * N2 * DV, -1, 1), *o = fill(dt, (size_t)B * N1 * DV, 0, 0);
    int32_t *idx = malloc(sizeof(int32_t) * B * N2 * KC);
    spa_tensor tq = tensor(dt, 3, qd, q), tk = tensor(dt, 4, kd, k), tv = tensor(dt, 4, vd, v),
               to = tensor(dt, 3, od, o), ti = tensor(SPA_INT32, 3, id, idx);
    uint64_t ws;
    spa_executor ex;
    if (spa_nsa_compress_attention_infer_get_workspace_size(&tq, &tk, &tv, NULL, NULL, &cmp, &len, 0.088, 1, CL, ST,
                                                            LS, KC, &to, &ti, &ws, &ex) != SPA_OK) {
        fprintf(stderr, "insn: nsa_compress_attention_infer refused\n");
        exit(1);
    }
    run(spa_nsa_compress_attention_infer, ws, &ex, calls);
    free(q), free(k), free(v), free(o), free(idx);
    /* Q Kᵀ and P V over the C keys of each query head */
    return 2.0 * B * N1 * (double)C * (D + DV);
}

/* The DSA lightning indexer: a decode step of DeepSeek's indexer (64 heads
 * of D 128 on one key head, f32 weights) against 2048 keys (1024 on the
 * boards), top 512, a contiguous key. */
static double dsa_lightning_indexer(spa_dtype dt, int calls)
{
#if defined(SPA_TEST_SMALL)
    enum { L = 1024 };
#else
    enum { L = 2048 };
#endif
    enum { N1 = 64, D = 128, KC = 512 };
    const int64_t qd[3] = {1, N1, D}, kd[4] = {1, L, 1, D}, wd[2] = {1, N1}, id[3] = {1, 1, KC};
    void *q = fill(dt, (size_t)N1 * D, -1, 1), *k = fill(dt, (size_t)L * D, -1, 1);
    void *w = fill(SPA_FLOAT32, (size_t)N1, -1, 1);
    int32_t *idx = malloc(sizeof(int32_t) * KC);
    spa_tensor tq = tensor(dt, 3, qd, q), tk = tensor(dt, 4, kd, k), tw = tensor(SPA_FLOAT32, 2, wd, w),
               ti = tensor(SPA_INT32, 3, id, idx);
    uint64_t ws;
    spa_executor ex;
    if (spa_dsa_lightning_indexer_get_workspace_size(&tq, &tk, &tw, NULL, NULL, NULL, KC, 3, &ti, NULL, &ws, &ex) !=
        SPA_OK) {
        fprintf(stderr, "insn: dsa_lightning_indexer refused\n");
        exit(1);
    }
    run(spa_dsa_lightning_indexer, ws, &ex, calls);
    free(q), free(k), free(w), free(idx);
    /* Q Kᵀ over the L keys of each query head */
    return 2.0 * N1 * (double)L * D;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: spattn_insn <op> <f32|f16|bf16> <calls>\n");
        return 2;
    }
    const char *op = argv[1], *dn = argv[2];
    const int calls = atoi(argv[3]);
    const spa_dtype dt = strcmp(dn, "f16") == 0 ? SPA_FLOAT16 : strcmp(dn, "bf16") == 0 ? SPA_BFLOAT16 : SPA_FLOAT32;
    double flops;
    if (strcmp(op, "nsa_select") == 0 || strcmp(op, "nsa_select_grad") == 0)
        flops = nsa_select(dt, op[10] != '\0', calls);
    else if (strcmp(op, "nsa_compress") == 0 || strcmp(op, "nsa_compress_grad") == 0)
        flops = nsa_compress(dt, op[12] != '\0', calls);
    else if (strcmp(op, "nsa_compress_attention") == 0 || strcmp(op, "nsa_compress_attention_grad") == 0)
        flops = nsa_compress_attention(dt, op[22] != '\0', calls);
    else if (strcmp(op, "swa") == 0 || strcmp(op, "swa_grad") == 0)
        flops = swa(dt, op[3] != '\0', calls);
    else if (strcmp(op, "nsa_select_infer") == 0)
        flops = nsa_select_infer(dt, calls);
    else if (strcmp(op, "nsa_compress_attention_infer") == 0)
        flops = nsa_compress_attention_infer(dt, calls);
    else if (strcmp(op, "dsa_lightning_indexer") == 0)
        flops = dsa_lightning_indexer(dt, calls);
    else if (strcmp(op, "msda") == 0 || strcmp(op, "msda_grad") == 0)
        flops = msda(dt, op[4] != '\0', calls);
    else {
        fprintf(stderr, "insn: unknown op %s\n", op);
        return 2;
    }
    printf("case op=%s dtype=%s shape=insn flops=%.0f\n", op, dn, flops);
    return 0;
}
