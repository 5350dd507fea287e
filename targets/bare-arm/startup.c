/* Vector table and reset handler for the Cortex-M test images under QEMU
 * (mps2-an500, mps3-an547). Reset enables the FPU, then hands over to newlib's
 * semihosting crt0 (rdimon), which sets up stack and heap and calls main. Any
 * fault ends the run through semihosting SYS_EXIT, so QEMU exits 1, not hangs. */
extern void _start(void);
extern char __stack_top[];

static void reset_handler(void)
{
#if defined(__ARM_FP) || defined(__ARM_FEATURE_MVE)
    *(volatile unsigned *)0xE000ED88 |= (0xFu << 20); /* CPACR: CP10/CP11 full access */
    __asm volatile("dsb\n isb");
#endif
    _start();
    for (;;) {
    }
}

/* SYS_EXIT (0x18) with ADP_Stopped_RunTimeError (0x20023). */
static void fault_handler(void)
{
    register unsigned r0 __asm("r0") = 0x18u, r1 __asm("r1") = 0x20023u;
    __asm volatile("bkpt 0xab" : : "r"(r0), "r"(r1) : "memory");
    for (;;) {
    }
}

typedef void (*spa_vector)(void);
__attribute__((section(".vectors"), used)) const spa_vector spa_vector_table[16] = {
    (spa_vector)__stack_top, reset_handler, fault_handler, fault_handler, fault_handler,
    fault_handler, fault_handler, 0, 0, 0, 0, fault_handler, fault_handler, 0, fault_handler,
    fault_handler,
};

/* The heap of the test images: the linker script's [__heap_start, __heap_end)
 * (rdimon's own _sbrk, a weak symbol, takes whatever QEMU's SYS_HEAPINFO says,
 * which on mps3-an547 is what is left of the 512 KiB ITCM). */
#include <errno.h>
#include <stddef.h>
extern char __heap_start[], __heap_end[];
void *_sbrk(ptrdiff_t incr);
void *_sbrk(ptrdiff_t incr)
{
    static char *brk = __heap_start;
    if (incr < 0 ? brk + incr < __heap_start : __heap_end - brk < incr) {
        /* A test image that runs out of heap has shapes too big for the
         * board; say so and stop (an unchecked NULL would write over the
         * vector table at address 0 and lock the core up). */
        static const char msg[] = "\n*** out of heap: scale this test down (TEST_SIZE / TEST_CAP)\n";
        register unsigned r0 __asm("r0") = 0x04u; /* SYS_WRITE0 */
        register const char *r1 __asm("r1") = msg;
        __asm volatile("bkpt 0xab" : : "r"(r0), "r"(r1) : "memory");
        fault_handler();
        errno = ENOMEM;
        return (void *)-1;
    }
    char *old = brk;
    brk += incr;
    return old;
}
