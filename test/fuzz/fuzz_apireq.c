/*
 * fuzz_apireq — libFuzzer target for the ID API's request parsers and body
 * renderer (apireq.c), and the token hash it feeds (token.c).
 *
 * Input: a flags byte (bit 0: no query, bit 1: no Accept, bit 2: no
 * Authorization), then four strings as fz_str() reads them: the path, the
 * query (or form body), the Accept header and the Authorization header;
 * then an error buffer length byte (0: APIREQ_ERR_MAX, else that modulo
 * APIREQ_ERR_MAX + 1), a byte that picks how many IDs when count is above
 * 64, and the IDs (fz_i64(), as uint64).
 *
 * Each parser is checked against an independent statement of its header's
 * contract (the same answer, the same key, count or token), the query is
 * handed over in a buffer of exactly its length (no NUL after it: ASan sees
 * any read past the end), and error messages are terminated, non-empty and
 * printable. The body for the parsed key, format and count (up to 64 IDs)
 * is rendered into a heap buffer of exactly apireq_body_max() bytes; JSON
 * must parse with cJSON to {"app": key, "ids": [...]} with the IDs as
 * decimal strings, text must be the IDs one per line.
 */
#include <cjson/cJSON.h>

#include "apireq.h"
#include "fuzz.h"
#include "token.h"

#define FIELD_MAX 1024
#define IDS_MAX   64

/* ---- the reference statements of the contracts ---- */

static int key_char(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-';
}

/* 1..64 of [A-Za-z0-9_.-], not starting with '-', not "." or "..": an application key. */
static int ref_key(const char *k, size_t n)
{
    if (n < 1 || n > 64 || k[0] == '-' || (n == 1 && k[0] == '.') ||
        (n == 2 && k[0] == '.' && k[1] == '.'))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!key_char((unsigned char)k[i]))
            return 0;
    return 1;
}

/*
 * At most 256 bytes, '/' first, at most 8 '/'s; each part between them
 * percent-decoded (else -2); three parts "v1", "ids" and a key (else -1).
 */
static int ref_path(const char *path, char *key, size_t *keylen)
{
    size_t n = strlen(path), slashes = 0, np = 0, dl;
    const char *part[9], *p;
    size_t plen[9];
    char dec[257];

    if (n > 256 || path[0] != '/')
        return -1;
    for (p = path; (p = strchr(p, '/')) != NULL; p++) {
        if (slashes > 0)
            plen[np - 1] = (size_t)(p - part[np - 1]);
        if (++slashes > 8)
            return -1;
        part[np++] = p + 1;
    }
    plen[np - 1] = strlen(part[np - 1]);
    for (size_t i = 0; i < np; i++)
        if (fz_pct_decode(part[i], plen[i], dec, &dl) < 0)
            return -2;
    if (np != 3 || fz_pct_decode(part[0], plen[0], dec, &dl) < 0 || dl != 2 ||
        memcmp(dec, "v1", 2) != 0 || fz_pct_decode(part[1], plen[1], dec, &dl) < 0 || dl != 3 ||
        memcmp(dec, "ids", 3) != 0 || fz_pct_decode(part[2], plen[2], dec, &dl) < 0 ||
        !ref_key(dec, dl))
        return -1;
    memcpy(key, dec, dl);
    key[dl] = '\0';
    *keylen = dl;
    return 0;
}

/*
 * '&'-separated parameters, empty ones ignored; each one's name and value
 * (after the first '=') percent-decoded; at most one, "count" = 1..10
 * digits, >= 1.
 */
