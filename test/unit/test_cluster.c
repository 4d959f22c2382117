/*
 * Unit tests of cluster (cluster.c): the slot table read from CLUSTER SLOTS
 * replies built by hand as hiredis would hand them over (RESP2: a node is
 * [host, port, id, metadata...], Redis 7's metadata map a flat array), the
 * table's nodes, the error replies of a router, and the refresh throttle's
 * timeline.
 */
#include <stdio.h>
#include <string.h>

#include "cluster.h"
#include "text.h"
#include "unit.h"
#include "unit_reply.h"

/* a (a struct cluster_addr) is host:port. */
#define CHECK_ADDR(a, h, p) CHECK(strcmp((a).host, (h)) == 0 && (a).port == (p))

/* Tables are large (100 kB): static, not on the stack. */
static struct cluster_table t, before;

/* [host, port, id] */
static redisReply *node(const char *host, long long port)
{
    return reply_arr(3, reply_str(host), reply_int(port), reply_str("0123abcd"));
}

/* [first, last, primary] */
static redisReply *range(long long first, long long last, redisReply *primary)
{
    return reply_arr(3, reply_int(first), reply_int(last), primary);
}

/* The slot table reads r, asked "10.0.0.9"; the read must succeed. */
static void read_ok(const redisReply *r)
{
    char err[256] = "";

    CHECK(cluster_table_read(&t, r, "10.0.0.9", err, sizeof(err)) == 0);
    if (err[0])
        fprintf(stderr, "  unexpected error: %s\n", err);
}

/* The owner of every slot in first..last is `owner`. */
static int owned(size_t first, size_t last, unsigned owner)
{
    for (size_t s = first; s <= last; s++)
        if (t.owner[s] != owner)
            return 0;
    return 1;
}

static void test_init(void)
{
    memset(&t, 0xa5, sizeof(t));
    cluster_table_init(&t);
    CHECK_EQ_U64(t.nprimaries, 0);
    CHECK_EQ_U64(t.unowned, KEYS_SLOTS);
    CHECK(owned(0, KEYS_SLOTS - 1, CLUSTER_NO_OWNER));
}

/* Three primaries, with replicas and Redis 7's metadata; the one with host "" is the one asked. */
static void test_read(void)
{
    reply_reset();
    read_ok(reply_arr(
        3, reply_arr(4, reply_int(0), reply_int(5460), node("127.0.0.1", 7000), node("h4", 7003)),
        reply_arr(5, reply_int(5461), reply_int(10922),
                  reply_arr(4, reply_str("::1"), reply_int(7001), reply_str("id2"),
                            reply_arr(2, reply_str("hostname"), reply_str("n2.example"))),
                  node("h5", 7004), node("h6", 7005)),
        range(10923, 16383, node("", 7002))));
    CHECK_EQ_U64(t.nprimaries, 3);
    CHECK_ADDR(t.primary[0], "127.0.0.1", 7000);
    CHECK_ADDR(t.primary[1], "::1", 7001);
    CHECK_ADDR(t.primary[2], "10.0.0.9", 7002);
    CHECK(owned(0, 5460, 0) && owned(5461, 10922, 1) && owned(10923, 16383, 2));
    CHECK_EQ_U64(t.unowned, 0);

    /* A fresh node that serves no slot yet answers an empty array. */
    reply_reset();
    read_ok(reply_arr(0));
    CHECK_EQ_U64(t.nprimaries, 0);
    CHECK_EQ_U64(t.unowned, KEYS_SLOTS);
}

