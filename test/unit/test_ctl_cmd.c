/* Unit tests for ctl_cmd: dispatch, help and the lists of commands from a command table. */
#include "ctl_cmd.h"
#include "unit.h"

#include <stdlib.h>
#include <unistd.h>

static int ran_add, ran_list;

static int run_add(struct ctl *c, int argc, char **argv)
{
    (void)c;
    ran_add++;
    return argc > 0 && strcmp(argv[0], "--help") == 0 ? CTL_HELP : argc;
}

static int run_list(struct ctl *c, int argc, char **argv)
{
    (void)c;
    (void)argc;
    (void)argv;
    ran_list++;
    return 0;
}

static const struct ctl_cmd subs[] = {
    {"add", "NAME [options]", "add one", run_add, "Usage: %s things add\n", NULL, NULL},
    {"list", "", "every thing\nand more", run_list, "Usage: %s things list\n", NULL, NULL},
    {"a-very-long-command", "WITH --many ARGUMENTS", "wraps", run_list, "x\n", NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL, NULL, NULL},
};

static const struct ctl_cmd top[] = {
    {"things", "COMMAND", NULL, NULL, "Usage: %s things COMMAND\n", subs, NULL},
    {"help", "[COMMAND]", "this help", run_list, "Usage: %s help\n", NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL, NULL, NULL},
};

static void test_names(void)
{
    char buf[64];

    CHECK_STR(ctl_cmd_names(subs, " or ", buf, sizeof(buf)), "add, list or a-very-long-command");
    CHECK_STR(ctl_cmd_names(top, ", ", buf, sizeof(buf)), "things, help");
    CHECK_STR(ctl_cmd_names(subs, ", ", buf, 8), "add, li"); /* cut, terminated */
    CHECK(ctl_cmd_find(top, "things") == &top[0]);
    CHECK(ctl_cmd_find(subs, "remove") == NULL);
}

/* A group's commands are listed under its name; summaries share a column, a long usage wraps. */
static void test_list(void)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    ctl_cmd_list(f, top);
    fclose(f);
    CHECK_STR(buf, "  things add NAME [options]  add one\n"
                   "  things list                every thing\n"
                   "                             and more\n"
                   "  things a-very-long-command WITH --many ARGUMENTS\n"
                   "                             wraps\n"
                   "  help [COMMAND]             this help\n");
    free(buf);
}

/* Run with stdout and stderr captured; returns the exit code. */
static int run(const struct ctl_cmd *k, int argc, char **argv, char **out, char **err)
{
    struct ctl c;
    size_t n;
    int rc, o = dup(1), e = dup(2);
    FILE *fo = tmpfile(), *fe = tmpfile();

    memset(&c, 0, sizeof(c));
    c.prog = "prog";
    fflush(stdout);
    dup2(fileno(fo), 1);
    dup2(fileno(fe), 2);
    rc = ctl_cmd_run(&c, k, argc, argv);
    fflush(stdout);
    fflush(stderr);
    dup2(o, 1);
    dup2(e, 2);
    close(o);
    close(e);
    *out = calloc(1, 4096);
    *err = calloc(1, 4096);
    rewind(fo);
    rewind(fe);
    n = fread(*out, 1, 4095, fo);
    (*out)[n] = '\0';
    n = fread(*err, 1, 4095, fe);
    (*err)[n] = '\0';
    fclose(fo);
    fclose(fe);
    return rc;
}

static void test_run(void)
{
    char *out, *err;
    char *a1[] = {"add", "x", "y"}, *a2[] = {"add", "--help"}, *a3[] = {"frob"}, *a4[] = {"help"},
         *a5[] = {"help", "list"}, *a6[] = {"help", "frob"};

    CHECK_EQ_U64(run(&top[0], 3, a1, &out, &err), 2); /* argv after the name */
    CHECK_EQ_U64(ran_add, 1);
    free(out);
    free(err);
    CHECK_EQ_U64(run(&top[0], 2, a2, &out, &err), 0);
    CHECK_STR(out, "Usage: prog things add\n");
    free(out);
    free(err);
    CHECK_EQ_U64(run(&top[0], 0, NULL, &out, &err), CTL_USAGE);
    CHECK_STR(err, "prog: things: missing command: add, list or a-very-long-command\n"
                   "Try 'prog things --help'.\n");
    free(out);
    free(err);
    CHECK_EQ_U64(run(&top[0], 1, a3, &out, &err), CTL_USAGE);
    CHECK_STR_CONTAINS(err, "unknown command 'things frob' (add, list, a-very-long-command)");
    free(out);
    free(err);
    CHECK_EQ_U64(run(&top[0], 1, a4, &out, &err), 0);
    CHECK_STR_CONTAINS(out, "Usage: prog things COMMAND\n\nCommands:\n  add NAME [options]");
    CHECK_STR_CONTAINS(out, "Every command takes --json");
    free(out);
    free(err);
    CHECK_EQ_U64(run(&top[0], 2, a5, &out, &err), 0);
    CHECK_STR(out, "Usage: prog things list\n");
    CHECK_EQ_U64(ran_list, 0); /* help, not the command */
    free(out);
    free(err);
    CHECK_EQ_U64(run(&top[0], 2, a6, &out, &err), CTL_USAGE);
    CHECK_STR_CONTAINS(err, "no help for 'things frob': no such command");
    free(out);
    free(err);
}

int main(void)
{
    RUN(test_names);
    RUN(test_list);
    RUN(test_run);
    return unit_done();
}
