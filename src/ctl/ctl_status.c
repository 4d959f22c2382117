/*
 * ctl_status — `idpoolctl status`.
 *
 * status asks the daemon first (GET /v1/apps on http_addr, a tiny blocking
 * HTTP/1.0 client with one overall deadline), because only the daemon knows
 * the consumption rate and its own alerts. When no daemon answers it reads
 * Redis (LLEN, the alert:* fields of meta) and MySQL (the rows) directly and
 * says so in a footer: status is most needed exactly when the daemon is down.
 * */
#include "ctl_status.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "app.h"
#include "ctl_rows.h"

#define HTTP_TIMEOUT_MS 2000
#define HTTP_MAX_BODY   (64u << 20)

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait until fd is ready for `events` or the deadline passes. 0, or -1 (errno ETIMEDOUT). */
static int wait_fd(int fd, short events, int64_t deadline)
{
    for (;;) {
        struct pollfd p = {fd, events, 0};
        int64_t left = deadline - now_ms();
        int n;

        if (left <= 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        n = poll(&p, 1, (int)left);
        if (n > 0)
            return 0;
        if (n == 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        if (errno != EINTR)
            return -1;
    }
}

/* Connect to host:port (any address family) before the deadline. fd, or -1 with err. */
static int http_connect(const char *host, int port, int64_t deadline, char *err, size_t errlen)
{
    struct addrinfo hints, *res = NULL, *ai;
    char portstr[8];
    int fd = -1, gai, last = 0;

    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    snprintf(portstr, sizeof(portstr), "%d", port);
    gai = getaddrinfo(host, portstr, &hints, &res);
    if (gai != 0) {
        snprintf(err, errlen, "%s", gai_strerror(gai));
        return -1;
    }
    for (ai = res; ai; ai = ai->ai_next) {
        int soerr = 0;
        socklen_t len = sizeof(soerr);

        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
        if (fd < 0) {
            last = errno;
            continue;
        }
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
            break;
        if (errno == EINPROGRESS && wait_fd(fd, POLLOUT, deadline) == 0 &&
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) == 0 && soerr == 0)
            break;
        last = soerr ? soerr : errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0)
        snprintf(err, errlen, "%s", strerror(last ? last : ECONNREFUSED));
    return fd;
}

/* Decode a chunked body in place. 0, or -1 when malformed. */
static int dechunk(char *body, size_t *len)
{
    size_t in = 0, out = 0;

    for (;;) {
        char *end;
        unsigned long n;

        if (in >= *len)
            return -1;
        n = strtoul(body + in, &end, 16);
        if (end == body + in)
            return -1;
        end = strstr(end, "\r\n");
        if (!end)
            return -1;
        in = (size_t)(end - body) + 2;
        if (n == 0)
            break;
        if (n > *len - in)
            return -1;
        memmove(body + out, body + in, n);
        out += n;
        in += n + 2;
    }
    body[out] = '\0';
    *len = out;
    return 0;
}

/* The header block (NUL-terminated) says Transfer-Encoding: chunked. */
static int header_is_chunked(const char *h)
{
    for (const char *line = strstr(h, "\r\n"); line; line = strstr(line + 2, "\r\n")) {
        const char *v = line + 2;
        if (strncasecmp(v, "transfer-encoding:", 18) != 0)
            continue;
        v += 18;
        while (*v == ' ' || *v == '\t')
            v++;
        return strncasecmp(v, "chunked", 7) == 0;
    }
    return 0;
}

/*
 * GET http://host:port/path with an overall timeout. On success (0) *status
 * holds the HTTP status and *body the body (heap, NUL-terminated). -1 with
 * err on any failure to talk HTTP with the server.
 */
static int http_get(const char *host, int port, const char *path, int timeout_ms, int *status,
                    char **body, char *err, size_t errlen)
{
    int64_t deadline = now_ms() + timeout_ms;
    char req[512], *buf = NULL, *hdr_end, *p;
    size_t len = 0, cap = 0, sent = 0, reqlen, blen;
    int fd, rc = -1, chunked;

    *body = NULL;
    fd = http_connect(host, port, deadline, err, errlen);
    if (fd < 0)
        return -1;
    reqlen = (size_t)snprintf(req, sizeof(req),
                              "GET %s HTTP/1.0\r\nHost: %s%s%s:%d\r\nAccept: application/json\r\n"
                              "User-Agent: idpoolctl\r\nConnection: close\r\n\r\n",
                              path, strchr(host, ':') ? "[" : "", host,
                              strchr(host, ':') ? "]" : "", port);
    while (sent < reqlen) {
        ssize_t n = send(fd, req + sent, reqlen - sent, MSG_NOSIGNAL);
        if (n > 0) {
            sent += (size_t)n;
        } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (wait_fd(fd, POLLOUT, deadline) < 0)
                goto io_error;
        } else {
            goto io_error;
        }
    }
    for (;;) {
        ssize_t n;

        if (cap - len < 4096) {
            char *nb;
            if (cap > HTTP_MAX_BODY) {
                snprintf(err, errlen, "reply larger than %u bytes", HTTP_MAX_BODY);
                goto out;
            }
            cap = cap ? cap * 2 : 16384;
            nb = realloc(buf, cap + 1);
            if (!nb)
                ctl_oom();
            buf = nb;
        }
        n = recv(fd, buf + len, cap - len, 0);
        if (n > 0) {
            len += (size_t)n;
        } else if (n == 0) {
            break;
        } else if (errno == EAGAIN || errno == EINTR) {
            if (wait_fd(fd, POLLIN, deadline) < 0)
                goto io_error;
        } else {
            goto io_error;
        }
    }
    if (!buf) {
        snprintf(err, errlen, "empty reply");
        goto out;
    }
    buf[len] = '\0';
    if (strncmp(buf, "HTTP/1.", 7) != 0 || len < 12 || sscanf(buf + 9, "%3d", status) != 1) {
        snprintf(err, errlen, "not an HTTP reply");
        goto out;
    }
    hdr_end = strstr(buf, "\r\n\r\n");
    if (!hdr_end) {
        snprintf(err, errlen, "truncated HTTP reply");
        goto out;
    }
    *hdr_end = '\0';
    chunked = header_is_chunked(buf);
    p = hdr_end + 4;
    blen = len - (size_t)(p - buf);
    memmove(buf, p, blen + 1);
    if (chunked && dechunk(buf, &blen) != 0) {
        snprintf(err, errlen, "malformed chunked reply");
        goto out;
    }
    rc = 0;
    *body = buf;
    buf = NULL;
    goto out;

io_error:
    snprintf(err, errlen, "%s", errno == ETIMEDOUT ? "timed out" : strerror(errno));
out:
    free(buf);
    close(fd);
    return rc;
}

