#include "text.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void text_err(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (err == NULL || errlen == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

int text_int(const char *s, size_t n, long long min, long long max, long long *out)
{
    char buf[64], *end;
    long long v;

    if (n >= sizeof(buf))
        return -1;
    memcpy(buf, s, n);
    buf[n] = '\0';
    if (!isdigit((unsigned char)buf[0]) && !(buf[0] == '-' && isdigit((unsigned char)buf[1])))
        return -1;
    errno = 0;
    v = strtoll(buf, &end, 10);
    if (errno != 0 || end != buf + n || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int text_pct_decode(const char *s, size_t n, char *out, size_t *outlen)
{
    char *o = out;
    int hi, lo;

    for (size_t i = 0; i < n; i++) {
        if (s[i] != '%') {
            *o++ = s[i];
            continue;
        }
        hi = i + 1 < n ? hexval(s[i + 1]) : -1;
        lo = i + 2 < n ? hexval(s[i + 2]) : -1;
        if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
            return -1;
        *o++ = (char)(hi * 16 + lo);
        i += 2;
    }
    *outlen = (size_t)(o - out);
    return 0;
}

int text_host_valid(const char *s, size_t n)
{
    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && (s[i] == '\0' || !strchr(".-_:", s[i])))
            return 0;
    return 1;
}

long text_retry_ms(const char *msg, long def)
{
    const char *p = strstr(msg, "retry in ");
    long v;

    if (p == NULL)
        return def;
    v = strtol(p + 9, NULL, 10);
    return v > 0 && v < 60000 ? v : def;
}
