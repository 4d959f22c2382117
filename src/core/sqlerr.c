#include "sqlerr.h"

#include <stdio.h>
#include <string.h>

int sqlerr_denied(unsigned errnum)
{
    return errnum == SQLERR_DBACCESS_DENIED || errnum == SQLERR_ACCESS_DENIED ||
           errnum == SQLERR_TABLEACCESS_DENIED || errnum == SQLERR_COLUMNACCESS_DENIED;
}

/* Copy a table name as the server quotes it (`db`.`t`, 'db.t', 't') without the quotes. */
static void unquote(const char *s, char *out, size_t len)
{
    size_t n = 0;

    for (; *s && *s != ' ' && *s != ',' && n + 1 < len; s++)
        if (*s != '`' && *s != '\'' && *s != '"')
            out[n++] = *s;
    out[n] = '\0';
}

void sqlerr_denied_text(unsigned errnum, const char *msg, const char *db, char *out, size_t len)
{
    const char *cmd_end = strstr(msg, " command denied to user ");
    const char *table = strstr(msg, " for table ");
    char name[160];

    if ((errnum == SQLERR_TABLEACCESS_DENIED || errnum == SQLERR_COLUMNACCESS_DENIED) && cmd_end &&
        table) {
        const char *cmd = cmd_end;

        while (cmd > msg && cmd[-1] != ' ' && cmd[-1] != ':')
            cmd--;
        unquote(table + strlen(" for table "), name, sizeof(name));
        snprintf(out, len, "%.*s denied on %s%s%s", (int)(cmd_end - cmd), cmd,
                 strchr(name, '.') ? "" : db, strchr(name, '.') ? "" : ".", name);
        return;
    }
    if (errnum == SQLERR_DBACCESS_DENIED) {
        snprintf(out, len, "access denied to database %s", db);
        return;
    }
    snprintf(out, len, "%s", msg);
}
