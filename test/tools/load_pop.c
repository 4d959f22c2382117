/*
 * load_pop — the request loop of lpop, take, incrby and rpush: requests
 * formatted once (RESP; RPUSH the same IDs every time), pipelined up to
 * --pipeline per connection, sent flat out or on an open-loop --rate
 * schedule, --count claimed across connections; each reply counted, timed
 * and recorded (take's IDPOOL_* refusals apart), anything unexpected a
 * malformed reply (exit 2).
 */
#define _GNU_SOURCE /* ppoll */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cluster.h"
#include "load.h"
#include "tools.h"

/*
 * rpush: batch pseudo-random IDs of 16..19 digits (< 2^63), the same every
 * run; or, with --push-base N, N, N+1, ...: the IDs of a monotonic
 * application as the daemon pushes them (the bench's ceiling: Redis stores
 * and replicates runs of near-consecutive IDs of one length more cheaply).
 */
int make_push_ids(struct run *run, uint64_t batch)
{
    static const uint64_t lo[] = {1000000000000000ULL, 10000000000000000ULL, 100000000000000000ULL,
                                  1000000000000000000ULL};
    static const uint64_t hi[] = {10000000000000000ULL, 100000000000000000ULL,
                                  1000000000000000000ULL, (uint64_t)INT64_MAX};
    uint64_t x = 0x9e3779b97f4a7c15ULL;

    run->push_ids = calloc(batch, sizeof *run->push_ids);
    run->push_lens = calloc(batch, sizeof *run->push_lens);
    if (run->push_ids == NULL || run->push_lens == NULL)
        return -1;
    for (uint64_t i = 0; i < batch; i++) {
        unsigned d;

        x ^= x << 13; /* xorshift64 */
        x ^= x >> 7;
        x ^= x << 17;
        d = (unsigned)(x >> 62);
        run->push_ids[i] = malloc(24);
        if (run->push_ids[i] == NULL)
            return -1;
        snprintf(run->push_ids[i], 24, "%" PRIu64,
                 run->o->push_base ? run->o->push_base + i : lo[d] + x % (hi[d] - lo[d]));
        run->push_lens[i] = strlen(run->push_ids[i]);
    }
    return 0;
}

/* The RESP request for `want` IDs (malloc'd by hiredis; -1 on failure). */
int format_request(const struct run *run, uint64_t want, char **out)
{
    const struct opts *o = run->o;
    const char *argv[8];
    size_t lens[8];
    char num[24];
    int argc = 0;

    snprintf(num, sizeof num, "%" PRIu64, want);
#define ARG(s) (argv[argc] = (s), lens[argc] = strlen(argv[argc]), argc++)
    switch (o->mode) {
    case MODE_LPOP:
        ARG("LPOP");
        ARG(o->key);
        if (o->batch > 1)
            ARG(num);
        break;
    case MODE_TAKE:
        ARG("FCALL");
        ARG("idpool_take");
        ARG("2");
        ARG(o->key);
        ARG(o->meta);
        ARG(num);
        break;
    case MODE_INCRBY:
        ARG("INCRBY");
        ARG(o->key);
        ARG(num);
        break;
    case MODE_LLEN:
        ARG("LLEN");
        ARG(o->key);
        break;
    case MODE_RPUSH: {
        const char **av = malloc((want + 2) * sizeof *av);
        size_t *al = malloc((want + 2) * sizeof *al);
        int len = -1;

        if (av != NULL && al != NULL) {
            av[0] = "RPUSH";
            al[0] = 5;
            av[1] = o->key;
            al[1] = strlen(o->key);
            for (uint64_t i = 0; i < want; i++) {
                av[i + 2] = run->push_ids[i];
                al[i + 2] = run->push_lens[i];
            }
            len = redisFormatCommandArgv(out, (int)(want + 2), av, al);
        }
        free(av);
        free(al);
        return len;
    }
    case MODE_SUBSCRIBE:
        return -1;
    }
#undef ARG
    return redisFormatCommandArgv(out, argc, argv, lens);
}

/* --count IDs have arrived (over all connections). */
bool count_reached(struct conn *cn)
{
    return cn->o->count != 0 &&
           atomic_load_explicit(&cn->run->received, memory_order_relaxed) >= cn->o->count;
}

/* Releases IDs claimed against --count and not received. */
void unclaim(struct conn *cn, uint64_t n)
{
    if (cn->o->count != 0 && n != 0)
        atomic_fetch_sub(&cn->run->claimed, n);
}

