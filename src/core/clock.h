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

/* A CLOCK_MONOTONIC time `ms` from now: a deadline for pthread_cond_timedwait (condattr set). */
static inline struct timespec clock_deadline_in(uint64_t ms)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += (time_t)(ms / 1000);
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

static inline uint64_t clock_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

#endif
