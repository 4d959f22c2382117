/*
 * httpresp — what libidpool reads of an ID issuer's answer (idpoold --api,
 * docs/api.md): the head of an HTTP/1.x response, a text/plain body of IDs
 * (one decimal per line), and a JSON error body
 * {"error":"IDPOOL_...","message":"..."}. Pure (fuzzed:
 * test/fuzz/fuzz_httpresp.c).
 *
 * The head: "HTTP/1.0|HTTP/1.1 SP 3DIGIT SP reason" and "name: value"
 * lines, each ended by CRLF (a bare LF too), then an empty line. Read:
 * Content-Length, Retry-After (delta-seconds), Connection, and
 * Transfer-Encoding (refused: the issuer never sends chunked bodies, and a
 * body this client cannot delimit is a broken connection).
 */
#ifndef IDPOOL_HTTPRESP_H
#define IDPOOL_HTTPRESP_H

#include <stddef.h>
#include <stdint.h>

#define HTTPRESP_HEAD_MAX 8192 /* a longer head is refused */

struct httpresp {
    int status;              /* 100..599 */
    int minor;               /* HTTP/1.<minor> */
    uint64_t content_length; /* valid when has_length */
    int has_length;
    int retry_after_s; /* -1 when absent or not delta-seconds */
    int keep_alive;    /* the connection may carry the next request */
    size_t head_len;   /* bytes of the head, the empty line included */
};

enum httpresp_status {
    HTTPRESP_DONE = 0, /* *r is filled */
    HTTPRESP_MORE = 1, /* not complete yet: read more */
    HTTPRESP_BAD = -1, /* not a response this client can read; *err says why */
};

/* Parse the head at buf[0..len). Nothing is written to buf. */
enum httpresp_status httpresp_parse(const char *buf, size_t len, struct httpresp *r,
                                    const char **err) __attribute__((warn_unused_result));

/*
 * The IDs of a text/plain body (one unsigned decimal per line, each line
 * ended by LF, CRLF accepted) into ids[0..cap): their number, or -1 when a
 * line is not an ID or there are more than cap.
 */
long httpresp_ids(const char *body, size_t len, uint64_t *ids, size_t cap)
    __attribute__((warn_unused_result));

/*
 * The error of a JSON body: code ("IDPOOL_RATE", ...) and message copied
 * (truncated to their sizes). 0, or -1 when the body is not such an object
 * (code and message are then empty).
 */
int httpresp_error(const char *body, size_t len, char *code, size_t code_len, char *msg,
                   size_t msg_len);

#endif