/* ------------------------------------------------------------------ status */

/* One line of the status table, whatever its source. */
struct status_line {
    char key[260];
    char state[16];   /* served | deleted | invalid */
    char type[16];    /* monotonic | trend | - */
    long long length; /* -1: unknown */
    double fill;      /* < 0: unknown */
    double rate;      /* < 0: unknown */
    cJSON *alerts;    /* array of strings (owned) */
    char reason[APP_ERR_MAX];
};

/* A JSON number or decimal string as a double; def when absent or null. */
static double jnum(const cJSON *o, const char *name, double def)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);

    if (cJSON_IsNumber(v))
        return v->valuedouble;
    if (cJSON_IsString(v) && v->valuestring[0])
        return strtod(v->valuestring, NULL);
    return def;
}

/* Lines from the daemon's /v1/apps array. 0, or -1 when the document is not what we expect. */
static int lines_from_daemon(const cJSON *arr, struct status_line **out, size_t *n)
{
    const cJSON *app;
    size_t i = 0;

    if (!cJSON_IsArray(arr))
        return -1;
    *n = (size_t)cJSON_GetArraySize(arr);
    *out = ctl_xcalloc(*n, sizeof(**out));
    cJSON_ArrayForEach(app, arr)
    {
        struct status_line *l = &(*out)[i++];
        const cJSON *key = cJSON_GetObjectItemCaseSensitive(app, "key");
        const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(app, "config");
        const cJSON *pool = cJSON_GetObjectItemCaseSensitive(app, "pool");
        const cJSON *inv = cJSON_GetObjectItemCaseSensitive(app, "invalid");
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(cfg, "type");
        const cJSON *alerts = cJSON_GetObjectItemCaseSensitive(app, "alerts"), *a;

        if (!cJSON_IsObject(app) || !cJSON_IsString(key))
            return -1;
        snprintf(l->key, sizeof(l->key), "%s", key->valuestring);
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(app, "deleted")))
            snprintf(l->state, sizeof(l->state), "deleted");
        else if ((cJSON_IsString(inv) && inv->valuestring[0]) || cJSON_IsTrue(inv))
            snprintf(l->state, sizeof(l->state), "invalid");
        else
            snprintf(l->state, sizeof(l->state), "served");
        if (cJSON_IsString(inv))
            snprintf(l->reason, sizeof(l->reason), "%s", inv->valuestring);
        if (cJSON_IsString(type))
            snprintf(l->type, sizeof(l->type), "%s", type->valuestring);
        else if (cJSON_IsNumber(type))
            snprintf(l->type, sizeof(l->type), "%s",
                     type->valueint == APP_TREND ? "trend" : "monotonic");
        else
            snprintf(l->type, sizeof(l->type), "-");
        l->length = (long long)jnum(pool, "length", -1);
        l->fill = jnum(pool, "fill_pct", -1);
        l->rate = jnum(app, "rate_ids_per_s", -1);
        l->alerts = ctl_jcheck(cJSON_CreateArray());
        cJSON_ArrayForEach(a, alerts)
        {
            const cJSON *name = a;
            if (cJSON_IsObject(a)) {
                name = cJSON_GetObjectItemCaseSensitive(a, "alert");
                if (!name)
                    name = cJSON_GetObjectItemCaseSensitive(a, "kind");
            }
            if (cJSON_IsString(name))
                cJSON_AddItemToArray(l->alerts, ctl_jcheck(cJSON_CreateString(name->valuestring)));
        }
    }
    return 0;
}

