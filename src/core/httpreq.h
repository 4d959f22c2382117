/*
 * httpreq — the head of an HTTP/1.x request (RFC 9112), parsed in place: the
 * request line and the few header fields the ID API reads. Pure (fuzzed:
 * test/fuzz/fuzz_httpreq.c).
 *
 * What is accepted: "METHOD SP target SP HTTP/1.0|HTTP/1.1" and header
 * lines "name: value", each ended by CRLF (a bare LF too); the head ends
 * with an empty line. Refused, with the status to answer: a malformed
 * request line or header line, a line folded onto the previous one
 * (obs-fold), another HTTP version (505), a head longer than the limit
 * (431), Transfer-Encoding (411: bodies must have a Content-Length), a bad
 * or conflicting Content-Length, more than one Authorization or Host (400).
 *
 * And the path of a request target, split into percent-decoded segments
 * (httpreq_path_split), which both of the daemon's servers route on.
 */
#ifndef IDPOOL_HTTPREQ_H
#define IDPOOL_HTTPREQ_H

#include <stddef.h>
#include <stdint.h>

/* A parsed head. Strings point into the caller's buffer, NUL-terminated there. */
struct httpreq {
    const char *method;      /* "GET", ... */
    const char *target;      /* as sent: "/v1/ids/user?count=5" */
    int minor;               /* HTTP/1.<minor>: 0 or 1 */
    const char *authz;       /* Authorization (only one is accepted), or NULL */
    const char *accept;      /* Accept (the first), or NULL */
    const char *ctype;       /* Content-Type, or NULL */
    const char *host;        /* Host (only one is accepted), or NULL */
    uint64_t content_length; /* 0 when absent */
    int keep_alive;          /* the connection stays open after the answer */
    int expect_continue;     /* Expect: 100-continue */
    size_t head_len;         /* bytes of the head, the empty line included */
};

enum httpreq_status {
    HTTPREQ_DONE = 0, /* *r is filled */
    HTTPREQ_MORE = 1, /* the head is not complete yet: read more */
    HTTPREQ_BAD = -1, /* refused: answer *code with *err and close */
};

/*
 * Parse the head at buf[0..len) (at most max_head bytes count). On DONE the
 * head's line ends in buf are overwritten with NULs. On BAD *code is the
 * status to answer (400, 411, 431, 505) and *err says why.
 */
enum httpreq_status httpreq_parse(char *buf, size_t len, size_t max_head, struct httpreq *r,
                                  int *code, const char **err) __attribute__((warn_unused_result));

/*
 * 1 when a Host header's value (name or address, with or without a port)
 * names an IP literal, "localhost", or a name in allowed (names separated
 * by commas, any case, "*" for any name; NULL: none); else 0. No Host (an
 * HTTP/1.0 client: browsers always send one) is 1. A browser sends the
 * name it resolved: this keeps a page of another site, whose name was made
 * to resolve to us (DNS rebinding), from reading our answers.
 */
int httpreq_host_allowed(const char *host, const char *allowed);

/* 1 when c may be part of a token (tchar, RFC 9110 5.6.2): a method, a header name. */
int httpreq_tchar(unsigned char c);

/* Segments of a path at most: a longer path names nothing served. */
#define HTTPREQ_SEGS_MAX 8

/* A path split at its '/'s: "/v1/ids/user" is "v1", "ids", "user"; "/" is one empty segment. */
struct httpreq_path {
    size_t n;                          /* segments, >= 1 */
    const char *seg[HTTPREQ_SEGS_MAX]; /* percent-decoded, NUL-terminated (in the caller's buf) */
    size_t len[HTTPREQ_SEGS_MAX];      /* their lengths */
};

enum httpreq_path_status {
    HTTPREQ_PATH_OK = 0,    /* *p is filled */
    HTTPREQ_PATH_NONE = -1, /* not "/...", or more than HTTPREQ_SEGS_MAX segments: nothing there */
    HTTPREQ_PATH_BAD = -2,  /* else a bad percent-escape or %00 (text_pct_decode): answer 400 */
};

/*
 * Split the path at path[0..len) (as sent, without its query) at its '/'s
 * and percent-decode each segment into buf (room for len + 1 bytes). The
 * split comes first: a decoded '/' (%2F) stays inside its segment and never
 * makes a new one, so "/v1%2Fids/x" is not "/v1/ids/x".
 */
enum httpreq_path_status httpreq_path_split(const char *path, size_t len, char *buf,
                                            struct httpreq_path *p)
    __attribute__((warn_unused_result));

#endif