static int ref_count(const char *q, size_t len, uint64_t *count)
{
    size_t i = 0;
    int seen = 0;

    *count = 1;
    if (q == NULL)
        return 0;
    while (i <= len) {
        size_t end = i, eq, nl, vl;
        uint64_t v = 0;
        char name[FIELD_MAX], value[FIELD_MAX];

        while (end < len && q[end] != '&')
            end++;
        if (end > i) {
            eq = i;
            while (eq < end && q[eq] != '=')
                eq++;
            if (eq == end || seen || fz_pct_decode(q + i, eq - i, name, &nl) < 0 || nl != 5 ||
                memcmp(name, "count", 5) != 0 ||
                fz_pct_decode(q + eq + 1, end - eq - 1, value, &vl) < 0)
                return -1;
            if (vl < 1 || vl > 10)
                return -1;
            for (size_t k = 0; k < vl; k++) {
                if (value[k] < '0' || value[k] > '9')
                    return -1;
                v = v * 10 + (uint64_t)(value[k] - '0');
            }
            if (v == 0)
                return -1;
            *count = v;
            seen = 1;
        }
        i = end + 1;
    }
    return 0;
}

/*
 * Accept, RFC 9110 12.5.1 read literally: the header split into elements
 * at commas outside quoted strings; an element (trimmed of OWS) is split
 * at semicolons outside quoted strings into its media range and its
 * parameters; the range is token "/" token, "*" "/" token only as
 * "*" "/" "*"; each parameter (trimmed) is empty or token "=" (token /
 * quoted-string), q's value a qvalue; anything else drops the element.
 * Each of the two types takes the weight of its most specific matching
 * range (the first of equal ones), 0 without one; higher weight wins, then
 * the earlier range, then JSON; both 0 is none; no element kept is JSON.
 */
struct span_a {
    const char *s;
    size_t n;
};

static struct span_a trim_a(const char *s, size_t n)
{
    while (n && (*s == ' ' || *s == '\t'))
        s++, n--;
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    return (struct span_a){s, n};
}

/* The end of the quoted string at s[i] (s[i] == '"') within n: the index after it, or 0. */
static size_t quoted_end(const char *s, size_t n, size_t i)
{
    for (i++; i < n; i++) {
        unsigned char c = (unsigned char)s[i];

        if (c == '"')
            return i + 1;
        if (c == '\\') {
            if (++i >= n)
                return 0;
            c = (unsigned char)s[i];
        }
        if (c != '\t' && (c < 0x20 || c == 0x7f))
            return 0;
    }
    return 0;
}

/* Split s[0..n) at sep outside quoted strings: the pieces into out (at most max); how many. */
static size_t split_a(const char *s, size_t n, char sep, struct span_a *out, size_t max)
{
    size_t k = 0, start = 0, i = 0;

    while (i <= n) {
        if (i == n || s[i] == sep) {
            if (k < max)
                out[k++] = (struct span_a){s + start, i - start};
            start = ++i;
            continue;
        }
        if (s[i] == '"') {
            size_t e = quoted_end(s, n, i);
            i = e ? e : i + 1;
            continue;
        }
        i++;
    }
    return k;
}

static int all_tchar(struct span_a t)
{
    if (t.n == 0)
        return 0;
    for (size_t i = 0; i < t.n; i++)
        if (!fz_tchar((unsigned char)t.s[i]))
            return 0;
    return 1;
}

/* A qvalue in thousandths, or -1. */
static int ref_qvalue(struct span_a v)
{
    if (v.n == 1 && (v.s[0] == '0' || v.s[0] == '1'))
        return v.s[0] == '1' ? 1000 : 0;
    if (v.n < 2 || v.n > 5 || v.s[1] != '.')
        return -1;
    if (v.s[0] == '1') {
        for (size_t i = 2; i < v.n; i++)
            if (v.s[i] != '0')
                return -1;
        return 1000;
    }
    if (v.s[0] != '0')
        return -1;
    {
        int q = 0, mul = 100;
        for (size_t i = 2; i < v.n; i++, mul /= 10) {
            if (v.s[i] < '0' || v.s[i] > '9')
                return -1;
            q += (v.s[i] - '0') * mul;
        }
        return q;
    }
}

static enum apireq_fmt ref_accept(const char *a)
{
    static const char *const types[2][2] = {{"application", "json"}, {"text", "plain"}};
    struct span_a el[FIELD_MAX + 1], par[FIELD_MAX + 1];
    size_t ne, kept = 0;
    int spec[2] = {0, 0}, w[2] = {0, 0};
    size_t at[2] = {0, 0};

