#include "sentinel.h"

#include <stdbool.h>
#include <string.h>
#include <strings.h>

#include <hiredis/hiredis.h>

#include "text.h"

/*
 * An address as a sentinel gives it (n bytes of host, plen of port): a
 * host name or an IP address (v6 without brackets), a port in 1..65535.
 * 0, or -1 when either makes no sense.
 */
static int addr_set(struct sentinel_addr *a, const char *host, size_t n, const char *port,
                    size_t plen)
{
    long long v;

    if (n >= sizeof(a->host) || !text_host_valid(host, n))
        return -1;
    if (text_int(port, plen, 1, 65535, &v) < 0)
        return -1;
    memcpy(a->host, host, n);
    a->host[n] = '\0';
    a->port = (int)v;
    return 0;
}

static bool addr_same(const struct sentinel_addr *a, const struct sentinel_addr *b)
{
    return a->port == b->port && strcasecmp(a->host, b->host) == 0;
}

int sentinel_set_init(struct sentinel_set *s, const struct redis_url *u)
{
    memset(s, 0, sizeof(*s));
    if (u->kind != REDIS_SENTINEL)
        return -1;
    for (size_t i = 0; i < u->nhosts && i < REDIS_HOSTS_MAX; i++) {
        const struct redis_hostport *h = &u->hosts[i];
        size_t n = strlen(h->host);

        if (n >= sizeof(s->a[0].host)) /* url.c allows 253: never */
            return -1;
        memcpy(s->a[s->n].host, h->host, n + 1);
        s->a[s->n].port = h->port;
        s->n++;
    }
    return 0;
}

void sentinel_set_promote(struct sentinel_set *s, size_t i)
{
    struct sentinel_addr first;

    if (i == 0 || i >= s->n)
        return;
    first = s->a[i];
    memmove(&s->a[1], &s->a[0], i * sizeof(s->a[0]));
    s->a[0] = first;
}

/* The value of field `name` in a flat field, value array of strings; NULL when absent. */
static const redisReply *field(const redisReply *m, const char *name)
{
    if (m->type != REDIS_REPLY_ARRAY)
        return NULL;
    for (size_t i = 0; i + 1 < m->elements; i += 2) {
        const redisReply *k = m->element[i], *v = m->element[i + 1];
        if (k && v && k->type == REDIS_REPLY_STRING && v->type == REDIS_REPLY_STRING &&
            strcmp(k->str, name) == 0)
            return v;
    }
    return NULL;
}

size_t sentinel_set_merge(struct sentinel_set *s, const struct redisReply *sentinels)
{
    size_t added = 0;

    if (!sentinels || sentinels->type != REDIS_REPLY_ARRAY)
        return 0;
    for (size_t i = 0; i < sentinels->elements && s->n < REDIS_HOSTS_MAX; i++) {
        const redisReply *m = sentinels->element[i], *ip, *port;
        struct sentinel_addr a;
        bool known = false;

        if (!m || !(ip = field(m, "ip")) || !(port = field(m, "port")) ||
            addr_set(&a, ip->str, ip->len, port->str, port->len) < 0)
            continue;
        for (size_t j = 0; j < s->n && !known; j++)
            known = addr_same(&s->a[j], &a);
        if (known)
            continue;
        s->a[s->n++] = a;
        added++;
    }
    return added;
}

enum sentinel_answer sentinel_master_reply(const struct redisReply *r, char *host, size_t hostlen,
                                           int *port)
{
    struct sentinel_addr a;

    if (!r)
        return SENTINEL_INVALID;
    if (r->type == REDIS_REPLY_NIL)
        return SENTINEL_UNKNOWN;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 || !r->element[0] || !r->element[1] ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_STRING ||
        addr_set(&a, r->element[0]->str, r->element[0]->len, r->element[1]->str,
                 r->element[1]->len) < 0 ||
        strlen(a.host) >= hostlen)
        return SENTINEL_INVALID;
    memcpy(host, a.host, strlen(a.host) + 1);
    *port = a.port;
    return SENTINEL_ADDR;
}

int sentinel_switch_msg(const char *msg, const char *master, char *host, size_t hostlen, int *port)
{
    const char *w[5];
    size_t wl[5], n = 0;
    struct sentinel_addr a;

    for (const char *c = msg; *c && n < 5;) {
        while (*c == ' ')
            c++;
        if (!*c)
            break;
        w[n] = c;
        while (*c && *c != ' ')
            c++;
        wl[n] = (size_t)(c - w[n]);
        n++;
    }
    if (n != 5 || strlen(master) != wl[0] || memcmp(w[0], master, wl[0]) != 0 ||
        addr_set(&a, w[3], wl[3], w[4], wl[4]) < 0 || strlen(a.host) >= hostlen)
        return -1;
    for (const char *c = w[4] + wl[4]; *c; c++) /* nothing after the new port */
        if (*c != ' ')
            return -1;
    memcpy(host, a.host, strlen(a.host) + 1);
    *port = a.port;
    return 0;
}

enum sentinel_role sentinel_role_reply(const struct redisReply *r)
{
    const redisReply *k;

    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 1 || !(k = r->element[0]) ||
        k->type != REDIS_REPLY_STRING)
        return ROLE_UNKNOWN;
    if (strcmp(k->str, "master") == 0)
        return ROLE_MASTER;
    if (strcmp(k->str, "slave") == 0 || strcmp(k->str, "replica") == 0)
        return ROLE_REPLICA;
    if (strcmp(k->str, "sentinel") == 0)
        return ROLE_SENTINEL;
    return ROLE_UNKNOWN;
}

const char *sentinel_role_name(enum sentinel_role role)
{
    switch (role) {
    case ROLE_MASTER:
        return "master";
    case ROLE_REPLICA:
        return "replica";
    case ROLE_SENTINEL:
        return "sentinel";
    case ROLE_UNKNOWN:
        break;
    }
    return "unknown";
}
