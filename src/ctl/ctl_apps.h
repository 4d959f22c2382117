/*
 * ctl_apps — `idpoolctl apps ...`: list, show, add, set, disable and enable
 * rows of the MySQL `application` table (and grant/revoke, the application's
 * Redis user, implemented in ctl_tokens). Every row is judged by
 * app_validate(), the daemon's own rules, so idpoolctl and idpoold always
 * agree on what is served; writes are validated before they are made.
 */
#ifndef IDPOOL_CTL_APPS_H
#define IDPOOL_CTL_APPS_H

#include <stddef.h>
#include <stdio.h>

#include "app.h"
#include "ctl_common.h"

struct ctl_row;

/* The row as a JSON object (columns, resolved values, validation). */
cJSON *ctl_row_json(const struct ctl_row *r);

/* `idpoolctl apps SUBCOMMAND ...` (argv after "apps"). Returns the exit code. */
int ctl_apps(struct ctl *c, int argc, char **argv);

/* --help of `apps` (sub NULL) or of one subcommand; 0, or -1 for an unknown one. */
int ctl_apps_help(FILE *out, const char *prog, const char *sub);

#endif
