/*
 * statusline — what idpoold tells its service manager (systemd's
 * sd_notify, daemon/notify.c): whether the start is complete (READY=1) and
 * the one line `systemctl status` shows (STATUS=), both from the daemon
 * view. Pure, so it is unit-tested without servers or systemd.
 */
#ifndef IDPOOL_STATUSLINE_H
#define IDPOOL_STATUSLINE_H

#include <stddef.h>

#include "status.h"

/* What the daemon is, for both. */
struct statusline_role {
    int refill; /* refills pools (refill = on); 0: issuer only */
    int api;    /* serves the ID API */
};

/*
 * The start is complete: the application rows were read from MySQL, every
 * Redis primary is connected (and validated), and, refilling, every served
 * pool had its first refill cycle (pool_checked); serving the API, its
 * tokens were read. Then READY=1.
 */
int statusline_ready(const struct daemon_view *d, const struct statusline_role *role);

/*
 * The status line into buf (always terminated; cut short to fit), e.g.
 * "serving 12 applications (1 invalid); redis up (3 nodes), mysql up; 2
 * alerts firing", or before ready "starting: 3 of 12 pools not checked
 * yet; redis up, mysql up; no alerts". ready: READY=1 was sent.
 */
void statusline_format(char *buf, size_t len, const struct daemon_view *d,
                       const struct statusline_role *role, int ready);

#endif
