/*
 * fuzz_httpreq — libFuzzer target for the HTTP/1.x request head parser
 * (httpreq.c), which the ID API's server runs on every byte a client sends.
 *
 * Input: one byte that picks max_head (0..127: 16..143, small enough for
 * the fuzzer to reach the limit; 128..254: 16 + 64 x (byte - 128), up to
 * 8144; 255: 8192, the server's HEAD_MAX), then the bytes as they arrived.
 *
 * The bytes are handed over in a heap buffer of exactly their length, with
 * no NUL after them (ASan sees any read past the end), and checked against
 * the header's promises:
 *   DONE: head_len <= len and <= max_head, the head ends with an empty line,
 *         every returned string lies in the head and is NUL-terminated
 *         there, method and target are non-empty, minor, keep_alive and
 *         expect_continue are 0 or 1, the bytes after the head untouched;
 *   MORE: the buffer unchanged, len < max_head;
 *   BAD:  code 400, 411, 431 or 505 and a non-empty printable err.
 * Then against an independent statement of the grammar (ref_parse(): the
 * same status, code, head_len and fields, computed on a copy without
 * writing into it), and an accepted head is parsed again alone, in a buffer
 * of exactly head_len bytes, to the same result. The path of an accepted
 * head's target (up to '?' or '#') is split (httpreq_path_split) and
 * checked against a statement of its own: '/' first, at most
 * HTTPREQ_SEGS_MAX '/'s, else NONE; each part between '/'s percent-decoded
 * (fz_pct_decode), else BAD; the parts NUL-terminated in the buffer given.
 */
#include "fuzz.h"
#include "httpreq.h"

#define HEAD_MAX 8192 /* apihttp.c's limit */

static size_t max_head_of(uint8_t b)
{
    if (b == 255)
        return HEAD_MAX;
    if (b < 128)
        return 16 + (size_t)b;
    return 16 + 64 * (size_t)(b - 128);
}

/* ---- the reference statement of the grammar ---- */

/* A field as the reference sees it: the n bytes at s (s NULL: absent). */
struct span {
    const char *s;
    size_t n;
};

struct ref {
    int st, code;
    size_t head_len;
    struct span method, target, authz, accept, ctype, host;
    int minor, keep_alive, expect_continue;
    uint64_t content_length;
};

static int ows(char c)
{
    return c == ' ' || c == '\t';
}

static int ref_bad(struct ref *r, int code)
{
    r->st = HTTPREQ_BAD;
    r->code = code;
    return HTTPREQ_BAD;
}

/* The request line p[0..n) (its line end cut off). */
static int ref_request_line(const char *p, size_t n, struct ref *r)
{
    size_t i = 0, t;
    const char *v;

    while (i < n && fz_tchar((unsigned char)p[i]))
        i++;
    if (i == 0 || i == n || p[i] != ' ')
        return ref_bad(r, 400);
    r->method = (struct span){p, i};
    t = ++i;
    while (i < n && (unsigned char)p[i] > 0x20 && (unsigned char)p[i] != 0x7f)
        i++;
    if (i == t || i == n || p[i] != ' ')
        return ref_bad(r, 400);
    r->target = (struct span){p + t, i - t};
    v = p + i + 1;
    if (n - i - 1 != 8 || memcmp(v, "HTTP/", 5) != 0 || v[5] < '0' || v[5] > '9' || v[6] != '.' ||
        v[7] < '0' || v[7] > '9')
        return ref_bad(r, 400);
    if (v[5] != '1' || (v[7] != '0' && v[7] != '1'))
        return ref_bad(r, 505);
    r->minor = v[7] - '0';
    return HTTPREQ_DONE;
}

