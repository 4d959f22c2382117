/*
 * Unit tests of route (src/lib/route.c) without Redis: fake cluster nodes
 * on threads of this test, each answering CLUSTER SLOTS with a table the
 * test wrote and every other command from a script (a reply, or "close":
 * the connection closed without one), and a seed that refuses connections
 * (a bound socket that does not listen). Checked: the table read from the
 * seeds, MOVED followed and patched into the table, ASK followed with
 * ASKING on the target's connection and the table unchanged, TRYAGAIN and
 * CLUSTERDOWN waited out and given up at the deadline, a command whose
 * reply was lost sent once and never again, a table that owns no slot not
 * taken, and every socket reported open then closed (libidpool's fork
 * safety).
 */
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "clock.h"
#include "keys.h"
#include "route.h"
#include "unit.h"
#include "unit_net.h"

#define SCRIPT_MAX 16

/* A fake node: its listening socket, its table, its script, what it saw. */
struct fake {
    int ls, port;
    pthread_t th;
    char slots[512];                /* the CLUSTER SLOTS reply (RESP) */
    const char *script[SCRIPT_MAX]; /* replies to the other commands, in turn ("close": none) */
    int next;                       /* the script's next reply */
    int commands, askings;          /* data commands and ASKINGs received */
    int asking_before;              /* the last data command came right after an ASKING */
};

static struct fake nodes[3];
static int open_fds;

static void on_fd(void *arg, size_t node, int fd)
{
    (void)arg;
    (void)node;
    open_fds += fd >= 0 ? 1 : -1;
}

/* The first word of each RESP command in buf[0..n): ASKING, CLUSTER, FCALL...; pipelined ones too.
 */
static int words(const char *buf, size_t n, char out[][16], int max)
{
    int k = 0;

    for (size_t i = 0; i + 1 < n && k < max; i++) {
        if (buf[i] != '*' || (i > 0 && buf[i - 1] != '\n'))
            continue;
        const char *d = memchr(buf + i, '$', n - i), *e;
        if (!d || !(e = memchr(d, '\n', n - (size_t)(d - buf))))
            break;
        snprintf(out[k], 16, "%.*s", (int)strcspn(e + 1, "\r"), e + 1);
        k++;
    }
    return k;
}

static void *serve(void *arg)
{
    struct fake *f = arg;
    char buf[4096], cmd[8][16];

    for (;;) {
        int c = accept(f->ls, NULL, NULL);
        ssize_t n;

        if (c < 0)
            return NULL;
        while ((n = read(c, buf, sizeof(buf))) > 0) {
            int k = words(buf, (size_t)n, cmd, 8), closed = 0;

            for (int j = 0; j < k && !closed; j++) {
                const char *out = "-ERR unknown\r\n";

                if (strcmp(cmd[j], "CLUSTER") == 0) {
                    out = f->slots;
                } else if (strcmp(cmd[j], "ASKING") == 0) {
                    f->askings++;
                    out = "+OK\r\n";
                } else {
                    f->asking_before = j > 0 && strcmp(cmd[j - 1], "ASKING") == 0;
                    f->commands++;
                    out = f->next < SCRIPT_MAX && f->script[f->next] ? f->script[f->next++]
                                                                     : "$2\r\nok\r\n";
                    if (strcmp(out, "close") == 0) {
                        closed = 1;
                        break;
                    }
                }
                if (write(c, out, strlen(out)) < 0)
                    closed = 1;
            }
            if (closed)
                break;
        }
        close(c);
    }
}

/* A table: every slot served by the fake node `owner` (-1: a reply that names no owner). */
static void table_of(struct fake *f, int owner)
{
    if (owner < 0)
        snprintf(f->slots, sizeof(f->slots), "*0\r\n");
    else
        snprintf(f->slots, sizeof(f->slots),
                 "*1\r\n*3\r\n:0\r\n:16383\r\n*3\r\n$9\r\n127.0.0.1\r\n:%d\r\n$2\r\nid\r\n",
                 nodes[owner].port);
}

