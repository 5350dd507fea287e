/* How much a tile of neighbouring query tokens could share the blocks they
 * select (the reuse a query-tiled selected attention would turn gathers
 * into): for tiles of 2, 4, 8 and 16 consecutive tokens of one batch and
 * one kv head, the distinct blocks of their union against the valid slots
 * they hold (not -1). A ratio r means such a tile gathers r of the rows the
 * per-token kernel gathers; 1 means no block is shared. */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

/* The union ratio for tiles of q tokens; stamp: one int per block, zeroed,
 * left stamped (the caller's generation counter *gen moves past it). */
static double union_ratio(const int32_t *idx, int64_t n2, int64_t kc, const int64_t *lens, int64_t nb, int64_t q,
                          int64_t blocks, int64_t *stamp, int64_t *gen)
{
    double slots = 0, distinct = 0;
    int64_t t0 = 0;
    for (int64_t b = 0; b < nb; b++) {
        for (int64_t s = 0; s < lens[b]; s += q) {
            const int64_t e = s + q < lens[b] ? s + q : lens[b];
            for (int64_t h = 0; h < n2; h++) {
                const int64_t g = ++*gen;
                for (int64_t t = t0 + s; t < t0 + e; t++)
                    for (int64_t i = 0; i < kc; i++) {
                        const int32_t blk = idx[(t * n2 + h) * kc + i];
                        if (blk < 0 || blk >= blocks)
                            continue;
                        slots += 1;
                        if (stamp[blk] != g) {
                            stamp[blk] = g;
                            distinct += 1;
                        }
                    }
            }
        }
        t0 += lens[b];
    }
    return slots > 0 ? distinct / slots : 1.0;
}

void bench_block_overlap(const char *what, const int32_t *idx, int64_t n2, int64_t kc, const int64_t *lens,
                         int64_t nb, int64_t blocks)
{
    int64_t *stamp = calloc((size_t)blocks, sizeof *stamp), gen = 0;
    if (stamp == NULL)
        return;
    static const int64_t tiles[4] = {2, 4, 8, 16};
    printf("#   block overlap of %s: distinct blocks / selected slots, tiles of", what);
    for (int k = 0; k < 4; k++)
        printf(" %lld tokens %.2f%s", (long long)tiles[k],
               union_ratio(idx, n2, kc, lens, nb, tiles[k], blocks, stamp, &gen), k < 3 ? "," : "\n");
    free(stamp);
}
