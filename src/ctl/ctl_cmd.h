/*
 * ctl_cmd — idpoolctl's commands as tables (pgbouncer's cmd_list[]): each
 * command's name, handler, usage line, summary and --help text, one row
 * each. Dispatch, `help`, the lists of commands in --help and the messages
 * that name the commands ("unknown command 'apps frob' (list, show, ...)")
 * are made from the tables: a command is added by adding its row.
 *
 * The top-level table is idpoolctl.c's; a group's commands (apps, tokens)
 * are the group module's (ctl_apps_cmds[], ctl_tokens_cmds[]).
 */
#ifndef IDPOOL_CTL_CMD_H
#define IDPOOL_CTL_CMD_H

#include <stdio.h>

#include "ctl_common.h"

/* One command, or a group of commands (`subs` set, `run` NULL). A table ends with {NULL}. */
struct ctl_cmd {
    const char *name;    /* "add" */
    const char *args;    /* its arguments in lists of commands: "KEY [options]" */
    const char *summary; /* what it does, in lists of commands; '\n' continues it */
    /* argv after the name; returns the exit code, or CTL_HELP for --help */
    int (*run)(struct ctl *c, int argc, char **argv);
    /*
     * --help: a format taking the program name (twice; it may use one). A
     * group's is its preamble: the list of its commands follows.
     */
    const char *help;
    const struct ctl_cmd *subs; /* a group's commands */
    /* a help made at run time (from the column list), printed instead of `help` */
    void (*help_fn)(FILE *out, const char *prog);
};

/* The command of cmds named `name`, or NULL. */
const struct ctl_cmd *ctl_cmd_find(const struct ctl_cmd *cmds, const char *name);

/*
 * Run `cmd` (argv: what follows its name), with c->cmd naming it for
 * messages ("status"; "apps add"). A group runs its command argv[0]: a
 * missing or unknown one is a usage error naming the group's commands;
 * `GROUP help [COMMAND]`, -h and --help print help. Returns the exit code
 * (a command's --help: its help printed, 0).
 */
int ctl_cmd_run(struct ctl *c, const struct ctl_cmd *cmd, int argc, char **argv)
    __attribute__((warn_unused_result));

/*
 * `help WORDS...`: the help of the command that words[0..n) (n >= 1) name
 * in `cmds` on stdout: a group's preamble and the list of its commands, or
 * a command's help. 0, or a usage error when there is no such command.
 */
int ctl_cmd_help(struct ctl *c, const struct ctl_cmd *cmds, int n, char **words)
    __attribute__((warn_unused_result));

/*
 * The list of commands in --help: "  apps add KEY [options]  summary", one
 * line per command (a group's commands, the group's name before theirs),
 * the summaries in one column.
 */
void ctl_cmd_list(FILE *out, const struct ctl_cmd *cmds);

/* The names of cmds joined by ", ", the last by `last` (", " or " or "), into buf[len]. */
const char *ctl_cmd_names(const struct ctl_cmd *cmds, const char *last, char *buf, size_t len);

#endif
