/*
 * takereply — what a take's answer means, for every taker: the daemon's ID
 * API (api.c), libidpool (lib/) and the Python client (which mirrors the
 * table, tested against this one). A take is answered with IDs (the array
 * idpool_take returns, an issuer's 200) or with a refusal "IDPOOL_<CODE>
 * <message>" (idpool_take's error reply; an issuer's {"error":...}).
 * TAKE_REFUSALS lists each refusal once, as libuv's UV_ERRNO_MAP does:
 * the enum, the names, the meanings, the HTTP status an issuer answers
 * it with, the wait it asks for, and what a client does about it. Pure.
 */
#ifndef IDPOOL_TAKEREPLY_H
#define IDPOOL_TAKEREPLY_H

#include <stddef.h>
#include <stdint.h>

struct redisReply;

/* What a client does with one take's answer. */
#define TAKE_OUTCOMES(X)                                                                           \
    X(IDS, "ids")     /* IDs came */                                                               \
    X(DRY, "dry")     /* the pool is empty: ask again shortly */                                   \
    X(EPOCH, "epoch") /* not yet re-validated: ask again after the hint */                         \
    X(RATE, "rate")   /* max_size_per_second: ask again after the hint, here */                    \
    X(LIMIT, "limit") /* more than max_size_per_times asked: ask for fewer */                      \
    X(NOAPP, "noapp") /* not served here (unknown application, or a token that may not) */         \
    X(DOWN, "down")   /* unreachable, timed out, or an answer that makes no sense */

enum take_outcome {
#define X(id, name) T_##id,
    TAKE_OUTCOMES(X)
#undef X
};

/*
 * Every refusal once: code (after "IDPOOL_"), HTTP status, the wait in ms
 * it asks for when its message names none ("retry in N ms"; an issuer
 * sends it as Retry-After; 0: asking again soon will not help), the
 * client's outcome, and what it means. idpool_take (src/idpool.lua) says
 * BADARG, NOAPP, EPOCH, LIMIT, RATE; an issuer (docs/api.md) all of them.
 */
#define TAKE_REFUSALS(X)                                                                           \
    X(EMPTY, 503, 100, DRY, "the pool is empty")                                                   \
    X(EPOCH, 503, 200, EPOCH,                                                                      \
      "the pool is not yet re-validated after a Redis restart or failover")                        \
    X(RATE, 429, 1000, RATE, "max_size_per_second IDs were already taken this second")             \
    X(LIMIT, 400, 0, LIMIT, "the count exceeds max_size_per_times")                                \
    X(NOAPP, 404, 0, NOAPP, "no such application is served")                                       \
    X(BADARG, 400, 0, DOWN, "a malformed take (keys, count)")                                      \
    X(AUTH, 401, 0, NOAPP, "no token, or an unknown or revoked one")                               \
    X(FORBIDDEN, 403, 0, NOAPP, "the token may not take this application's IDs")                   \
    X(UNAVAILABLE, 503, 200, DOWN,                                                                 \
      "the issuer cannot take now (Redis, its tokens, shutting down)")                             \
    X(NOTFOUND, 404, 0, DOWN, "no such path")                                                      \
    X(METHOD, 405, 0, DOWN, "a method other than GET or POST")                                     \
    X(NOTACCEPTABLE, 406, 0, DOWN, "the Accept header allows neither JSON nor text/plain")         \
    X(BADREQUEST, 400, 0, DOWN, "a request the server cannot read (also 408, 411, 413, 431)")      \
    X(INTERNAL, 500, 0, DOWN, "the issuer failed (out of memory)")

enum take_refusal {
    TR_NONE = 0, /* not a refusal of ours */
#define X(code, http, retry, outcome, meaning) TR_##code,
    TAKE_REFUSALS(X)
#undef X
        TR_COUNT
};

/* "IDPOOL_<CODE>" ("" for TR_NONE). */
const char *takereply_name(enum take_refusal r);
/* What it means (one line, no code). */
const char *takereply_meaning(enum take_refusal r);
/* The HTTP status an issuer answers it with (503 for TR_NONE). */
int takereply_http(enum take_refusal r);
/* The wait it asks for when its message names none, ms (0: none). */
unsigned takereply_retry_ms(enum take_refusal r);
/* What a client does (T_DOWN for TR_NONE: not ours). */
enum take_outcome takereply_outcome(enum take_refusal r);
/* "ids", "dry", ... */
const char *takereply_outcome_name(enum take_outcome o);

/*
 * The refusal a reply text "IDPOOL_<CODE>[ <message>]" names, TR_NONE when
 * it names none (another error: a missing library, a read-only replica...).
 * *msg (when not NULL) gets the message after the code and its space.
 */
enum take_refusal takereply_parse(const char *text, const char **msg);

/*
 * The wait a refusal asks for: the N of "retry in N ms" in its text when
 * 1..59999, else the table's.
 */
unsigned takereply_wait_ms(enum take_refusal r, const char *text);

/*
 * The max_size_per_times an IDPOOL_LIMIT text names ("... max_size_per_times
 * N"), or count / 2 when it names none.
 */
unsigned takereply_limit(const char *text, unsigned count);

/*
 * The IDs of idpool_take's array reply x into ids[0..x->elements): its
 * elements that are strict decimal uint64 strings, in order. Other
 * elements (never written by a refiller) are skipped, each passed to skip
 * when not NULL. Returns how many IDs were written.
 */
size_t takereply_ids(const struct redisReply *x, uint64_t *ids,
                     void (*skip)(const char *entry, void *arg), void *arg);

#endif