/* Holes, a primary named twice (in any case), nil and "?" hosts, ranges that overlap. */
static void test_read_holes(void)
{
    reply_reset();
    read_ok(reply_arr(5, range(0, 99, node("a.example", 1)), range(200, 299, node("A.EXAMPLE", 1)),
                      range(300, 300, reply_arr(2, reply_nil(), reply_int(2))),
                      range(400, 499, node("?", 3)), range(16383, 16383, node("a.example", 4))));
    CHECK_EQ_U64(t.nprimaries, 3); /* "?" names no address */
    CHECK_ADDR(t.primary[0], "a.example", 1);
    CHECK_ADDR(t.primary[1], "10.0.0.9", 2); /* nil: Redis 7's unknown-endpoint */
    CHECK_ADDR(t.primary[2], "a.example", 4);
    CHECK(owned(0, 99, 0) && owned(200, 299, 0) && owned(300, 300, 1) && owned(16383, 16383, 2));
    CHECK(owned(100, 199, CLUSTER_NO_OWNER) && owned(301, 16382, CLUSTER_NO_OWNER));
    CHECK_EQ_U64(t.unowned, KEYS_SLOTS - 100 - 100 - 1 - 1);

    /* The later of two overlapping ranges wins; an earlier table is forgotten. */
    reply_reset();
    read_ok(reply_arr(2, range(0, 100, node("a", 1)), range(50, 60, node("b", 2))));
    CHECK_EQ_U64(t.nprimaries, 2);
    CHECK(owned(0, 49, 0) && owned(50, 60, 1) && owned(61, 100, 0));
    CHECK_EQ_U64(t.unowned, KEYS_SLOTS - 101);
}

/* A reply that cannot be read: -1, a message containing want, the table as it was. */
static void bad(const redisReply *r, const char *asked, const char *want)
{
    char err[256] = "";

    memcpy(&before, &t, sizeof(t));
    CHECK(cluster_table_read(&t, r, asked, err, sizeof(err)) == -1);
    CHECK_STR_CONTAINS(err, want);
    CHECK(memcmp(&before, &t, sizeof(t)) == 0);
}

static void test_read_malformed(void)
{
    static char longhost[300];
    const char *range_msg = "not a range of 0..16383";
    const char *node_msg = "the primary is not [host, port 1..65535, ...]";
    const char *host_msg = "the primary's host is not a host name or address";

    memset(longhost, 'h', 256); /* one more than fits */
    reply_reset();
    read_ok(reply_arr(1, range(0, 16383, node("a", 1))));
    bad(NULL, "x", "not an array");
    bad(reply_str("x"), "x", "CLUSTER SLOTS answered something else, not an array");
    bad(reply_err("ERR This instance has cluster support disabled"), "x", "answered an error");
    /* A good entry first: nothing of it may reach the table either. */
    bad(reply_arr(2, range(0, 10, node("b", 2)), reply_nil()), "x",
        "entry 1 is not [start, end, primary, ...]");
    bad(reply_arr(1, reply_arr(2, reply_int(0), reply_int(1))), "x", "entry 0 is not");
    bad(reply_arr(1, reply_arr(3, reply_str("0"), reply_int(1), node("b", 2))), "x",
        "entry 0 is not");
    bad(reply_arr(1, reply_arr(3, reply_int(0), reply_nil(), node("b", 2))), "x", "entry 0 is not");
    bad(reply_arr(1, range(-1, 5, node("b", 2))), "x", range_msg);
    bad(reply_arr(1, range(0, 16384, node("b", 2))), "x", "slots 0..16384, not a range");
    bad(reply_arr(1, range(7, 6, node("b", 2))), "x", range_msg);
    bad(reply_arr(1, range(0, 1, reply_str("b:2"))), "x", node_msg);
    bad(reply_arr(1, range(0, 1, reply_arr(1, reply_str("b")))), "x", node_msg);
    bad(reply_arr(1, range(0, 1, reply_arr(2, reply_int(1), reply_int(2)))), "x", node_msg);
    bad(reply_arr(1, range(0, 1, reply_arr(2, reply_str("b"), reply_str("2")))), "x", node_msg);
    bad(reply_arr(1, range(0, 1, node("b", 0))), "x", node_msg);
    bad(reply_arr(1, range(0, 1, node("b", 65536))), "x", node_msg);
    bad(reply_arr(1, range(0, 1, node("b c", 2))), "x", host_msg);
    bad(reply_arr(1, range(0, 1, node("[::1]", 2))), "x", host_msg);
    bad(reply_arr(1, range(0, 1, node(longhost, 2))), "x", host_msg);
    bad(reply_arr(1, range(0, 1, reply_arr(2, reply_strn("a\0b", 3), reply_int(2)))), "x",
        host_msg);
    /* The node asked, when it is not known (or not a host). */
    bad(reply_arr(1, range(0, 1, node("", 2))), NULL, "(it is the node asked, which is not known)");
    bad(reply_arr(1, range(0, 1, reply_arr(2, reply_nil(), reply_int(2)))), "", "not known");
    bad(reply_arr(1, range(0, 1, node("", 2))), longhost, host_msg);
    /* 255 bytes fit. */
    longhost[255] = '\0';
    read_ok(reply_arr(1, range(0, 1, node(longhost, 2))));
    CHECK_EQ_U64(strlen(t.primary[0].host), 255);
}

