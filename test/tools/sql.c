/*
 * idpool-sql: the statements of the daemon that the tests run EXPLAIN on,
 * from the one text the daemon runs (src/core), so that a test checks the
 * real statement and not a copy of it.
 *
 *   idpool-sql ledger   the lease ledger read (runway_ledger_sql)
 */
#include <stdio.h>
#include <string.h>

#include "runway.h"

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "ledger") == 0) {
        puts(runway_ledger_sql);
        return 0;
    }
    fputs("usage: idpool-sql ledger\n", stderr);
    return 64;
}
