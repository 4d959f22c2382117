/*
 * notify — idpoold's side of systemd's notify protocol (sd_notify(3), from
 * libsystemd), for Type=notify units:
 *
 *   READY=1     once the start is complete (statusline_ready: rows read
 *               from MySQL, every Redis primary connected, every served
 *               pool's first refill cycle over, the API's tokens read)
 *   STATUS=     the status line (statusline_format), sent when it changes
 *   WATCHDOG=1  from the event loop every half of WATCHDOG_USEC (when
 *               WATCHDOG_PID, if set, is this process): a loop that stops
 *               turning stops them, and systemd restarts the service
 *   RELOADING=1 on SIGHUP, then READY=1 once the configuration is applied
 *               and the rows were read again; a rejected configuration
 *               adds "; reload rejected: <why>" to STATUS= until a reload
 *               is accepted
 *   STOPPING=1  on SIGTERM/SIGINT
 *
 * Without NOTIFY_SOCKET (not started by systemd) it sends nothing and sets
 * no timer.
 */
#ifndef IDPOOL_NOTIFY_H
#define IDPOOL_NOTIFY_H

#include <stdint.h>

#include <event2/event.h>

#include "status.h"
#include "statusline.h"

struct notify;

/* src: the daemon's status views (read on the loop, a few times a second). NULL: out of memory. */
struct notify *notify_new(struct event_base *base, const struct status_source *src,
                          const struct statusline_role *role);
void notify_free(struct notify *n);

/*
 * SIGHUP: RELOADING=1 now, READY=1 once the view's rows_loads reaches
 * rows_load (refill_reload). Before the start is complete it sends nothing:
 * READY=1 still waits for the start. rejected: why the new configuration
 * was rejected (STATUS= says so until a reload is accepted), or NULL.
 */
void notify_reloading(struct notify *n, uint64_t rows_load, const char *rejected);

/* SIGTERM: STOPPING=1 and a last status line; nothing more but watchdog pings. */
void notify_stopping(struct notify *n);

#endif
