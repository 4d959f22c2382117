/*
 * ctl_apps — `idpoolctl apps ...`: list, show, add, set, disable and enable
 * rows of the MySQL `application` table (the writes in ctl_apps_write), and
 * grant/revoke, the application's Redis user (ctl_tokens). Every row is
 * judged by app_validate(), the daemon's own rules, so idpoolctl and idpoold
 * always agree on what is served; writes are validated before they are made.
 */
#ifndef IDPOOL_CTL_APPS_H
#define IDPOOL_CTL_APPS_H

#include "ctl_cmd.h"

/* `idpoolctl apps COMMAND ...`: its commands (ctl_cmd.h) and the preamble of its --help. */
extern const struct ctl_cmd ctl_apps_cmds[];
extern const char ctl_apps_help[];

#endif