/* Claims up to batch IDs against --count; 0 when all are claimed. */
static uint64_t claim(struct conn *cn)
{
    uint64_t batch = cn->o->batch, count = cn->o->count, c, want;

    if (count == 0)
        return batch;
    c = atomic_load(&cn->run->claimed);
    do {
        if (c >= count)
            return 0;
        want = count - c < batch ? count - c : batch;
    } while (!atomic_compare_exchange_weak(&cn->run->claimed, &c, c + want));
    return want;
}

/*
 * --cluster: a MOVED (text) patches the run's slot table and drops the
 * connection (the next connect goes to the new owner; the requests in
 * flight did not run, their claims go back). 0, or -1 when it cannot be
 * read.
 */
static int cluster_moved(struct conn *cn, const char *text)
{
    struct cluster_addr to;
    int slot;

    if (cluster_error_read(text, strlen(text), NULL, &slot, &to) != CLUSTER_MOVED)
        return -1;
    pthread_mutex_lock(&cn->run->route_mu);
    route_moved(cn->run->route, (unsigned)slot, &to);
    pthread_mutex_unlock(&cn->run->route_mu);
    fprintf(stderr, "idpool-load: conn %u: %s: connecting again\n", cn->idx, text);
    cn->drop = true;
    return 0;
}

/*
 * Handles one complete reply (in conn.rs / conn.ids) to the oldest request
 * in flight: counts it, its latency and IDs, and records it. Returns 0, or
 * -1 when the run must end (fatal set).
 */
static int on_reply(struct conn *cn)
{
    const struct opts *o = cn->o;
    struct rstate *rs = &cn->rs;
    struct inflight rq = cn->ring[cn->ring_head];
    uint64_t now = tools_ns(), n = 0, lat;
    bool empty = false, refused = false;
    struct tl_bucket *b;

    cn->ring_head = (cn->ring_head + 1) % o->pipeline;
    cn->inflight--;
    cn->requests++;
    lat = now - (rq.sched_ns ? rq.sched_ns : rq.send_ns);
    if (rq.sched_ns > now)
        lat = 0;
    lat_add(cn, lat);

    if (rs->bad)
        goto malformed;
    switch (rs->type) {
    case REDIS_REPLY_ERROR:
        unclaim(cn, rq.want);
        if (o->mode == MODE_TAKE && strncmp(rs->what, "IDPOOL_", 7) == 0) {
            enum ekind k = strncmp(rs->what, "IDPOOL_RATE", 11) == 0    ? E_REFUSED_RATE
                           : strncmp(rs->what, "IDPOOL_LIMIT", 12) == 0 ? E_REFUSED_LIMIT
                                                                        : E_IDPOOL;
            count_error(cn, k, now);
            if (ref_put(cn, rq.send_ns, now, rs->what) != 0) {
                cn->fatal = EXIT_ERROR;
                request_stop(1);
                return -1;
            }
            refused = true;
            break;
        }
        count_error(cn, E_REPLY, now);
        switch (count_reply_class(cn, rs->what)) {
        case C_READONLY:
        case C_NOREPLICAS:
            cn->drop = o->sentinel != NULL; /* not (or no longer) a primary: ask the sentinels */
            break;
        case C_MOVED:
            if (o->cluster != NULL && cluster_moved(cn, rs->what) == 0)
                goto done; /* not an error of the run: connect again, to the new owner */
            break;
        default:
            break;
        }
        cn->down_errors++;
        if (!o->reconnect) {
            fprintf(stderr, "idpool-load: conn %u: error reply: %s\n", cn->idx, rs->what);
            cn->fatal = EXIT_ERROR;
            request_stop(1);
            return -1;
        }
        if (!cn->down_reported)
            fprintf(stderr, "idpool-load: conn %u: error reply: %s; retrying\n", cn->idx, rs->what);
        cn->down_reported = true;
        /* LOADING, READONLY...: back off like a reconnect. */
        cn->pause_until = now + cn->backoff_ms * NS_PER_MS;
        cn->backoff_ms = backoff_next(cn);
        goto done;
    case REDIS_REPLY_NIL:
        if (o->mode != MODE_LPOP && o->mode != MODE_TAKE)
            goto malformed;
        empty = true;
        break;
    case REDIS_REPLY_STRING:
        if (o->mode != MODE_LPOP || o->batch != 1)
            goto malformed;
        n = rs->nids;
        break;
    case REDIS_REPLY_ARRAY:
        if ((o->mode != MODE_LPOP && o->mode != MODE_TAKE) ||
            (o->mode == MODE_LPOP && o->batch == 1))
            goto malformed;
        n = rs->nids;
        if (n != rs->elements || n > rq.want) {
            snprintf(rs->what, sizeof rs->what, "%zu IDs for a request of %" PRIu64, rs->elements,
                     rq.want);
            goto malformed;
        }
        empty = n == 0;
        break;
    case REDIS_REPLY_INTEGER:
        if (o->mode == MODE_RPUSH) {
            if (rs->integer < (long long)rq.want)
                goto malformed_int;
            n = rq.want;
        } else if (o->mode == MODE_INCRBY) {
            /* v stands for IDs v-want+1 .. v, all >= 1 */
            if (rs->integer < (long long)rq.want)
                goto malformed_int;
            n = rq.want;
            for (uint64_t i = 0; i < n; i++)
                cn->ids[i] = (uint64_t)rs->integer - n + 1 + i;
        } else {
            goto malformed_int;
        }
        break;
    default:
        snprintf(rs->what, sizeof rs->what, "reply of type %d", rs->type);
        goto malformed;
    }

    replies_again(cn);
    if (!refused) {
        cn->ids_total += n;
        if (o->count != 0) {
            unclaim(cn, rq.want - n);
            atomic_fetch_add(&cn->run->received, n);
        }
        if (empty)
            cn->empties++;
        b = tl_at(cn, now);
        if (b != NULL) {
            b->ids += n;
            b->empties += empty;
        }
        if (cn->rec_fd >= 0 && rec_put(cn, rq.send_ns, now, cn->ids, n) != 0) {
            cn->fatal = EXIT_ERROR;
            request_stop(1);
            return -1;
        }
    }
    if ((empty || refused) && o->rate == 0 && o->empty_pause_us > 0)
        cn->pause_until = now + o->empty_pause_us * 1000;
done:
    rs->type = 0;
    rs->nids = 0;
    rs->bad = false;
    rs->what[0] = '\0';
    return 0;

malformed_int:
    snprintf(rs->what, sizeof rs->what, "integer reply %lld", rs->integer);
malformed:
    fprintf(stderr, "idpool-load: conn %u: malformed reply: %s\n", cn->idx,
            rs->what[0] ? rs->what : "unexpected shape");
    cn->fatal = EXIT_MALFORMED;
    request_stop(1);
    return -1;
}

