/*
 * idpoolctl — the operator CLI of idpool.
 *
 *   idpoolctl [global options] COMMAND [ARGS]
 *
 * Global options are idpoold's own (--redis, --mysql, --http, --key-prefix,
 * --config, ...; same environment variables and config file, read by the
 * same config_load()), plus --json, --help and --version. They go before the
 * command; what follows the command belongs to it.
 *
 * Exit codes: 0 ok, 1 error, 2 usage (see ctl_common.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "build_config.h"
#include "ctl_apps.h"
#include "ctl_cmd.h"
#include "ctl_common.h"
#include "ctl_explain.h"
#include "ctl_status.h"
#include "ctl_take.h"
#include "ctl_tokens.h"
#include "ctl_verify.h"

static const char *const progname = "idpoolctl";

static int cmd_help(struct ctl *c, int argc, char **argv);

/* idpoolctl's commands (ctl_cmd.h); apps and tokens are groups of commands. */
static const struct ctl_cmd commands[] = {
    {"apps", "COMMAND [ARGS]", NULL, NULL, ctl_apps_help, ctl_apps_cmds, NULL},
    {"tokens", "COMMAND [ARGS]", NULL, NULL, ctl_tokens_help, ctl_tokens_cmds, NULL},
    {"status", "",
     "pools, fill, rate and alerts (from idpoold, or Redis\n"
     "and MySQL directly when no daemon answers)",
     ctl_status, ctl_status_help, NULL, NULL},
    {"take", "KEY [N]", "take N IDs as clients do (libidpool, limits kept)", ctl_take,
     ctl_take_help, NULL, NULL},
    {"verify", "[--env MYSQL_URL[,REDIS_URL]]...",
     "prove from the lease ledgers that no ID was issued\n"
     "twice (within and across environments, and the pools)",
     ctl_verify, ctl_verify_help, NULL, NULL},
    {"explain", "ID | --app KEY --from T --to T",
     "where an ID came from (application, environment,\n"
     "lease, pool), or the IDs leased in a window",
     ctl_explain, ctl_explain_help, NULL, NULL},
    {"help", "[COMMAND]", "this help, or a command's ('apps add', 'tokens')", cmd_help,
     "Usage: %s [global options] help [COMMAND [SUBCOMMAND]]\n"
     "\n"
     "idpoolctl's help, or a command's: 'help status', 'help apps', 'help apps add'.\n",
     NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL, NULL, NULL},
};

/* The settings idpoolctl uses: the rest of idpoold's are accepted (one config file) and unused. */
static const char *const settings_used[] = {
    "redis",
    "redis-password",
    "redis-password-file",
    "redis-timeout-ms",
    "key-prefix",
    "mysql",
    "mysql-password",
    "mysql-password-file",
    "mysql-timeout-ms",
    "tick-ms",
    "reload-ms",
    "http",
    "config",
    NULL,
};

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: %s [global options] COMMAND [ARGS]\n"
            "\n"
            "Operator CLI of idpool: manage the applications (rows of the MySQL table\n"
            "`application`) that idpoold keeps Redis ID pools for and the credentials of\n"
            "their clients, see what the service is doing, and take IDs the way a client does.\n"
            "\n"
            "Commands:\n",
            progname);
    ctl_cmd_list(out, commands);
    fprintf(out,
            "\n"
            "Every command takes --json and -h/--help. Exit status: 0 ok, 1 error (unknown\n"
            "application, validation failure, server unreachable or refusing), 2 usage\n"
            "(unknown command or option, missing or malformed argument).\n"
            "\n"
            "Global options (before the command): the settings of idpoold that idpoolctl\n"
            "uses, with the same environment variables and config file (later sources win:\n"
            "defaults < config file < environment < flags; flags take '--name value' or\n"
            "'--name=value'); a config file may hold idpoold's other settings too. tick-ms is\n"
            "the interval of a row whose interval is 0; reload-ms, when idpoold applies a\n"
            "change. Passwords never appear in messages.\n"
            "\n"
            "Output:\n"
            "  %-28s %s\n",
            "--json", "machine-readable output: one JSON document on stdout");
    config_usage_settings(out, settings_used);
}

