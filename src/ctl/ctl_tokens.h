/*
 * ctl_tokens — the credentials idpoolctl hands out: bearer tokens of the ID
 * API (`idpoolctl tokens add/list/revoke`, table api_token) and the Redis ACL
 * users of direct LPOP clients (`idpoolctl apps grant/revoke`, table
 * redis_user). A secret is printed once, when it is made; only its SHA-256 is
 * stored (token.h), so a lost secret is replaced, never recovered.
 */
#ifndef IDPOOL_CTL_TOKENS_H
#define IDPOOL_CTL_TOKENS_H

#include <stdio.h>

#include "ctl_common.h"

/* `idpoolctl tokens SUBCOMMAND ...` (argv after "tokens"). Returns the exit code. */
int ctl_tokens(struct ctl *c, int argc, char **argv);

/* --help of `tokens` (sub NULL) or of one subcommand; 0, or -1 for an unknown one. */
int ctl_tokens_help(FILE *out, const char *prog, const char *sub);

/*
 * `apps grant KEY` / `apps revoke KEY` (argv after the subcommand; c->cmd is
 * set by the caller). Return the exit code, or CTL_HELP for --help.
 */
int ctl_redis_user_grant(struct ctl *c, int argc, char **argv);
int ctl_redis_user_revoke(struct ctl *c, int argc, char **argv);

#endif
