#include "http.h"

#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "clock.h"
#include "log.h"

#define HTTP_BACKLOG 4096 /* the kernel caps it at net.core.somaxconn */

#define HTTP_FD_RESERVE 32    /* descriptors kept for Redis, MySQL, the webhook and the rest */
#define LOG_EVERY_MS    10000 /* a burst of the same trouble is logged once per this */

/* 1 when a burst entry should be logged now (then `n` says how many since the last one). */
int http_burst_due(struct http_burst *b, uint64_t *n)
{
    uint64_t now = clock_ms();

    b->n++;
    if (b->last_ms && now - b->last_ms < LOG_EVERY_MS)
        return 0;
    *n = b->n;
    b->n = 0;
    b->last_ms = now;
    return 1;
}

void http_raise_fd_limit(void)
{
    struct rlimit rl;
    rlim_t was;

    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= rl.rlim_max ||
        rl.rlim_max == RLIM_INFINITY)
        return;
    was = rl.rlim_cur;
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
        log_warn("cannot raise the file limit from %llu to %llu descriptors: %s",
                 (unsigned long long)was, (unsigned long long)rl.rlim_max, strerror(errno));
    else
        log_info("file limit raised from %llu to %llu descriptors (the hard limit) for "
                 "client connections",
                 (unsigned long long)was, (unsigned long long)rl.rlim_max);
}

/*
 * Connections must leave HTTP_FD_RESERVE descriptors to the rest of the
 * daemon: raise the soft file limit if needed (and allowed), else take
 * fewer connections.
 */
int http_fit_fd_limit(const char *name, int want)
{
    static rlim_t granted; /* to the servers set up before this one */
    struct rlimit rl;
    rlim_t need = (rlim_t)want + HTTP_FD_RESERVE + granted;
    int fit = want;

    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need)
        goto out;
    if (rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need) {
        rl.rlim_cur = need;
        if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
            goto out;
    }
    getrlimit(RLIMIT_NOFILE, &rl);
    fit = rl.rlim_cur > HTTP_FD_RESERVE + granted + 1
              ? (int)(rl.rlim_cur - HTTP_FD_RESERVE - granted)
              : 1;
    log_warn("%s: the file limit (%llu descriptors) leaves room for %d connection%s; "
             "%s-max-connections %d lowered to %d (raise LimitNOFILE / ulimit -n)",
             name, (unsigned long long)rl.rlim_cur, fit, fit == 1 ? "" : "s", name, want, fit);
out:
    granted += (rlim_t)fit;
    return fit;
}

/* libevent's own messages, into the daemon's log; a burst once. */
void http_libevent_log(int severity, const char *msg)
{
    static struct http_burst b;
    uint64_t n;

    if (severity < EVENT_LOG_WARN || !http_burst_due(&b, &n))
        return;
    log_warn("libevent: %s (%" PRIu64 " message(s) since the last one)", msg, n);
}

char *http_target_path(const char *target)
{
    const char *t = target;
    size_t n;

    /* The absolute form (RFC 7230 5.3.2), which a server must accept: the path after the authority.
     */
    if (t && (strncasecmp(t, "http://", 7) == 0 || strncasecmp(t, "https://", 8) == 0)) {
        t = strchr(t + (t[4] == ':' ? 7 : 8), '/');
        if (t == NULL)
            return strdup("/");
    }
    if (t == NULL || t[0] != '/')
        return strdup("");
    n = strcspn(t, "?#");
    return strndup(t, n);
}

/*
 * A listening, non-blocking socket on the first address of host:port;
 * -1 with an error logged. The address is written to addr for logs.
 */
int http_listen(const char *name, const char *host, int port, char *addr, size_t addrlen)
{
    struct addrinfo hints, *res = NULL;
    char portstr[16], hbuf[NI_MAXHOST];
    int fd = -1, one = 1, rc;

    snprintf(addr, addrlen, "%s:%d", host, port);
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    snprintf(portstr, sizeof(portstr), "%d", port);
    rc = getaddrinfo(host, portstr, &hints, &res);
    if (rc != 0) {
        log_error("%s: cannot resolve '%s': %s", name, host, gai_strerror(rc));
        return -1;
    }
    if (getnameinfo(res->ai_addr, res->ai_addrlen, hbuf, sizeof(hbuf), NULL, 0, NI_NUMERICHOST) ==
        0)
        snprintf(addr, addrlen, res->ai_family == AF_INET6 ? "[%s]:%d" : "%s:%d", hbuf, port);
    fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        bind(fd, res->ai_addr, res->ai_addrlen) < 0 || listen(fd, HTTP_BACKLOG) < 0) {
        log_error("%s: cannot listen on %s: %s", name, addr, strerror(errno));
        if (fd >= 0)
            close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    return fd;
}
