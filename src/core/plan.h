/*
 * plan — what one refill does, decided without I/O: how many IDs to add,
 * how much ID space to lease, how to read the progress kept in meta, how to
 * draw a batch from the leases and cut it into push chunks. Pure, so every
 * rule here is unit-tested without servers (test/unit/test_plan.c).
 */
#ifndef IDPOOL_PLAN_H
#define IDPOOL_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "app.h"
#include "gen.h"

#define PLAN_MAX_IDS        (1 << 20) /* most IDs one refill draws; the next check continues */
#define PLAN_LEASE_SECONDS  60        /* a lease should last about this long at the current rate */
#define PLAN_LEASE_MAX_IDS  (1ULL << 30) /* and hold no more IDs than this */
#define PLAN_LEASE_MAX_SPAN (1ULL << 48) /* nor more ID space, unless one full pool needs it */

/*
 * IDs to add to a pool of `len` IDs that is below its low-water mark: the
 * room up to max_pool_size in whole steps, at least one step, at most
 * PLAN_MAX_IDS (in whole steps, at least one).
 */
uint64_t plan_want(const struct app_cfg *cfg, uint64_t len);

/*
 * A pool of `len` IDs needs a refill: it is below its low-water mark, or the
 * last refill was cut short (`unfinished`: fenced off or failed part-way,
 * keeping what it had appended) and at least one step of room is left. Such
 * a refill is finished at the next check: the pool may have been left just
 * above its mark, and waiting for clients to drain it looks like a wedge.
 */
int plan_due(const struct app_cfg *cfg, uint64_t len, int unfinished);

/* Lease size in IDs: PLAN_LEASE_SECONDS of consumption at `rate` IDs/s, at least a full pool. */
uint64_t plan_lease_ids(const struct app_cfg *cfg, double rate);

/*
 * The ID space to reserve for a lease: plan_lease_ids() worth, but no more
 * than PLAN_LEASE_MAX_SPAN unless one full pool needs more, so that a large
 * delta x increment_max cannot swallow the whole ID space at once.
 */
uint64_t plan_lease_span(const struct app_cfg *cfg, double rate);

/* Prefetch the next lease when none is held and less than half a lease span is left. */
int plan_should_prefetch(const struct gen_state *st, uint64_t span);

/*
 * The failover reserve: a range of a pool's ID space that one daemon
 * reserved in MySQL and never wrote to any Redis, kept to refill the pool
 * once when MySQL cannot lease (a failover or a Redis restart while MySQL
 * is down). The daemon gets it by reserving twice the span it needs and
 * keeping the upper half (plan_reserve_split), or from a lease whose refill
 * lost its Redis node before it wrote anything.
 */
enum plan_reserve_mode {
    PLAN_RESERVE_OFF = 0,
    PLAN_RESERVE_TREND, /* trend applications only (their pools have no order to keep) */
    PLAN_RESERVE_ALL,   /* monotonic ones too, when their pool starts over */
};

/* A pool of this type keeps a reserve under `mode`. */
int plan_reserve_kept(enum plan_reserve_mode mode, enum app_type type);

/*
 * The reserve may refill the pool now that leasing failed: a trend pool
 * always; a monotonic one (mode all) only when it starts over (no meta, an
 * empty pool), so that the pool stays strictly increasing: its IDs are
 * below the leases reserved after it.
 */
int plan_reserve_usable(enum plan_reserve_mode mode, enum app_type type, int have_meta,
                        uint64_t len);

/* Where a reservation [lo, hi) made twice as large splits: [lo, mid) now, [mid, hi) kept. */
uint64_t plan_reserve_split(uint64_t lo, uint64_t hi);

/*
 * The meta hash read field by field (HGETALL): plan_meta_init(),
 * plan_meta_field() for each pair, then plan_meta_end().
 */
struct plan_meta {
    struct gen_state st; /* next, hi, nlo, nhi as parsed */
    const char *next;    /* the verbatim text of 'next' (points into the caller's reply) */
    size_t next_len;
    int have_next; /* 'next' is present */
    int bad;       /* a lease field is not a decimal uint64 */
};

enum plan_meta_result {
    PLAN_META_OK = 0,      /* *st is the progress to continue from */
    PLAN_META_NONE = 1,    /* no 'next': a fresh application (or meta was lost); *st is zero */
    PLAN_META_CORRUPT = 2, /* unusable progress: start from a fresh lease; *st is zero */
};

void plan_meta_init(struct plan_meta *m);
void plan_meta_field(struct plan_meta *m, const char *f, size_t flen, const char *v, size_t vlen);
enum plan_meta_result plan_meta_end(struct plan_meta *m, struct gen_state *st);

/* IDs [off, off+n) of a batch, and the lease state (meta) after them. */
struct plan_chunk {
    size_t off, n;
    struct gen_state after;
};

/*
 * One refill's IDs: drawn from the leases in `st`, recorded per draw so
 * that every push carries a consistent meta, then cut into push chunks.
 * Owned by the refill that fills it; plan_batch_free() releases it.
 */
struct plan_batch {
    struct gen_state st;      /* lease state after the IDs drawn so far */
    uint64_t *ids;            /* drawn IDs (heap) */
    size_t nids, want;        /* drawn, wanted */
    struct plan_chunk *draws; /* one per draw (heap) */
    size_t ndraws, drawcap;
    struct plan_chunk *chunks; /* the batch in push-sized chunks (heap) */
    size_t nchunks, chunkcap;
};

enum plan_draw_result { PLAN_DRAW_DONE = 0, PLAN_DRAW_SHORT = 1, PLAN_DRAW_NOMEM = -1 };

/* Empty the batch for `want` IDs drawn from `st`; -1 out of memory. */
int plan_batch_start(struct plan_batch *b, const struct gen_state *st, size_t want)
    __attribute__((warn_unused_result));
/*
 * Draw IDs until the batch is complete (PLAN_DRAW_DONE) or the leases run out
 * (PLAN_DRAW_SHORT: add a lease to b->st and draw again). Monotonic draws
 * `chunk` IDs at a time; trend draws whole blocks of step (several small
 * blocks per chunk; a short batch ends on a whole block).
 */
enum plan_draw_result plan_batch_draw(struct plan_batch *b, const struct app_cfg *cfg,
                                      struct rng *rng, size_t chunk)
    __attribute__((warn_unused_result));
/*
 * Cut the draws into chunks of at most `chunk` IDs (a trend block larger
 * than a chunk goes out in several; all but the first carry the block's
 * final state). -1 out of memory.
 */
int plan_batch_split(struct plan_batch *b, size_t chunk) __attribute__((warn_unused_result));
void plan_batch_free(struct plan_batch *b);

#endif
