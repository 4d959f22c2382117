/*
 * ctl_verify — `idpoolctl verify`: proves from the lease ledgers of one or
 * more environments (application_lease, and the pools in Redis) that no ID
 * can have been issued twice, or names each conflict. The arithmetic is
 * src/core/ledgercheck.h; this is the reading of the servers and the report.
 */
#ifndef IDPOOL_CTL_VERIFY_H
#define IDPOOL_CTL_VERIFY_H

#include "ctl_common.h"

/* `idpoolctl verify [--env MYSQL_URL[,REDIS_URL]]... [--json]` (argv after "verify"). */
int ctl_verify(struct ctl *c, int argc, char **argv);

/* Its --help: a format taking the program name. */
extern const char ctl_verify_help[];

#endif
