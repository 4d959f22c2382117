/*
 * ledger — the arithmetic of reading the ledger of leases
 * (application_lease) for `idpoolctl explain`: which IDs a lease can hold
 * (its lattice), what can be said of one ID in a lease given what the
 * pool shows (the verdict), and the times an operator gives for a window.
 * Pure: no I/O, unit-tested (test/unit/test_ledger.c) and fuzzed
 * (test/fuzz/fuzz_ledger.c) without servers.
 */
#ifndef IDPOOL_LEDGER_H
#define IDPOOL_LEDGER_H

#include <stddef.h>
#include <stdint.h>

#include "gen.h"

/* The IDs a lease may hold: x % delta == remainder, x >= max(start, 1) (gen.c). */
struct ledger_lattice {
    int known;          /* 0: neither recorded with the lease nor a valid row */
    const char *source; /* "lease" (recorded with it) or "row now" (static) */
    uint64_t delta, remainder, start;
};

/* 1 when id is on l (a known lattice with delta >= 1). */
int ledger_on_lattice(const struct ledger_lattice *l, uint64_t id);

/* How many IDs of [lo, hi) are on l: 0 for an invalid lattice. */
uint64_t ledger_lattice_count(const struct ledger_lattice *l, uint64_t lo, uint64_t hi);

/* What explain concludes about an ID in one application of one environment. */
enum ledger_verdict {
    LEDGER_IN_POOL,           /* in the pool now: not handed out yet */
    LEDGER_NOT_YET_PUSHED,    /* in the pool's current or prefetched lease, at or above next */
    LEDGER_NOT_PUSHED,        /* leased, not held by the pool: never pushed (unless a reserve) */
    LEDGER_ISSUED,            /* the pool passed it and makes every lattice ID: handed out */
    LEDGER_ISSUED_OR_SKIPPED, /* the pool passed it with gaps, or holds no progress */
    LEDGER_LEASED,            /* leased; the pool was not read */
    LEDGER_OFF_LATTICE,       /* in a lease, not on its lattice: never issued */
    LEDGER_NEVER_LEASED,      /* in no lease */
};

/* "in_pool", "not_yet_pushed", ... (the names of the JSON and the docs). */
const char *ledger_verdict_name(enum ledger_verdict v);

/* What is known about an ID that lies in a lease of its application. */
struct ledger_facts {
    const struct ledger_lattice *lat; /* the lease's lattice */
    int gaps;                         /* the application may skip IDs (monotonic,
                                         increment_max > 1, or unknown) */
    int pool_read;                    /* Redis was read: */
    int in_pool;                      /*   LPOS found the ID */
    int have_meta;                    /*   meta holds progress, st: */
    struct gen_state st;
};

/* The verdict on id, in a lease, from f. */
enum ledger_verdict ledger_judge(const struct ledger_facts *f, uint64_t id);

/*
 * TIME as a MySQL expression of a UTC DATETIME(3) into buf (160 bytes are
 * enough): "now", "now-N" with a unit s, m, h or d (N up to 7 digits),
 * "YYYY-MM-DD", "YYYY-MM-DDTHH:MM[:SS[.fff]]" with an optional Z (a space
 * for the T too). Only digits of the input reach the expression. 0, or -1
 * when t is none of them (buf then "").
 */
int ledger_time_sql(const char *t, char *buf, size_t len) __attribute__((warn_unused_result));

#endif
