#include "slots.h"

void slots_init(struct slots *q, unsigned max)
{
    q->max = max;
    q->busy = 0;
    TAILQ_INIT(&q->line);
}

int slots_request(struct slots *q, struct slot_entry *e)
{
    if (q->busy >= q->max) {
        e->waiting = 1;
        TAILQ_INSERT_TAIL(&q->line, e, line);
        return 0;
    }
    q->busy++;
    e->holding = 1;
    return 1;
}

int slots_release(struct slots *q, struct slot_entry *e)
{
    if (!e->holding)
        return 0;
    e->holding = 0;
    q->busy--;
    return 1;
}

struct slot_entry *slots_next(struct slots *q)
{
    struct slot_entry *e = TAILQ_FIRST(&q->line);

    if (q->busy >= q->max || !e)
        return NULL;
    TAILQ_REMOVE(&q->line, e, line);
    e->waiting = 0;
    return e;
}

int slots_waiters(const struct slots *q)
{
    return !TAILQ_EMPTY(&q->line);
}
