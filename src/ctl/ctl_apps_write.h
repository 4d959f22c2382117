/*
 * ctl_apps_write — `idpoolctl apps add | set | disable | enable`: the
 * commands that write rows of `application`, each validated with the
 * daemon's own app_validate() before it is written.
 */
#ifndef IDPOOL_CTL_APPS_WRITE_H
#define IDPOOL_CTL_APPS_WRITE_H

#include "ctl_common.h"

/* argv: after the command's name. Return the exit code, or CTL_HELP for --help. */
int ctl_apps_add(struct ctl *c, int argc, char **argv) __attribute__((warn_unused_result));
int ctl_apps_set(struct ctl *c, int argc, char **argv) __attribute__((warn_unused_result));
int ctl_apps_disable(struct ctl *c, int argc, char **argv) __attribute__((warn_unused_result));
int ctl_apps_enable(struct ctl *c, int argc, char **argv) __attribute__((warn_unused_result));

#endif
