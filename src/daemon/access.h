/*
 * access — who may take IDs besides the daemon itself, from MySQL (the
 * source of truth), re-read every reload interval and on SIGHUP:
 *
 *   API tokens   (api_token)  looked up by the ID API by the SHA-256 of the
 *                presented bearer token; a revoked token is gone at the
 *                next reload. With the API on, the Redis set
 *                "<prefix>:revoked-tokens" (keys.h) is read at every reload
 *                too: a token revoked there is refused even while MySQL
 *                cannot be read; such hashes are kept for the process' life.
 *   Redis users  (redis_user) applied to every primary node (ACL SETUSER,
 *                or DELUSER for a revoked one; acluser.h) on every
 *                (re)connect of its main connection and whenever the rows
 *                change, so that a restarted Redis gets its users back. A
 *                user whose password Redis holds differently (ACL GETUSER
 *                before the SETUSER) has its connections closed (CLIENT
 *                KILL USER): a rotation ends the sessions of the old
 *                password, an unchanged user keeps its connections.
 *
 * Tokens and passwords are never logged: only token names and user names.
 */
#ifndef IDPOOL_ACCESS_H
#define IDPOOL_ACCESS_H

#include <stddef.h>

#include <event2/event.h>

#include "config.h"

struct access;
struct node;
struct nodemap;
struct store;

/* Users are applied on every primary of map; revocations read from the node of their set. */
struct access *access_new(struct event_base *base, const struct config *cfg, struct store *store,
                          struct nodemap *map);
void access_free(struct access *a);

/* Re-read tokens and users now (SIGHUP); the reload interval from cfg (config reload). */
void access_reload(struct access *a);
void access_configure(struct access *a, const struct config *cfg);

/* A node's main connection became ready (1) or was lost (0). */
void access_node_state(struct access *a, struct node *n, int ready);

/*
 * The name of the active token whose SHA-256 matches the n bytes at tok,
 * or NULL; *apps_out gets its application list ("user,order" or "*").
 * Valid until the next reload (use it within the request).
 */
const char *access_token(const struct access *a, const char *tok, size_t n, const char **apps_out);

/* 1 when the list ("user,order" or "*") names application `key` (keylen bytes). */
int access_allows(const char *apps, const char *key, size_t keylen);

/* Tokens loaded, and whether a load has succeeded yet (for the log and /metrics). */
size_t access_tokens(const struct access *a, int *loaded);

#endif
