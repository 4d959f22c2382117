#include "accesslog.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "accessline.h"
#include "http.h"
#include "log.h"

#define BUF_MAX (64 * 1024) /* bytes of lines waiting at most */

struct accesslog {
    char *path;                 /* as given; "-": stderr */
    int fd;                     /* O_APPEND, or STDERR_FILENO */
    struct event *flush_ev;     /* a zero timer: after this loop turn */
    char buf[BUF_MAX];          /* lines waiting */
    size_t len;                 /* bytes in buf */
    struct http_burst fail_log; /* failed writes */
};

static int is_stderr(const char *path)
{
    return strcmp(path, "-") == 0;
}

/* The file at path, or stderr; -1 with an error logged. */
static int open_path(const char *path)
{
    int fd;

    if (is_stderr(path))
        return STDERR_FILENO;
    fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0640);
    if (fd < 0)
        log_error("api: cannot open the access log %s (api-access-log): %s", path, strerror(errno));
    return fd;
}

/* Write what waits; on failure the lines are dropped (and that said, once per burst). */
static void flush_buf(struct accesslog *l)
{
    size_t off = 0;

    while (off < l->len) {
        ssize_t n = write(l->fd, l->buf + off, l->len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            uint64_t k;
            int err = n < 0 ? errno : EIO;

            if (http_burst_due(&l->fail_log, &k))
                log_warn("api: cannot write the access log %s: %s; its lines are dropped (%" PRIu64
                         " failed write(s) since the last message)",
                         l->path, strerror(err), k);
            break;
        }
        off += (size_t)n;
    }
    l->len = 0;
}

static void on_flush(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    flush_buf(arg);
}

struct accesslog *accesslog_open(struct event_base *base, const char *path)
{
    struct accesslog *l = calloc(1, sizeof(*l));

    if (l == NULL || (l->path = strdup(path)) == NULL ||
        (l->flush_ev = evtimer_new(base, on_flush, l)) == NULL) {
        log_error("api: cannot set up the access log: out of memory");
        goto fail;
    }
    if ((l->fd = open_path(path)) < 0)
        goto fail;
    log_info("api: access log %s", is_stderr(path) ? "on stderr" : path);
    return l;
fail:
    if (l) {
        if (l->flush_ev)
            event_free(l->flush_ev);
        free(l->path);
        free(l);
    }
    return NULL;
}

const char *accesslog_path(const struct accesslog *l)
{
    return l->path;
}

int accesslog_reopen(struct accesslog *l)
{
    int fd;

    flush_buf(l);
    if (is_stderr(l->path))
        return 0;
    if ((fd = open_path(l->path)) < 0)
        return -1; /* logged; the old file stays */
    close(l->fd);
    l->fd = fd;
    return 0;
}

void accesslog_write(struct accesslog *l, const struct accessline *e)
{
    static const struct timeval now = {0, 0};

    if (l->len + ACCESSLINE_MAX > sizeof(l->buf))
        flush_buf(l);
    l->len += accessline_format(l->buf + l->len, e);
    if (!evtimer_pending(l->flush_ev, NULL))
        evtimer_add(l->flush_ev, &now);
}

void accesslog_free(struct accesslog *l)
{
    if (l == NULL)
        return;
    flush_buf(l);
    event_free(l->flush_ev);
    if (!is_stderr(l->path))
        close(l->fd);
    free(l->path);
    free(l);
}
