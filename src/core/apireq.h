/*
 * apireq — the parts of an ID API request that idpoold parses itself, and
 * the rendering of its answers. Pure (fuzzed: test/fuzz/fuzz_apireq.c).
 *
 *   GET or POST /v1/ids/{key}[?count=N]
 *   Authorization: Bearer <token>
 *   Accept: text/plain           one ID per line instead of JSON
 *
 * A POST may carry count=N in an application/x-www-form-urlencoded body
 * instead of the query.
 */
#ifndef IDPOOL_APIREQ_H
#define IDPOOL_APIREQ_H

#include <stddef.h>
#include <stdint.h>

#include "httpreq.h"

#define APIREQ_PATH    "/v1/ids/"
#define APIREQ_ERR_MAX 160

/* An answer's format; APIREQ_NONE: the client accepts neither (406). */
enum apireq_fmt { APIREQ_JSON, APIREQ_TEXT, APIREQ_NONE };

#define APIREQ_PATH_MAX 256 /* bytes of a path at most: a longer one names nothing */

/*
 * The application key of a request path, without its query ("/v1/ids/user"
 * -> "user"), percent-decoded ("/v1/ids/demo%5Fmono" -> "demo_mono") into
 * key (APP_KEY_MAX + 1 bytes), NUL-terminated, *keylen its length:
 * HTTPREQ_PATH_OK; HTTPREQ_PATH_NONE when the path is longer than
 * APIREQ_PATH_MAX or is not "/v1/ids/" and one more segment that decodes to
 * a valid application key (app_key_valid; a decoded '/' separates nothing:
 * "/v1/ids/a%2Fb" names "a/b", no key); HTTPREQ_PATH_BAD at a bad
 * percent-escape or %00 anywhere in the path (httpreq_path_split).
 */
enum httpreq_path_status apireq_path(const char *path, char *key, size_t *keylen)
    __attribute__((warn_unused_result));

/*
 * count from a query string or form body ("count=5"; NULL or "" = 1): a
 * decimal integer >= 1 (at most 10 digits); names and values are
 * percent-decoded first ("count=%31%30" is 10; '+' stays '+'). Any other
 * parameter, a repeated count, a bad value or a bad percent-escape (%zz,
 * %00) is an error (err says which, quoting at most 32 bytes of it). 0 or
 * -1.
 */
int apireq_count(const char *query, size_t len, uint64_t *count, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/*
 * The answer's format from an Accept header (NULL: absent), weighed as RFC
 * 9110 12.5.1 says: application/json and text/plain each get the weight
 * (q=0 to 1, 1 when not given) of the most specific media range that
 * matches it ("text/plain", then "text" with the subtype "*", then "*" with
 * the subtype "*"; the first of equally specific ones; parameters other
 * than q are not compared), 0 when none
 * does. The higher weight wins; between equal ones the type whose range
 * comes first in the header, then JSON (the server's preference). Both 0:
 * APIREQ_NONE (406). Elements that do not parse (no type/subtype, a bad
 * q, a bad parameter) are ignored; a header with none that parses, or
 * none at all, accepts anything: JSON.
 */
enum apireq_fmt apireq_accept(const char *accept);

/*
 * The token of an "Authorization: Bearer <token>" header (scheme
 * case-insensitive, RFC 6750 token68 characters): 0 with *tok and *len set, -1
 * when the header is absent, of another scheme or malformed.
 */
int apireq_bearer(const char *authz, const char **tok, size_t *len)
    __attribute__((warn_unused_result));

/* Decimal text of v into buf (>= 21 bytes), not terminated; returns its length. */
size_t apireq_u64(uint64_t v, char *buf);

/*
 * The 200 body for n IDs of application `key` (a valid key: nothing to
 * escape): {"app":"key","ids":["1","2"]}\n, or one ID per line. Needs at
 * most apireq_body_max(keylen, n) bytes at buf; returns the length.
 */
size_t apireq_body_max(size_t keylen, size_t n);
size_t apireq_body(char *buf, enum apireq_fmt fmt, const char *key, size_t keylen,
                   const uint64_t *ids, size_t n);

#endif
