/* A hang becomes a failure: watchdog_arm(s) ends the test program (SIGALRM)
 * unless watchdog_disarm() comes first. A no-op on targets without alarm()
 * (bare metal), where the runner's own time limit stands in. */
#ifndef SPA_TEST_WATCHDOG_H
#define SPA_TEST_WATCHDOG_H

#if defined(SPA_TEST_NO_THREADS)
static inline void watchdog_arm(unsigned seconds)
{
    (void)seconds;
}
static inline void watchdog_disarm(void)
{
}
#else
#include <unistd.h>
static inline void watchdog_arm(unsigned seconds)
{
    alarm(seconds);
}
static inline void watchdog_disarm(void)
{
    alarm(0);
}
#endif

#endif
