/*
 * load_conn — one connection of idpool-load and its life: set up (buffers,
 * logs), connect (TCP, AUTH, SELECT, SUBSCRIBE, socket timeouts), fail
 * (the requests in flight lost, never recorded) and, with --reconnect,
 * reconnect with backoff (--backoff-ms: doubling from MIN to MAX); the one
 * line said when an outage starts and when replies come again. With
 * --sentinel every connect asks the sentinels first (resolve.h) and checks
 * ROLE; the server popped from is said once per connect. With --cluster
 * every connect goes to the primary of --key's slot in the shared slot
 * table (read first when due: route.h), said once per connect too.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "clock.h"
#include "hist.h"
#include "keys.h"
#include "load.h"
#include "tools.h"

int conn_init(struct conn *cn, struct run *run, unsigned idx)
{
    const struct opts *o = run->o;

    cn->run = run;
    cn->o = o;
    cn->idx = idx;
    cn->rec_fd = -1;
    cn->backoff_ms = cn->o->backoff_min_ms;
    cn->ids_cap = o->batch;
    cn->ids = malloc(cn->ids_cap * sizeof *cn->ids);
    cn->ring = calloc(o->pipeline, sizeof *cn->ring);
    cn->wbuf_cap = (size_t)o->pipeline * run->cmd_len + 1;
    cn->wbuf = malloc(cn->wbuf_cap);
    cn->hist = hist_new(HIST_LINEAR_BITS, HIST_SUB_BITS, HIST_TOP_BITS);
    if (cn->ids == NULL || cn->ring == NULL || cn->wbuf == NULL || cn->hist == NULL) {
        fprintf(stderr, "idpool-load: out of memory\n");
        return -1;
    }
    if (o->record != NULL && rec_open(cn, o->record) != 0)
        return -1;
    if (o->sentinel != NULL && resolve_init(&cn->res, &o->surl, NULL, NULL) != 0) {
        fprintf(stderr, "idpool-load: --sentinel: not a Sentinel set\n");
        return -1;
    }
    if (o->out != NULL) {
        cn->out = fopen(o->out, "w");
        if (cn->out == NULL) {
            fprintf(stderr, "idpool-load: %s: %s\n", o->out, strerror(errno));
            return -1;
        }
    }
    return 0;
}

int conn_free(struct conn *cn)
{
    int rc = 0;

    if (cn->rec_fd >= 0 && close(cn->rec_fd) != 0) {
        fprintf(stderr, "idpool-load: %s: %s\n", cn->rec_path, strerror(errno));
        rc = -1;
    }
    if (cn->ref_out != NULL && fclose(cn->ref_out) != 0) {
        fprintf(stderr, "idpool-load: %s: %s\n", cn->ref_path, strerror(errno));
        rc = -1;
    }
    if (cn->out != NULL && fclose(cn->out) != 0) {
        fprintf(stderr, "idpool-load: %s: %s\n", cn->o->out, strerror(errno));
        rc = -1;
    }
    free(cn->rec_path);
    free(cn->ref_path);
    free(cn->rec_buf);
    free(cn->ids);
    free(cn->ring);
    free(cn->wbuf);
    free(cn->tl);
    free(cn->hist);
    free(cn);
    return rc;
}

static void set_sock_timeout(int fd, int opt, uint64_t ms)
{
    struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};

    (void)setsockopt(fd, SOL_SOCKET, opt, &tv, sizeof tv);
}

/* One command during setup (AUTH, SELECT, SUBSCRIBE); -1 on an error. */
static int setup_cmd(struct conn *cn, const char *what, redisReply *r)
{
    int rc = 0;

    if (r == NULL) {
        snprintf(cn->err, sizeof cn->err, "%s: %s", what, cn->c->errstr);
        return -1;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        snprintf(cn->err, sizeof cn->err, "%s: %s", what, r->str);
        rc = -1;
    }
    freeReplyObject(r);
    return rc;
}

void conn_close(struct conn *cn)
{
    if (cn->c != NULL)
        redisFree(cn->c);
    cn->c = NULL;
    memset(&cn->rs, 0, sizeof cn->rs);
}

/*
 * --cluster: the primary of --key's slot in the run's slot table (read
 * first when due, each node asked within --timeout-ms) into host and
 * *port. 0, or -1 with the reason in cn->err.
 */