/* Lines from MySQL rows and Redis directly. 0 or an exit code (reported). */
static int lines_direct(struct ctl *c, struct status_line **out, size_t *n)
{
    struct ctl_row *rows = NULL;
    struct ctl_pool *pools = NULL;
    const char **keys = NULL;
    size_t nrows = 0, nk = 0;
    int rc;

    *out = NULL;
    *n = 0;
    if ((rc = ctl_db_open(c)) != 0 || (rc = ctl_rows_load(c, NULL, 0, &rows, &nrows)) != 0)
        return rc;
    if ((rc = ctl_redis_open(c)) != 0)
        goto done;
    keys = ctl_xcalloc(nrows, sizeof(*keys));
    pools = ctl_xcalloc(nrows, sizeof(*pools));
    /* A key that cannot name Redis keys has no pool to look at. */
    for (size_t i = 0; i < nrows; i++)
        if (app_key_valid(rows[i].key))
            keys[nk++] = rows[i].key;
    if ((rc = ctl_pools_read(c, keys, nk, pools)) != 0)
        goto done;
    *out = ctl_xcalloc(nrows, sizeof(**out));
    *n = nrows;
    for (size_t i = 0, k = 0; i < nrows; i++) {
        struct ctl_row *r = &rows[i];
        struct status_line *l = &(*out)[i];
        struct ctl_pool *p = app_key_valid(r->key) ? &pools[k++] : NULL;

        snprintf(l->key, sizeof(l->key), "%s", r->key);
        snprintf(l->state, sizeof(l->state), "%s", ctl_row_state(r));
        if (!r->valid)
            snprintf(l->reason, sizeof(l->reason), "%s", r->error);
        snprintf(l->type, sizeof(l->type), "%s",
                 r->valid ? (r->cfg.type == APP_TREND ? "trend" : "monotonic") : "-");
        l->length = p ? p->length : -1;
        l->fill = (p && r->valid && r->cfg.max_pool)
                      ? 100.0 * (double)p->length / (double)r->cfg.max_pool
                      : -1;
        l->rate = -1;
        if (p) {
            l->alerts = p->alerts;
            p->alerts = NULL;
        } else {
            l->alerts = ctl_jcheck(cJSON_CreateArray());
        }
    }
done:
    for (size_t i = 0; pools && i < nk; i++)
        ctl_pool_free(&pools[i]);
    free(pools);
    free(keys);
    free(rows);
    return rc;
}

