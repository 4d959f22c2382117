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

#include "ctl_cmd.h"
#include "ctl_common.h"

/* `idpoolctl tokens COMMAND ...`: its commands (ctl_cmd.h) and the preamble of its --help. */
extern const struct ctl_cmd ctl_tokens_cmds[];
extern const char ctl_tokens_help[];

/*
 * `apps grant KEY` / `apps revoke KEY` (argv after the subcommand; c->cmd is
 * set by the caller). Return the exit code, or CTL_HELP for --help.
 */
int ctl_redis_user_grant(struct ctl *c, int argc, char **argv);
int ctl_redis_user_revoke(struct ctl *c, int argc, char **argv);

#endif