/* At most CLUSTER_NODES_MAX primaries; the same ones named again do not count. */
static void test_read_many(void)
{
    static char hosts[CLUSTER_NODES_MAX + 1][16];
    redisReply *el[2 * CLUSTER_NODES_MAX];
    char err[256] = "";

    reply_reset();
    for (size_t i = 0; i <= CLUSTER_NODES_MAX; i++) {
        snprintf(hosts[i], sizeof(hosts[i]), "10.0.%zu.%zu", i / 256, i % 256);
        el[i] = range((long long)i, (long long)i, node(hosts[i], 6379));
    }
    read_ok(reply_arrv(el, CLUSTER_NODES_MAX));
    CHECK_EQ_U64(t.nprimaries, CLUSTER_NODES_MAX);
    CHECK(t.owner[CLUSTER_NODES_MAX - 1] == CLUSTER_NODES_MAX - 1);
    memcpy(&before, &t, sizeof(t));
    CHECK(cluster_table_read(&t, reply_arrv(el, CLUSTER_NODES_MAX + 1), "x", err, sizeof(err)) ==
          -1);
    CHECK_STR_CONTAINS(err, "CLUSTER SLOTS names more than 256 primaries");
    CHECK(memcmp(&before, &t, sizeof(t)) == 0);
    /* The same 256 again, for other slots: no overflow. */
    for (size_t i = 0; i < CLUSTER_NODES_MAX; i++)
        el[CLUSTER_NODES_MAX + i] =
            range(1000 + (long long)i, 1000 + (long long)i, node(hosts[i], 6379));
    read_ok(reply_arrv(el, 2 * CLUSTER_NODES_MAX));
    CHECK_EQ_U64(t.nprimaries, CLUSTER_NODES_MAX);
    CHECK(t.owner[1000] == 0 && t.owner[1000 + CLUSTER_NODES_MAX - 1] == CLUSTER_NODES_MAX - 1);
    CHECK_EQ_U64(t.unowned, KEYS_SLOTS - 2 * CLUSTER_NODES_MAX);
}

static void test_table_node(void)
{
    static char longhost[300];
    char host[32];

    cluster_table_init(&t);
    CHECK(cluster_table_node(&t, "10.0.0.1", 7000) == 0);
    CHECK(cluster_table_node(&t, "10.0.0.1", 7001) == 1);
    CHECK(cluster_table_node(&t, "n.example", 7000) == 2);
    CHECK(cluster_table_node(&t, "N.EXAMPLE", 7000) == 2); /* found, in any case */
    CHECK(cluster_table_node(&t, "10.0.0.1", 7000) == 0);
    CHECK_EQ_U64(t.nprimaries, 3);
    CHECK_STR(t.primary[2].host, "n.example");
    CHECK_EQ_U64(t.unowned, KEYS_SLOTS); /* no slot moves with it */
    /* No host, no port, or one that does not fit. */
    memset(longhost, 'h', 256);
    CHECK(cluster_table_node(&t, "", 1) == -1);
    CHECK(cluster_table_node(&t, "a b", 1) == -1);
    CHECK(cluster_table_node(&t, longhost, 1) == -1);
    CHECK(cluster_table_node(&t, "a", 0) == -1);
    CHECK(cluster_table_node(&t, "a", 65536) == -1);
    CHECK_EQ_U64(t.nprimaries, 3);
    /* Full: a known one is still found. */
    for (int i = 3; i < CLUSTER_NODES_MAX; i++) {
        snprintf(host, sizeof(host), "h%d", i);
        CHECK(cluster_table_node(&t, host, 1) == i);
    }
    CHECK(cluster_table_node(&t, "one-more", 1) == -1);
    CHECK(cluster_table_node(&t, "h3", 1) == 3);
    CHECK_EQ_U64(t.nprimaries, CLUSTER_NODES_MAX);
}

/* cluster_error_read of s (NUL-terminated) with asked "10.0.0.9". */
static enum cluster_error classify(const char *s, int *slot, struct cluster_addr *to)
{
    return cluster_error_read(s, strlen(s), "10.0.0.9", slot, to);
}

static void test_errors(void)
{
    static const char *const other[] = {
        "ERR unknown command 'X'",
        "MOVEDX 1 h:1",
        "moved 1 h:1",
        "MOVED",
        "MOVED ",
        "MOVED 3999",
        "MOVED 3999 ",
        "MOVED  3999 h:1",
        "MOVED 16384 h:1",
        "MOVED -1 h:1",
        "MOVED x h:1",
        "MOVED 3999 h",
        "MOVED 3999 h:",
        "MOVED 3999 h:0",
        "MOVED 3999 h:65536",
        "MOVED 3999 h:1 ",
        "MOVED 3999 h:1 extra",
        "MOVED 3999 ho st:1",
        "MOVED 3999 ?:6380",
        "MOVED 3999 []:1",
        "ASK 3999 [::1:1",
        "TRYAGAINX",
        "CLUSTERDOWNX The cluster is down",
        "",
    };
    struct cluster_addr to = {"untouched", 42};
    char longer[300];
    int slot = -7;

    CHECK(classify("MOVED 3999 127.0.0.1:6381", &slot, &to) == CLUSTER_MOVED);
    CHECK(slot == 3999);
    CHECK_ADDR(to, "127.0.0.1", 6381);
    CHECK(classify("ASK 0 ::1:6382", &slot, &to) == CLUSTER_ASK); /* as Redis writes IPv6 */
    CHECK(slot == 0);
    CHECK_ADDR(to, "::1", 6382);
    CHECK(classify("ASK 16383 [2001:db8::1]:7000", &slot, &to) == CLUSTER_ASK);
    CHECK(slot == 16383);
    CHECK_STR(to.host, "2001:db8::1");
    CHECK(classify("MOVED 12 :6383", &slot, &to) == CLUSTER_MOVED); /* the node that answered */
    CHECK_ADDR(to, "10.0.0.9", 6383);
    CHECK(classify("MOVED 1 n-1.example:1", &slot, &to) == CLUSTER_MOVED);
    CHECK_STR(to.host, "n-1.example");
    CHECK(cluster_error_read("MOVED 1 :1", 10, NULL, &slot, &to) == CLUSTER_ERR_OTHER);
    /* Only len bytes count. */
    CHECK(cluster_error_read("MOVED 2 h:123", 11, NULL, &slot, &to) == CLUSTER_MOVED);
    CHECK(slot == 2 && to.port == 1);
    CHECK(cluster_error_read("MOVED 2\0 h:1", 12, NULL, &slot, &to) == CLUSTER_ERR_OTHER);
    CHECK(cluster_error_read("MOVED 2 h\0:1", 12, NULL, &slot, &to) == CLUSTER_ERR_OTHER);

    CHECK(classify("TRYAGAIN Multiple keys request during rehashing of slot", &slot, &to) ==
          CLUSTER_TRYAGAIN);
    CHECK(classify("TRYAGAIN", &slot, &to) == CLUSTER_TRYAGAIN);
    CHECK(classify("CLUSTERDOWN The cluster is down", &slot, &to) == CLUSTER_DOWN);
    CHECK(classify("CLUSTERDOWN Hash slot not served", &slot, &to) == CLUSTER_DOWN);

    /* Anything else, or a MOVED or ASK that cannot be read: OTHER, slot and to untouched. */
    slot = -7;
    to.port = 42;
    snprintf(to.host, sizeof(to.host), "untouched");
    for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++) {
        CHECK(classify(other[i], &slot, &to) == CLUSTER_ERR_OTHER);
        if (slot != -7)
            fprintf(stderr, "  '%s' wrote the slot\n", other[i]);
    }
    memset(longer, 'h', sizeof(longer));
    memcpy(longer, "MOVED 1 ", 8);
    snprintf(longer + 8 + 256, sizeof(longer) - 8 - 256, ":1"); /* a host of 256 bytes */
    CHECK(classify(longer, &slot, &to) == CLUSTER_ERR_OTHER);
    snprintf(longer + 8 + 255, sizeof(longer) - 8 - 255, ":1"); /* 255 fit */
    CHECK(classify(longer, &slot, &to) == CLUSTER_MOVED);
    CHECK_EQ_U64(strlen(to.host), 255);
    CHECK(slot == 1);

    CHECK(text_host_valid("a-b_c.d:1", 9) == 1);
    CHECK(text_host_valid("", 0) == 0);
    CHECK(text_host_valid("a/b", 3) == 0);
}

