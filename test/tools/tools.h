/*
 * tools — the test tools' clock (the pop log is poplog.h).
 */
#ifndef IDPOOL_TOOLS_H
#define IDPOOL_TOOLS_H

#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC in ns: system-wide, so comparable across processes. */
static inline uint64_t tools_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif
