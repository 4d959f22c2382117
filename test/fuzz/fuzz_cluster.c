/*
 * fuzz_cluster — libFuzzer target for what cluster.c reads from Redis:
 * the input after its first byte is RESP, read by hiredis' reader as a
 * router would get it; every reply goes to cluster_table_read() (into one
 * table, kept from reply to reply) and an error reply also to
 * cluster_error_read(). The first byte picks the node that was asked:
 * "10.0.0.9", none (NULL), "" or "::1".
 *
 * Invariants: the table is always whole (at most CLUSTER_NODES_MAX
 * primaries, distinct, each a host that fits and a port in 1..65535;
 * every owner a primary or CLUSTER_NO_OWNER; unowned counts the latter);
 * a read that fails leaves it as it was, with an error message. An error
 * reply is TRYAGAIN or CLUSTERDOWN exactly when its first word is; a MOVED
 * or ASK that was read has a slot in 0..16383 and an address as above,
 * and written again as Redis writes it ("MOVED <slot> <host>:<port>") reads
 * the same; its address joins the table unless the table is full. Anything
 * else writes neither the slot nor the address.
 */
#include <strings.h>

#include <hiredis/hiredis.h>

#include "cluster.h"
#include "fuzz.h"
#include "text.h"

/* hiredis 0.14 allocates an array's element pointers up front: bounded here. */
#define ARRAY_MAX 65536

static struct cluster_table table, copy; /* 100 kB each: not on the stack */
static void *(*create_array)(const redisReadTask *, int);

static void *array_capped(const redisReadTask *task, int elements)
{
    return elements > ARRAY_MAX ? NULL : create_array(task, elements);
}

static void check_addr(const struct cluster_addr *a)
{
    size_t n = strnlen(a->host, sizeof(a->host));

    CHECK(n > 0 && n < sizeof(a->host));
    CHECK(text_host_valid(a->host, n));
    CHECK(a->port >= 1 && a->port <= 65535);
}

static void check_table(const struct cluster_table *t)
{
    size_t unowned = 0;

    CHECK(t->nprimaries <= CLUSTER_NODES_MAX);
    for (size_t i = 0; i < t->nprimaries; i++) {
        check_addr(&t->primary[i]);
        for (size_t j = 0; j < i; j++)
            CHECK(t->primary[i].port != t->primary[j].port ||
                  strcasecmp(t->primary[i].host, t->primary[j].host) != 0);
    }
    for (size_t s = 0; s < KEYS_SLOTS; s++) {
        if (t->owner[s] == CLUSTER_NO_OWNER)
            unowned++;
        else
            CHECK(t->owner[s] < t->nprimaries);
    }
    CHECK(unowned == t->unowned);
}

/* The n bytes at s begin with the word w, then a space or nothing. */
static int first_word(const char *s, size_t n, const char *w)
{
    size_t m = strlen(w);

    return n >= m && memcmp(s, w, m) == 0 && (n == m || s[m] == ' ');
}

static void check_error(const redisReply *r, const char *asked)
{
    struct cluster_addr to, untouched, again;
    char text[512];
    int slot = -1, slot2 = -1, i;
    enum cluster_error e;
    size_t n;

    memset(&to, 0x5a, sizeof(to));
    untouched = to;
    e = cluster_error_read(r->str, r->len, asked, &slot, &to);
    CHECK((e == CLUSTER_TRYAGAIN) == first_word(r->str, r->len, "TRYAGAIN"));
    CHECK((e == CLUSTER_DOWN) == first_word(r->str, r->len, "CLUSTERDOWN"));
    if (e != CLUSTER_MOVED && e != CLUSTER_ASK) {
        CHECK(slot == -1 && memcmp(&to, &untouched, sizeof(to)) == 0);
        return;
    }
    CHECK(first_word(r->str, r->len, e == CLUSTER_MOVED ? "MOVED" : "ASK"));
    CHECK(slot >= 0 && slot < KEYS_SLOTS);
    check_addr(&to);
    snprintf(text, sizeof(text), "%s %d %s:%d", e == CLUSTER_MOVED ? "MOVED" : "ASK", slot, to.host,
             to.port);
    CHECK(cluster_error_read(text, strlen(text), NULL, &slot2, &again) == e);
    CHECK(slot2 == slot && strcmp(again.host, to.host) == 0 && again.port == to.port);
    n = table.nprimaries;
    i = cluster_table_node(&table, to.host, to.port);
    CHECK(i >= 0 || n == CLUSTER_NODES_MAX);
    CHECK(i < 0 ||
          (strcasecmp(table.primary[i].host, to.host) == 0 && table.primary[i].port == to.port));
    CHECK(table.nprimaries == n + (i == (int)n)); /* added only when absent */
    for (size_t j = 0; i == (int)n && j < n; j++)
        CHECK(table.primary[j].port != to.port || strcasecmp(table.primary[j].host, to.host) != 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const askeds[] = {"10.0.0.9", NULL, "", "::1"};
    static redisReplyObjectFunctions fns;
    const char *asked;
    redisReader *reader;
    void *reply;
    char err[256];

    if (size == 0)
        return 0;
    asked = askeds[data[0] % 4];
    reader = redisReaderCreate();
    CHECK(reader != NULL);
    fns = *reader->fn;
    create_array = fns.createArray;
    fns.createArray = array_capped;
    reader->fn = &fns;
    cluster_table_init(&table);
    CHECK(redisReaderFeed(reader, (const char *)data + 1, size - 1) == REDIS_OK);
    while (redisReaderGetReply(reader, &reply) == REDIS_OK && reply != NULL) {
        const redisReply *r = reply;

        memcpy(&copy, &table, sizeof(table));
        err[0] = '\0';
        if (cluster_table_read(&table, r, asked, err, sizeof(err)) < 0) {
            fz_check_err(err);
            CHECK(memcmp(&copy, &table, sizeof(table)) == 0);
        } else {
            check_table(&table);
        }
        if (r->type == REDIS_REPLY_ERROR)
            check_error(r, asked);
        freeReplyObject(reply);
    }
    redisReaderFree(reader);
    return 0;
}