/* A table: the slot of "a" served by node 1, every other slot by node 0 (after the MOVED). */
static void table_split(struct fake *f)
{
    unsigned sa = keys_slot("a", 1); /* 15495: neither the first nor the last */

    snprintf(f->slots, sizeof(f->slots),
             "*3\r\n*3\r\n:0\r\n:%u\r\n*2\r\n$9\r\n127.0.0.1\r\n:%d\r\n"
             "*3\r\n:%u\r\n:%u\r\n*2\r\n$9\r\n127.0.0.1\r\n:%d\r\n"
             "*3\r\n:%u\r\n:16383\r\n*2\r\n$9\r\n127.0.0.1\r\n:%d\r\n",
             sa - 1, nodes[0].port, sa, sa, nodes[1].port, sa + 1, nodes[0].port);
}

static void script(struct fake *f, const char *a, const char *b, const char *c)
{
    memset(f->script, 0, sizeof(f->script));
    f->script[0] = a;
    f->script[1] = b;
    f->script[2] = c;
    f->next = f->commands = f->askings = f->asking_before = 0;
}

/* GET key through r: what route_command says; the reply's string into got (or ""). */
static enum route_rc get(struct router *r, const char *key, unsigned ms, struct route_trip *trip,
                         char *got, char *err)
{
    const char *argv[2] = {"GET", key};
    size_t lens[2] = {3, strlen(key)};
    redisReply *y = NULL;
    enum route_rc rc = route_command(r, key, 2, argv, lens, clock_ms() + ms, &y, trip, err, 512);

    got[0] = '\0';
    if (y && (y->type == REDIS_REPLY_STRING || y->type == REDIS_REPLY_ERROR))
        snprintf(got, 64, "%s", y->str);
    freeReplyObject(y);
    return rc;
}