    if (a == NULL)
        return APIREQ_JSON;
    ne = split_a(a, strlen(a), ',', el, FIELD_MAX + 1);
    for (size_t e = 0; e < ne; e++) {
        struct span_a t = trim_a(el[e].s, el[e].n), range, type, sub;
        size_t np, slash;
        int q = 1000, ok = 1;

        if (t.n == 0)
            continue;
        np = split_a(t.s, t.n, ';', par, FIELD_MAX + 1);
        range = trim_a(par[0].s, par[0].n);
        for (slash = 0; slash < range.n && range.s[slash] != '/'; slash++)
            ;
        type = (struct span_a){range.s, slash};
        sub = (struct span_a){range.s + slash + 1, slash < range.n ? range.n - slash - 1 : 0};
        if (slash == range.n || !all_tchar(type) || !all_tchar(sub) ||
            (type.n == 1 && type.s[0] == '*' && !(sub.n == 1 && sub.s[0] == '*')))
            ok = 0;
        for (size_t i = 1; ok && i < np; i++) {
            struct span_a pm = trim_a(par[i].s, par[i].n), name, val;
            size_t eq;

            if (pm.n == 0)
                continue;
            for (eq = 0; eq < pm.n && pm.s[eq] != '='; eq++)
                ;
            name = (struct span_a){pm.s, eq};
            val = (struct span_a){pm.s + eq + 1, eq < pm.n ? pm.n - eq - 1 : 0};
            if (eq == pm.n || !all_tchar(name) ||
                !(all_tchar(val) ||
                  (val.n >= 2 && val.s[0] == '"' && quoted_end(val.s, val.n, 0) == val.n)))
                ok = 0;
            else if (fz_case_eq(name.s, name.n, "q") && (q = ref_qvalue(val)) < 0)
                ok = 0;
        }
        if (!ok)
            continue;
        kept++;
        for (int f = 0; f < 2; f++) {
            int sp = 0;

            if (type.n == 1 && type.s[0] == '*')
                sp = 1;
            else if (fz_case_eq(type.s, type.n, types[f][0]))
                sp = sub.n == 1 && sub.s[0] == '*'           ? 2
                     : fz_case_eq(sub.s, sub.n, types[f][1]) ? 3
                                                             : 0;
            if (sp > spec[f]) {
                spec[f] = sp;
                w[f] = q;
                at[f] = e;
            }
        }
    }
    if (kept == 0)
        return APIREQ_JSON;
    if (w[0] == 0 && w[1] == 0)
        return APIREQ_NONE;
    if (w[1] > w[0] || (w[1] == w[0] && at[1] < at[0]))
        return APIREQ_TEXT;
    return APIREQ_JSON;
}

static int token68_char(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_' || c == '~' || c == '+' || c == '/';
}

/* "Bearer" (any case), 1*(SP / HT), 1*token68-char *"=", *(SP / HT), the end. */
static int ref_bearer(const char *h, const char **tok, size_t *len)
{
    const char *p, *t;

    if (h == NULL || !fz_case_eq(h, strnlen(h, 6), "bearer") || (h[6] != ' ' && h[6] != '\t'))
        return -1;
    p = h + 6;
    while (*p == ' ' || *p == '\t')
        p++;
    t = p;
    while (token68_char((unsigned char)*p))
        p++;
    if (p == t)
        return -1;
    while (*p == '=')
        p++;
    *tok = t;
    *len = (size_t)(p - t);
    while (*p == ' ' || *p == '\t')
        p++;
    return *p == '\0' ? 0 : -1;
}

/* ---- checks ---- */

/* Terminated inside err[errlen], printable ASCII; non-empty when there is room for a byte. */
static void check_err(const char *err, size_t errlen)
{
    const char *nul = memchr(err, '\0', errlen);

    CHECK(nul != NULL);
    CHECK(errlen < 2 || nul != err);
    for (const char *c = err; c < nul; c++)
        CHECK(*c >= 0x20 && *c < 0x7f);
}