/* What httpreq_parse() must answer for d[0..len), computed without writing into d. */
static int ref_parse(const char *d, size_t len, size_t max_head, struct ref *r)
{
    size_t lim = len < max_head ? len : max_head, start = 0, end = 0, p;
    int first = 1, have_cl = 0, close = 0, keep = 0;

    memset(r, 0, sizeof(*r));
    while (start < lim && (d[start] == '\r' || d[start] == '\n'))
        start++;
    /* the end: the first empty line (LF or CRLF) after a line end */
    for (p = start; p < lim && !end; p++) {
        if (d[p] != '\n')
            continue;
        if (p + 1 < lim && d[p + 1] == '\n')
            end = p + 2;
        else if (p + 2 < lim && d[p + 1] == '\r' && d[p + 2] == '\n')
            end = p + 3;
    }
    if (!end) {
        if (len >= max_head)
            return ref_bad(r, 431);
        r->st = HTTPREQ_MORE;
        return HTTPREQ_MORE;
    }
    if (memchr(d, '\0', end))
        return ref_bad(r, 400);
    r->head_len = end;
    for (p = start; p < end;) {
        const char *l = d + p;
        size_t n = 0, next, name, v, ve;

        while (l[n] != '\n')
            n++;
        next = p + n + 1;
        if (n > 0 && l[n - 1] == '\r')
            n--;
        if (memchr(l, '\r', n))
            return ref_bad(r, 400);
        p = next;
        if (first) {
            if (ref_request_line(l, n, r) != HTTPREQ_DONE)
                return HTTPREQ_BAD;
            first = 0;
            continue;
        }
        if (n == 0)
            break;
        if (ows(l[0]))
            return ref_bad(r, 400); /* obs-fold */
        for (name = 0; name < n && fz_tchar((unsigned char)l[name]); name++)
            ;
        if (name == 0 || name == n || l[name] != ':')
            return ref_bad(r, 400);
        for (v = name + 1; v < n && ows(l[v]); v++)
            ;
        for (size_t k = v; k < n; k++)
            if ((unsigned char)l[k] < 0x20 ? l[k] != '\t' : (unsigned char)l[k] == 0x7f)
                return ref_bad(r, 400);
        for (ve = n; ve > v && ows(l[ve - 1]); ve--)
            ;
        if (fz_case_eq(l, name, "authorization")) {
            if (r->authz.s)
                return ref_bad(r, 400);
            r->authz = (struct span){l + v, ve - v};
        } else if (fz_case_eq(l, name, "host")) {
            if (r->host.s)
                return ref_bad(r, 400);
            r->host = (struct span){l + v, ve - v};
        } else if (fz_case_eq(l, name, "accept")) {
            if (!r->accept.s)
                r->accept = (struct span){l + v, ve - v};
        } else if (fz_case_eq(l, name, "content-type")) {
            r->ctype = (struct span){l + v, ve - v};
        } else if (fz_case_eq(l, name, "content-length")) {
            uint64_t x = 0;

            if (ve == v || ve - v > 18)
                return ref_bad(r, 400);
            for (size_t k = v; k < ve; k++) {
                if (l[k] < '0' || l[k] > '9')
                    return ref_bad(r, 400);
                x = x * 10 + (uint64_t)(l[k] - '0');
            }
            if (have_cl && x != r->content_length)
                return ref_bad(r, 400);
            r->content_length = x;
            have_cl = 1;
        } else if (fz_case_eq(l, name, "transfer-encoding")) {
            return ref_bad(r, 411);
        } else if (fz_case_eq(l, name, "connection")) {
            close |= fz_list_has(l + v, ve - v, "close");
            keep |= fz_list_has(l + v, ve - v, "keep-alive");
        } else if (fz_case_eq(l, name, "expect")) {
            r->expect_continue = fz_case_eq(l + v, ve - v, "100-continue");
        }
    }
    r->keep_alive = !close && (r->minor == 1 || keep);
    r->st = HTTPREQ_DONE;
    return HTTPREQ_DONE;
}

/* ---- checks ---- */

/* A string of the parse: NULL, or in buf[0..head_len) and NUL-terminated there. */
static void check_in_head(const char *s, const char *buf, size_t head_len)
{
    if (s == NULL)
        return;
    CHECK(s >= buf && s < buf + head_len);
    CHECK(memchr(s, '\0', (size_t)(buf + head_len - s)) != NULL);
}

