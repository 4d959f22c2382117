/*
 * poolstate — the states of one pool's refill cycle and the transitions
 * allowed between them. Pure: the daemon changes a pool's state only
 * through pool_set_state(), which checks every change against this table
 * (test/unit/test_plan.c walks it).
 *
 *   IDLE -> CHECK -> IDLE                          nothing to do
 *                 -> LOCK -> RESERVE -> PUSHQ -> PUSH -> UNLOCK -> IDLE
 *                         -> PUSHQ (the leases in meta suffice)
 *   PUSH -> PREFETCH -> INSTALL -> LOCK (another refill under the same lock) | UNLOCK
 *   a waiting pool goes IDLE -> LOCK when it gets a refill slot
 */
#ifndef IDPOOL_POOLSTATE_H
#define IDPOOL_POOLSTATE_H

/* X(id, name) */
#define POOL_STATES(X)                                                                             \
    X(IDLE, "idle")         /* nothing in flight */                                                \
    X(CHECK, "check")       /* LLEN or idpool_status sent */                                       \
    X(LOCK, "lock")         /* SET NX + LLEN + HGETALL sent, or the lock being renewed */          \
    X(RESERVE, "reserve")   /* waiting for a lease the batch needs */                              \
    X(PUSHQ, "push-queue")  /* waiting for the push connection */                                  \
    X(PUSH, "push")         /* pushing on the push connection */                                   \
    X(PREFETCH, "prefetch") /* waiting for the next lease (pool already refilled) */               \
    X(INSTALL, "install")   /* storing the prefetched lease in meta */                             \
    X(UNLOCK, "unlock")     /* idpool_unlock sent */

enum pool_state {
#define X(id, name) POOL_##id,
    POOL_STATES(X)
#undef X
        POOL_NSTATES
};

const char *pool_state_name(enum pool_state s);

/* 1 when a pool may go from `from` to `to`. */
int pool_state_allowed(enum pool_state from, enum pool_state to);

#endif
