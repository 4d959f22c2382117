/*
 * ctl_explain — `idpoolctl explain`: where an ID came from (application,
 * environment, lease, lattice, pool), or the ID ranges leased in a window.
 */
#ifndef IDPOOL_CTL_EXPLAIN_H
#define IDPOOL_CTL_EXPLAIN_H

#include "ctl_common.h"

int ctl_explain(struct ctl *c, int argc, char **argv) __attribute__((warn_unused_result));
extern const char ctl_explain_help[];

#endif
