/* clock — monotonic milliseconds (and microseconds), for timeouts, rates and durations. */
#ifndef IDPOOL_CLOCK_H
#define IDPOOL_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t clock_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static inline uint64_t clock_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

#endif
