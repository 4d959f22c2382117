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
#include "ctl_common.h"
#include "ctl_status.h"
#include "ctl_take.h"
#include "ctl_tokens.h"

static const char *const progname = "idpoolctl";

/* The global options of config_usage(), without its daemon-specific preamble. */
static void global_options_usage(FILE *out)
{
    char *text = NULL, *opts;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);

    if (!mem)
        ctl_oom();
    config_usage(mem, progname);
    if (fclose(mem) != 0)
        ctl_oom();
    /* The option groups start at the first blank line followed by a heading. */
    opts = strstr(text, "\n\nRedis:");
    if (!opts)
        opts = strstr(text, "\n\n");
    fputs(opts ? opts + 1 : text, out);
    free(text);
}

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: %s [global options] COMMAND [ARGS]\n"
            "\n"
            "Operator CLI of idpool: manage the applications (rows of the MySQL table\n"
            "`application`) that idpoold keeps Redis ID pools for and the credentials of\n"
            "their clients, see what the service is doing, and take IDs the way a client does.\n"
            "\n"
            "Commands:\n"
            "  apps list                  every application and whether it is served\n"
            "  apps show KEY              one application: columns, values in force, Redis\n"
            "  apps add KEY [options]     add an application (validated first)\n"
            "  apps set KEY field=value.. change columns (validated first)\n"
            "  apps disable KEY           soft-delete (deleted_at = now)\n"
            "  apps enable KEY            undo disable\n"
            "  apps grant KEY             a Redis user that may only LPOP/LLEN KEY's pool\n"
            "                             (prints its password once; again: new password)\n"
            "  apps revoke KEY            delete that Redis user\n"
            "  tokens add NAME --apps KEY[,KEY...]|*\n"
            "                             a bearer token of the ID API (printed once)\n"
            "  tokens list                every token and whether it is active\n"
            "  tokens revoke NAME         stop accepting a token\n"
            "  status                     pools, fill, rate and alerts (from idpoold, or Redis\n"
            "                             and MySQL directly when no daemon answers)\n"
            "  take KEY [N]               take N IDs as clients do (libidpool, limits kept)\n"
            "  help [COMMAND]             this help, or a command's ('apps add', 'tokens')\n"
            "\n"
            "Every command takes --json and -h/--help. Exit status: 0 ok, 1 error (unknown\n"
            "application, validation failure, server unreachable or refusing), 2 usage\n"
            "(unknown command or option, missing or malformed argument).\n"
            "\n"
            "Global options (before the command): the settings idpoold reads, with the same\n"
            "environment variables and config file (later sources win: defaults < config\n"
            "file < environment < flags; flags take '--name value' or '--name=value');\n"
            "idpoolctl uses redis, mysql, http, key-prefix, the timeouts and tick-ms (the\n"
            "interval of a row whose interval is 0). Passwords never appear in messages.\n"
            "\n"
            "Output:\n"
            "  %-28s %s\n",
            progname, "--json", "machine-readable output: one JSON document on stdout");
    global_options_usage(out);
}

/* `help [COMMAND...]` and `COMMAND --help` for the top-level commands. */
static int help(struct ctl *c, int argc, char **argv)
{
    if (argc == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[0], "apps") == 0) {
        if (ctl_apps_help(stdout, progname, argc > 1 ? argv[1] : NULL) == 0)
            return 0;
        return ctl_usage(c, "no help for 'apps %.64s': no such command", argv[1]);
    }
    if (strcmp(argv[0], "tokens") == 0) {
        if (ctl_tokens_help(stdout, progname, argc > 1 ? argv[1] : NULL) == 0)
            return 0;
        return ctl_usage(c, "no help for 'tokens %.64s': no such command", argv[1]);
    }
    if (strcmp(argv[0], "status") == 0) {
        ctl_status_help(stdout, progname);
        return 0;
    }
    if (strcmp(argv[0], "take") == 0) {
        ctl_take_help(stdout, progname);
        return 0;
    }
    return ctl_usage(c, "no help for '%.64s': no such command", argv[0]);
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
    const char *cmd;

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
    if (i >= argc) {
        /* A bad global option is the more useful thing to report. */
        if (c->gargc > 1 && (rc = ctl_setup(c)) != 0)
            return rc;
        return ctl_usage(c, "missing command (apps, tokens, status, take, help)");
    }
    cmd = argv[i];
    argc -= i + 1;
    argv += i + 1;
    if (strcmp(cmd, "apps") == 0)
        return ctl_apps(c, argc, argv);
    if (strcmp(cmd, "tokens") == 0)
        return ctl_tokens(c, argc, argv);
    if (strcmp(cmd, "status") == 0) {
        rc = ctl_status(c, argc, argv);
        if (rc == CTL_HELP)
            ctl_status_help(stdout, progname);
        return rc == CTL_HELP ? 0 : rc;
    }
    if (strcmp(cmd, "take") == 0) {
        rc = ctl_take(c, argc, argv);
        if (rc == CTL_HELP)
            ctl_take_help(stdout, progname);
        return rc == CTL_HELP ? 0 : rc;
    }
    if (strcmp(cmd, "help") == 0)
        return help(c, argc, argv);
    /*
     * An unknown option before the command may have swallowed the command as
     * its value (--bogus apps list): report the option, not "unknown command".
     */
    if (c->gargc > 1 && (rc = ctl_setup(c)) != 0)
        return rc;
    return ctl_usage(c, "unknown command '%.64s' (apps, tokens, status, take, help)", cmd);
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