static int cluster_primary(struct conn *cn, char *host, size_t len, int *port)
{
    struct run *run = cn->run;
    const struct opts *o = cn->o;
    struct cluster_addr a;
    char why[1024];
    int rc = -1;

    pthread_mutex_lock(&run->route_mu);
    if (route_sync(run->route, clock_ms() + o->timeout_ms * ROUTE_ASK_MAX, why, sizeof why) != 0)
        snprintf(cn->err, sizeof cn->err, "%s", why);
    else if (route_addr(run->route, o->key, &a) != 0)
        snprintf(cn->err, sizeof cn->err, "slot %u of %s has no primary in the slot table",
                 keys_slot(o->key, strlen(o->key)), o->key);
    else if (snprintf(host, len, "%s", a.host) < (int)len)
        rc = 0;
    *port = a.port;
    pthread_mutex_unlock(&run->route_mu);
    return rc;
}

/*
 * --cluster: the connection to the primary of --key's slot failed (a
 * connect refused, a reply lost, an error reply). In a failover that
 * primary is gone and only a read of the slot table names its promoted
 * replica: one is wanted (route.h: at most one a second), else the next
 * connects would go to the dead address until the table's periodic read.
 */
static void cluster_suspect(struct conn *cn)
{
    if (cn->o->cluster == NULL)
        return;
    pthread_mutex_lock(&cn->run->route_mu);
    route_want(cn->run->route);
    pthread_mutex_unlock(&cn->run->route_mu);
}

/*
 * One connect attempt: TCP with --timeout-ms, AUTH, SELECT, then the
 * socket gets a 100 ms receive timeout (a blocked read(2) comes back to
 * check the stop flags and the request deadline itself) and a --timeout-ms
 * send timeout. Pop modes get our reply-object functions. 0 or -1 (the
 * reason in rs.what).
 */
static int conn_open(struct conn *cn)
{
    const struct opts *o = cn->o;
    struct timeval tv = {(time_t)(o->timeout_ms / 1000),
                         (suseconds_t)(o->timeout_ms % 1000) * 1000};
    const char *host = o->host;
    char primary[256], why[512];
    int port = o->port;

    conn_close(cn);
    if (o->sentinel != NULL) {
        if (resolve_primary(&cn->res, (int)o->timeout_ms, primary, sizeof primary, &port, why,
                            sizeof why) != 0) {
            snprintf(cn->err, sizeof cn->err, "%s", why);
            return -1;
        }
        host = primary;
    } else if (o->cluster != NULL) {
        if (cluster_primary(cn, primary, sizeof primary, &port) != 0)
            return -1;
        host = primary;
    }
    cn->c = redisConnectWithTimeout(host, port, tv);
    if (cn->c == NULL) {
        snprintf(cn->err, sizeof cn->err, "out of memory");
        return -1;
    }
    if (cn->c->err) {
        snprintf(cn->err, sizeof cn->err, "connect %s:%d: %s", host, port, cn->c->errstr);
        goto fail;
    }
    if (redisSetTimeout(cn->c, tv) != REDIS_OK) {
        snprintf(cn->err, sizeof cn->err, "cannot set the socket timeout");
        goto fail;
    }
    if (o->password && setup_cmd(cn, "AUTH", redisCommand(cn->c, "AUTH %s", o->password)) != 0)
        goto fail;
    if (o->db != 0 && setup_cmd(cn, "SELECT", redisCommand(cn->c, "SELECT %d", o->db)) != 0)
        goto fail;
    if (o->sentinel != NULL) {
        if (resolve_check_master(cn->c, why, sizeof why) != 0) {
            snprintf(cn->err, sizeof cn->err, "%s:%d: %s", host, port, why);
            goto fail;
        }
        fprintf(stderr, "idpool-load: conn %u: primary %s:%d\n", cn->idx, host, port);
    }
    if (o->cluster != NULL)
        fprintf(stderr, "idpool-load: conn %u: primary %s:%d (slot %u)\n", cn->idx, host, port,
                keys_slot(o->key, strlen(o->key)));
    if (o->mode == MODE_SUBSCRIBE &&
        setup_cmd(cn, "SUBSCRIBE", redisCommand(cn->c, "SUBSCRIBE %s", o->key)) != 0)
        goto fail;
    set_sock_timeout(cn->c->fd, SO_RCVTIMEO, POLL_SLICE_NS / NS_PER_MS);
    set_sock_timeout(cn->c->fd, SO_SNDTIMEO, o->timeout_ms);
    if (o->mode != MODE_LLEN && o->mode != MODE_SUBSCRIBE) {
        reply_attach(cn);
    }
    memset(&cn->rs, 0, sizeof cn->rs);
    return 0;
fail:
    conn_close(cn);
    return -1;
}

