#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

static enum log_level current_level = LOG_INFO;

static const char *const level_names[] = {"error", "warn", "info", "debug"};

int log_level_parse(const char *s)
{
    for (int i = 0; i < (int)(sizeof(level_names) / sizeof(level_names[0])); i++)
        if (strcmp(s, level_names[i]) == 0)
            return i;
    return -1;
}

const char *log_level_name(enum log_level level)
{
    return level_names[level];
}

void log_set_level(enum log_level level)
{
    current_level = level;
}

enum log_level log_get_level(void)
{
    return current_level;
}

static void log_vwrite(enum log_level level, const char *fmt, va_list ap)
{
    char line[2048];
    struct timeval tv;
    struct tm tm;
    int n;

    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    n = snprintf(line, sizeof(line), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ %-5s ", tm.tm_year + 1900,
                 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                 (int)(tv.tv_usec / 1000), level_names[level]);
    vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    /* One write per line so lines of concurrent processes do not interleave. */
    strcat(line, "\n");
    fputs(line, stderr);
}

void log_write(enum log_level level, const char *fmt, ...)
{
    va_list ap;

    if (level > current_level)
        return;
    va_start(ap, fmt);
    log_vwrite(level, fmt, ap);
    va_end(ap);
}

void die(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    log_vwrite(LOG_ERROR, fmt, ap);
    va_end(ap);
    exit(1);
}
