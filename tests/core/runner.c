/* CUnit main: registers every suite of the test_*.c files under tests/ (the list is generated
 * from the file names) and turns failures into the exit status. An optional
 * argument runs only the suites whose name contains it. */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <string.h>

#include "util.h"

#define SPA_SUITE(name) void suite_##name(void);
#include "suites.inc"
#undef SPA_SUITE

int main(int argc, char **argv)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
#define SPA_SUITE(name) \
    if (argc < 2 || strstr(#name, argv[1])) \
        suite_##name();
#include "suites.inc"
#undef SPA_SUITE
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
    unsigned ran = CU_get_number_of_tests_run();
    CU_cleanup_registry();
    test_runners_stop();
    if (ran == 0) {
        fprintf(stderr, "no test ran\n");
        return 1;
    }
    return failed ? 1 : 0;
}
