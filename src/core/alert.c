#include "alert.h"

static const char *const names[ALERT_COUNT] = {
#define X(id, name) name,
    ALERT_KINDS(X)
#undef X
};

const char *alert_name(enum alert_kind kind)
{
    return kind < ALERT_COUNT ? names[kind] : "unknown";
}

/*
 * Hysteresis: the alert fires when the condition has held for fire_after_ms
 * and resolves when it has been clear for resolve_after_ms. Each transition
 * is reported once; observations in between report nothing.
 */
enum alert_change alert_observe(struct alert_track *t, int condition, uint64_t now_ms,
                                uint64_t fire_after_ms, uint64_t resolve_after_ms)
{
    condition = !!condition;
    if (condition != t->cond) {
        t->cond = condition;
        t->since_ms = now_ms;
    }
    if (condition && !t->firing && now_ms - t->since_ms >= fire_after_ms) {
        t->firing = 1;
        return ALERT_FIRE;
    }
    if (!condition && t->firing && now_ms - t->since_ms >= resolve_after_ms) {
        t->firing = 0;
        return ALERT_RESOLVE;
    }
    return ALERT_NONE;
}
