/* Hostile memory: what a call must survive when the caller's memory is laid
 * out or changed adversarially. Each class runs through the hostile-input
 * engine (fz_engine.h) on every operator, from inputs written for the class:
 *
 * - every index tensor and sequence array laid over every output (phase 2
 *   reads only its checked copies: stays in bounds, returns);
 * - the workspace laid over every tensor and array of the call (refused
 *   with 161002, nothing written);
 * - every executor byte outside the argument descriptors edited (three
 *   ways) and the executor sealed again (phase 2 runs only from values it
 *   derives again: stays in bounds, returns);
 * - NaN, Inf and huge inputs on whichever path this build runs.
 *
 * A finding aborts the test program with its description. A watchdog turns a
 * hang into a failure where the target has alarm(). */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <string.h>

#include "fz_engine.h"
#include "util.h"
#include "watchdog.h"

static const fz_op *const ops[] = {&fz_op_nsa_compress, &fz_op_nsa_compress_grad,
                                   &fz_op_nsa_select,   &fz_op_nsa_select_grad,
                                   &fz_op_msda,         &fz_op_msda_grad,
                                   &fz_op_nsa_compress_attention,
                                   &fz_op_nsa_compress_attention_grad,
                                   &fz_op_swa,          &fz_op_swa_grad,
                                   &fz_op_nsa_select_infer, &fz_op_nsa_compress_cache,
                                   &fz_op_nsa_cattn_infer, &fz_op_dsa_lightning_indexer,
                                   &fz_op_dsa_sparse_attention, &fz_op_dsa_sparse_attention_grad,
                                   &fz_op_dsa_lightning_indexer_grad};
#define N_OPS (int)(sizeof ops / sizeof ops[0])

/* The baseline's data seed and flags, then one hostile mutation. */
static int run_one(const fz_op *op, uint8_t b2, uint8_t t, uint8_t u, uint8_t off16)
{
    const uint8_t in[] = {7, 0, 15, t, b2, u, off16};
    watchdog_arm(60);
    const int r = fz_run(op, in, sizeof in);
    watchdog_disarm();
    return r;
}

static void test_index_over_outputs(void)
{
    for (int o = 0; o < N_OPS; o++) {
        const fz_op *op = ops[o];
        for (int u = 0; u < op->ntensors; u++) {
            if (op->tensors[u].role != FZ_OUT)
                continue;
            for (int t = 0; t < op->ntensors; t++)
                if (op->tensors[t].role == FZ_INDEX)
                    for (uint8_t off = 0; off < 3; off++)
                        CU_ASSERT_EQUAL(run_one(op, 0x80, (uint8_t)t, (uint8_t)u, off), 0);
            for (int a = 0; a < op->narrays; a++)
                for (uint8_t off = 0; off < 3; off++)
                    CU_ASSERT_EQUAL(run_one(op, 0x81, (uint8_t)a, (uint8_t)u, off), 0);
        }
    }
}

/* Outputs over inputs and over each other, inputs over outputs: results are
 * meaningless, memory safety is not. */
static void test_tensor_over_tensor(void)
{
    for (int o = 0; o < N_OPS; o++) {
        const fz_op *op = ops[o];
        for (int t = 0; t < op->ntensors; t++)
            for (int u = 0; u < op->ntensors; u++)
                if (t != u && (op->tensors[t].role == FZ_OUT || op->tensors[u].role == FZ_OUT))
                    CU_ASSERT_EQUAL(run_one(op, 0x80, (uint8_t)t, (uint8_t)u, 0), 0);
    }
}

static void test_workspace_over_call(void)
{
    for (int o = 0; o < N_OPS; o++) {
        const fz_op *op = ops[o];
        for (int k = 0; k < op->ntensors + op->narrays; k++)
            for (uint8_t off = 0; off < 2; off++)
                CU_ASSERT_EQUAL(run_one(op, 0x83, 0, (uint8_t)k, off), 0);
    }
}

/* Every byte of the executor's record, in inputs of 64 edits each, each
 * byte flipped three ways; in the thin case set (the emulated and valgrind
 * runs, whose drivers are the same C the quick and full runs edit three
 * ways) one way, turning with the op and the run of 64 bytes, so that all
 * three still occur. */
static void test_edited_executors(void)
{
    static const uint8_t flips[] = {0x01, 0x80, 0xFF};
    for (int o = 0; o < N_OPS; o++) {
        const fz_op *op = ops[o];
        const uint8_t base[] = {7, 0};
        fz_report rep;
        CU_ASSERT_EQUAL_FATAL(fz_run_report(op, base, sizeof base, &rep), 0);
        CU_ASSERT_EQUAL_FATAL(rep.phase1, SPA_OK);
        CU_ASSERT_FATAL(rep.exec_bytes > 0 && rep.exec_bytes <= SPA_EXECUTOR_BYTES);
        for (size_t f = 0; f < sizeof flips; f++)
            for (uint32_t first = 0; first < rep.exec_bytes; first += 64) {
                if (test_thin && f != ((size_t)o + first / 64) % sizeof flips)
                    continue;
                uint8_t in[2 + 64 * 6];
                size_t n = 0;
                in[n++] = 7;
                in[n++] = 0;
                for (uint32_t off = first; off < first + 64 && off < rep.exec_bytes; off++) {
                    const uint8_t edit[] = {15, 0, 0x82, (uint8_t)off, (uint8_t)(off >> 8), flips[f]};
                    memcpy(in + n, edit, sizeof edit);
                    n += sizeof edit;
                }
                watchdog_arm(60);
                CU_ASSERT_EQUAL(fz_run(op, in, n), 0);
                watchdog_disarm();
            }
    }
}

/* 1 in 2 float inputs NaN, Inf or huge, several data seeds. */
static void test_nonfinite_inputs(void)
{
    for (int o = 0; o < N_OPS; o++)
        for (uint8_t seed = 0; seed < 4; seed++) {
            const uint8_t in[] = {seed, 0x81};
            CU_ASSERT_EQUAL(fz_run(ops[o], in, sizeof in), 0);
        }
}

void suite_hostile(void)
{
    CU_pSuite s = CU_add_suite("hostile", NULL, NULL);
    CU_add_test(s, "index and length arrays over every output", test_index_over_outputs);
    CU_add_test(s, "outputs over inputs and each other", test_tensor_over_tensor);
    CU_add_test(s, "workspace over every tensor and array", test_workspace_over_call);
    CU_add_test(s, "executors edited byte by byte and sealed again", test_edited_executors);
    CU_add_test(s, "NaN, Inf and huge inputs", test_nonfinite_inputs);
}
