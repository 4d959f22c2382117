/*
 * log — one line per event on stderr: timestamp, level, message.
 *
 * Callers put the application key in the message ("app=user ...") where
 * there is one, so an operator can grep for it.
 */
#ifndef IDPOOL_LOG_H
#define IDPOOL_LOG_H

enum log_level {
    LOG_ERROR = 0,
    LOG_WARN = 1,
    LOG_INFO = 2,
    LOG_DEBUG = 3,
};

/* Parse "error" | "warn" | "info" | "debug"; -1 when unknown. */
int log_level_parse(const char *s);
const char *log_level_name(enum log_level level);

void log_set_level(enum log_level level);
enum log_level log_get_level(void);

void log_write(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) log_write(LOG_ERROR, __VA_ARGS__)
#define log_warn(...)  log_write(LOG_WARN, __VA_ARGS__)
#define log_info(...)  log_write(LOG_INFO, __VA_ARGS__)
#define log_debug(...)                                                                             \
    do {                                                                                           \
        if (log_get_level() >= LOG_DEBUG)                                                          \
            log_write(LOG_DEBUG, __VA_ARGS__);                                                     \
    } while (0)

/* Start-up failures only: log and exit(1). */
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#endif