/* A MOVED patches one slot: to a known primary, to a new one, or not at all. */
static void test_table_move(void)
{
    cluster_table_init(&t);
    CHECK(cluster_table_node(&t, "10.0.0.1", 7000) == 0);
    CHECK(cluster_table_move(&t, 5, "10.0.0.1", 7000) == 0);
    CHECK(t.owner[5] == 0 && t.unowned == KEYS_SLOTS - 1);
    CHECK(cluster_table_move(&t, 5, "10.0.0.2", 7001) == 1); /* a primary the table did not know */
    CHECK(t.owner[5] == 1 && t.unowned == KEYS_SLOTS - 1 && t.nprimaries == 2);
    CHECK_ADDR(t.primary[1], "10.0.0.2", 7001);
    CHECK(cluster_table_move(&t, KEYS_SLOTS - 1, "10.0.0.2", 7001) == 1);
    CHECK(t.unowned == KEYS_SLOTS - 2);
    before = t;
    CHECK(cluster_table_move(&t, KEYS_SLOTS, "10.0.0.2", 7001) == -1); /* no such slot */
    CHECK(cluster_table_move(&t, 6, "a b", 7001) == -1);               /* no host */
    CHECK(cluster_table_move(&t, 6, "10.0.0.2", 0) == -1);
    CHECK(memcmp(&before, &t, sizeof(t)) == 0);
}

/* The throttle's timeline: first read at once, then at most one a second, one at a time. */
static void test_refresh(void)
{
    struct cluster_refresh r = {0};
    int64_t wait = 0;

    cluster_refresh_want(&r);
    CHECK(cluster_refresh_due(&r, 0, &wait) == 1); /* t=0: none sent yet */
    CHECK(r.in_flight && r.sent == 1 && r.last_ms == 0 && !r.wanted);
    CHECK(cluster_refresh_due(&r, 1, &wait) == 0); /* in flight */
    CHECK(wait == -1);
    cluster_refresh_done(&r);
    cluster_refresh_want(&r); /* t=500: a MOVED */
    CHECK(cluster_refresh_due(&r, 500, &wait) == 0);
    CHECK(wait == 500);
    CHECK(cluster_refresh_due(&r, 999, NULL) == 0);
    CHECK(cluster_refresh_due(&r, 1000, &wait) == 1);
    cluster_refresh_want(&r); /* while in flight: wanted after it */
    CHECK(cluster_refresh_due(&r, 1200, &wait) == 0);
    CHECK(wait == -1);
    cluster_refresh_done(&r);
    CHECK(cluster_refresh_due(&r, 1300, &wait) == 0);
    CHECK(wait == 700);
    CHECK(cluster_refresh_due(&r, 2000, &wait) == 1);
    cluster_refresh_done(&r);
    /* Nothing wanted: the periodic read, 10 s after the last. */
    CHECK(cluster_refresh_due(&r, 2500, &wait) == 0);
    CHECK(wait == 9500);
    CHECK(cluster_refresh_due(&r, 11999, &wait) == 0);
    CHECK(wait == 1);
    CHECK(cluster_refresh_due(&r, 12000, &wait) == 1);
    CHECK(r.sent == 4 && r.last_ms == 12000);
    cluster_refresh_done(&r);
    /* A clock behind the last read counts as no time since. */
    cluster_refresh_want(&r);
    CHECK(cluster_refresh_due(&r, 11000, &wait) == 0);
    CHECK(wait == 1000);
    /* A zeroed struct sends its first read at once, wanted or not. */
    memset(&r, 0, sizeof(r));
    CHECK(cluster_refresh_due(&r, 5, NULL) == 1);
}

int main(void)
{
    RUN(test_init);
    RUN(test_read);
    RUN(test_read_holes);
    RUN(test_read_malformed);
    RUN(test_read_many);
    RUN(test_table_node);
    RUN(test_table_move);
    RUN(test_errors);
    RUN(test_refresh);
    return unit_done();
}
