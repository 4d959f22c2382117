/*
 * ctl_cmd — dispatch and --help from the command tables (see ctl_cmd.h).
 */
#include "ctl_cmd.h"

#include <string.h>

#define LIST_WIDTH_MAX 30 /* a longer usage puts its summary on the next line */

const struct ctl_cmd *ctl_cmd_find(const struct ctl_cmd *cmds, const char *name)
{
    for (const struct ctl_cmd *k = cmds; k->name; k++)
        if (strcmp(k->name, name) == 0)
            return k;
    return NULL;
}

const char *ctl_cmd_names(const struct ctl_cmd *cmds, const char *last, char *buf, size_t len)
{
    size_t used = 0;

    buf[0] = '\0';
    for (const struct ctl_cmd *k = cmds; k->name && used < len; k++) {
        const char *sep = k == cmds ? "" : k[1].name ? ", " : last;
        int n = snprintf(buf + used, len - used, "%s%s", sep, k->name);

        if (n < 0)
            break;
        used += (size_t)n;
    }
    return buf;
}

/* `GROUP COMMAND ARGS` of a group's command, or `COMMAND ARGS`, into buf. */
static const char *usage_of(const struct ctl_cmd *group, const struct ctl_cmd *k, char *buf,
                            size_t len)
{
    snprintf(buf, len, "%s%s%s%s%s", group ? group->name : "", group ? " " : "", k->name,
             k->args[0] ? " " : "", k->args);
    return buf;
}

/* The widest usage of the list, up to LIST_WIDTH_MAX. */
static size_t list_width(const struct ctl_cmd *cmds, const struct ctl_cmd *group)
{
    char buf[128];
    size_t w = 0;

    for (const struct ctl_cmd *k = cmds; k->name; k++) {
        size_t n;

        if (k->subs) {
            n = list_width(k->subs, k);
        } else {
            n = strlen(usage_of(group, k, buf, sizeof(buf)));
            n = n > LIST_WIDTH_MAX ? 0 : n;
        }
        w = n > w ? n : w;
    }
    return w;
}

static void list_lines(FILE *out, const struct ctl_cmd *cmds, const struct ctl_cmd *group,
                       size_t width)
{
    char buf[128];

    for (const struct ctl_cmd *k = cmds; k->name; k++) {
        const char *s = k->summary;
        const char *usage;

        if (k->subs) {
            list_lines(out, k->subs, k, width);
            continue;
        }
        usage = usage_of(group, k, buf, sizeof(buf));
        if (strlen(usage) > width)
            fprintf(out, "  %s\n%*s", usage, (int)width + 4, "");
        else
            fprintf(out, "  %-*s  ", (int)width, usage);
        for (;;) { /* the summary's lines, in its column */
            size_t n = strcspn(s, "\n");

            fprintf(out, "%.*s\n", (int)n, s);
            if (s[n] == '\0')
                break;
            s += n + 1;
            fprintf(out, "%*s", (int)width + 4, "");
        }
    }
}

void ctl_cmd_list(FILE *out, const struct ctl_cmd *cmds)
{
    list_lines(out, cmds, NULL, list_width(cmds, NULL));
}

/* A command's help text: a format taking the program name (twice). */
static void help_text(FILE *out, const char *prog, const struct ctl_cmd *k)
{
    if (k->help_fn)
        k->help_fn(out, prog);
    else if (k->help)
        fprintf(out, k->help, prog, prog);
}

/* A group's help: its preamble, its commands, and what every command takes. */
static void group_help(FILE *out, const char *prog, const struct ctl_cmd *group)
{
    help_text(out, prog, group);
    fprintf(out, "\nCommands:\n");
    ctl_cmd_list(out, group->subs);
    fprintf(out, "\nEvery command takes --json (one JSON document on stdout) and -h, --help.\n");
}

/* The help of k, or of its command `sub` (a group's, when not NULL), on stdout. */
static int print_help(struct ctl *c, const struct ctl_cmd *k, const char *sub)
{
    const struct ctl_cmd *s;

    if (!sub || !k->subs) {
        if (k->subs)
            group_help(stdout, c->prog, k);
        else
            help_text(stdout, c->prog, k);
        return 0;
    }
    s = ctl_cmd_find(k->subs, sub);
    if (!s)
        return ctl_usage(c, "no help for '%s %.64s': no such command", k->name, sub);
    help_text(stdout, c->prog, s);
    return 0;
}

int ctl_cmd_help(struct ctl *c, const struct ctl_cmd *cmds, int n, char **words)
{
    const struct ctl_cmd *k = ctl_cmd_find(cmds, words[0]);

    if (!k)
        return ctl_usage(c, "no help for '%.64s': no such command", words[0]);
    return print_help(c, k, n > 1 ? words[1] : NULL);
}

/* Run a command that is not a group; its --help is printed here. */
static int run_leaf(struct ctl *c, const struct ctl_cmd *k, int argc, char **argv)
{
    int rc = k->run(c, argc, argv);

    if (rc != CTL_HELP)
        return rc;
    help_text(stdout, c->prog, k);
    return 0;
}

int ctl_cmd_run(struct ctl *c, const struct ctl_cmd *cmd, int argc, char **argv)
{
    static char path[64]; /* c->cmd of a group's command: one per run of idpoolctl */
    const struct ctl_cmd *k;
    char names[256];
    const char *sub;

    c->cmd = cmd->name;
    if (!cmd->subs)
        return run_leaf(c, cmd, argc, argv);
    if (argc < 1)
        return ctl_usage(c, "missing command: %s",
                         ctl_cmd_names(cmd->subs, " or ", names, sizeof(names)));
    sub = argv[0];
    if (strcmp(sub, "-h") == 0 || strcmp(sub, "--help") == 0 || strcmp(sub, "help") == 0) {
        return print_help(c, cmd, strcmp(sub, "help") == 0 && argc > 1 ? argv[1] : NULL);
    }
    k = ctl_cmd_find(cmd->subs, sub);
    if (!k)
        return ctl_usage(c, "unknown command '%s %.64s' (%s)", cmd->name, sub,
                         ctl_cmd_names(cmd->subs, ", ", names, sizeof(names)));
    snprintf(path, sizeof(path), "%s %s", cmd->name, k->name);
    c->cmd = path;
    return run_leaf(c, k, argc - 1, argv + 1);
}
