/*
 * alerts — delivery of alert transitions: the log, Redis pub/sub
 * (<prefix>:alerts, through idpool_alert so that several daemons announce
 * a transition once), an optional webhook (HTTP POST of the JSON event,
 * retried with backoff from a queue, never blocking the loop).
 */
#ifndef IDPOOL_ALERTS_H
#define IDPOOL_ALERTS_H

#include <event2/event.h>

#include "alert.h"
#include "config.h"

struct alerts;
struct nodemap;

/* idpool_alert goes to the node of the application's meta in map. */
struct alerts *alerts_new(struct event_base *base, const struct config *cfg, struct nodemap *map);
/* Drops undelivered webhook calls (logged) and frees. */
void alerts_free(struct alerts *al);

/*
 * Announce that alert `kind` of application `app` fired (firing = 1) or
 * resolved. meta_key names the application's meta hash for cross-daemon
 * deduplication and pub/sub; NULL when there is none (the event is then
 * logged and sent to the webhook by this daemon alone). extra_json is a JSON
 * object whose fields are added to the event, or NULL.
 */
void alerts_emit(struct alerts *al, const char *app, const char *meta_key, enum alert_kind kind,
                 int firing, const char *message, const char *extra_json);

/*
 * Publish an alert that this daemon already announced while Redis was
 * unreachable: it reaches pub/sub and the shared state in meta, without a
 * second log line or webhook call.
 */
void alerts_sync(struct alerts *al, const char *app, const char *meta_key, enum alert_kind kind,
                 const char *message);

/* Webhook deliveries queued or in flight, and given up on. */
unsigned alerts_webhook_pending(const struct alerts *al);
unsigned long alerts_webhook_dropped(const struct alerts *al);

#endif
