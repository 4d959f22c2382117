/*
 * Unit tests of statusline: when the start is complete (READY=1) and the
 * line systemctl status shows (STATUS=), from daemon views.
 */
#include <stdio.h>
#include <string.h>

#include "statusline.h"
#include "unit.h"

static const struct statusline_role refiller = {1, 0}, issuer = {0, 1};

/* A daemon view of a refiller with every part up and served rows checked. */
static struct daemon_view up(void)
{
    struct daemon_view d;

    memset(&d, 0, sizeof(d));
    d.redis_up = 1;
    d.mysql_up = 1;
    d.rows_loaded = 1;
    d.apps_served = 12;
    return d;
}

static void test_ready(void)
{
    struct daemon_view d = up();

    CHECK(statusline_ready(&d, &refiller));
    d.rows_loaded = 0; /* MySQL never answered */
    CHECK(!statusline_ready(&d, &refiller));
    d = up();
    d.redis_up = 0;
    CHECK(!statusline_ready(&d, &refiller));
    d = up();
    d.apps_unchecked = 1;
    CHECK(!statusline_ready(&d, &refiller));
    CHECK(!statusline_ready(&d, &(struct statusline_role){1, 1})); /* tokens not read either */
    /* an issuer checks no pool, but needs its tokens */
    CHECK(!statusline_ready(&d, &issuer));
    d.api_tokens_loaded = 1;
    CHECK(statusline_ready(&d, &issuer));
    /* MySQL down after the rows were read: still ready (the status says it) */
    d = up();
    d.mysql_up = 0;
    CHECK(statusline_ready(&d, &refiller));
}

static void test_lines(void)
{
    struct daemon_view d = up();
    struct node_view nodes[3] = {
        {"10.0.0.1:6379", 1, 5461}, {"10.0.0.2:6379", 1, 5461}, {"10.0.0.3:6379", 1, 5462}};
    char line[256];

    statusline_format(line, sizeof(line), &d, &refiller, 1);
    CHECK_STR(line, "serving 12 applications; redis up, mysql up; no alerts");
    d.apps_invalid = 1;
    d.alerts_firing = 2;
    d.cluster = 1;
    d.nodes = nodes;
    d.nnodes = 3;
    statusline_format(line, sizeof(line), &d, &refiller, 1);
    CHECK_STR(line, "serving 12 applications (1 invalid); redis up (3 nodes), mysql up; 2 alerts "
                    "firing");
    nodes[1].up = 0;
    d.redis_up = 0;
    d.alerts_firing = 1;
    statusline_format(line, sizeof(line), &d, &refiller, 1);
    CHECK_STR(line, "serving 12 applications (1 invalid); redis down (3 nodes, 1 down), mysql "
                    "up; 1 alert firing");

    d = up();
    d.sentinel = 1;
    d.redis_master = "idpool";
    snprintf(d.redis_primary, sizeof(d.redis_primary), "10.0.0.9:6379");
    d.apps_served = 1;
    d.mysql_up = 0;
    statusline_format(line, sizeof(line), &d, &issuer, 1);
    CHECK_STR(line, "issuing (refill off) for 1 application; redis up (primary 10.0.0.9:6379 of "
                    "idpool), mysql down; no alerts");

    /* before READY=1: what the start waits for */
    d = up();
    d.rows_loaded = 0;
    d.mysql_up = 0;
    d.apps_served = 0;
    statusline_format(line, sizeof(line), &d, &refiller, 0);
    CHECK_STR(line, "starting: application rows not read yet; redis up, mysql down; no alerts");
    d = up();
    d.apps_unchecked = 3;
    statusline_format(line, sizeof(line), &d, &refiller, 0);
    CHECK_STR(line, "starting: 3 of 12 pools not checked yet; redis up, mysql up; no alerts");
    d.mysql_up = 0;
    d.mysql_schema_missing = 1;
    statusline_format(line, sizeof(line), &d, &refiller, 0);
    CHECK_STR_CONTAINS(line, "mysql schema not loaded");
    d = up();
    snprintf(d.mysql_denied, sizeof(d.mysql_denied), "SELECT denied on idpool.api_token");
    statusline_format(line, sizeof(line), &d, &refiller, 1);
    CHECK_STR_CONTAINS(line, "mysql up, SELECT denied on idpool.api_token;");

    /* a short buffer is cut, never overrun */
    memset(line, 'x', sizeof(line));
    statusline_format(line, 10, &d, &refiller, 1);
    CHECK_EQ_U64(strlen(line), 9);
    CHECK(line[10] == 'x');
}

int main(void)
{
    RUN(test_ready);
    RUN(test_lines);
    return unit_done();
}
