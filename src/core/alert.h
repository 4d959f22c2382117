/*
 * alert — alert kinds and their hysteresis (brief §7). Pure logic: whether a
 * condition observed over time should fire or resolve an alert, and the JSON
 * event. Delivery (log, Redis pub/sub, webhook) is in alerts.c.
 *
 * An alert fires once when its condition has held for `fire_after_ms`, and
 * resolves once when the condition has been clear for `resolve_after_ms`:
 * a condition that flickers does not make the alert flap.
 */
#ifndef IDPOOL_ALERT_H
#define IDPOOL_ALERT_H

#include <stdint.h>

/* X-macro: every alert kind once; name as in the JSON, metrics and docs. */
#define ALERT_KINDS(X)                                                                             \
    X(UNDERFLOW, "underflow")                                                                      \
    X(LOW, "low")                                                                                  \
    X(STALLED, "stalled")                                                                          \
    X(OFFSET_REGRESSION, "offset_regression")                                                      \
    X(INVALID_CONFIG, "invalid_config")                                                            \
    X(ID_SPACE_EXHAUSTION, "id_space_exhaustion")                                                  \
    X(POOL_MEMORY, "pool_memory")                                                                  \
    X(ID_SPACE_CONFLICT, "id_space_conflict")

enum alert_kind {
#define X(id, name) ALERT_##id,
    ALERT_KINDS(X)
#undef X
        ALERT_COUNT
};

const char *alert_name(enum alert_kind kind);

/* Hysteresis state of one alert of one application. */
struct alert_track {
    int firing;        /* 1 after it fired, until it resolves */
    int cond;          /* the condition as last observed */
    uint64_t since_ms; /* when cond took its current value */
};

enum alert_change { ALERT_NONE = 0, ALERT_FIRE = 1, ALERT_RESOLVE = -1 };

/* Feed one observation of the condition at time now. */
enum alert_change alert_observe(struct alert_track *t, int condition, uint64_t now_ms,
                                uint64_t fire_after_ms, uint64_t resolve_after_ms);

#endif
