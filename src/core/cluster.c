#include "cluster.h"

#include <string.h>
#include <strings.h>

#include <hiredis/hiredis.h>

#include "text.h"

#define SLOT_MAX (KEYS_SLOTS - 1)

void cluster_table_init(struct cluster_table *t)
{
    memset(t, 0, sizeof(*t));
    for (size_t i = 0; i < KEYS_SLOTS; i++)
        t->owner[i] = CLUSTER_NO_OWNER;
    t->unowned = KEYS_SLOTS;
}

/* The n bytes at host may go into struct cluster_addr: a host name or an address. */
static int host_fits(const char *host, size_t n)
{
    return n < sizeof(((struct cluster_addr *)0)->host) && text_host_valid(host, n);
}

/* host (n bytes):port and host2 (n2 bytes):port2 are one node: a host name has no case. */
static int addr_same(const char *host, size_t n, int port, const char *host2, size_t n2, int port2)
{
    return port == port2 && n == n2 && strncasecmp(host, host2, n) == 0;
}

/* Index of host (n bytes):port in t; -1 when absent. */
static int node_find(const struct cluster_table *t, const char *host, size_t n, int port)
{
    for (size_t i = 0; i < t->nprimaries; i++) {
        const struct cluster_addr *a = &t->primary[i];
        if (addr_same(a->host, strlen(a->host), a->port, host, n, port))
            return (int)i;
    }
    return -1;
}

/* cluster_table_node for a host of n bytes. */
static int node_index(struct cluster_table *t, const char *host, size_t n, int port)
{
    int i = node_find(t, host, n, port);
    struct cluster_addr *a;

    if (i >= 0)
        return i;
    if (t->nprimaries == CLUSTER_NODES_MAX || !host_fits(host, n) || port < 1 || port > 65535)
        return -1;
    a = &t->primary[t->nprimaries];
    memcpy(a->host, host, n);
    a->host[n] = '\0';
    a->port = port;
    return (int)t->nprimaries++;
}

int cluster_table_node(struct cluster_table *t, const char *host, int port)
{
    return node_index(t, host, strlen(host), port);
}

int cluster_table_move(struct cluster_table *t, unsigned slot, const char *host, int port)
{
    int i = slot < KEYS_SLOTS ? node_index(t, host, strlen(host), port) : -1;

    if (i < 0)
        return -1;
    if (t->owner[slot] == CLUSTER_NO_OWNER)
        t->unowned--;
    t->owner[slot] = (uint16_t)i;
    return i;
}

/* What one entry of CLUSTER SLOTS says: slots first..last live on the primary host:port. */
struct entry {
    long long first, last;
    const char *host; /* the reply's, or `asked`; NULL: "?", no address */
    size_t hostlen;
    int port;
};

static int is_int(const redisReply *r, long long min, long long max)
{
    return r && r->type == REDIS_REPLY_INTEGER && r->integer >= min && r->integer <= max;
}

/*
 * Read entry i of a CLUSTER SLOTS reply into e: 0, or -1 with err saying
 * what is wrong (never echoing the reply's bytes).
 */
static int entry_read(const redisReply *r, size_t i, const char *asked, struct entry *e, char *err,
                      size_t errlen)
{
    const redisReply *node, *host;

    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 3 || !r->element[0] ||
        r->element[0]->type != REDIS_REPLY_INTEGER || !r->element[1] ||
        r->element[1]->type != REDIS_REPLY_INTEGER) {
        text_err(err, errlen, "CLUSTER SLOTS entry %zu is not [start, end, primary, ...]", i);
        return -1;
    }
    e->first = r->element[0]->integer;
    e->last = r->element[1]->integer;
    if (e->first < 0 || e->last > SLOT_MAX || e->first > e->last) {
        text_err(err, errlen, "CLUSTER SLOTS entry %zu: slots %lld..%lld, not a range of 0..%d", i,
                 e->first, e->last, SLOT_MAX);
        return -1;
    }
    node = r->element[2];
    if (!node || node->type != REDIS_REPLY_ARRAY || node->elements < 2 ||
        !(host = node->element[0]) ||
        (host->type != REDIS_REPLY_STRING && host->type != REDIS_REPLY_NIL) ||
        !is_int(node->element[1], 1, 65535)) {
        text_err(err, errlen,
                 "CLUSTER SLOTS entry %zu: the primary is not [host, port 1..65535, ...]", i);
        return -1;
    }
    e->port = (int)node->element[1]->integer;
    e->host = host->type == REDIS_REPLY_STRING ? host->str : "";
    e->hostlen = host->type == REDIS_REPLY_STRING ? host->len : 0;
    if (e->hostlen == 1 && e->host[0] == '?') {
        e->host = NULL;
        return 0;
    }
    if (e->hostlen == 0 && asked) {
        e->host = asked;
        e->hostlen = strlen(asked);
    }
    if (!host_fits(e->host, e->hostlen)) {
        text_err(err, errlen,
                 "CLUSTER SLOTS entry %zu: the primary's host is not a host name or address%s", i,
                 e->hostlen == 0 ? " (it is the node asked, which is not known)" : "");
        return -1;
    }
    return 0;
}

/*
 * Two passes: the first checks every entry and counts the primaries, so
 * that the second, which writes t, cannot fail halfway.
 */
int cluster_table_read(struct cluster_table *t, const struct redisReply *slots, const char *asked,
                       char *err, size_t errlen)
{
    struct {
        const char *host;
        size_t n;
        int port;
    } seen[CLUSTER_NODES_MAX];
    size_t nseen = 0;
    struct entry e;

    if (!slots || slots->type != REDIS_REPLY_ARRAY) {
        text_err(err, errlen, "CLUSTER SLOTS answered %s, not an array",
                 slots && slots->type == REDIS_REPLY_ERROR ? "an error" : "something else");
        return -1;
    }
    for (size_t i = 0; i < slots->elements; i++) {
        size_t j = 0;

        if (entry_read(slots->element[i], i, asked, &e, err, errlen) < 0)
            return -1;
        while (e.host && j < nseen &&
               !addr_same(seen[j].host, seen[j].n, seen[j].port, e.host, e.hostlen, e.port))
            j++;
        if (!e.host || j < nseen)
            continue;
        if (nseen == CLUSTER_NODES_MAX) {
            text_err(err, errlen, "CLUSTER SLOTS names more than %d primaries", CLUSTER_NODES_MAX);
            return -1;
        }
        seen[nseen].host = e.host;
        seen[nseen].n = e.hostlen;
        seen[nseen].port = e.port;
        nseen++;
    }
    cluster_table_init(t);
    for (size_t i = 0; i < slots->elements; i++) {
        int owner;

        if (entry_read(slots->element[i], i, asked, &e, NULL, 0) < 0) /* read once already */
            continue;
        owner = e.host ? node_index(t, e.host, e.hostlen, e.port) : (int)CLUSTER_NO_OWNER;
        for (long long s = e.first; s <= e.last; s++)
            t->owner[s] = (uint16_t)owner;
    }
    t->unowned = 0;
    for (size_t s = 0; s < KEYS_SLOTS; s++)
        t->unowned += t->owner[s] == CLUSTER_NO_OWNER;
    return 0;
}

/*
 * "<slot> <host>:<port>" (n bytes at s), the rest of a MOVED or ASK: 0 with
 * *slot and *to, or -1. An empty host is `asked`; "[v6]" loses its brackets.
 */
static int redirect_read(const char *s, size_t n, const char *asked, int *slot,
                         struct cluster_addr *to)
{
    const char *sp = memchr(s, ' ', n), *addr, *colon = NULL, *host;
    size_t alen, hlen;
    long long v, port;

    if (!sp || text_int(s, (size_t)(sp - s), 0, SLOT_MAX, &v) < 0)
        return -1;
    addr = sp + 1;
    alen = n - (size_t)(addr - s);
    for (size_t i = 0; i < alen; i++)
        if (addr[i] == ':')
            colon = addr + i;
    if (!colon || text_int(colon + 1, alen - (size_t)(colon + 1 - addr), 1, 65535, &port) < 0)
        return -1;
    host = addr;
    hlen = (size_t)(colon - addr);
    if (hlen >= 2 && host[0] == '[' && host[hlen - 1] == ']') {
        host++;
        hlen -= 2;
    } else if (hlen == 0 && asked) {
        host = asked;
        hlen = strlen(asked);
    }
    if (!host_fits(host, hlen))
        return -1;
    memcpy(to->host, host, hlen);
    to->host[hlen] = '\0';
    to->port = (int)port;
    *slot = (int)v;
    return 0;
}

enum cluster_error cluster_error_read(const char *err, size_t len, const char *asked, int *slot,
                                      struct cluster_addr *to)
{
    static const struct {
        const char *word;
        enum cluster_error kind;
    } words[] = {
        {"MOVED", CLUSTER_MOVED},
        {"ASK", CLUSTER_ASK},
        {"TRYAGAIN", CLUSTER_TRYAGAIN},
        {"CLUSTERDOWN", CLUSTER_DOWN},
    };
    const char *sp = memchr(err, ' ', len);
    size_t wlen = sp ? (size_t)(sp - err) : len;

    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
        struct cluster_addr a;
        int s;

        if (strlen(words[i].word) != wlen || memcmp(err, words[i].word, wlen) != 0)
            continue;
        if (words[i].kind != CLUSTER_MOVED && words[i].kind != CLUSTER_ASK)
            return words[i].kind;
        if (!sp || redirect_read(sp + 1, len - wlen - 1, asked, &s, &a) < 0)
            return CLUSTER_ERR_OTHER;
        *slot = s;
        *to = a;
        return words[i].kind;
    }
    return CLUSTER_ERR_OTHER;
}

void cluster_refresh_want(struct cluster_refresh *r)
{
    r->wanted = 1;
}

int cluster_refresh_due(struct cluster_refresh *r, uint64_t now_ms, int64_t *wait_ms)
{
    uint64_t since = now_ms > r->last_ms ? now_ms - r->last_ms : 0;
    uint64_t after = r->wanted ? CLUSTER_REFRESH_MIN_MS : CLUSTER_REFRESH_MAX_MS;

    if (r->in_flight) {
        if (wait_ms)
            *wait_ms = -1;
        return 0;
    }
    if (r->sent > 0 && since < after) {
        if (wait_ms)
            *wait_ms = (int64_t)(after - since);
        return 0;
    }
    r->sent++;
    r->last_ms = now_ms;
    r->in_flight = 1;
    r->wanted = 0;
    return 1;
}

void cluster_refresh_done(struct cluster_refresh *r)
{
    r->in_flight = 0;
}
