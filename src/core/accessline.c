#include "accessline.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* s (at most max bytes of it, "..." when cut) at p, escaped; the end. */
static char *put_field(char *p, const char *s, size_t max)
{
    static const char hex[] = "0123456789abcdef";
    size_t i;

    if (s == NULL || *s == '\0') {
        *p++ = '-';
        return p;
    }
    for (i = 0; s[i] && i < max; i++) {
        unsigned char c = (unsigned char)s[i];

        if (c <= ' ' || c >= 0x7f || c == '"' || c == '\\') {
            *p++ = '\\';
            *p++ = 'x';
            *p++ = hex[c >> 4];
            *p++ = hex[c & 15];
        } else {
            *p++ = (char)c;
        }
    }
    if (s[i]) {
        memcpy(p, "...", 3);
        p += 3;
    }
    return p;
}

size_t accessline_format(char *buf, const struct accessline *e)
{
    char *p = buf;
    time_t t = (time_t)(e->time_ms / 1000);
    struct tm tm;
    size_t path = 0;
    char tmp[ACCESSLINE_PATH_MAX + 2]; /* one byte more than is written: a cut shows */
    int n;

    if (gmtime_r(&t, &tm) == NULL)
        memset(&tm, 0, sizeof(tm));
    n = snprintf(p, 32, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ ", tm.tm_year + 1900, tm.tm_mon + 1,
                 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(e->time_ms % 1000));
    p += n > 0 && n < 32 ? n : 0;
    p = put_field(p, e->peer, 64);
    *p++ = ' ';
    p = put_field(p, e->method, 32);
    *p++ = ' ';
    if (e->target) { /* the path: up to '?' or '#', one byte more than fits to tell a cut */
        path = strcspn(e->target, "?#");
        if (path > ACCESSLINE_PATH_MAX)
            path = ACCESSLINE_PATH_MAX + 1;
        memcpy(tmp, e->target, path);
        tmp[path] = '\0';
    }
    p = put_field(p, e->target ? tmp : NULL, ACCESSLINE_PATH_MAX);
    n = snprintf(p, 96, " %d %" PRIu64 " %" PRIu64 ".%03" PRIu64 " ", e->status, e->bytes,
                 e->duration_us / 1000, e->duration_us % 1000);
    p += n > 0 && n < 96 ? n : 0;
    p = put_field(p, e->user, 64);
    *p++ = '\n';
    return (size_t)(p - buf);
}
