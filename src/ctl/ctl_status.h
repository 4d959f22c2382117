/*
 * ctl_status — `idpoolctl status` (what the service is doing: from the
 * daemon's GET /v1/apps, or from Redis and MySQL directly when no daemon
 * answers).
 */
#ifndef IDPOOL_CTL_STATUS_H
#define IDPOOL_CTL_STATUS_H

#include <stdio.h>

#include "ctl_common.h"

/* `idpoolctl status [--json]` (argv after "status"). Returns the exit code. */
int ctl_status(struct ctl *c, int argc, char **argv);

/* Its --help: a format taking the program name. */
extern const char ctl_status_help[];

#endif
