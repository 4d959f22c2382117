/*
 * text — small helpers for parsers that report errors as text: a printf
 * into the caller's error buffer, strict decimal integers, and the one
 * percent-decoder (URLs, request paths and queries). Pure.
 */
#ifndef IDPOOL_TEXT_H
#define IDPOOL_TEXT_H

#include <stddef.h>

/* printf into err[errlen]; nothing when err is NULL or errlen 0. */
void text_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/*
 * The n bytes at s as a strict decimal integer: optional '-', digits,
 * nothing else (no spaces, no '+', no trailing junk, no NUL), no overflow,
 * within min..max. 0, or -1.
 */
int text_int(const char *s, size_t n, long long min, long long max, long long *out)
    __attribute__((warn_unused_result));

/*
 * Percent-decode the n bytes at s into out (room for n bytes; not
 * terminated), *outlen the decoded length: 0, or -1 at a '%' not followed
 * by two hex digits or at %00 (a NUL would cut the text short wherever it
 * goes next). Nothing else is changed ('+' stays '+'). TEXT_PCT_HINT says
 * how to write what was meant. The one decoder of the daemon's and
 * idpoolctl's URLs (url.c) and of the HTTP servers' paths and queries
 * (httpreq_path_split, apireq_count).
 */
int text_pct_decode(const char *s, size_t n, char *out, size_t *outlen)
    __attribute__((warn_unused_result));
#define TEXT_PCT_HINT "write '%' itself as %25; %00 is not allowed"

/*
 * 1 when the n bytes at s are a host as a server names one (Sentinel,
 * Cluster): 1..n of A-Z a-z 0-9 . - _ : (a name, IPv4, or IPv6 without
 * brackets); else 0.
 */
int text_host_valid(const char *s, size_t n);

/*
 * The N of "... retry in N ms" in a refusal of the idpool library
 * (IDPOOL_RATE, IDPOOL_EPOCH), when 1..59999; else def.
 */
long text_retry_ms(const char *msg, long def);

#endif