/* Feeds what was read to the reader and handles every complete reply. */
static int feed_replies(struct conn *cn, size_t len)
{
    void *reply;

    if (redisReaderFeed(cn->c->reader, cn->rbuf, len) != REDIS_OK) {
        conn_fail(cn, E_IO, "reader error");
        return 0;
    }
    for (;;) {
        if (redisReaderGetReply(cn->c->reader, &reply) != REDIS_OK) {
            char why[160];

            snprintf(why, sizeof why, "protocol error: %s", cn->c->reader->errstr);
            conn_fail(cn, E_IO, why);
            return 0;
        }
        if (reply == NULL)
            return 0;
        if (cn->inflight == 0) {
            fprintf(stderr, "idpool-load: conn %u: a reply nobody asked for\n", cn->idx);
            cn->fatal = EXIT_MALFORMED;
            request_stop(1);
            return -1;
        }
        if (on_reply(cn) != 0)
            return -1;
        if (cn->drop) {
            conn_drop(cn);
            return 0;
        }
    }
}

/* When the next --rate slot is due: the wake-up for it also sends those
 * due in the --burst-us after it, so the next one is that much later. */
static uint64_t slot_wake(const struct conn *cn, uint64_t t0)
{
    const struct opts *o = cn->o;

    return t0 + (uint64_t)(((double)cn->sched_k * o->conns + cn->idx) * 1e9 / o->rate);
}

/* Appends requests while the pipeline has room and the schedule allows,
 * then writes them in one go. 0, or -1 if this connection failed. */
static int fill_pipeline(struct conn *cn, uint64_t now, bool *starved)
{
    const struct opts *o = cn->o;
    struct run *run = cn->run;
    size_t wlen = 0;
    unsigned first = cn->inflight;

    while (cn->inflight < o->pipeline) {
        uint64_t sched = 0, want;
        struct inflight *rq;

        if (cn->pause_until > now)
            break;
        if (o->rate > 0) {
            uint64_t t0 = atomic_load_explicit(&run->t0_ns, memory_order_relaxed);

            /* slot k of connection i: (k * conns + i) / rate after t0 */
            sched = t0 + (uint64_t)(((double)cn->sched_k * o->conns + cn->idx) * 1e9 / o->rate);
            if (sched > now + o->burst_ns)
                break;
        }
        want = claim(cn);
        if (want == 0) {
            *starved = true;
            break;
        }
        if (want == o->batch) {
            memcpy(cn->wbuf + wlen, run->cmd, run->cmd_len);
            wlen += run->cmd_len;
        } else { /* the last, partial batch of --count */
            char *cmd;
            int len = format_request(run, want, &cmd);

            if (len < 0 || (size_t)len > run->cmd_len) {
                fprintf(stderr, "idpool-load: cannot format a request\n");
                unclaim(cn, want);
                cn->fatal = EXIT_ERROR;
                request_stop(1);
                return -1;
            }
            memcpy(cn->wbuf + wlen, cmd, (size_t)len);
            wlen += (size_t)len;
            redisFreeCommand(cmd);
        }
        if (o->rate > 0)
            cn->sched_k++;
        rq = &cn->ring[(cn->ring_head + cn->inflight) % o->pipeline];
        rq->sched_ns = sched < now ? sched : now; /* a burst's early ones: from the send */
        rq->want = want;
        cn->inflight++;
    }
    if (wlen == 0)
        return 0;
    now = tools_ns();
    for (unsigned i = first; i < cn->inflight; i++)
        cn->ring[(cn->ring_head + i) % o->pipeline].send_ns = now;
    if (write_all(cn->c->fd, cn->wbuf, wlen) != 0) {
        int err = errno;
        char why[160];

        snprintf(why, sizeof why, "write: %s", err == EAGAIN ? "timed out" : strerror(err));
        conn_fail(cn, err == EAGAIN ? E_TIMEOUT : E_IO, why);
        return -1;
    }
    return 0;
}

