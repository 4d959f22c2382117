/*
 * token — the secrets of the ID API and of direct Redis clients: API bearer
 * tokens and Redis ACL passwords are both 256 random bits, written as
 * "idp_" + 43 base64url characters; only their SHA-256 (hex) is stored, in
 * MySQL (api_token, redis_user), and compared. No I/O except the kernel's
 * random numbers (getrandom).
 */
#ifndef IDPOOL_TOKEN_H
#define IDPOOL_TOKEN_H

#include <stddef.h>

#define TOKEN_PREFIX   "idp_"
#define TOKEN_LEN      47 /* "idp_" + 43 */
#define TOKEN_HASH_LEN 64 /* hex SHA-256 */
#define TOKEN_NAME_MAX 64

/* A new random secret into out[TOKEN_LEN + 1]. 0, or -1 (no randomness). */
int token_new(char *out) __attribute__((warn_unused_result));

/* bytes (<= 64) random bytes as lowercase hex into out[2 * bytes + 1]. 0, or -1. */
int token_random_hex(char *out, size_t bytes) __attribute__((warn_unused_result));

/* Hex SHA-256 of the n bytes at s into hex[TOKEN_HASH_LEN + 1]. */
void token_hash(const char *s, size_t n, char *hex);

/* 1 when hex is 64 lowercase hex digits (a stored hash). */
int token_hash_valid(const char *hex);

/* 1 when name is a valid token name: 1..64 characters of A-Z a-z 0-9 _ . - */
int token_name_valid(const char *name);

/*
 * The n bytes at s compared with a stored hash in time that does not depend
 * on where they differ: 1 when SHA-256(s) is `hex`.
 */
int token_matches(const char *s, size_t n, const char *hex);

#endif