static void lines_free(struct status_line *l, size_t n)
{
    for (size_t i = 0; l && i < n; i++)
        cJSON_Delete(l[i].alerts);
    free(l);
}

static void status_print(struct ctl *c, const struct status_line *l, size_t n, const char *source,
                         const char *note)
{
    static const char *const hdr[] = {"KEY", "STATE", "TYPE", "POOL", "FILL", "RATE/S", "ALERTS"};
    struct ctl_table *t;

    if (c->json) {
        cJSON *doc = ctl_jcheck(cJSON_CreateObject()), *arr;

        ctl_jcheck(cJSON_AddStringToObject(doc, "source", source));
        ctl_jcheck(cJSON_AddStringToObject(doc, "note", note));
        arr = ctl_jcheck(cJSON_AddArrayToObject(doc, "apps"));
        for (size_t i = 0; i < n; i++) {
            cJSON *o = ctl_jcheck(cJSON_CreateObject());
            ctl_jcheck(cJSON_AddStringToObject(o, "key", l[i].key));
            ctl_jcheck(cJSON_AddStringToObject(o, "state", l[i].state));
            if (l[i].reason[0])
                ctl_jcheck(cJSON_AddStringToObject(o, "error", l[i].reason));
            ctl_jcheck(cJSON_AddStringToObject(o, "type", l[i].type));
            if (l[i].length >= 0)
                ctl_json_i64(o, "pool_length", l[i].length);
            else
                ctl_jcheck(cJSON_AddNullToObject(o, "pool_length"));
            if (l[i].fill >= 0)
                ctl_jcheck(cJSON_AddNumberToObject(o, "fill_pct", l[i].fill));
            else
                ctl_jcheck(cJSON_AddNullToObject(o, "fill_pct"));
            if (l[i].rate >= 0)
                ctl_jcheck(cJSON_AddNumberToObject(o, "rate_ids_per_s", l[i].rate));
            else
                ctl_jcheck(cJSON_AddNullToObject(o, "rate_ids_per_s"));
            cJSON_AddItemToObject(o, "alerts", ctl_jcheck(cJSON_Duplicate(l[i].alerts, 1)));
            cJSON_AddItemToArray(arr, o);
        }
        ctl_json_print(c, doc);
        return;
    }
    t = ctl_table_new(7, hdr);
    for (size_t i = 0; i < n; i++) {
        char key[260], len[24], fill[32], rate[32], alerts[256] = "";
        const char *cells[7];
        const cJSON *a;

        cJSON_ArrayForEach(a, l[i].alerts)
        {
            size_t used = strlen(alerts);
            snprintf(alerts + used, sizeof(alerts) - used, "%s%s", used ? "," : "", a->valuestring);
        }
        if (l[i].length >= 0)
            snprintf(len, sizeof(len), "%lld", l[i].length);
        else
            snprintf(len, sizeof(len), "-");
        if (l[i].fill >= 0)
            snprintf(fill, sizeof(fill), "%.1f%%", l[i].fill);
        else
            snprintf(fill, sizeof(fill), "-");
        if (l[i].rate >= 0)
            snprintf(rate, sizeof(rate), "%.1f", l[i].rate);
        else
            snprintf(rate, sizeof(rate), "?");
        cells[0] = ctl_printable(l[i].key, key, sizeof(key));
        cells[1] = strcmp(l[i].state, "invalid") == 0 ? "INVALID" : l[i].state;
        cells[2] = l[i].type;
        cells[3] = len;
        cells[4] = fill;
        cells[5] = rate;
        cells[6] = alerts[0] ? alerts : "-";
        ctl_table_add(t, cells);
    }
    ctl_table_print(t, stdout);
    if (n == 0)
        printf("(no applications)\n");
    printf("-- %s\n", note);
    ctl_table_free(t);
}

