#include "cadence.h"

enum cadence_check cadence_check(const struct cadence_pool *p)
{
    if (p->waiting)
        return CADENCE_NONE; /* in line for a refill slot */
    if (p->epoch_due && p->sweeping)
        return CADENCE_NONE; /* the sweep's idpool_epoch for this pool is on its way (or it has
                                none) */
    if (p->dead || !p->idle || (p->now < p->due_ms && !p->epoch_due))
        return CADENCE_NONE;
    if (p->epoch_due)
        return CADENCE_EPOCH;
    if (p->now >= p->status_due_ms || !p->live)
        return CADENCE_STATUS;
    return CADENCE_LLEN;
}

int cadence_busy(int len_known, uint64_t seen_len, uint64_t len, double rate)
{
    return !len_known || len != seen_len || rate >= 1.0;
}

uint64_t cadence_next_check(uint64_t check_ms, uint64_t interval_ms, int busy)
{
    uint64_t idle = CADENCE_IDLE_CHECK_MS > interval_ms ? CADENCE_IDLE_CHECK_MS : interval_ms;

    return check_ms + (busy ? interval_ms : idle);
}

uint64_t cadence_next_status(uint64_t check_ms, uint64_t interval_ms, int alerting, int busy)
{
    return check_ms + (alerting ? interval_ms : busy ? CADENCE_STATUS_MS : CADENCE_IDLE_STATUS_MS);
}
