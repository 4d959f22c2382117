/*
 * load_reply — the replies of the pop modes parsed straight into IDs. The
 * client must stay cheap next to one redis-server on a small machine, so
 * the hot path allocates nothing per ID: hiredis' reader is given the
 * reply-object functions below, which parse each array element strictly
 * into the connection's uint64 buffer instead of building a redisReply.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "load.h"

/* True if the 8 bytes (little-endian load) are all ASCII digits, and
 * their value; SWAR as in simdjson / fast_float. */
static bool eight_digits(const char *s, uint64_t *out)
{
    uint64_t v;

    memcpy(&v, s, 8);
    if (((v & 0xF0F0F0F0F0F0F0F0ULL) |
         (((v + 0x0606060606060606ULL) & 0xF0F0F0F0F0F0F0F0ULL) >> 4)) != 0x3333333333333333ULL)
        return false;
    v -= 0x3030303030303030ULL;
    v = v * 10 + (v >> 8); /* pairs of digits */
    v = (((v & 0x000000FF000000FFULL) * (100 + (1000000ULL << 32))) +
         (((v >> 16) & 0x000000FF000000FFULL) * (1 + (10000ULL << 32)))) >>
        32;
    *out = v;
    return true;
}

/* Parses a canonical unsigned decimal below 2^63; -1 on anything else
 * (no sign, no leading zeros, no spaces). Hot: runs once per ID, so 8
 * digits at a time. Up to 18 digits cannot overflow; 19 digits are
 * compared with 2^63-1 first. */
int parse_id(const char *s, size_t len, uint64_t *out)
{
    static const char max[] = "9223372036854775807";
    uint64_t v = 0, chunk;
    size_t i = 0;

    if (len == 0 || len > 19 || (s[0] == '0' && len > 1))
        return -1;
    if (len == 19 && memcmp(s, max, 19) > 0)
        return -1; /* too big, or not digits (rejected below anyway) */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    for (; i < len % 8; i++) {
        unsigned d = (unsigned)(unsigned char)s[i] - '0';

        if (d > 9)
            return -1;
        v = v * 10 + d;
    }
    for (; i < len; i += 8) {
        if (!eight_digits(s + i, &chunk))
            return -1;
        v = v * 100000000 + chunk;
    }
#else
    for (; i < len; i++) {
        unsigned d = (unsigned)(unsigned char)s[i] - '0';

        if (d > 9)
            return -1;
        v = v * 10 + d;
    }
    (void)chunk;
#endif
    *out = v;
    return 0;
}

/*
 * The hiredis reader calls these for every reply item; privdata is the
 * connection. Instead of allocating a redisReply per item, they note the
 * top-level shape in conn.rs and parse every array element strictly into
 * conn.ids. Every function returns a non-NULL dummy (NULL means out of
 * memory to the reader) and nothing is ever freed.
 */
static void mark_bad(struct rstate *rs, const char *why, const char *s, size_t len)
{
    if (rs->bad)
        return;
    rs->bad = true;
    snprintf(rs->what, sizeof rs->what, "%s '%.*s'", why, len > 40 ? 40 : (int)len, s ? s : "");
}

static void *fn_string(const redisReadTask *t, char *s, size_t len)
{
    struct conn *cn = t->privdata;
    struct rstate *rs = &cn->rs;
    uint64_t id;

    if (t->parent == NULL) {
        rs->type = t->type;
        if (t->type != REDIS_REPLY_STRING) { /* error or status text */
            snprintf(rs->what, sizeof rs->what, "%.*s", len > 90 ? 90 : (int)len, s);
            return cn;
        }
    } else if (t->parent->parent != NULL || t->type != REDIS_REPLY_STRING) {
        mark_bad(rs, "unexpected element", s, len);
        return cn;
    }
    if (rs->nids >= cn->ids_cap)
        mark_bad(rs, "more IDs than requested, at", s, len);
    else if (parse_id(s, len, &id) != 0)
        mark_bad(rs, "not an ID:", s, len);
    else
        cn->ids[rs->nids++] = id;
    return cn;
}

static void *fn_array(const redisReadTask *t, int elements)
{
    struct conn *cn = t->privdata;

    if (t->parent != NULL)
        mark_bad(&cn->rs, "nested array", NULL, 0);
    else {
        cn->rs.type = REDIS_REPLY_ARRAY;
        cn->rs.elements = elements > 0 ? (size_t)elements : 0;
    }
    return cn;
}

static void *fn_integer(const redisReadTask *t, long long v)
{
    struct conn *cn = t->privdata;

    if (t->parent != NULL)
        mark_bad(&cn->rs, "integer element", NULL, 0);
    else {
        cn->rs.type = REDIS_REPLY_INTEGER;
        cn->rs.integer = v;
    }
    return cn;
}

static void *fn_nil(const redisReadTask *t)
{
    struct conn *cn = t->privdata;

    if (t->parent != NULL)
        mark_bad(&cn->rs, "nil element", NULL, 0);
    else
        cn->rs.type = REDIS_REPLY_NIL;
    return cn;
}

static void fn_free(void *obj)
{
    (void)obj;
}

static redisReplyObjectFunctions id_functions = {
    .createString = fn_string,
    .createArray = fn_array,
    .createInteger = fn_integer,
    .createNil = fn_nil,
    .freeObject = fn_free,
};

/* The connection's reader parses with the functions above from now on. */
void reply_attach(struct conn *cn)
{
    cn->c->reader->fn = &id_functions;
    cn->c->reader->privdata = cn;
    cn->c->reader->maxbuf = 0; /* keep the buffer: no free/malloc per read */
}
