/* The stack painting's report (make stackpaint, tools/stack_paint.sh): at
 * exit, the deepest stack each public phase function used in the run, one
 * line each, for the Makefile to compare with the static bounds. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

extern const char *const spa_paint_names[];
extern const unsigned spa_paint_count;
extern uint32_t spa_paint_depth[];

static void paint_report(void)
{
    for (unsigned i = 0; i < spa_paint_count; i++)
        if (spa_paint_depth[i] > 0)
            printf("stackpaint: %s %lu\n", spa_paint_names[i], (unsigned long)spa_paint_depth[i]);
}

__attribute__((constructor)) static void paint_register(void)
{
    atexit(paint_report);
}
