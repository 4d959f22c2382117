#include "push.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault.h"
#include "node.h"
#include "rds.h"
#include "resp.h"

/*
 * Chunks per transaction. Each transaction waits one round trip for the
 * guard's verdict; 4 chunks of 1000 IDs keep Redis busy for about 200 us
 * per EXEC while the daemon's turnaround is paid once per 4000 IDs.
 */
#define PUSH_GROUP 4

struct pusher {
    struct node *node;              /* whose push connection carries the jobs */
    struct push_job *running;       /* the job that owns the connection (WATCH) */
    TAILQ_HEAD(, push_job) waiting; /* the others, in order */
    int lock_ttl_ms;                /* for messages */
    char ttl[16];                   /* lock_ttl_ms as text, for the renewal in each chunk */
    char *resp;                     /* a chunk's RPUSH in RESP (grown as needed) */
    size_t respcap;
};

static void pusher_next(struct pusher *p);
static void tx_open(struct pusher *p, struct push_job *j);

static void job_error(struct push_job *j, enum push_result kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Record the first problem: it tells what happened; later ones follow from it. */
static void job_error(struct push_job *j, enum push_result kind, const char *fmt, ...)
{
    va_list ap;

    if (j->result != PUSH_OK)
        return;
    j->result = kind;
    va_start(ap, fmt);
    vsnprintf(j->msg, sizeof(j->msg), fmt, ap);
    va_end(ap);
}

/* The job's pushes are over, successful or not: hand the connection on. */
static void job_finish(struct pusher *p, struct push_job *j)
{
    if (p->running == j)
        p->running = NULL;
    if (j->result == PUSH_OK && j->ndone < j->nchunks)
        job_error(j, PUSH_ERROR, "only %zu of %zu chunks appended", j->ndone, j->nchunks);
    j->done(j, j->arg);
    pusher_next(p);
}

static void tx_settle(struct pusher *p, struct push_job *j)
{
    if (j->pending == 0 && (j->result != PUSH_OK || j->ndone == j->nchunks))
        job_finish(p, j);
}

/* A command was queued on the push connection (rc 0) or could not be. */
static int tx_queued(struct push_job *j, int rc)
{
    if (rc != 0) {
        job_error(j, PUSH_ERROR, "cannot send on the push connection");
        return -1;
    }
    j->pending++;
    return 0;
}

static void on_tx_reply(struct rds *r, redisReply *reply, void *arg);

static int tx_send(struct pusher *p, struct push_job *j, rds_reply_fn *fn, int argc,
                   const char **argv, const size_t *argvlen)
{
    return tx_queued(j, rds_command_argv(p->node->push, fn, j, argc, argv, argvlen));
}

/* MULTI, RPUSH... : only an error matters (EXEC then fails with EXECABORT). */
static void on_tx_reply(struct rds *r, redisReply *reply, void *arg)
{
    struct push_job *j = arg;

    j->pending--;
    if (!reply || reply->type == REDIS_REPLY_ERROR)
        job_error(j, PUSH_ERROR, "%s", rds_errstr(reply));
    (void)r;
    tx_settle(j->pusher, j);
}

static void on_tx_exec(struct rds *r, redisReply *reply, void *arg);

/* An error reply of the fence (idpool_guard or idpool_push): which check failed. */
static void fence_error(struct pusher *p, struct push_job *j, const redisReply *reply)
{
    if (strncmp(reply->str, "IDPOOL_FENCED", 13) == 0)
        job_error(j, PUSH_FENCED, "lock not held by this refiller (held past its %d ms TTL?)",
                  p->lock_ttl_ms);
    else if (strncmp(reply->str, "IDPOOL_EPOCH", 12) == 0)
        job_error(j, PUSH_EPOCH, "%s", reply->str);
    else if (strncmp(reply->str, "IDPOOL_UNVALIDATED", 18) == 0)
        job_error(j, PUSH_UNVALIDATED, "%s", reply->str);
    else if (strncmp(reply->str, "IDPOOL_STALE", 12) == 0)
        job_error(j, PUSH_STALE, "%s", reply->str);
    else if (strncmp(reply->str, "IDPOOL_MOVING", 13) == 0)
        job_error(j, PUSH_ERROR, "%s", reply->str);
    else
        job_error(j, PUSH_NOFENCE, "the fence did not run: %s", reply->str);
}

/*
 * The guard's verdict on the open transaction decides: EXEC on 1 (and the
 * next chunks' transaction goes out right behind it), DISCARD on anything
 * else.
 * An IDPOOL_* error says which check failed.
 */
static void on_tx_guard(struct rds *r, redisReply *reply, void *arg)
{
    struct push_job *j = arg;
    struct pusher *p = j->pusher;
    int ok = reply && reply->type == REDIS_REPLY_INTEGER && reply->integer == 1;

    (void)r;
    j->pending--;
    if (reply && reply->type == REDIS_REPLY_ERROR) {
        fence_error(p, j, reply);
    } else if (!ok) {
        job_error(j, PUSH_ERROR, "the fence did not run: %s",
                  reply ? "unexpected reply from idpool_guard" : rds_errstr(reply));
    }
    if (reply) { /* (a lost connection took its MULTI along) */
        const char *cmd[1];
        size_t cmd_len[1];

        ok = ok && j->result == PUSH_OK;
        cmd[0] = ok ? "EXEC" : "DISCARD";
        cmd_len[0] = ok ? 4 : 7;
        /* (still in the MULTI while EXEC goes out: no ASKING inside the transaction) */
        int sent = tx_send(p, j, ok ? on_tx_exec : on_tx_reply, 1, cmd, cmd_len);
        rds_in_multi(p->node->push, 0);
        if (sent == 0 && ok) {
            j->exec_n = j->open_n;
            if (j->sent == j->open_n && fault_at(FAULT_PUSHING)) {
                rds_flush(p->node->push); /* the first chunk is committed, the rest is not sent */
                fault_fire();
            }
            tx_open(p, j);
        }
    }
    tx_settle(p, j);
}

static void on_tx_exec(struct rds *r, redisReply *reply, void *arg)
{
    struct push_job *j = arg;
    struct pusher *p = j->pusher;

    (void)r;
    j->pending--;
    if (!reply || reply->type == REDIS_REPLY_ERROR) {
        job_error(j, PUSH_ERROR, "%s", rds_errstr(reply));
    } else if (reply->type == REDIS_REPLY_NIL) {
        job_error(j, PUSH_FENCED, "the lock changed before EXEC (held past its %d ms TTL?)",
                  p->lock_ttl_ms);
    } else if (j->result == PUSH_OK) {
        /* the pool's length after the transaction's last RPUSH */
        if (reply->type == REDIS_REPLY_ARRAY && j->exec_n > 0 && reply->elements >= j->exec_n &&
            reply->element[j->exec_n - 1]->type == REDIS_REPLY_INTEGER)
            j->len = (uint64_t)reply->element[j->exec_n - 1]->integer;
        j->ndone += j->exec_n;
    }
    tx_settle(p, j);
}

/*
 * Open the transaction of chunks k .. k+g-1: WATCH, the guard, MULTI, an
 * RPUSH per chunk, the meta of the last one, PEXPIRE; EXEC waits for the
 * verdict. Several chunks share a transaction, so that the round trip to
 * the verdict is paid once per PUSH_GROUP chunks, not per chunk.
 */
static int tx_write(struct pusher *p, struct push_job *j, size_t k, size_t g)
{
    const struct plan_chunk *c = &j->chunks[k + g - 1];
    const struct gen_state *st = &c->after;
    char nums[4][U64_LEN], n[U64_LEN];
    const char *multi[] = {"MULTI"};
    size_t multi_len[] = {5};
    size_t klen = strlen(j->k_pool), most = 0, ids = 0, need;

    for (size_t i = k; i < k + g; i++) {
        most = j->chunks[i].n > most ? j->chunks[i].n : most;
        ids += j->chunks[i].n;
    }
    need = RESP_RPUSH_MAX(klen, most);
    /* the buffer first: nothing is sent if it cannot be had (no MULTI left open) */
    if (need > p->respcap) {
        char *b = realloc(p->resp, need);
        if (!b) {
            job_error(j, PUSH_ERROR, "out of memory for a push chunk");
            return -1;
        }
        p->resp = b;
        p->respcap = need;
    }
    {
        const char *epoch = rds_epoch(p->node->push), *want = j->expected;
        const char *watch[] = {"WATCH", j->k_lock};
        size_t watch_len[] = {5, strlen(j->k_lock)};
        char prev[U64_LEN];

        if (k > 0) {
            prev[u64_fmt(j->chunks[k - 1].after.next, prev)] = '\0';
            want = prev;
        }
        const char *guard[] = {"FCALL",   "idpool_guard", "3",   j->k_pool, j->k_meta,
                               j->k_lock, j->token,       epoch, want};
        size_t guard_len[9];
        for (int i = 0; i < 9; i++)
            guard_len[i] = strlen(guard[i]);
        if (tx_send(p, j, on_tx_reply, 2, watch, watch_len) != 0 ||
            tx_send(p, j, on_tx_guard, 9, guard, guard_len) != 0 ||
            tx_send(p, j, on_tx_reply, 1, multi, multi_len) != 0)
            return -1;
        rds_in_multi(p->node->push, 1);
    }
    for (size_t i = k; i < k + g; i++) {
        const struct plan_chunk *ci = &j->chunks[i];
        size_t rlen = resp_rpush(p->resp, j->k_pool, klen, j->ids + ci->off, ci->n);
        if (tx_queued(j, rds_command_resp(p->node->push, on_tx_reply, j, p->resp, rlen)) != 0)
            return -1;
    }
    j->open_n = g;
    {
        const char *epoch = rds_epoch(p->node->push);
        const char *argv[] = {"HSET",  j->k_meta, "next", nums[0], "hi",  nums[1],
                              "epoch", epoch,     "nlo",  nums[2], "nhi", nums[3]};
        size_t len[12] = {4, strlen(j->k_meta),
                          4, u64_fmt(st->next, nums[0]),
                          2, u64_fmt(st->hi, nums[1]),
                          5, strlen(epoch),
                          3, 0,
                          3, 0};
        int has_next = gen_has_next(st);

        if (has_next) {
            len[9] = u64_fmt(st->nlo, nums[2]);
            len[11] = u64_fmt(st->nhi, nums[3]);
        }
        if (tx_send(p, j, on_tx_reply, has_next ? 12 : 8, argv, len) != 0)
            return -1;
        if (!has_next) {
            const char *del[] = {"HDEL", j->k_meta, "nlo", "nhi"};
            size_t del_len[] = {4, strlen(j->k_meta), 3, 3};
            if (tx_send(p, j, on_tx_reply, 4, del, del_len) != 0)
                return -1;
        }
    }
    {
        const char *argv[] = {"HINCRBY", j->k_meta, "pushed", n};
        size_t len[] = {7, strlen(j->k_meta), 6, u64_fmt(ids, n)};
        if (tx_send(p, j, on_tx_reply, 4, argv, len) != 0)
            return -1;
    }
    {
        /* the lock is renewed with every transaction: a long push is not fenced off part-way */
        const char *argv[] = {"PEXPIRE", j->k_lock, p->ttl};
        size_t len[] = {7, strlen(j->k_lock), strlen(p->ttl)};
        return tx_send(p, j, on_tx_reply, 3, argv, len);
    }
}

/* idpool_push's reply to a chunk sent by fn_write: the pool's length, or the fence's error. */
static void on_fn_push(struct rds *r, redisReply *reply, void *arg)
{
    struct push_job *j = arg;
    struct pusher *p = j->pusher;

    (void)r;
    j->pending--;
    if (reply && reply->type == REDIS_REPLY_INTEGER) {
        if (j->result == PUSH_OK) {
            j->len = (uint64_t)reply->integer;
            j->ndone++;
        }
    } else if (reply && reply->type == REDIS_REPLY_ERROR) {
        fence_error(p, j, reply);
    } else {
        job_error(j, PUSH_ERROR, "%s",
                  reply ? "unexpected reply from idpool_push" : rds_errstr(reply));
    }
    tx_settle(p, j);
}

/*
 * Chunk k through idpool_push, the fence and the append in one function
 * that declares only the lock: while the push connection follows a Cluster
 * slot being migrated to its server (rds_set_asking), a transaction on a
 * pool absent there would answer TRYAGAIN until the migration ends (a pool
 * LPOP emptied is deleted). Costs Redis more CPU per ID; only then.
 */
static int fn_write(struct pusher *p, struct push_job *j, size_t k)
{
    const struct plan_chunk *c = &j->chunks[k];
    const struct gen_state *st = &c->after;
    uint64_t head[4] = {st->next, st->hi, st->nlo, st->nhi};
    size_t argc = 11 + c->n;
    const char **argv = malloc(argc * sizeof(*argv));
    size_t *len = malloc(argc * sizeof(*len));
    char *num = malloc((5 + c->n) * U64_LEN);
    int rc = -1;

    if (argv && len && num) {
        argv[0] = "FCALL";
        argv[1] = "idpool_push";
        argv[2] = "1";
        argv[3] = j->k_lock;
        argv[4] = j->token;
        argv[5] = rds_epoch(p->node->push);
        for (int i = 0; i < 6; i++)
            len[i] = strlen(argv[i]);
        /* the next the chunk before leaves (num[0 .. U64_LEN) holds no terminator) */
        argv[6] = k > 0 ? num : j->expected;
        len[6] = k > 0 ? u64_fmt(j->chunks[k - 1].after.next, num) : strlen(j->expected);
        for (int i = 0; i < 4; i++) {
            argv[7 + i] = num + (size_t)(1 + i) * U64_LEN;
            /* "" = no prefetched lease */
            len[7 + i] =
                i >= 2 && !gen_has_next(st) ? 0 : u64_fmt(head[i], num + (1 + i) * U64_LEN);
        }
        for (size_t i = 0; i < c->n; i++) {
            argv[11 + i] = num + (5 + i) * U64_LEN;
            len[11 + i] = u64_fmt(j->ids[c->off + i], num + (5 + i) * U64_LEN);
        }
        rc = tx_send(p, j, on_fn_push, (int)argc, argv, len);
    } else {
        job_error(j, PUSH_ERROR, "out of memory for a push chunk");
    }
    free(argv);
    free(len);
    free(num);
    return rc;
}

/*
 * Open the next chunk's transaction, if any. One is open at a time (WATCH
 * and MULTI belong to the connection); it goes out right behind the EXEC of
 * the one before, whose outcome it need not wait for: its guard runs after
 * that EXEC and expects the meta it leaves, so a chunk after one that did
 * nothing fails its guard and is discarded.
 */
static void tx_open(struct pusher *p, struct push_job *j)
{
    size_t g = j->nchunks - j->sent < PUSH_GROUP ? j->nchunks - j->sent : PUSH_GROUP;

    if (rds_asking(p->node->push)) { /* every chunk through the function, pipelined */
        while (j->result == PUSH_OK && j->sent < j->nchunks && fn_write(p, j, j->sent) == 0)
            j->sent++;
        return;
    }
    if (j->sent == 0 && g > 1)
        g = 1; /* the first chunk alone: a refill shows early whether the fence lets it through */
    if (j->result == PUSH_OK && g > 0 && tx_write(p, j, j->sent, g) == 0)
        j->sent += g;
}

/* Give the push connection to the next waiting job that is ready. */
static void pusher_next(struct pusher *p)
{
    struct push_job *j;

    while (!p->running && (j = TAILQ_FIRST(&p->waiting)) && (!j->ready || j->ready(j->arg))) {
        TAILQ_REMOVE(&p->waiting, j, q);
        j->start(j, j->arg);
        if (!p->node->push || !rds_ready(p->node->push)) {
            job_error(j, PUSH_ERROR, "the push connection to Redis is down");
            job_finish(p, j);
            continue;
        }
        p->running = j;
        tx_open(p, j);
        tx_settle(p, j);
    }
}

void push_submit(struct pusher *p, struct push_job *job)
{
    job->pusher = p;
    job->result = PUSH_OK;
    job->msg[0] = '\0';
    job->ndone = job->sent = 0;
    job->pending = 0;
    job->len = 0;
    TAILQ_INSERT_TAIL(&p->waiting, job, q);
    pusher_next(p);
}

void push_kick(struct pusher *p)
{
    pusher_next(p);
}

size_t push_appended(const struct push_job *job)
{
    const struct plan_chunk *last;

    if (job->ndone == 0)
        return 0;
    last = &job->chunks[job->ndone - 1];
    return last->off + last->n; /* chunks are cut from the batch in order, back to back */
}

void pusher_configure(struct pusher *p, int lock_ttl_ms)
{
    p->lock_ttl_ms = lock_ttl_ms;
    snprintf(p->ttl, sizeof(p->ttl), "%d", lock_ttl_ms);
}

struct pusher *pusher_new(struct node *n, int lock_ttl_ms)
{
    struct pusher *p = calloc(1, sizeof(*p));

    if (!p)
        return NULL;
    p->node = n;
    TAILQ_INIT(&p->waiting);
    pusher_configure(p, lock_ttl_ms);
    return p;
}

void pusher_free(struct pusher *p)
{
    if (!p)
        return;
    free(p->resp);
    free(p);
}
