/*
 * sqlerr — what a MySQL permission error says, for an operator: the
 * daemon's health names the missing grant ("SELECT denied on
 * idpool.api_token") instead of calling MySQL down.
 */
#ifndef IDPOOL_SQLERR_H
#define IDPOOL_SQLERR_H

#include <stddef.h>

/* MariaDB/MySQL error numbers of a refused privilege or login. */
#define SQLERR_DBACCESS_DENIED     1044 /* no privilege on the database */
#define SQLERR_ACCESS_DENIED       1045 /* wrong user or password */
#define SQLERR_TABLEACCESS_DENIED  1142 /* "SELECT command denied to user ... for table ..." */
#define SQLERR_COLUMNACCESS_DENIED 1143

/* 1 when errnum is one of the above. */
int sqlerr_denied(unsigned errnum);

/*
 * The grant that is missing, from the server's message msg (found anywhere
 * in it, so a message with a prefix will do) of error errnum, db the
 * database the connection uses: "SELECT denied on idpool.api_token" (1142,
 * 1143), "access denied to database idpool" (1044), or msg itself
 * (1045 and anything not recognised). Always NUL-terminated.
 */
void sqlerr_denied_text(unsigned errnum, const char *msg, const char *db, char *out, size_t len);

#endif
