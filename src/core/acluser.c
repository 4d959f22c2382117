#include "acluser.h"

#include <stdio.h>

#include "keys.h"

void acluser_name(const char *prefix, const char *key, char *buf, size_t len)
{
    snprintf(buf, len, "%s:%s", prefix, key);
}

int acluser_setuser(const char *prefix, const char *key, const char *sha256hex, int db, char *space,
                    const char **argv)
{
    char *name = space, *hash = space + ACLUSER_NAME_MAX, *pattern = hash + 70;
    int n = 0;

    acluser_name(prefix, key, name, ACLUSER_NAME_MAX);
    snprintf(hash, 70, "#%s", sha256hex);
    /* "~<pool>": prefix and key have no glob characters (* ? [ ] \), the pattern is literal. */
    pattern[0] = '~';
    keys_app(prefix, key, KEYS_POOL, pattern + 1, ACLUSER_NAME_MAX + 10 - 1);
    argv[n++] = "ACL";
    argv[n++] = "SETUSER";
    argv[n++] = name;
    argv[n++] = "reset"; /* whatever the user had before goes: no stale rights */
    argv[n++] = "on";
    argv[n++] = hash;
    argv[n++] = pattern;
    argv[n++] = "resetchannels";
    argv[n++] = "-@all";
    argv[n++] = "+lpop";
    argv[n++] = "+llen";
    if (db != 0)
        argv[n++] = "+select";
    return n;
}
