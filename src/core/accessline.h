/*
 * accessline — one line of the ID API's access log (api-access-log), for
 * operators who need a record of every request. Pure.
 *
 *   2026-11-28T17:55:01.123Z 192.0.2.7:51234 GET /v1/ids/user 200 27 0.412 t1
 *
 * Fields, separated by one space: the time of the answer (UTC, ms), the
 * client's address, the method, the path (as sent, without the query: it
 * may hold anything a client put there), the status, the bytes of the
 * answer's body, the milliseconds from the request's first byte to its
 * answer, and the name of the token it carried (never the token). A field
 * that is not known is "-" (a request that could not be read has no
 * method or path; one without a valid token no name). Bytes of the path
 * outside printable ASCII, and '"' and '\', are written \xHH, so a line is
 * always one line of printable ASCII; a path longer than
 * ACCESSLINE_PATH_MAX bytes is cut and ends in "...".
 */
#ifndef IDPOOL_ACCESSLINE_H
#define IDPOOL_ACCESSLINE_H

#include <stddef.h>
#include <stdint.h>

#define ACCESSLINE_PATH_MAX 256
/* A line is at most this long, its newline included. */
#define ACCESSLINE_MAX 2048

/* One answered request. */
struct accessline {
    uint64_t time_ms;     /* when it was answered, ms since the epoch */
    const char *peer;     /* "192.0.2.7:51234", "[2001:db8::1]:51234"; NULL: "-" */
    const char *method;   /* NULL: not read */
    const char *target;   /* as sent (only its path is written); NULL: not read */
    int status;           /* 100..999 */
    uint64_t bytes;       /* of the answer's body */
    uint64_t duration_us; /* from the request's first byte (or the accept) to its answer */
    const char *user;     /* the token's name; NULL: none */
};

/* The line (newline-terminated, not NUL-terminated) into buf (ACCESSLINE_MAX bytes); its length. */
size_t accessline_format(char *buf, const struct accessline *e);

#endif
