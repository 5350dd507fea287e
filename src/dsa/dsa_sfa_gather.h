/* How a unit of DSA sparse attention (one query token and key head, forward
 * or grad) gathers the tokens its slots select and it sees into rows that
 * selected attention's kernels read as virtual blocks of 16 rows
 * (spa_nsas_args.gathered): row n is the n-th such token's key with its
 * rope part after it ([D | Dr], widened, zero-padded to dp), and its value
 * (none when value is in key); the rows past the count up to a whole
 * virtual block are zeros. */
#ifndef SPA_DSA_SFA_GATHER_H
#define SPA_DSA_SFA_GATHER_H

#include <stdint.h>

#include "dsa_sfa_args.h"

enum { SPA_DSA_SFA_VB = 16 }; /* rows per virtual block */

/* The unit: its token, key head, batch, how many of the batch's tokens it
 * sees, and (TND) the batch's first key row; all trusted. */
typedef struct spa_dsa_sfa_unit {
    int64_t t, n, b, seen, kstart;
} spa_dsa_sfa_unit;

/* Where the rows go: key rows [vb * 16][dp], value rows [vb * 16][dvp]
 * (unused when value is in key), the virtual slots [vb] (0, 1, ..., then
 * -1) and, where non-NULL, each row's token [vb * 16]. */
typedef struct spa_dsa_sfa_dest {
    unsigned char *kg, *vg;
    int32_t *slots;
    int64_t *pos;
    int64_t vb;
} spa_dsa_sfa_dest;

/* The kernels' element bytes: 8 (double) for FLOAT64, else 4 (float). */
static inline uint64_t spa_dsa_sfa_elem_bytes(const spa_dsa_sfa_shape *sh)
{
    return sh->dtype == SPA_FLOAT64 ? 8u : 4u;
}

/* Virtual blocks for n slots' tokens. */
static inline int64_t spa_dsa_sfa_vblocks(const spa_dsa_sfa_shape *sh, int64_t n)
{
    return (n * sh->sbs + SPA_DSA_SFA_VB - 1) / SPA_DSA_SFA_VB;
}

/* Slots j0 .. j1 - 1 of unit x gathered into d (d->vb >= their virtual
 * blocks); returns the count of rows. Each index and page number is read
 * once and used only if that read is still valid (an array rewritten
 * during the call loses those tokens, never reads outside the cache). */
int64_t spa_dsa_sfa_gather(const spa_dsa_sfa_in *in, const spa_dsa_sfa_shape *sh, const spa_dsa_sfa_unit *x,
                           int64_t j0, int64_t j1, const spa_dsa_sfa_dest *d);

#endif
