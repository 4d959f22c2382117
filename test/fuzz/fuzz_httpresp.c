/*
 * fuzz_httpresp — libFuzzer target for what libidpool reads of an ID
 * issuer's answer (httpresp.c): bytes from a server, which may be anything
 * (a proxy's error page, another protocol, an attacker).
 *
 * The first input byte picks a mode (byte % 3); every input is handed over in
 * a heap buffer of exactly its length, with no NUL after it, so ASan sees any
 * read past the end:
 *   0  the rest is a response head for httpresp_parse():
 *        DONE: err NULL, head_len <= len and <= 8192, the head ends with an
 *              empty line ("\n\n" or "\n\r\n"), status 100..599, minor,
 *              keep_alive and has_length 0 or 1, content_length <= 1 MiB,
 *              retry_after_s -1..86400; the head alone (exactly head_len
 *              bytes) parses to the same result, and every prefix of it
 *              gives MORE (all of them for heads up to 512 bytes, a sample
 *              beyond);
 *        MORE: len < 8192, and the input less its last byte is MORE too;
 *        BAD:  a non-empty printable err;
 *      then against an independent statement of the grammar (ref_head():
 *      the same status and fields);
 *   1  a byte that picks cap (0..64, then steps of 8 up to 1592), the rest
 *      is a text/plain body for httpresp_ids() into exactly cap IDs: the
 *      result is that of an independent reading (ref_ids()), a positive one
 *      k <= cap, and the IDs written back one per line, each as wide as its
 *      line (leading zeros are read) and with its CR if it had one,
 *      reproduce the body;
 *   2  two bytes that pick the sizes of the code (0..39) and message
 *      (0..255) buffers, the rest a JSON body for httpresp_error(): 0 or -1,
 *      the buffers NUL-terminated within their sizes and empty on -1, on 0
 *      the "error" and "message" strings cut to the buffers, as cJSON reads
 *      them from a NUL-terminated copy.
 */
#include <cjson/cJSON.h>
#include <inttypes.h>

#include "fuzz.h"
#include "httpresp.h"

#define HEAD_MAX 8192      /* HTTPRESP_HEAD_MAX, restated */
#define BODY_MAX (1 << 20) /* the largest Content-Length read */

/* ---- the reference statement of the head's grammar ---- */

struct ref {
    enum httpresp_status st;
    int status, minor, has_length, retry_after_s, keep_alive;
    uint64_t content_length;
    size_t head_len;
};

/* 1..20 decimal digits with a value <= max into *v; 0 if not. */
static int ref_digits(const char *s, size_t n, uint64_t max, uint64_t *v)
{
    uint64_t x = 0;

    if (n == 0 || n > 20)
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
        if (x > UINT64_MAX / 10 || x * 10 > UINT64_MAX - (uint64_t)(s[i] - '0'))
            return 0;
        x = x * 10 + (uint64_t)(s[i] - '0');
    }
    if (x > max)
        return 0;
    *v = x;
    return 1;
}

/* The line at s[*pos..lim): its bytes without CRLF/LF in *n; 0 if no LF before lim. */
static int ref_line(const char *s, size_t lim, size_t *pos, const char **line, size_t *n)
{
    size_t i = *pos;

    while (i < lim && s[i] != '\n')
        i++;
    if (i == lim)
        return 0;
    *line = s + *pos;
    *n = i - *pos;
    if (*n && s[i - 1] == '\r')
        (*n)--;
    *pos = i + 1;
    return 1;
}

static void ref_head(const char *s, size_t len, struct ref *r)
{
    size_t lim = len < HEAD_MAX ? len : HEAD_MAX, pos = 0, n;
    const char *l;
    int conn_close = 0, conn_keep = 0;
    uint64_t v;

    memset(r, 0, sizeof(*r));
    r->retry_after_s = -1;
    r->st = HTTPRESP_BAD;
    if (!ref_line(s, lim, &pos, &l, &n))
        goto incomplete;
    if (n < 12 || memcmp(l, "HTTP/1.", 7) != 0 || (l[7] != '0' && l[7] != '1') || l[8] != ' ' ||
        !ref_digits(l + 9, 3, 599, &v) || v < 100 || (n > 12 && l[12] != ' '))
        return;
    r->minor = l[7] - '0';
    r->status = (int)v;
    while (ref_line(s, lim, &pos, &l, &n)) {
        size_t name = 0, vb, ve;
        if (n == 0) {
            r->st = HTTPRESP_DONE;
            r->head_len = pos;
            r->keep_alive = r->minor == 1 ? !conn_close : conn_keep && !conn_close;
            return;
        }
        while (name < n && l[name] != ':')
            name++;
        if (name == 0 || name == n)
            return;
        for (size_t i = 0; i < name; i++)
            if (!fz_tchar((unsigned char)l[i]))
                return;
        vb = name + 1;
        ve = n;
        while (vb < ve && (l[vb] == ' ' || l[vb] == '\t'))
            vb++;
        while (ve > vb && (l[ve - 1] == ' ' || l[ve - 1] == '\t'))
            ve--;
        if (fz_case_eq(l, name, "content-length")) {
            if (!ref_digits(l + vb, ve - vb, BODY_MAX, &v) ||
                (r->has_length && r->content_length != v))
                return;
            r->has_length = 1;
            r->content_length = v;
        } else if (fz_case_eq(l, name, "transfer-encoding")) {
            return;
        } else if (fz_case_eq(l, name, "retry-after")) {
            r->retry_after_s = ref_digits(l + vb, ve - vb, 86400, &v) ? (int)v : -1;
        } else if (fz_case_eq(l, name, "connection")) {
            conn_close |= fz_list_has(l + vb, ve - vb, "close");
            conn_keep |= fz_list_has(l + vb, ve - vb, "keep-alive");
        }
    }
incomplete:
    r->st = len < HEAD_MAX ? HTTPRESP_MORE : HTTPRESP_BAD;
}

