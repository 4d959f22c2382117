/*
 * statusline — the start's completion and the one-line status for systemd,
 * from the daemon view (statusline.h).
 */
#include "statusline.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int statusline_ready(const struct daemon_view *d, const struct statusline_role *role)
{
    return d->rows_loaded && d->redis_up && (!role->refill || d->apps_unchecked == 0) &&
           (!role->api || d->api_tokens_loaded);
}

/* Append to buf (len bytes, *at used) like snprintf; a line cut short stays terminated. */
static void add(char *buf, size_t len, size_t *at, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void add(char *buf, size_t len, size_t *at, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (*at >= len)
        return;
    va_start(ap, fmt);
    n = vsnprintf(buf + *at, len - *at, fmt, ap);
    va_end(ap);
    if (n > 0)
        *at += (size_t)n < len - *at ? (size_t)n : len - *at - 1;
}

static const char *plural(size_t n, const char *one, const char *many)
{
    return n == 1 ? one : many;
}

/* What the start still waits for (not ready). */
static void add_waiting(char *buf, size_t len, size_t *at, const struct daemon_view *d,
                        const struct statusline_role *role)
{
    if (!d->rows_loaded)
        add(buf, len, at, "starting: application rows not read yet");
    else if (!d->redis_up)
        add(buf, len, at, "starting: waiting for redis");
    else if (role->refill && d->apps_unchecked)
        add(buf, len, at, "starting: %zu of %zu %s not checked yet", d->apps_unchecked,
            d->apps_served, plural(d->apps_served, "pool", "pools"));
    else if (role->api && !d->api_tokens_loaded)
        add(buf, len, at, "starting: API tokens not read yet");
    else
        add(buf, len, at, "starting");
}

static void add_redis(char *buf, size_t len, size_t *at, const struct daemon_view *d)
{
    add(buf, len, at, "redis %s", d->redis_up ? "up" : "down");
    if (d->cluster) {
        size_t down = 0;

        for (size_t i = 0; i < d->nnodes; i++)
            down += !d->nodes[i].up;
        add(buf, len, at, " (%zu %s", d->nnodes, plural(d->nnodes, "node", "nodes"));
        if (down)
            add(buf, len, at, ", %zu down", down);
        if (d->cluster_unowned)
            add(buf, len, at, ", %zu slots without a primary", d->cluster_unowned);
        add(buf, len, at, ")");
    } else if (d->sentinel) {
        if (d->redis_primary[0])
            add(buf, len, at, " (primary %s of %s)", d->redis_primary,
                d->redis_master ? d->redis_master : "?");
        else
            add(buf, len, at, " (no primary named yet%s)",
                d->sentinel_up ? "" : ", no sentinel answers");
    }
}

static void add_mysql(char *buf, size_t len, size_t *at, const struct daemon_view *d)
{
    if (d->mysql_denied[0])
        add(buf, len, at, "mysql up, %s", d->mysql_denied);
    else if (d->mysql_up)
        add(buf, len, at, "mysql up");
    else if (d->mysql_schema_missing)
        add(buf, len, at, "mysql schema not loaded");
    else
        add(buf, len, at, "mysql down");
}

void statusline_format(char *buf, size_t len, const struct daemon_view *d,
                       const struct statusline_role *role, int ready)
{
    size_t at = 0;

    if (len == 0)
        return;
    buf[0] = '\0';
    if (!ready)
        add_waiting(buf, len, &at, d, role);
    else
        add(buf, len, &at, "%s %zu %s", role->refill ? "serving" : "issuing (refill off) for",
            d->apps_served, plural(d->apps_served, "application", "applications"));
    if (ready && d->apps_invalid)
        add(buf, len, &at, " (%zu invalid)", d->apps_invalid);
    add(buf, len, &at, "; ");
    add_redis(buf, len, &at, d);
    add(buf, len, &at, ", ");
    add_mysql(buf, len, &at, d);
    if (d->alerts_firing)
        add(buf, len, &at, "; %zu %s firing", d->alerts_firing,
            plural(d->alerts_firing, "alert", "alerts"));
    else
        add(buf, len, &at, "; no alerts");
}
