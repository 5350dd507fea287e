/* CUnit main: registers every suite of the test_*.c files under tests/ (the list is generated
 * from the file names) and turns failures into the exit status.
 *   spattn_tests [FILTER] [--cases=full|quick|thin] [--shard=K/N]
 * FILTER runs only the suites whose name contains it. --cases=quick runs the quick case set
 * (util.h: fewer random cases, shorter sequences) for the runs that pay 10-50x per operation. --shard=K/N (1 <= K <= N) runs the K-th
 * of N interleaved parts of the tests (test i of the registry, counted across suites, belongs to
 * part i mod N + 1), so that N programs started at once cover every test once between them and
 * keep N cores busy: `make test` starts TEST_SHARDS of them (emulators and valgrind are
 * single-threaded). A test is the unit: no test depends on another having run. */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define SPA_SUITE(name) void suite_##name(void);
#include "suites.inc"
#undef SPA_SUITE

/* "--shard=K/N" -> k (0-based), n; false when malformed. */
static bool parse_shard(const char *arg, unsigned *k, unsigned *n)
{
    const char *p = arg + strlen("--shard=");
    char *end;
    unsigned long kk = strtoul(p, &end, 10);
    if (end == p || *end != '/')
        return false;
    const char *q = end + 1;
    unsigned long nn = strtoul(q, &end, 10);
    if (end == q || *end != '\0' || nn == 0 || nn > 64 || kk == 0 || kk > nn)
        return false;
    *k = (unsigned)(kk - 1);
    *n = (unsigned)nn;
    return true;
}

/* Leaves active only the tests of part k of n. */
static void keep_shard(unsigned k, unsigned n)
{
    unsigned i = 0;
    for (CU_pSuite s = CU_get_registry()->pSuite; s; s = s->pNext)
        for (CU_pTest t = s->pTest; t; t = t->pNext, i++)
            if (i % n != k)
                CU_set_test_active(t, CU_FALSE);
}

int main(int argc, char **argv)
{
    const char *filter = NULL;
    unsigned shard = 0, shards = 1;
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "--shard=", 8) == 0) {
            if (!parse_shard(argv[i], &shard, &shards)) {
                fprintf(stderr, "spattn_tests: %s: expected --shard=K/N with 1 <= K <= N <= 64\n",
                        argv[i]);
                return 2;
            }
        } else if (strcmp(argv[i], "--cases=quick") == 0) {
            test_quick = true;
        } else if (strcmp(argv[i], "--cases=thin") == 0) {
            test_quick = test_thin = true;
        } else if (strcmp(argv[i], "--cases=full") == 0) {
            test_quick = false;
        } else if (strncmp(argv[i], "--", 2) == 0) {
            fprintf(stderr, "spattn_tests: unknown option %s\n", argv[i]);
            return 2;
        } else {
            filter = argv[i];
        }
    }
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
#define SPA_SUITE(name) \
    if (!filter || strstr(#name, filter)) \
        suite_##name();
#include "suites.inc"
#undef SPA_SUITE
    if (shards > 1) {
        keep_shard(shard, shards);
        CU_set_fail_on_inactive(CU_FALSE); /* the other parts' tests */
    }
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
    unsigned ran = CU_get_number_of_tests_run();
    CU_cleanup_registry();
    test_runners_stop();
    if (ran == 0 && shards == 1) {
        fprintf(stderr, "no test ran\n");
        return 1;
    }
    return failed ? 1 : 0;
}