/* ---- mode 0: the head ---- */

/* httpresp_parse() over the first n bytes of d, copied to a buffer of exactly n bytes. */
static enum httpresp_status parse_copy(const char *d, size_t n, struct httpresp *r,
                                       const char **err)
{
    char *b = fz_copy(d, n);
    enum httpresp_status st;

    st = httpresp_parse(b, n, r, err);
    CHECK(memcmp(b, d, n) == 0);
    free(b);
    return st;
}

static int same(const struct httpresp *a, const struct httpresp *b)
{
    return a->status == b->status && a->minor == b->minor &&
           a->content_length == b->content_length && a->has_length == b->has_length &&
           a->retry_after_s == b->retry_after_s && a->keep_alive == b->keep_alive &&
           a->head_len == b->head_len;
}

static void check_head(const char *d, size_t len)
{
    struct httpresp r, r2;
    struct ref want;
    const char *err = "(not set)", *err2;
    enum httpresp_status st = parse_copy(d, len, &r, &err);

    CHECK(st == HTTPRESP_DONE || st == HTTPRESP_MORE || st == HTTPRESP_BAD);
    if (st == HTTPRESP_DONE) {
        size_t h = r.head_len, step;
        CHECK(err == NULL);
        CHECK(h >= 14 && h <= len && h <= HEAD_MAX);
        CHECK(d[h - 1] == '\n' && (d[h - 2] == '\n' || (d[h - 2] == '\r' && d[h - 3] == '\n')));
        CHECK(r.status >= 100 && r.status <= 599);
        CHECK(r.minor == 0 || r.minor == 1);
        CHECK(r.keep_alive == 0 || r.keep_alive == 1);
        CHECK(r.has_length == 0 || r.has_length == 1);
        CHECK(r.content_length <= BODY_MAX && (r.has_length || r.content_length == 0));
        CHECK(r.retry_after_s >= -1 && r.retry_after_s <= 86400);
        /* the head alone */
        CHECK(parse_copy(d, h, &r2, &err2) == HTTPRESP_DONE && same(&r, &r2));
        /* never DONE early */
        step = h <= 512 ? 1 : h / 64;
        for (size_t i = 0; i < h; i += step)
            CHECK(parse_copy(d, i, &r2, &err2) == HTTPRESP_MORE);
        CHECK(parse_copy(d, h - 1, &r2, &err2) == HTTPRESP_MORE);
    } else if (st == HTTPRESP_MORE) {
        CHECK(len < HEAD_MAX);
        if (len)
            CHECK(parse_copy(d, len - 1, &r2, &err2) == HTTPRESP_MORE);
    } else {
        fz_check_err(err);
    }

    ref_head(d, len, &want);
    if (st != want.st) {
        fprintf(stderr, "httpresp_parse: %d (%s), the reference: %d\n", st,
                st == HTTPRESP_BAD ? err : "", want.st);
        CHECK(!"httpresp_parse follows the grammar");
    }
    if (st == HTTPRESP_DONE) {
        CHECK(r.status == want.status && r.minor == want.minor);
        CHECK(r.head_len == want.head_len);
        CHECK(r.has_length == want.has_length && r.content_length == want.content_length);
        CHECK(r.retry_after_s == want.retry_after_s);
        CHECK(r.keep_alive == want.keep_alive);
    }
}

/* ---- mode 1: the IDs ---- */

