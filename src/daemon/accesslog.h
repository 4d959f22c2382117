/*
 * accesslog — the ID API's access log (api-access-log): one line per
 * answered request (accessline.h) appended to a file, or to stderr ("-").
 * Off unless set.
 *
 * Lines are gathered in a buffer and written once per loop turn (one
 * write(2) for every answer of the turn, so a busy API does not make a
 * system call per request), at once when the buffer is full, and when the
 * log is reopened or freed. The file is opened with O_APPEND and reopened
 * on SIGHUP, for logrotate (rename, then SIGHUP; or copytruncate). A write
 * that fails drops its lines and says so in the daemon's log, once per
 * burst: the API goes on serving.
 */
#ifndef IDPOOL_ACCESSLOG_H
#define IDPOOL_ACCESSLOG_H

#include <event2/event.h>

struct accessline;
struct accesslog;

/* path: a file (created 0640 when missing), or "-" for stderr. NULL with an error logged. */
struct accesslog *accesslog_open(struct event_base *base, const char *path)
    __attribute__((warn_unused_result));
/* Its path as given. */
const char *accesslog_path(const struct accesslog *l);
/*
 * Write what waits, then open the path again (a file logrotate moved away
 * is left to it); when that fails the old file is kept, with an error
 * logged. 0 or -1.
 */
int accesslog_reopen(struct accesslog *l);
/* One line (written within the loop turn). */
void accesslog_write(struct accesslog *l, const struct accessline *e);
/* Write what waits, close; NULL ok. */
void accesslog_free(struct accesslog *l);

#endif