/* `help [COMMAND...]`: idpoolctl's help, or a command's. */
static int cmd_help(struct ctl *c, int argc, char **argv)
{
    c->cmd = NULL; /* a usage error here is about idpoolctl's commands: "Try 'idpoolctl --help'" */
    if (argc == 0) {
        usage(stdout);
        return 0;
    }
    return ctl_cmd_help(c, commands, argc, argv);
}

/*
 * Split argv into the global options (copied to c->gargv for config_load)
 * and the command. Every idpoold setting takes a value, as '--name=value' or
 * '--name value' (the value is the next argument unless it starts with
 * "--", exactly as config_load() reads it), so the command is the first
 * argument that is neither an option nor such a value.
 * Returns the index of the command (argc when there is none).
 */
static int split_globals(struct ctl *c, int argc, char **argv, int *want_help, int *want_version)
{
    int i = 1;

    c->gargv = ctl_xcalloc((size_t)argc + 1, sizeof(char *));
    c->gargv[c->gargc++] = argv[0];
    while (i < argc) {
        const char *a = argv[i];

        if (strcmp(a, "--json") == 0) {
            c->json = 1;
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            *want_help = 1;
        } else if (strcmp(a, "-V") == 0 || strcmp(a, "--version") == 0) {
            *want_version = 1;
        } else if (strcmp(a, "--") == 0) {
            return i + 1;
        } else if (a[0] == '-' && a[1] != '\0') {
            c->gargv[c->gargc++] = argv[i];
            if (a[1] == '-' && !strchr(a, '=') && i + 1 < argc && strncmp(argv[i + 1], "--", 2))
                c->gargv[c->gargc++] = argv[++i];
        } else {
            return i;
        }
        i++;
    }
    return i;
}

static int run(struct ctl *c, int argc, char **argv)
{
    int want_help = 0, want_version = 0, i, rc;
    const struct ctl_cmd *k;
    char names[128];

    i = split_globals(c, argc, argv, &want_help, &want_version);
    if (want_help) {
        usage(stdout);
        return 0;
    }
    if (want_version) {
        if (c->json) {
            cJSON *doc = ctl_jcheck(cJSON_CreateObject());
            ctl_jcheck(cJSON_AddStringToObject(doc, "version", IDPOOL_VERSION));
            ctl_json_print(c, doc);
        } else {
            printf("%s %s\n", progname, IDPOOL_VERSION);
        }
        return 0;
    }
    if (i < argc && (k = ctl_cmd_find(commands, argv[i])) != NULL)
        return ctl_cmd_run(c, k, argc - i - 1, argv + i + 1);
    /*
     * A bad global option is the more useful thing to report; and an unknown
     * one may have swallowed the command as its value (--bogus apps list).
     */
    if (c->gargc > 1 && (rc = ctl_setup(c)) != 0)
        return rc;
    if (i >= argc)
        return ctl_usage(c, "missing command (%s)",
                         ctl_cmd_names(commands, ", ", names, sizeof(names)));
    return ctl_usage(c, "unknown command '%.64s' (%s)", argv[i],
                     ctl_cmd_names(commands, ", ", names, sizeof(names)));
}

int main(int argc, char **argv)
{
    struct ctl c;
    int rc;

    memset(&c, 0, sizeof(c));
    c.prog = progname;
    rc = run(&c, argc, argv);
    /* With --json, stdout holds one JSON document whatever happened. */
    if (c.json && rc != 0 && !c.json_done) {
        cJSON *doc = ctl_jcheck(cJSON_CreateObject());
        ctl_jcheck(cJSON_AddStringToObject(doc, "error", c.errmsg));
        ctl_jcheck(cJSON_AddNumberToObject(doc, "exit_code", rc));
        ctl_json_print(&c, doc);
    }
    ctl_close(&c);
    free(c.gargv);
    return rc;
}