/* The number of IDs of the body (-1: not a list of at most cap IDs), into ids[0..cap). */
static long ref_ids(const char *s, size_t len, uint64_t *ids, size_t cap)
{
    size_t pos = 0, n, k = 0;
    const char *l;

    while (pos < len) {
        if (!ref_line(s, len, &pos, &l, &n) || k == cap || !ref_digits(l, n, UINT64_MAX, &ids[k]))
            return -1;
        k++;
    }
    return (long)k;
}

static void check_ids(struct fz *f)
{
    uint8_t b = fz_u8(f);
    size_t cap = b <= 64 ? b : 64 + (size_t)(b - 64) * 8, len;
    char *d = fz_rest(f, &len), *body = fz_copy(d, len), *again;
    uint64_t *ids = malloc(cap ? cap * sizeof(*ids) : 1), *want = malloc((cap + 1) * 8);
    long k, wk;
    size_t pos = 0;

    CHECK(ids != NULL && want != NULL);
    k = httpresp_ids(body, len, ids, cap);
    CHECK(memcmp(body, d, len) == 0);
    wk = ref_ids(d, len, want, cap);
    if (k != wk) {
        fprintf(stderr, "httpresp_ids: %ld, the reference: %ld (cap %zu)\n", k, wk, cap);
        CHECK(!"httpresp_ids follows the format");
    }
    CHECK(k >= -1 && (k < 0 || (size_t)k <= cap));
    if (k <= 0)
        goto out;
    CHECK(memcmp(ids, want, (size_t)k * sizeof(*ids)) == 0);
    /* written back, each as wide as its line, with its CR: the body */
    again = malloc(len + 1);
    CHECK(again != NULL);
    for (long i = 0; i < k; i++) {
        const char *nl = memchr(d + pos, '\n', len - pos);
        size_t w, cr;
        CHECK(nl != NULL);
        w = (size_t)(nl - (d + pos));
        cr = w && nl[-1] == '\r';
        w -= cr;
        CHECK(w >= 1 && w <= 20);
        snprintf(again + pos, len + 1 - pos, "%0*" PRIu64 "%s", (int)w, ids[i], cr ? "\r\n" : "\n");
        pos += w + cr + 1;
    }
    CHECK(pos == len && memcmp(again, d, len) == 0);
    free(again);
out:
    free(d);
    free(body);
    free(ids);
    free(want);
}

/* ---- mode 2: the error body ---- */

/* s (NUL-terminated) within a buffer of size n: s cut to n - 1 bytes. */
static void check_cut(const char *got, size_t n, const char *s)
{
    size_t m = strlen(s);

    if (n == 0)
        return;
    if (m > n - 1)
        m = n - 1;
    CHECK(strlen(got) == m && memcmp(got, s, m) == 0);
}

static void check_error(struct fz *f)
{
    size_t code_len = fz_u8(f) % 40, msg_len = fz_u8(f), len;
    char *d = fz_rest(f, &len), *body = fz_copy(d, len);
    char *code = code_len ? malloc(code_len) : NULL, *msg = msg_len ? malloc(msg_len) : NULL;
    cJSON *o;
    const cJSON *e, *m;
    int rc, want;

    CHECK((code_len == 0 || code != NULL) && (msg_len == 0 || msg != NULL));
    if (code)
        memset(code, 'c', code_len);
    if (msg)
        memset(msg, 'm', msg_len);
    rc = httpresp_error(body, len, code, code_len, msg, msg_len);
    CHECK(memcmp(body, d, len) == 0);
    CHECK(rc == 0 || rc == -1);
    CHECK(code_len == 0 || memchr(code, '\0', code_len) != NULL);
    CHECK(msg_len == 0 || memchr(msg, '\0', msg_len) != NULL);
    if (rc < 0) {
        CHECK(code_len == 0 || code[0] == '\0');
        CHECK(msg_len == 0 || msg[0] == '\0');
    }
    /* the same body NUL-terminated (d), as cJSON reads it */
    o = len ? cJSON_ParseWithLength(d, len) : NULL;
    e = cJSON_GetObjectItemCaseSensitive(o, "error");
    m = cJSON_GetObjectItemCaseSensitive(o, "message");
    want = cJSON_IsObject(o) && cJSON_IsString(e) && cJSON_IsString(m) ? 0 : -1;
    CHECK(rc == want);
    if (rc == 0) {
        check_cut(code, code_len, e->valuestring);
        check_cut(msg, msg_len, m->valuestring);
    }
    cJSON_Delete(o);
    free(d);
    free(body);
    free(code);
    free(msg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fz f = {data, size};
    uint8_t mode = fz_u8(&f) % 3;

    if (mode == 0) {
        size_t len;
        char *d = fz_rest(&f, &len);
        check_head(d, len);
        free(d);
    } else if (mode == 1) {
        check_ids(&f);
    } else {
        check_error(&f);
    }
    return 0;
}
