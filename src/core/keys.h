/*
 * keys — every Redis key name idpool uses (design brief §2), and the Redis
 * Cluster slot of a key. Pure: no I/O.
 *
 *   <prefix>:{<app>}:pool     an application's pool of IDs (a list)
 *   <prefix>:{<app>}:meta     its progress, limits and alerts (a hash)
 *   <prefix>:{<app>}:lock     its refill lock (a string)
 *   <prefix>:revoked-tokens   the hashes of revoked API tokens (a set)
 *   <prefix>:promoted:<server>  set by the daemon that reset the function
 *                             library of a promoted server (a string, 1 day)
 *
 * The braces are a Cluster hash tag: every key of one application lives in
 * one slot, so a script given its pool and meta is cluster-safe. A prefix
 * has no brace (keys_prefix_valid), so the hash tag of an application's key
 * is the application (keys_app_of). The Lua library (src/idpool.lua) is
 * given its keys by its callers; it only parses them (app_of) and names the
 * alert channel <prefix>:alerts. The Python client mirrors keys_app() in
 * redis_key() (src/python/idpool_client/keys.py; test/unit/test_pykeys.py
 * holds them equal).
 */
#ifndef IDPOOL_KEYS_H
#define IDPOOL_KEYS_H

#include <stddef.h>

#include "app.h"

#define KEYS_PREFIX_MAX 64 /* a key prefix: 1..64 of [A-Za-z0-9_.:-] */
/* Room for any name made here: "<prefix>:{<app>}:pool" and its NUL is the longest. */
#define KEYS_MAX   (KEYS_PREFIX_MAX + APP_KEY_MAX + 9)
#define KEYS_SLOTS 16384 /* Redis Cluster hash slots */

/* The keys of one application, by their suffix. */
enum keys_kind {
    KEYS_POOL, /* ":pool" */
    KEYS_META, /* ":meta" */
    KEYS_LOCK, /* ":lock" */
    KEYS_NONE, /* not an application's key (keys_kind_of) */
};

/*
 * 1 when s may be a key prefix: 1..KEYS_PREFIX_MAX characters of
 * A-Z a-z 0-9 _ . : - — no brace (the hash tag stays the application's) and
 * no glob character (SCAN and ACL patterns built from it stay literal).
 */
int keys_prefix_valid(const char *s);

/*
 * The key of kind `kind` (not KEYS_NONE) of application `app`,
 * "<prefix>:{<app>}:<kind>", into buf[len] (cut to fit and terminated, as
 * snprintf). Returns its length; buf may be NULL when len is 0.
 */
int keys_app(const char *prefix, const char *app, enum keys_kind kind, char *buf, size_t len);

/* The same as a new heap string, for prefixes of any length; NULL when out of memory. */
char *keys_app_new(const char *prefix, const char *app, enum keys_kind kind);

/* The SCAN MATCH pattern of every key of every application: "<prefix>:{*}:*". */
int keys_scan_pattern(const char *prefix, char *buf, size_t len);

/* The set of revoked API token hashes, "<prefix>:revoked-tokens". */
int keys_revoked(const char *prefix, char *buf, size_t len);
/*
 * The marker of a promoted server whose library a daemon reset,
 * "<prefix>:promoted:<server_id>" (server_id: "run_id:master_replid"), or
 * with tag (a Cluster node: a hash tag of one of its slots, keys_slot_tag)
 * "<prefix>:promoted:{<tag>}:<server_id>"; like snprintf, the length it
 * needs.
 */
int keys_promoted(const char *prefix, const char *tag, const char *server_id, char *buf,
                  size_t len);

/* The kind of the key of len bytes at key by its suffix; KEYS_NONE when it has none. */
enum keys_kind keys_kind_of(const char *key, size_t len);

/*
 * The key of len bytes at key, which has a kind (keys_kind_of), with the
 * suffix of kind `to` (not KEYS_NONE) instead: the meta of a pool and the
 * pool of a meta, as a new heap string. NULL when key has no kind or out of
 * memory.
 */
char *keys_sibling(const char *key, size_t len, enum keys_kind to);

/*
 * The hash tag of the key of len bytes at key, as Redis Cluster defines it:
 * the bytes between its first '{' and the first '}' after that, when there
 * is at least one. Returns where they start and sets *n; NULL when the key
 * has no hash tag (then its whole name is hashed).
 */
const char *keys_hashtag(const char *key, size_t len, size_t *n);

/*
 * The application of a key: its hash tag into app[cap], terminated. 0, or -1
 * when the key has no hash tag or the tag does not fit.
 */
int keys_app_of(const char *key, size_t len, char *app, size_t cap);

/* The Redis Cluster slot of a key: CRC16 (XMODEM) of its hash tag, or of the key, mod 16384. */
unsigned keys_slot(const char *key, size_t len);

/*
 * A hash tag of slot (< KEYS_SLOTS): the smallest decimal number whose
 * slot it is, into buf (KEYS_SLOT_TAG_MAX bytes), for a key that must live
 * on a given Cluster node. Its length.
 */
#define KEYS_SLOT_TAG_MAX 8
size_t keys_slot_tag(unsigned slot, char *buf);

#endif