static void check_path(const char *path, char *key, size_t *keylen)
{
    char k[80], rk[80];
    size_t n = 0, rn = 0;
    int rc = apireq_path(path, k, &n), want = ref_path(path, rk, &rn);

    CHECK(rc == HTTPREQ_PATH_OK || rc == HTTPREQ_PATH_NONE || rc == HTTPREQ_PATH_BAD);
    if (rc != want) {
        fprintf(stderr, "apireq_path: %d, the contract: %d\n", rc, want);
        CHECK(!"apireq_path follows its contract");
    }
    if (rc == 0) {
        CHECK(n == rn && memcmp(k, rk, n) == 0 && k[n] == '\0');
        memcpy(key, k, n + 1);
        *keylen = n;
    }
}

static uint64_t check_count(const char *s, size_t len, int absent, size_t errlen, int *ok)
{
    char err[APIREQ_ERR_MAX + 16], *q = NULL;
    uint64_t count = 0, want = 0;
    int rc, rrc;

    if (!absent) {
        q = malloc(len ? len : 1); /* exactly the bytes: no NUL after them */
        CHECK(q != NULL);
        memcpy(q, s, len);
    }
    memset(err, 0x7f, sizeof(err));
    rc = apireq_count(q, absent ? 0 : len, &count, err, errlen);
    rrc = ref_count(q, len, &want);
    CHECK(rc == 0 || rc == -1);
    if (rc != rrc) {
        fprintf(stderr, "apireq_count: %d, the contract: %d\n", rc, rrc);
        CHECK(!"apireq_count follows its contract");
    }
    if (rc == 0) {
        CHECK(count == want);
        CHECK(count >= 1 && count <= 9999999999ULL);
    } else if (errlen > 0) {
        check_err(err, errlen);
        if (errlen == APIREQ_ERR_MAX)
            CHECK(strlen(err) < APIREQ_ERR_MAX - 1); /* the longest message fits */
    }
    for (size_t i = errlen; i < sizeof(err); i++)
        CHECK(err[i] == 0x7f); /* nothing past errlen */
    free(q);
    *ok = rc == 0;
    return count;
}

static void check_bearer(const char *authz, size_t alen)
{
    const char *tok = NULL, *rtok = NULL;
    size_t n = 0, rn = 0;
    char hex[TOKEN_HASH_LEN + 1];
    int rc = apireq_bearer(authz, &tok, &n), want = ref_bearer(authz, &rtok, &rn);

    CHECK(rc == 0 || rc == -1);
    if (rc != want) {
        fprintf(stderr, "apireq_bearer: %d, the contract: %d\n", rc, want);
        CHECK(!"apireq_bearer follows its contract");
    }
    if (rc != 0)
        return;
    CHECK(tok == rtok && n == rn);
    CHECK(n >= 1 && tok >= authz && tok + n <= authz + alen); /* within the header */
    /* what the daemon does with it: hash, then look the hash up */
    token_hash(tok, n, hex);
    CHECK(strlen(hex) == TOKEN_HASH_LEN);
    CHECK(token_matches(tok, n, hex) == token_hash_valid(hex));
}

/* JSON: {"app": key, "ids": [decimal strings]} and nothing else. */
static void check_json(const char *b, size_t len, const char *key, size_t keylen,
                       const uint64_t *ids, size_t n)
{
    cJSON *j = cJSON_ParseWithLength(b, len), *app, *arr, *it;
    size_t i = 0;

    CHECK(len >= 2 && b[len - 1] == '\n' && b[len - 2] == '}');
    CHECK(j != NULL && cJSON_IsObject(j));
    CHECK(cJSON_GetArraySize(j) == 2);
    app = cJSON_GetObjectItemCaseSensitive(j, "app");
    CHECK(cJSON_IsString(app) && strlen(app->valuestring) == keylen &&
          memcmp(app->valuestring, key, keylen) == 0);
    arr = cJSON_GetObjectItemCaseSensitive(j, "ids");
    CHECK(cJSON_IsArray(arr) && (size_t)cJSON_GetArraySize(arr) == n);
    cJSON_ArrayForEach(it, arr)
    {
        char *end;
        CHECK(cJSON_IsString(it));
        CHECK(it->valuestring[0] >= '0' && it->valuestring[0] <= '9');
        CHECK(it->valuestring[0] != '0' || it->valuestring[1] == '\0'); /* no leading zeros */
        CHECK(strtoull(it->valuestring, &end, 10) == ids[i] && *end == '\0');
        i++;
    }
    CHECK(i == n);
    cJSON_Delete(j);
}