int ctl_status(struct ctl *c, int argc, char **argv)
{
    struct status_line *lines = NULL;
    size_t n = 0;
    char *pos[1], *body = NULL, err[256], where[300], note[700];
    int npos, rc, status = 0;
    cJSON *doc;

    rc = ctl_opts_parse(c, argc, argv, NULL, NULL, NULL, pos, 0, &npos);
    if (rc != 0)
        return rc;
    if ((rc = ctl_setup(c)) != 0)
        return rc;
    if (c->cfg.http_addr[0] == '\0') {
        snprintf(note, sizeof(note),
                 "read from Redis and MySQL directly: the daemon's HTTP address is disabled "
                 "(--http ''); rate unknown");
    } else {
        snprintf(where, sizeof(where), strchr(c->cfg.http_host, ':') ? "[%s]:%d" : "%s:%d",
                 c->cfg.http_host, c->cfg.http_port);
        if (http_get(c->cfg.http_host, c->cfg.http_port, "/v1/apps", HTTP_TIMEOUT_MS, &status,
                     &body, err, sizeof(err)) != 0) {
            snprintf(note, sizeof(note),
                     "no idpoold answered at http://%s (%s): read from Redis and MySQL directly; "
                     "rate unknown",
                     where, err);
        } else if (status != 200) {
            snprintf(note, sizeof(note),
                     "idpoold at http://%s answered /v1/apps with HTTP %d: read from Redis and "
                     "MySQL directly; rate unknown",
                     where, status);
        } else if (!(doc = cJSON_Parse(body)) || lines_from_daemon(doc, &lines, &n) != 0) {
            cJSON_Delete(doc);
            lines_free(lines, n);
            lines = NULL;
            n = 0;
            snprintf(note, sizeof(note),
                     "idpoold at http://%s sent an unexpected /v1/apps document: read from Redis "
                     "and MySQL directly; rate unknown",
                     where);
        } else {
            cJSON_Delete(doc);
            free(body);
            snprintf(note, sizeof(note), "from idpoold at http://%s/v1/apps", where);
            status_print(c, lines, n, "daemon", note);
            lines_free(lines, n);
            return 0;
        }
        free(body);
    }
    if ((rc = lines_direct(c, &lines, &n)) != 0)
        return rc;
    status_print(c, lines, n, "direct", note);
    lines_free(lines, n);
    return 0;
}

/* -------------------------------------------------------------------- help */

const char ctl_status_help[] =
    "Usage: %s [global options] status [--json]\n"
    "\n"
    "What the service is doing, one line per application: KEY, STATE (served, deleted,\n"
    "INVALID), TYPE, POOL (IDs in the pool), FILL (%% of max_pool_size), RATE/S\n"
    "(consumption, IDs per second, smoothed) and the ALERTS firing.\n"
    "\n"
    "It asks idpoold (GET /v1/apps on --http / IDPOOL_HTTP_ADDR, 2 s timeout). When no\n"
    "daemon answers it reads Redis and MySQL directly (the rate is then unknown, '?')\n"
    "and the footer line says so. Exit 1 only when neither source can be read.\n";