/* The stop level this thread must obey: the global one, or 1 once the
 * duration is over. */
int stop_level(struct conn *cn, uint64_t now)
{
    int s = atomic_load_explicit(&g_stop, memory_order_relaxed);
    uint64_t dl = atomic_load_explicit(&cn->run->deadline_ns, memory_order_relaxed);

    if (s == 0 && dl != 0 && now >= dl)
        s = 1;
    return s;
}

uint64_t backoff_next(const struct conn *cn)
{
    uint64_t ms = cn->backoff_ms, max = cn->o->backoff_max_ms;

    return ms * 2 < max ? ms * 2 : max;
}

/* A good reply ends an outage: one line, and the backoff starts over. */
void replies_again(struct conn *cn)
{
    if (cn->down_reported)
        fprintf(stderr, "idpool-load: conn %u: replies again (%u errors meanwhile)\n", cn->idx,
                cn->down_errors);
    cn->down_reported = false;
    cn->down_errors = 0;
    cn->backoff_ms = cn->o->backoff_min_ms;
}

/*
 * Close the connection: the requests in flight are lost, never recorded
 * (never sent again: a lost take's IDs are a gap); their claims go back.
 */
void conn_drop(struct conn *cn)
{
    while (cn->inflight > 0) {
        unclaim(cn, cn->ring[cn->ring_head].want);
        cn->ring_head = (cn->ring_head + 1) % cn->o->pipeline;
        cn->inflight--;
    }
    cn->drop = false;
    conn_close(cn);
}

/*
 * The connection failed (kind): the requests in flight are lost, never
 * recorded; their claims go back. Without --reconnect this ends the run
 * (exit 1); with it, the next loop reconnects after the backoff.
 */
void conn_fail(struct conn *cn, enum ekind kind, const char *why)
{
    uint64_t now = tools_ns();

    count_error(cn, kind, now);
    cn->down_errors++;
    if (!cn->down_reported)
        fprintf(stderr, "idpool-load: conn %u: %s%s\n", cn->idx, why,
                cn->o->reconnect ? "; reconnecting" : "");
    cn->down_reported = true;
    conn_drop(cn);
    cluster_suspect(cn);
    if (!cn->o->reconnect) {
        cn->fatal = EXIT_ERROR;
        request_stop(1);
    }
}

/*
 * Connects, retrying with backoff (--backoff-ms) with --reconnect
 * until it works or the run stops. 0 connected, -1 not (fatal set when
 * there is no --reconnect).
 */
int conn_ensure(struct conn *cn, bool first)
{
    while (cn->c == NULL) {
        if (!first || cn->down_attempts > 0) {
            uint64_t until = tools_ns() + cn->backoff_ms * NS_PER_MS;

            while (tools_ns() < until && stop_level(cn, tools_ns()) == 0)
                sleep_until(until);
            cn->backoff_ms = backoff_next(cn);
        }
        if (stop_level(cn, tools_ns()) != 0 || count_reached(cn))
            return -1;
        if (conn_open(cn) == 0) {
            /* "replies again" is said by the first reply: a stopped server
             * still accepts connections (the kernel's backlog). */
            cn->down_attempts = 0;
            return 0;
        }
        cn->down_attempts++;
        cn->down_errors++;
        count_error(cn, E_CONNECT, tools_ns());
        cluster_suspect(cn);
        if (!cn->down_reported || !cn->o->reconnect)
            fprintf(stderr, "idpool-load: conn %u: %s%s\n", cn->idx, cn->err,
                    cn->o->reconnect ? "; retrying" : "");
        cn->down_reported = true;
        if (!cn->o->reconnect) {
            cn->fatal = EXIT_ERROR;
            request_stop(1);
            return -1;
        }
    }
    return 0;
}