/* Text: each ID in decimal, one per line. */
static void check_text(const char *b, size_t len, const uint64_t *ids, size_t n)
{
    const char *p = b, *e = b + len;

    for (size_t i = 0; i < n; i++) {
        char num[32];
        const char *nl = memchr(p, '\n', (size_t)(e - p));
        size_t m;

        CHECK(nl != NULL);
        m = (size_t)(nl - p);
        CHECK(m >= 1 && m <= 20);
        memcpy(num, p, m);
        num[m] = '\0';
        CHECK(strspn(num, "0123456789") == m && (num[0] != '0' || m == 1));
        CHECK(strtoull(num, NULL, 10) == ids[i]);
        p = nl + 1;
    }
    CHECK(p == e);
}

static void check_body(enum apireq_fmt fmt, const char *key, size_t keylen, const uint64_t *ids,
                       size_t n)
{
    size_t max = apireq_body_max(keylen, n), len;
    char *b = malloc(max ? max : 1); /* exactly the bound: ASan sees any byte past it */

    CHECK(b != NULL);
    len = apireq_body(b, fmt, key, keylen, ids, n);
    CHECK(len <= max);
    if (fmt == APIREQ_JSON)
        check_json(b, len, key, keylen, ids, n);
    else
        check_text(b, len, ids, n);
    free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fz f = {data, size};
    uint8_t flags = fz_u8(&f);
    size_t qlen, hlen, errlen, n;
    char *path = fz_str(&f, FIELD_MAX, NULL), *query = fz_str(&f, FIELD_MAX, &qlen);
    char *accept = fz_str(&f, FIELD_MAX, NULL), *authz = fz_str(&f, FIELD_MAX, &hlen);
    char key[80] = "k";
    size_t keylen = 1;
    uint64_t count, ids[IDS_MAX];
    enum apireq_fmt fmt;
    int count_ok;
    char digits[32];

    errlen = fz_u8(&f); /* 0: the full size; else 0..APIREQ_ERR_MAX */
    errlen = errlen == 0 ? APIREQ_ERR_MAX : errlen % (APIREQ_ERR_MAX + 1);

    check_path(path, key, &keylen);
    count = check_count(query, qlen, flags & 1, errlen, &count_ok);
    fmt = apireq_accept(flags & 2 ? NULL : accept);
    CHECK(fmt == APIREQ_JSON || fmt == APIREQ_TEXT || fmt == APIREQ_NONE);
    if (fmt != ref_accept(flags & 2 ? NULL : accept)) {
        fprintf(stderr, "apireq_accept: %d, the contract: %d\n", fmt,
                ref_accept(flags & 2 ? NULL : accept));
        CHECK(!"apireq_accept follows its contract");
    }
    if (fmt == APIREQ_NONE)
        fmt = APIREQ_JSON; /* the bodies below: the errors are JSON */
    check_bearer(flags & 4 ? NULL : authz, hlen);

    /* the body for the parsed count (more than 64: a smaller one), key and format */
    n = !count_ok ? 0 : count <= IDS_MAX ? (size_t)count : fz_u8(&f) % (IDS_MAX + 1);
    for (size_t i = 0; i < n; i++)
        ids[i] = (uint64_t)fz_i64(&f);
    check_body(fmt, key, keylen, ids, n);
    check_body(fmt == APIREQ_JSON ? APIREQ_TEXT : APIREQ_JSON, key, keylen, ids, n);

    /* apireq_u64 round-trips */
    for (size_t i = 0; i < n; i++) {
        size_t m = apireq_u64(ids[i], digits);
        CHECK(m >= 1 && m <= 20);
        digits[m] = '\0';
        CHECK(strtoull(digits, NULL, 10) == ids[i]);
    }

    free(path);
    free(query);
    free(accept);
    free(authz);
    return 0;
}
