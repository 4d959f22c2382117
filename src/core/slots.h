/*
 * slots — the refill slots: at most `max` holders at once, the others wait
 * in line, first come first served. Pure (no I/O, no allocation): the entry
 * lives in its holder (struct pool's sched.slot), scheduler.c decides who
 * asks and what a holder does.
 */
#ifndef IDPOOL_SLOTS_H
#define IDPOOL_SLOTS_H

#include <stddef.h> /* NULL, in the queue macros */
#include <sys/queue.h>

/* One holder's place: holding a slot, in line for one, or neither. */
struct slot_entry {
    int holding;                  /* holds a slot */
    int waiting;                  /* in line */
    TAILQ_ENTRY(slot_entry) line; /* that line */
};

struct slots {
    unsigned max;                  /* slots */
    unsigned busy;                 /* held */
    TAILQ_HEAD(, slot_entry) line; /* waiting, oldest first */
};

void slots_init(struct slots *q, unsigned max);

/* Ask for a slot: 1, e holds one now; 0, a slot is not free and e waits at the end of the line. */
int slots_request(struct slots *q, struct slot_entry *e);

/* Give e's slot back: 1, or 0 when e held none (nothing changes). */
int slots_release(struct slots *q, struct slot_entry *e);

/*
 * The oldest entry in line while a slot is free, taken out of the line
 * (holding nothing yet: it asks again with slots_request if it still wants
 * one); NULL when no slot is free or nobody waits.
 */
struct slot_entry *slots_next(struct slots *q);

/* 1 when an entry waits in line. */
int slots_waiters(const struct slots *q);

#endif
