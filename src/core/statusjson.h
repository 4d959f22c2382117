/*
 * statusjson — the JSON documents of the HTTP status server (/v1/apps,
 * /v1/apps/{key}, /healthz), built with cJSON from the status views
 * (status.h). Pure: no I/O, unit-tested with a fake status source.
 *
 * 64-bit IDs and offsets are decimal strings (JSON numbers are exact only
 * up to 2^53); counters and sizes are numbers.
 */
#ifndef IDPOOL_STATUSJSON_H
#define IDPOOL_STATUSJSON_H

#include <cjson/cJSON.h>

#include "status.h"

enum statusjson_result {
    STATUSJSON_OK = 0,
    STATUSJSON_NOT_FOUND = 1, /* no application with that key */
    STATUSJSON_ERROR = -1,    /* out of memory */
};

/*
 * One application as a JSON object: key, id, served, deleted, invalid,
 * config (null for an invalid row), pool, rate_ids_per_s, lease, counters,
 * last_refill, last_error, alerts. NULL when out of memory. The caller owns
 * it (cJSON_Delete).
 */
cJSON *statusjson_app(const struct app_view *v) __attribute__((warn_unused_result));

/*
 * The body of /v1/apps (key == NULL: an array of every application, sorted
 * by key) or /v1/apps/{key} (one object). On STATUSJSON_OK *out is a heap
 * string (free()); otherwise *out is NULL.
 */
enum statusjson_result statusjson_apps(const struct status_source *src, const char *key, char **out)
    __attribute__((warn_unused_result));

/*
 * The body of /healthz: {"status":"ok",...} with *healthy = 1 when Redis and
 * MySQL are up and the application rows are loaded, else
 * {"status":"unavailable","reasons":[...],...} with *healthy = 0.
 * A heap string (free()), or NULL when out of memory.
 */
char *statusjson_health(const struct status_source *src, int *healthy)
    __attribute__((warn_unused_result));

#endif
