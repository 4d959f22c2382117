/*
 * notify — sd_notify for Type=notify units (notify.h). One poll timer
 * reads the daemon view a few times a second, decides readiness and
 * compares the status line with the one last sent; a second timer sends
 * the watchdog pings.
 */
#include "notify.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <systemd/sd-daemon.h>

#include "log.h"

#define NOTIFY_POLL_MS 250 /* readiness and status line checked this often */
/*
 * READY=1 at the latest this long after the start, degraded: a Cluster
 * primary or MySQL down, or a pool whose lock another daemon holds, must
 * not keep the start from completing until TimeoutStartSec (90 s in the
 * unit) kills the daemon, and with it the refills it does for the healthy
 * pools, over and over. IDPOOL_READY_MAX_MS changes it (the tests).
 */
#define NOTIFY_READY_MAX_MS 60000
#define STATUS_MAX          512

struct notify {
    struct status_source src;
    struct statusline_role role;
    struct event *poll_ev;     /* NOTIFY_POLL_MS, persistent */
    struct event *watchdog_ev; /* half of WATCHDOG_USEC, persistent; NULL: no watchdog */
    int ready;                 /* READY=1 sent for the start */
    unsigned ready_max_ms;     /* READY=1 at the latest this long after the start */
    unsigned polls_left;       /* polls until READY=1 is sent degraded */
    int reloading;             /* RELOADING=1 sent, READY=1 not yet */
    uint64_t reload_load;      /* the rows' load that ends the reload (pools_reread) */
    int stopping;              /* STOPPING=1 sent */
    int failed;                /* an sd_notify failed (logged once) */
    char status[STATUS_MAX];   /* the STATUS= last sent */
    char rejected[200];        /* why the last reload's configuration was rejected, or "" */
};

/* sd_notify(3), its failure logged once (the socket went away: nothing to do about it). */
static void send_state(struct notify *n, const char *state)
{
    int rc = sd_notify(0, state);

    if (rc < 0 && !n->failed) {
        n->failed = 1;
        log_warn("systemd: cannot notify the service manager (NOTIFY_SOCKET): %s", strerror(-rc));
    }
}

static unsigned ready_max_ms(void)
{
    const char *v = getenv("IDPOOL_READY_MAX_MS");
    unsigned long ms = v && *v ? strtoul(v, NULL, 10) : 0;

    return ms >= NOTIFY_POLL_MS && ms <= 3600000 ? (unsigned)ms : NOTIFY_READY_MAX_MS;
}

/* Read the view: readiness, the end of a reload, the status line when it changed. */
static void notify_poll(struct notify *n)
{
    struct daemon_view d;
    char line[STATUS_MAX], msg[STATUS_MAX + 32];
    const char *event = NULL;

    if (n->stopping)
        return;
    memset(&d, 0, sizeof(d));
    n->src.daemon(n->src.ctx, &d);
    if (!n->ready && statusline_ready(&d, &n->role)) {
        n->ready = 1;
        event = "start complete";
    } else if (!n->ready && n->polls_left > 0 && --n->polls_left == 0) {
        statusline_format(line, sizeof(line), &d, &n->role, 0);
        log_warn("systemd: the start is not complete after %u ms (%s): ready anyway, degraded",
                 n->ready_max_ms, line);
        n->ready = 1;
        event = "start complete, degraded";
    } else if (n->reloading && d.rows_loads >= n->reload_load) {
        n->reloading = 0;
        event = "reload complete";
    }
    statusline_format(line, sizeof(line), &d, &n->role, n->ready);
    if (n->rejected[0]) {
        size_t len = strlen(line);
        snprintf(line + len, sizeof(line) - len, "; reload rejected: %s", n->rejected);
    }
    if (!event && strcmp(line, n->status) == 0)
        return;
    snprintf(msg, sizeof(msg), "%sSTATUS=%s", event ? "READY=1\n" : "", line);
    send_state(n, msg);
    if (event)
        log_info("systemd: %s (READY=1): %s", event, line);
    snprintf(n->status, sizeof(n->status), "%s", line);
}

static void on_poll(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    notify_poll(arg);
}

static void on_watchdog(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    send_state(arg, "WATCHDOG=1");
}

struct notify *notify_new(struct event_base *base, const struct status_source *src,
                          const struct statusline_role *role)
{
    struct notify *n = calloc(1, sizeof(*n));
    const char *sock = getenv("NOTIFY_SOCKET");
    uint64_t usec = 0;

    if (!n)
        return NULL;
    n->src = *src;
    n->role = *role;
    if (!sock || !sock[0])
        return n; /* not under systemd: nothing to tell */
    n->ready_max_ms = ready_max_ms();
    n->polls_left = n->ready_max_ms / NOTIFY_POLL_MS;
    n->poll_ev = event_new(base, -1, EV_PERSIST, on_poll, n);
    if (!n->poll_ev)
        goto fail;
    {
        struct timeval tv = {0, NOTIFY_POLL_MS * 1000};
        if (event_add(n->poll_ev, &tv) != 0)
            goto fail;
    }
    /* > 0: WATCHDOG_USEC is set, and WATCHDOG_PID is unset or this process. */
    if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
        struct timeval tv = {(time_t)(usec / 2 / 1000000), (suseconds_t)(usec / 2 % 1000000)};

        n->watchdog_ev = event_new(base, -1, EV_PERSIST, on_watchdog, n);
        if (!n->watchdog_ev || event_add(n->watchdog_ev, &tv) != 0)
            goto fail;
        log_info("systemd: watchdog every %" PRIu64 " ms: pinging every %" PRIu64 " ms",
                 usec / 1000, usec / 2000);
        send_state(n, "WATCHDOG=1");
    }
    return n; /* the first status line at the first poll: by then MySQL and Redis were tried */
fail:
    notify_free(n);
    return NULL;
}

void notify_free(struct notify *n)
{
    if (!n)
        return;
    if (n->poll_ev)
        event_free(n->poll_ev);
    if (n->watchdog_ev)
        event_free(n->watchdog_ev);
    free(n);
}

void notify_reloading(struct notify *n, uint64_t rows_load, const char *rejected)
{
    struct timespec ts;
    char msg[96];

    if (!n->poll_ev || n->stopping)
        return;
    /* kept until a reload is accepted; one line (STATUS= is one field) */
    snprintf(n->rejected, sizeof(n->rejected), "%s", rejected ? rejected : "");
    for (char *p = n->rejected; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    if (!n->ready)
        return;
    n->reloading = 1;
    n->reload_load = rows_load;
    /* MONOTONIC_USEC: systemd >= 253 wants it with RELOADING=1 (Type=notify-reload). */
    clock_gettime(CLOCK_MONOTONIC, &ts);
    snprintf(msg, sizeof(msg), "RELOADING=1\nMONOTONIC_USEC=%" PRIu64,
             (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000);
    send_state(n, msg);
}

void notify_stopping(struct notify *n)
{
    if (!n->poll_ev || n->stopping)
        return;
    n->stopping = 1;
    send_state(n, "STOPPING=1\nSTATUS=stopping: finishing in-flight refills, releasing locks");
}
