/* sqlerr: the missing grant named from real server messages (MariaDB 10.11, MySQL 8). */
#include <string.h>

#include "sqlerr.h"
#include "unit.h"

static char out[200];

static const char *text(unsigned e, const char *msg)
{
    sqlerr_denied_text(e, msg, "idpool", out, sizeof(out));
    return out;
}

static void test_table(void)
{
    /* MariaDB 10.11 quotes `db`.`table` */
    CHECK_STR_CONTAINS(text(1142, "SELECT command denied to user 'idpool'@'localhost' for table "
                                  "`idpool`.`api_token`"),
                       "SELECT denied on idpool.api_token");
    CHECK(strcmp(out, "SELECT denied on idpool.api_token") == 0);
    /* older servers: 'table' alone; the connection's database is added */
    CHECK(strcmp(text(1142, "INSERT command denied to user 'x'@'%' for table 'application_lease'"),
                 "INSERT denied on idpool.application_lease") == 0);
    /* with the daemon's prefix before the server's words */
    CHECK(strcmp(text(1142, "MySQL error 1142: UPDATE command denied to user 'i'@'h' for table "
                            "`idpool`.`application`"),
                 "UPDATE denied on idpool.application") == 0);
    CHECK(strcmp(text(1143, "SELECT command denied to user 'i'@'h' for column 'x' in table 't'"),
                 "SELECT command denied to user 'i'@'h' for column 'x' in table 't'") == 0);
}

static void test_others(void)
{
    CHECK(strcmp(text(1044, "Access denied for user 'i'@'h' to database 'idpool'"),
                 "access denied to database idpool") == 0);
    CHECK(strcmp(text(1045, "Access denied for user 'i'@'h' (using password: YES)"),
                 "Access denied for user 'i'@'h' (using password: YES)") == 0);
    CHECK(sqlerr_denied(1044) && sqlerr_denied(1045) && sqlerr_denied(1142) && sqlerr_denied(1143));
    CHECK(!sqlerr_denied(0) && !sqlerr_denied(1146) && !sqlerr_denied(2013));
    /* a short buffer is cut, never overrun */
    sqlerr_denied_text(1142, "SELECT command denied to user 'a'@'b' for table `idpool`.`api_token`",
                       "idpool", out, 8);
    CHECK(strlen(out) == 7);
}

int main(void)
{
    RUN(test_table);
    RUN(test_others);
    return unit_done();
}