/* Reads once (blocking at most 100 ms, or, while sending, until the next
 * --rate slot) and handles the replies. 0, or -1 when the run must end. */
static int read_replies(struct conn *cn, uint64_t now, bool sending)
{
    const struct opts *o = cn->o;
    uint64_t oldest = cn->ring[cn->ring_head].send_ns;
    ssize_t n;

    if (sending && o->rate > 0 && cn->inflight < o->pipeline && cn->pause_until <= now) {
        /* Room for another request: wake up for its slot. */
        uint64_t t0 = atomic_load_explicit(&cn->run->t0_ns, memory_order_relaxed);
        uint64_t next = slot_wake(cn, t0);
        uint64_t wait = next > now ? next - now : 0;
        struct pollfd pfd = {cn->c->fd, POLLIN, 0};
        struct timespec ts;

        if (wait > POLL_SLICE_NS)
            wait = POLL_SLICE_NS;
        ts.tv_sec = (time_t)(wait / NS_PER_S);
        ts.tv_nsec = (long)(wait % NS_PER_S);
        if (ppoll(&pfd, 1, &ts, NULL) <= 0)
            goto check_timeout;
    }
    n = read(cn->c->fd, cn->rbuf, sizeof cn->rbuf);
    if (n > 0)
        return feed_replies(cn, (size_t)n);
    if (n == 0) {
        conn_fail(cn, E_IO, "connection closed by the server");
        return 0;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        char why[160];

        snprintf(why, sizeof why, "read: %s", strerror(errno));
        conn_fail(cn, E_IO, why);
        return 0;
    }
check_timeout:
    if (tools_ns() - oldest >= o->timeout_ms * NS_PER_MS) {
        char why[80];

        snprintf(why, sizeof why, "no reply within %" PRIu64 " ms", o->timeout_ms);
        conn_fail(cn, E_TIMEOUT, why);
    }
    return 0;
}

/* Waits while nothing is in flight: for the next --rate slot, the end of
 * a pause, or (--count) for IDs another connection may give back. */
static void idle_wait(struct conn *cn, uint64_t now, bool starved)
{
    const struct opts *o = cn->o;
    uint64_t until = now + POLL_SLICE_NS;

    if (o->rate > 0) {
        uint64_t t0 = atomic_load_explicit(&cn->run->t0_ns, memory_order_relaxed);
        uint64_t next = slot_wake(cn, t0);

        if (next < until)
            until = next;
    }
    if (cn->pause_until > now && cn->pause_until < until)
        until = cn->pause_until;
    if (starved && now + NS_PER_MS < until)
        until = now + NS_PER_MS;
    sleep_until(until);
}

/* The request loop of lpop / take / incrby / rpush. */
void run_requests(struct conn *cn)
{
    for (;;) {
        uint64_t now = tools_ns();
        int stop = stop_level(cn, now);
        bool starved = false, done;

        if (stop >= 2 || (stop == 1 && cn->inflight == 0))
            break;
        done = count_reached(cn);
        if (done && cn->inflight == 0)
            break;
        if (cn->c == NULL) {
            if (stop != 0 || conn_ensure(cn, false) != 0)
                break;
            continue;
        }
        if (stop == 0 && !done && fill_pipeline(cn, now, &starved) != 0) {
            if (cn->fatal)
                break;
            continue; /* connection failed: reconnect */
        }
        if (cn->inflight == 0) {
            idle_wait(cn, now, starved);
            continue;
        }
        if (read_replies(cn, now, stop == 0 && !done && !starved) != 0)
            break;
        if (cn->fatal)
            break;
    }
}