static void test_route(void)
{
    int dead_port, dead = unit_bound(0, &dead_port);
    char url[256], err[512], got[64], moved[96], ask[96];
    struct route_trip trip;
    struct cluster_addr a;
    struct redis_url u;
    struct router *r;
    uint64_t t0;

    for (int i = 0; i < 3; i++) {
        nodes[i].ls = unit_bound(1, &nodes[i].port);
        pthread_create(&nodes[i].th, NULL, serve, &nodes[i]);
    }
    for (int i = 0; i < 3; i++)
        table_of(&nodes[i], 0); /* every node says: node 0 owns everything */
    snprintf(url, sizeof(url), "redis-cluster://127.0.0.1:%d,127.0.0.1:%d", dead_port,
             nodes[2].port);
    u = url_of(url);
    r = route_new(&u, 500, on_fd, NULL);
    CHECK(r != NULL);
    open_fds = 0;

    /* The table, read from the seed that answers (the first refuses). */
    CHECK(route_sync(r, clock_ms() + 2000, err, sizeof(err)) == 0);
    CHECK(route_addr(r, "a", &a) == 0 && a.port == nodes[0].port);
    CHECK(route_primaries(r) == 1);

    /* MOVED: followed at once, the slot patched; the other slots stay. */
    snprintf(moved, sizeof(moved), "-MOVED %u 127.0.0.1:%d\r\n", keys_slot("a", 1), nodes[1].port);
    script(&nodes[0], moved, NULL, NULL);
    script(&nodes[1], "$5\r\nhello\r\n", NULL, NULL);
    CHECK(get(r, "a", 1000, &trip, got, err) == ROUTE_REPLY);
    CHECK_STR(got, "hello");
    CHECK(trip.moved == 1 && trip.asked == 0 && trip.retried == 0);
    CHECK(route_addr(r, "a", &a) == 0 && a.port == nodes[1].port);
    CHECK(route_addr(r, "b", &a) == 0 && a.port == nodes[0].port);
    for (int i = 0; i < 3; i++) /* what a read of the table says from now on */
        table_split(&nodes[i]);

    /* ASK: ASKING then the command on the target's connection; the table unchanged. */
    snprintf(ask, sizeof(ask), "-ASK %u 127.0.0.1:%d\r\n", keys_slot("a", 1), nodes[2].port);
    script(&nodes[1], ask, NULL, NULL);
    script(&nodes[2], "$3\r\nask\r\n", NULL, NULL);
    CHECK(get(r, "a", 1000, &trip, got, err) == ROUTE_REPLY);
    CHECK_STR(got, "ask");
    CHECK(trip.asked == 1 && trip.moved == 0);
    CHECK(nodes[2].askings == 1 && nodes[2].asking_before);
    CHECK(route_addr(r, "a", &a) == 0 && a.port == nodes[1].port);

    /* TRYAGAIN and CLUSTERDOWN: waited out, then sent again where the table says. */
    script(&nodes[1], "-TRYAGAIN Multiple keys request during rehashing of slot\r\n",
           "-CLUSTERDOWN The cluster is down\r\n", "$5\r\nagain\r\n");
    CHECK(get(r, "a", 2000, &trip, got, err) == ROUTE_REPLY);
    CHECK_STR(got, "again");
    CHECK(trip.retried == 2 && nodes[1].commands == 3);

    /* ... until the deadline: not run, may be sent again. */
    script(&nodes[1], NULL, NULL, NULL);
    for (int i = 0; i < SCRIPT_MAX; i++)
        nodes[1].script[i] = "-CLUSTERDOWN The cluster is down\r\n";
    t0 = clock_ms();
    CHECK(get(r, "a", 100, &trip, got, err) == ROUTE_UNSENT);
    CHECK(clock_ms() - t0 < 300);
    CHECK_STR_CONTAINS(err, "CLUSTERDOWN");
    CHECK(trip.retried >= 2 && (int)trip.retried == nodes[1].commands);

    /* The command's own error is the caller's. */
    script(&nodes[1], "-IDPOOL_EPOCH retry in 200 ms\r\n", NULL, NULL);
    CHECK(get(r, "a", 1000, &trip, got, err) == ROUTE_REPLY);
    CHECK_STR(got, "IDPOOL_EPOCH retry in 200 ms");

    /* A lost reply: sent once, never again; the node backs off. */
    script(&nodes[1], "close", "$4\r\nlate\r\n", NULL);
    CHECK(get(r, "a", 1000, &trip, got, err) == ROUTE_LOST);
    CHECK(nodes[1].commands == 1);
    CHECK(route_retry_at(r, "a", clock_ms()) > clock_ms());
    CHECK(get(r, "a", 1000, &trip, got, err) == ROUTE_UNSENT); /* backing off: not tried */
    CHECK_STR_CONTAINS(err, "down, next try in");
    CHECK(nodes[1].commands == 1);
    CHECK(route_retry_at(r, "b", clock_ms()) == 0); /* another primary's keys go on */

    /* Too many redirections: given up, not run. */
    snprintf(moved, sizeof(moved), "-MOVED %u 127.0.0.1:%d\r\n", keys_slot("b", 1), nodes[0].port);
    script(&nodes[0], moved, moved, moved);
    for (int i = 3; i < SCRIPT_MAX; i++)
        nodes[0].script[i] = moved;
    CHECK(get(r, "b", 1000, &trip, got, err) == ROUTE_UNSENT);
    CHECK_STR_CONTAINS(err, "redirections");
    CHECK(trip.moved == ROUTE_REDIRECTS_MAX + 1);

    route_free(r);
    CHECK(open_fds == 0); /* every socket reported was reported closed */
    redis_url_free(&u);

    /* A table that owns no slot is not taken; with none, the error names the seeds asked. */
    table_of(&nodes[2], -1);
    snprintf(url, sizeof(url), "redis-cluster://127.0.0.1:%d,127.0.0.1:%d", dead_port,
             nodes[2].port);
    u = url_of(url);
    r = route_new(&u, 500, NULL, NULL);
    CHECK(route_sync(r, clock_ms() + 2000, err, sizeof(err)) == -1);
    CHECK_STR_CONTAINS(err, "serves no slot");
    snprintf(got, sizeof(got), "127.0.0.1:%d", dead_port);
    CHECK_STR_CONTAINS(err, got);
    CHECK(route_addr(r, "a", &a) == -1);
    CHECK(get(r, "a", 200, &trip, got, err) == ROUTE_UNSENT); /* the next read in a second */
    route_free(r);
    redis_url_free(&u);

    u = url_of("redis://127.0.0.1:1");
    CHECK(route_new(&u, 500, NULL, NULL) == NULL);
    redis_url_free(&u);
    for (int i = 0; i < 3; i++) {
        shutdown(nodes[i].ls, SHUT_RDWR);
        close(nodes[i].ls);
        pthread_join(nodes[i].th, NULL);
    }
    close(dead);
}

int main(void)
{
    RUN(test_route);
    return unit_done();
}
