/*
 * acluser — the Redis ACL user of a direct LPOP client (idpoolctl apps
 * grant, re-applied by idpoold): user "<prefix>:<key>" may run LPOP and
 * LLEN on "<prefix>:{<key>}:pool" and nothing else (no other key, no
 * channel, no script or function, no push, no delete); SELECT as well when
 * the daemon's database is not 0, so the client can reach it. Its password
 * is given to Redis as its SHA-256 ("#<hex>"), so only the hash is ever
 * stored. Pure: builds the command, does not send it.
 */
#ifndef IDPOOL_ACLUSER_H
#define IDPOOL_ACLUSER_H

#include <stddef.h>

#define ACLUSER_ARGC_MAX 12
#define ACLUSER_NAME_MAX 140 /* prefix (64) + ':' + key (64) */

/* The user name into buf: "<prefix>:<key>". */
void acluser_name(const char *prefix, const char *key, char *buf, size_t len);

/*
 * ACL SETUSER for the application `key` with password hash `sha256hex`:
 * fills argv (pointers into the caller's strings and into `space`, which
 * must hold 2 * ACLUSER_NAME_MAX + 80 bytes) and returns argc.
 */
int acluser_setuser(const char *prefix, const char *key, const char *sha256hex, int db, char *space,
                    const char **argv);

#endif
