/* The hostile-input engine: libFuzzer drives it from the harnesses
 * fuzz/fuzz_<op>.c, and the test suite (tests/core/test_hostile.c) from inputs
 * written for each class of hostile call.
 *
 * A harness describes one op by a small VALID call (its baseline: tensors,
 * sequence arrays, integer and double attributes, index-tensor contents) and
 * two thunks calling phase 1 and phase 2. The fuzz input is a list of
 * mutations of that baseline: any dim, rank, dtype or stride of any tensor
 * (huge, negative, overflowing values included), NULL tensors or data,
 * sequence-array values and sizes, attributes, the layout string,
 * index-tensor contents, and every occurrence of one shape value at once (so
 * bigger or smaller consistent shapes are reached too). The empty input is
 * the baseline itself.
 *
 * Each run checks: phase 1 either refuses (and then wrote neither the
 * workspace size nor the executor, and no output byte) or accepts; when it
 * accepts a shape small enough to materialise, phase 2 runs on random data
 * with NaN and Inf mixed in, the index contents as given, a misaligned
 * workspace, and must succeed, leave every red zone and every input intact,
 * and give bit-identical outputs when run again with the tasks in reverse
 * order. Any violation aborts (a finding).
 *
 * Hostile memory (mutation kind 15 with an operand from 0x80): views laid
 * over other tensors' memory (an index tensor or a sequence array over an
 * output, an output over an input, ...): phase 2 may then succeed or refuse,
 * but stays inside every buffer; the workspace laid over a tensor or array
 * of the call: phase 2 must refuse with 161002 and write nothing; executor
 * bytes edited after phase 1 and the executor sealed again (all but the
 * copies of the tensor and array descriptors, which are the call's
 * arguments): phase 2 answers anything but stays inside every buffer and
 * returns.
 *
 * Input encoding (for hand-written seeds, fuzz/corpus/<op>/): byte 0 seeds
 * the data; byte 1 has flags (0x80: 1 in 1 + (b & 15) float inputs is NaN,
 * Inf or huge; bits 4..6: workspace misalignment in 9-byte steps); then
 * mutations, each a kind byte (mod 16), a tensor byte (mod the tensor count)
 * and the kind's operands (fz_engine.c, decode()). Kind 15: operand below
 * 0x80 reseeds; 0x80 + 4i: tensor over tensor (u, offset/16); 0x81: array
 * over tensor (u, offset/16); 0x82: executor edit (offset lo, hi, xor);
 * 0x83: workspace over tensor or array (target, offset/16). A value operand is one byte:
 * below the edge-value table's size an entry of it, up to 0xEF a small
 * number, from 0xF0 eight raw big-endian bytes. */
#ifndef SPA_FZ_ENGINE_H
#define SPA_FZ_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spattn/spattn.h"

#define FZ_MAX_TENSORS 16
#define FZ_MAX_ARRAYS 3
#define FZ_MAX_SEQ 16
#define FZ_MAX_ATTRS 8

typedef enum fz_role { FZ_IN, FZ_OUT, FZ_INDEX } fz_role;

typedef struct fz_tensor_spec {
    const char *name;
    int32_t dtype;
    int32_t rank;
    int64_t dims[SPA_MAX_RANK];
    fz_role role;
    bool optional;            /* NULL in the baseline (e.g. the attention mask) */
    const int64_t *index_vals; /* FZ_INDEX: contents, cycled over the elements */
    int64_t index_count;
} fz_tensor_spec;

typedef struct fz_array_spec {
    int64_t vals[FZ_MAX_SEQ];
    uint64_t size;
} fz_array_spec;

/* One call's arguments after mutation; the thunks read them. */
typedef struct fz_call {
    spa_tensor t[FZ_MAX_TENSORS];
    bool present[FZ_MAX_TENSORS];
    spa_int_array a[FZ_MAX_ARRAYS];
    bool array_present[FZ_MAX_ARRAYS];
    int64_t a_vals[FZ_MAX_ARRAYS][FZ_MAX_SEQ];
    int64_t attr[FZ_MAX_ATTRS];
    double dattr;
    const char *layout;
    bool null_ws_size, null_executor;
} fz_call;

typedef struct fz_op {
    const char *name;
    int ntensors;
    const fz_tensor_spec *tensors;
    int narrays;
    const fz_array_spec *arrays;
    int nattrs;
    const int64_t *attrs;
    double dattr;
    const char *layout;
    spa_status (*phase1)(const fz_call *c, uint64_t *ws_size, spa_executor *ex);
    spa_status (*phase2)(void *ws, uint64_t ws_size, const spa_executor *ex, const spa_runner *r);
    /* Optional: the multiply-adds phase 2 would do. Attention over every
     * key is quadratic in the token count, so inputs within the byte caps
     * can still ask for minutes of work: those stop after phase 1. */
    double (*work)(const fz_call *c);
} fz_op;

/* Argument helpers for the thunks: NULL where the input removed it. */
#define FZ_T(c, k) ((c)->present[k] ? &(c)->t[k] : NULL)
#define FZ_A(c, k) ((c)->array_present[k] ? &(c)->a[k] : NULL)
#define FZ_WS(c, p) ((c)->null_ws_size ? NULL : (p))
#define FZ_EX(c, p) ((c)->null_executor ? NULL : (p))

int fz_run(const fz_op *op, const uint8_t *data, size_t size);
/* fz_run, saying what phase 1 answered and the size of the executor's
 * internal record (what the executor edits of the input walk over). */
typedef struct fz_report {
    spa_status phase1;
    uint32_t exec_bytes;
} fz_report;
int fz_run_report(const fz_op *op, const uint8_t *data, size_t size, fz_report *rep);

/* The operators (tests/core/fz_ops.c). */
extern const fz_op fz_op_nsa_compress, fz_op_nsa_compress_grad, fz_op_nsa_select,
    fz_op_nsa_select_grad, fz_op_msda, fz_op_msda_grad;
extern const fz_op fz_op_nsa_compress_attention, fz_op_nsa_compress_attention_grad;
extern const fz_op fz_op_swa, fz_op_swa_grad;
extern const fz_op fz_op_nsa_select_infer, fz_op_nsa_compress_cache, fz_op_nsa_cattn_infer;
extern const fz_op fz_op_dsa_lightning_indexer, fz_op_dsa_sparse_attention, fz_op_dsa_sparse_attention_grad,
    fz_op_dsa_lightning_indexer_grad;

#endif
