/*
 * unit_reply — hiredis replies built by hand, as hiredis 0.14 would hand
 * them to a callback (RESP2), for the tests of the modules that read them
 * (test_sentinel.c, test_cluster.c). They live in a static arena that
 * reply_reset() empties; strings are the caller's (not copied).
 */
#ifndef IDPOOL_UNIT_REPLY_H
#define IDPOOL_UNIT_REPLY_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#define UNIT_REPLIES 4096 /* replies in the arena */

static redisReply unit_arena[UNIT_REPLIES];
static redisReply *unit_ptrs[2 * UNIT_REPLIES];
static size_t unit_narena, unit_nptrs;

static inline void reply_reset(void)
{
    memset(unit_arena, 0, sizeof(unit_arena));
    unit_narena = unit_nptrs = 0;
}

/* A new reply of type `type`; exits when the arena is full. */
static inline redisReply *reply_new(int type)
{
    redisReply *y;

    if (unit_narena == UNIT_REPLIES) {
        fprintf(stderr, "unit_reply: more than %d replies\n", UNIT_REPLIES);
        exit(1);
    }
    y = &unit_arena[unit_narena++];
    y->type = type;
    return y;
}

/* A bulk string of the n bytes at s (NUL bytes allowed). */
static inline redisReply *reply_strn(const char *s, size_t n)
{
    redisReply *y = reply_new(REDIS_REPLY_STRING);

    y->str = (char *)s;
    y->len = n;
    return y;
}

static inline redisReply *reply_str(const char *s)
{
    return reply_strn(s, strlen(s));
}

/* An error reply, its text without the leading '-'. */
static inline redisReply *reply_err(const char *s)
{
    redisReply *y = reply_str(s);

    y->type = REDIS_REPLY_ERROR;
    return y;
}

static inline redisReply *reply_nil(void)
{
    return reply_new(REDIS_REPLY_NIL);
}

static inline redisReply *reply_int(long long v)
{
    redisReply *y = reply_new(REDIS_REPLY_INTEGER);

    y->integer = v;
    return y;
}

/* An array of the n replies that follow. */
static inline redisReply *reply_arr(size_t n, ...)
{
    redisReply *y = reply_new(REDIS_REPLY_ARRAY);
    va_list ap;

    if (unit_nptrs + n > sizeof(unit_ptrs) / sizeof(unit_ptrs[0])) {
        fprintf(stderr, "unit_reply: more than %zu elements\n",
                sizeof(unit_ptrs) / sizeof(unit_ptrs[0]));
        exit(1);
    }
    y->element = &unit_ptrs[unit_nptrs];
    y->elements = n;
    va_start(ap, n);
    for (size_t i = 0; i < n; i++)
        unit_ptrs[unit_nptrs++] = va_arg(ap, redisReply *);
    va_end(ap);
    return y;
}

/* An array of the n replies at el (not copied). */
static inline redisReply *reply_arrv(redisReply **el, size_t n)
{
    redisReply *y = reply_new(REDIS_REPLY_ARRAY);

    y->element = el;
    y->elements = n;
    return y;
}

#endif
