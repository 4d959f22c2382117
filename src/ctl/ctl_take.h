/*
 * ctl_take — `idpoolctl take`: IDs through libidpool, from the configured
 * Redis or the environments given (Redis or issuer URLs), with the
 * application's limits enforced where the IDs come from.
 */
#ifndef IDPOOL_CTL_TAKE_H
#define IDPOOL_CTL_TAKE_H

#include <stdio.h>

#include "ctl_common.h"

/* `idpoolctl take KEY [N] [--env URL]... [--timeout-ms MS] [--json]` (argv after "take"). */
int ctl_take(struct ctl *c, int argc, char **argv);

/* Its --help: a format taking the program name. */
extern const char ctl_take_help[];

#endif
