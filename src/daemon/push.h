/*
 * push — the fenced push (brief §4.3). Every chunk of a refill is appended
 * with native RPUSH inside MULTI/EXEC on a connection of its own
 * ("redis-push"): a Lua function that unpacks 1000 arguments into RPUSH
 * costs Redis about twice the CPU of the plain command. The fence is
 * idpool_guard (src/idpool.lua), and its verdict comes before the commit:
 *
 *   WATCH lock
 *   FCALL idpool_guard 3 pool meta lock token epoch expected_next
 *   MULTI; RPUSH pool ids...; HSET meta next hi run_id [nlo nhi];
 *   [HDEL meta nlo nhi]; HINCRBY meta pushed n; PEXPIRE lock ttl
 *   ... the guard's reply ... EXEC if it is 1, else DISCARD
 *
 * The guard checks the lock token, the epoch and meta's next. Whatever
 * keeps it from saying 1 (a failed check, a missing or foreign function
 * library, a Lua error, BUSY, OOM, a lost connection) means no EXEC: the
 * push fails closed. WATCH covers the time between the verdict and EXEC: a
 * lock that expired, was taken over or deleted meanwhile makes EXEC do
 * nothing. Each chunk renews the lock (PEXPIRE inside the transaction), so
 * a long push on a slow Redis keeps it. The next chunk's transaction goes
 * out right behind an EXEC; its guard expects the next left by the chunk
 * before, so after a chunk that did nothing the following ones fail too.
 *
 * WATCH is per connection, so one job at a time owns the push connection;
 * the others wait in a FIFO. A job works on what it is given (keys, token,
 * the batch's IDs and chunks), never on the pool that owns it.
 */
#ifndef IDPOOL_PUSH_H
#define IDPOOL_PUSH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "plan.h"

struct node;
struct pusher;

enum push_result {
    PUSH_OK = 0,      /* every chunk was appended */
    PUSH_FENCED,      /* the lock is not held by this refiller (or changed before EXEC) */
    PUSH_EPOCH,       /* the pool was written under an earlier epoch: it was discarded */
    PUSH_UNVALIDATED, /* our epoch is no longer the validated one: the connection validates
                         again (rds) and the refill is retried */
    PUSH_STALE,       /* meta's next is not what the batch was drawn from */
    PUSH_NOFENCE,     /* the guard did not run (function library missing or foreign, Lua error) */
    PUSH_ERROR,       /* anything else: connection, error reply, memory */
};

struct push_job;
typedef void push_done_fn(struct push_job *job, void *arg);
/* 0 while the job must not start yet (its lock renewal is still in flight). */
typedef int push_ready_fn(void *arg);

struct push_job {
    /* in: set by the owner before push_submit(), valid until done */
    const char *k_pool, *k_meta, *k_lock, *token;
    const char *expected;            /* meta next the first chunk expects ("" = no meta) */
    const uint64_t *ids;             /* the batch */
    const struct plan_chunk *chunks; /* its chunks */
    size_t nchunks;
    push_done_fn *start;  /* called when the job gets the push connection */
    push_done_fn *done;   /* called once, when every reply is in */
    push_ready_fn *ready; /* may be NULL */
    void *arg;
    /* out */
    enum push_result result; /* the first problem seen */
    char msg[256];           /* its description */
    size_t ndone;            /* chunks appended (EXEC succeeded) */
    uint64_t len;            /* pool length after the last appended chunk */
    /* the pusher's */
    struct pusher *pusher;
    unsigned pending; /* replies outstanding */
    size_t sent;      /* chunks written */
    size_t open_n;    /* chunks in the transaction waiting for its verdict */
    size_t exec_n;    /* chunks in the transaction whose EXEC is in flight */
    TAILQ_ENTRY(push_job) q;
};

/*
 * The pusher of node n, on its push connection ("redis-push"; WATCH is per
 * connection, so one pusher per node). lock_ttl_ms: for the messages of
 * fenced pushes.
 */
struct pusher *pusher_new(struct node *n, int lock_ttl_ms);
void pusher_free(struct pusher *p);
void pusher_configure(struct pusher *p, int lock_ttl_ms);

/* Queue a job for the push connection; done() is called from the loop (maybe at once). */
void push_submit(struct pusher *p, struct push_job *job);
/* A job that was not ready may be now: start the next one if the connection is free. */
void push_kick(struct pusher *p);

/*
 * After done: how many of the job's IDs were appended, the first ones in
 * order (its chunks whose EXEC succeeded; all of them on PUSH_OK). A fenced
 * or failed push keeps these: the pool grew by them.
 */
size_t push_appended(const struct push_job *job);

#endif
