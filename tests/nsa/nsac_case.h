/* Random NsaCompress / NsaCompressGrad problems shared by their two suites. */
#ifndef SPA_TEST_NSAC_CASE_H
#define SPA_TEST_NSAC_CASE_H

#include "ref/ref.h"
#include "util.h"

#define NSAC_MAX_BATCHES (SPA_TEST_SMALL ? 48 : 400) /* array bound: compile time */

typedef struct nsac_case {
    spa_dtype dt;
    int64_t n, d, bs, st, seq_type;
    int64_t batches;
    int64_t start[NSAC_MAX_BATCHES], len[NSAC_MAX_BATCHES];
    int64_t seq_vals[NSAC_MAX_BATCHES]; /* what the API gets (cumulative or lengths) */
    spa_int_array seq;
    int64_t tokens, windows;
    bool strided;
} nsac_case;

/* Case number i of a sweep: every D from 16 to 256 comes round every 16
 * cases, dtypes every 3; the rest is drawn from r (bs, st <= bs, heads,
 * batch lengths including empty and shorter-than-window ones, seq type,
 * strided views). One case in 4 draws bs, st and D off the NPU's grid. */
void nsac_case_draw(nsac_case *c, int i, rng *r);
/* Case i of the shapes only the native API takes (any D >= 1, any
 * block >= stride >= 1): a fixed list of head dims and block / stride
 * pairs, each dtype, lengths drawn from r (not multiples of anything). */
#define NSAC_ANY_CASES 24
void nsac_case_any(nsac_case *c, int i, rng *r);
/* Whether the shape keeps the NPU's limits (the aclnn layer's contract:
 * D 16..256 step 16, N <= 128, bs and st multiples of 16, bs <= 128). */
bool nsac_case_on_npu_grid(const nsac_case *c);
/* A fixed shape (for validation and determinism tests). */
void nsac_case_fixed(nsac_case *c, spa_dtype dt, int64_t n, int64_t d, int64_t bs, int64_t st,
                     int64_t batches, const int64_t *lens, int64_t seq_type);
ref_batches nsac_case_batches(const nsac_case *c);
void nsac_case_describe(const nsac_case *c, char *buf, size_t size);

#endif