/* The parsed string s (in buf) is the reference's span of the copy d. */
static void check_same(const char *s, const char *buf, struct span want, const char *d)
{
    if (want.s == NULL) {
        CHECK(s == NULL);
        return;
    }
    CHECK(s != NULL);
    CHECK(s - buf == want.s - d); /* in place: the same offset */
    CHECK(strlen(s) == want.n);
}

static void check_done(const char *buf, const char *d, size_t len, size_t max_head,
                       const struct httpreq *r)
{
    size_t h = r->head_len;

    CHECK(h >= 2 && h <= len && h <= max_head);
    CHECK(d[h - 1] == '\n' &&
          (d[h - 2] == '\n' || (h >= 3 && d[h - 2] == '\r' && d[h - 3] == '\n')));
    CHECK(memchr(d, '\0', h) == NULL);
    CHECK(r->method != NULL && r->target != NULL);
    check_in_head(r->method, buf, h);
    check_in_head(r->target, buf, h);
    check_in_head(r->authz, buf, h);
    check_in_head(r->accept, buf, h);
    check_in_head(r->ctype, buf, h);
    check_in_head(r->host, buf, h);
    CHECK(r->method[0] != '\0' && r->target[0] != '\0');
    CHECK(r->minor == 0 || r->minor == 1);
    CHECK(r->keep_alive == 0 || r->keep_alive == 1);
    CHECK(r->expect_continue == 0 || r->expect_continue == 1);
    CHECK(r->content_length <= 999999999999999999ULL);
    CHECK(memcmp(buf + h, d + h, len - h) == 0); /* what follows the head is not touched */
}

