/*
 * resp — decimal IDs and the Redis protocol (RESP) for the push path: IDs
 * formatted and a whole RPUSH encoded without hiredis' per-argument
 * formatting, and strict parsing of IDs read back. Pure.
 */
#ifndef IDPOOL_RESP_H
#define IDPOOL_RESP_H

#include <stddef.h>
#include <stdint.h>

#define U64_LEN 21 /* decimal uint64 (20 digits) + NUL */
/* Decimal text of v into buf (>= U64_LEN bytes), no NUL; returns the length. */
size_t u64_fmt(uint64_t v, char *buf);
/* The most bytes resp_rpush writes for n IDs and a key of klen bytes. */
#define RESP_RPUSH_MAX(klen, n) (48 + (size_t)(klen) + (size_t)(n)*27)
/*
 * `RPUSH key ids...` in the Redis protocol (RESP), ready to send as it is:
 * writes at most RESP_RPUSH_MAX(klen, n) bytes to buf, returns the length.
 * (hiredis' own formatting of 1,000 arguments cost more CPU than drawing them.)
 */
size_t resp_rpush(char *buf, const char *key, size_t klen, const uint64_t *ids, size_t n);
/* Parse a decimal uint64 (no sign, no spaces, no overflow); 0 or -1. */
int u64_parse(const char *s, size_t len, uint64_t *out) __attribute__((warn_unused_result));

#endif
