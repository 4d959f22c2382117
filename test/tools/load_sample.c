/*
 * load_sample — idpool-load's samplers, one connection each, one request
 * at a time, lines to --out: llen (LLEN every --interval-ms, "t_ns len")
 * and subscribe (the messages of a channel, "t_ns <message>", with a PING
 * after a second of silence to notice a dead or partitioned server).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "load.h"
#include "tools.h"

/*
 * Waits for one reply (default hiredis objects) until the monotonic time
 * deadline: 1 and *reply, 0 timed out or stopped, -1 the connection
 * failed (conn_fail done).
 */
static int wait_reply(struct conn *cn, uint64_t deadline, redisReply **reply)
{
    for (;;) {
        void *r = NULL;
        ssize_t n;

        if (redisReaderGetReply(cn->c->reader, &r) != REDIS_OK) {
            conn_fail(cn, E_IO, "protocol error");
            return -1;
        }
        if (r != NULL) {
            *reply = r;
            return 1;
        }
        if (tools_ns() >= deadline || stop_level(cn, tools_ns()) >= 2)
            return 0;
        n = read(cn->c->fd, cn->rbuf, sizeof cn->rbuf);
        if (n > 0) {
            if (redisReaderFeed(cn->c->reader, cn->rbuf, (size_t)n) != REDIS_OK) {
                conn_fail(cn, E_IO, "reader error");
                return -1;
            }
        } else if (n == 0) {
            conn_fail(cn, E_IO, "connection closed by the server");
            return -1;
        } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            conn_fail(cn, E_IO, strerror(errno));
            return -1;
        }
    }
}

static int send_raw(struct conn *cn, const char *cmd, size_t len)
{
    if (write_all(cn->c->fd, cmd, len) != 0) {
        conn_fail(cn, errno == EAGAIN ? E_TIMEOUT : E_IO, "write failed");
        return -1;
    }
    return 0;
}

static bool out_line_failed(struct conn *cn)
{
    if (ferror(cn->out) || fflush(cn->out) != 0) {
        fprintf(stderr, "idpool-load: %s: %s\n", cn->o->out, strerror(errno));
        cn->fatal = EXIT_ERROR;
        request_stop(1);
        return true;
    }
    return false;
}

/*
 * A sampler's turn: -1 the run is over for it (stopped, --count samples
 * taken, or no connection to be had), 1 it was disconnected and has
 * connected again, 0 it is connected: go on.
 */
static int sampler_turn(struct conn *cn, uint64_t now)
{
    const struct opts *o = cn->o;

    if (stop_level(cn, now) != 0 || (o->count != 0 && cn->requests >= o->count))
        return -1;
    if (cn->c == NULL)
        return conn_ensure(cn, false) != 0 ? -1 : 1;
    return 0;
}

/* llen: LLEN every --interval-ms on a fixed schedule (missed slots are
 * skipped), lines "t_ns len" with t_ns when the reply was parsed. */
void run_llen(struct conn *cn)
{
    const struct opts *o = cn->o;
    uint64_t t0 = atomic_load(&cn->run->t0_ns), period = o->interval_ms * NS_PER_MS, k = 0;

    for (;;) {
        uint64_t now = tools_ns(), due = t0 + k * period, sent;
        redisReply *r = NULL;
        int rc, turn;

        if ((turn = sampler_turn(cn, now)) < 0)
            break;
        if (turn > 0)
            continue;
        if (due > now) {
            sleep_until(due);
            continue;
        }
        k = (now - t0) / period + 1; /* next slot after this one */
        sent = tools_ns();
        if (send_raw(cn, cn->run->cmd, cn->run->cmd_len) != 0)
            continue;
        rc = wait_reply(cn, sent + o->timeout_ms * NS_PER_MS, &r);
        if (rc < 0)
            continue;
        if (rc == 0) {
            if (stop_level(cn, tools_ns()) >= 2)
                break;
            conn_fail(cn, E_TIMEOUT, "LLEN: no reply in time");
            continue;
        }
        now = tools_ns();
        cn->requests++;
        lat_add(cn, now - sent);
        if (r->type == REDIS_REPLY_INTEGER) {
            fprintf(cn->out, "%" PRIu64 " %lld\n", now, r->integer);
            replies_again(cn);
        } else if (r->type == REDIS_REPLY_ERROR) {
            count_error(cn, E_REPLY, now);
            (void)count_reply_class(cn, r->str);
            cn->down_errors++;
            if (!cn->down_reported)
                fprintf(stderr, "idpool-load: LLEN: %s\n", r->str);
            cn->down_reported = true;
            if (!o->reconnect) {
                cn->fatal = EXIT_ERROR;
                request_stop(1);
            }
        } else {
            fprintf(stderr, "idpool-load: LLEN: reply of type %d\n", r->type);
            cn->fatal = EXIT_MALFORMED;
            request_stop(1);
        }
        freeReplyObject(r);
        if (cn->fatal || out_line_failed(cn))
            break;
    }
}

/* subscribe: lines "t_ns <message>" for each message on the channel. A PING
 * after 1 s of silence detects a dead or partitioned server. */
void run_subscribe(struct conn *cn)
{
    const struct opts *o = cn->o;
    static const char ping[] = "*1\r\n$4\r\nPING\r\n";
    uint64_t last = tools_ns(), ping_sent = 0;

    for (;;) {
        uint64_t now = tools_ns();
        redisReply *r = NULL;
        int rc, turn;

        if ((turn = sampler_turn(cn, now)) < 0)
            break;
        if (turn > 0) {
            last = tools_ns();
            ping_sent = 0;
            continue;
        }
        if (ping_sent == 0 && now - last >= PING_IDLE_NS) {
            if (send_raw(cn, ping, sizeof ping - 1) != 0)
                continue;
            ping_sent = now;
        }
        if (ping_sent != 0 && now - ping_sent >= o->timeout_ms * NS_PER_MS) {
            conn_fail(cn, E_TIMEOUT, "subscribe: no PING reply in time");
            continue;
        }
        rc = wait_reply(cn, now + POLL_SLICE_NS, &r);
        if (rc <= 0)
            continue;
        now = tools_ns();
        last = now;
        replies_again(cn);
        if (r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
            r->element[0]->type == REDIS_REPLY_STRING) {
            const char *kind = r->element[0]->str;

            if (strcmp(kind, "message") == 0 && r->elements == 3 &&
                r->element[2]->type == REDIS_REPLY_STRING) {
                cn->requests++;
                fprintf(cn->out, "%" PRIu64 " %.*s\n", now, (int)r->element[2]->len,
                        r->element[2]->str);
            } else if (strcmp(kind, "pong") == 0) {
                if (ping_sent)
                    lat_add(cn, now - ping_sent);
                ping_sent = 0;
            }
        }
        freeReplyObject(r);
        if (out_line_failed(cn))
            break;
    }
}