/* httpreq_path_split of the path of target against the statement above. */
static void check_split(const char *target)
{
    size_t n = strcspn(target, "?#"), slashes = 0, k = 0, i = 1;
    char *path = fz_copy(target, n), *out = malloc(n + 1), dec[HEAD_MAX];
    struct httpreq_path p;
    int st, want = HTTPREQ_PATH_OK;

    CHECK(out != NULL);
    st = httpreq_path_split(path, n, out, &p);
    CHECK(st == HTTPREQ_PATH_OK || st == HTTPREQ_PATH_NONE || st == HTTPREQ_PATH_BAD);
    for (size_t j = 0; j < n; j++)
        slashes += target[j] == '/';
    if (n == 0 || target[0] != '/' || slashes > HTTPREQ_SEGS_MAX) {
        want = HTTPREQ_PATH_NONE;
    } else {
        for (;; k++) { /* part k starts at target[i] */
            size_t e = i, dl;

            while (e < n && target[e] != '/')
                e++;
            if (fz_pct_decode(target + i, e - i, dec, &dl) < 0) {
                want = HTTPREQ_PATH_BAD;
                break;
            }
            if (st == HTTPREQ_PATH_OK) {
                CHECK(k < p.n);
                CHECK(p.len[k] == dl && memcmp(p.seg[k], dec, dl) == 0 && p.seg[k][dl] == '\0');
                CHECK(p.seg[k] >= out && p.seg[k] + dl < out + n + 1);
            }
            if (e == n)
                break;
            i = e + 1;
        }
    }
    if (st != want) {
        fprintf(stderr, "httpreq_path_split: %d, the statement: %d\n", st, want);
        CHECK(!"httpreq_path_split follows its statement");
    }
    if (st == HTTPREQ_PATH_OK)
        CHECK(p.n == k + 1 && p.n == slashes);
    free(path);
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t max_head, len;
    char *buf, *d;
    struct httpreq r;
    struct ref want;
    int code = 0, st;
    const char *err = NULL;

    if (size < 1)
        return 0;
    max_head = max_head_of(data[0]);
    len = size - 1;
    buf = fz_copy(data + 1, len); /* exactly the bytes: no NUL after them */
    d = fz_copy(data + 1, len);   /* the input as sent */

    st = httpreq_parse(buf, len, max_head, &r, &code, &err);
    CHECK(st == HTTPREQ_DONE || st == HTTPREQ_MORE || st == HTTPREQ_BAD);
    if (st == HTTPREQ_DONE) {
        check_done(buf, d, len, max_head, &r);
    } else if (st == HTTPREQ_MORE) {
        CHECK(memcmp(buf, d, len) == 0);
        CHECK(len < max_head);
    } else {
        CHECK(code == 400 || code == 411 || code == 431 || code == 505);
        fz_check_err(err);
        if (code == 431)
            CHECK(memcmp(buf, d, len) == 0 && len >= max_head);
    }

    /* the reference */
    ref_parse(d, len, max_head, &want);
    if (st != want.st || (st == HTTPREQ_BAD && code != want.code)) {
        fprintf(stderr, "httpreq_parse: %d (%d %s), the reference: %d (%d)\n", st, code,
                st == HTTPREQ_BAD ? err : "", want.st, want.code);
        CHECK(!"httpreq_parse follows the grammar");
    }
    if (st == HTTPREQ_DONE) {
        CHECK(r.head_len == want.head_len);
        check_same(r.method, buf, want.method, d);
        check_same(r.target, buf, want.target, d);
        check_same(r.authz, buf, want.authz, d);
        check_same(r.accept, buf, want.accept, d);
        check_same(r.ctype, buf, want.ctype, d);
        check_same(r.host, buf, want.host, d);
        CHECK(memcmp(r.method, want.method.s, want.method.n) == 0);
        CHECK(memcmp(r.target, want.target.s, want.target.n) == 0);
        CHECK(!r.authz || memcmp(r.authz, want.authz.s, want.authz.n) == 0);
        CHECK(!r.accept || memcmp(r.accept, want.accept.s, want.accept.n) == 0);
        CHECK(!r.ctype || memcmp(r.ctype, want.ctype.s, want.ctype.n) == 0);
        CHECK(!r.host || memcmp(r.host, want.host.s, want.host.n) == 0);
        /* any Host is checked (ASan sees a read past its NUL); "*" allows what none does */
        CHECK(httpreq_host_allowed(r.host, "a.example, *") >= httpreq_host_allowed(r.host, NULL));
        CHECK(r.minor == want.minor);
        CHECK(r.keep_alive == want.keep_alive);
        CHECK(r.expect_continue == want.expect_continue);
        CHECK(r.content_length == want.content_length);
    }

    if (st == HTTPREQ_DONE)
        check_split(r.target);

    /* an accepted head alone, in a buffer of exactly its bytes: the same */
    if (st == HTTPREQ_DONE) {
        size_t h = r.head_len;
        char *one = malloc(h);
        struct httpreq r2;
        int code2 = 0;
        const char *err2 = NULL;

        CHECK(one != NULL);
        memcpy(one, d, h);
        CHECK(httpreq_parse(one, h, h, &r2, &code2, &err2) == HTTPREQ_DONE);
        CHECK(r2.head_len == h);
        CHECK(memcmp(one, buf, h) == 0); /* the same NULs written */
        CHECK(r2.method - one == r.method - buf && r2.target - one == r.target - buf);
        CHECK((r2.authz ? r2.authz - one : -1) == (r.authz ? r.authz - buf : -1));
        CHECK((r2.accept ? r2.accept - one : -1) == (r.accept ? r.accept - buf : -1));
        CHECK((r2.ctype ? r2.ctype - one : -1) == (r.ctype ? r.ctype - buf : -1));
        CHECK((r2.host ? r2.host - one : -1) == (r.host ? r.host - buf : -1));
        CHECK(r2.minor == r.minor && r2.keep_alive == r.keep_alive &&
              r2.expect_continue == r.expect_continue && r2.content_length == r.content_length);
        free(one);
    }

    free(buf);
    free(d);
    return 0;
}
