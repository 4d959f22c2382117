/*
 * poplog — the pop log, the one record of what a consumer popped: written
 * by idpool-load (--record), idpool-clientload and idpool-clientedge, read
 * by idpool-check. One file per consumer, little-endian:
 *
 *   header (POPLOG_HEADER_LEN bytes): POPLOG_MAGIC, u32 version 1,
 *     u32 consumer_id, u32 client kind (enum poplog_kind), 12 reserved bytes;
 *   records (POPLOG_RECORD_LEN bytes, then the IDs): u64 t_send_ns,
 *     u64 t_recv_ns, u32 count, u32 flags 0, count x u64 id.
 *
 * Times are CLOCK_MONOTONIC (tools_ns), comparable across the processes of
 * a machine.
 */
#ifndef IDPOOL_POPLOG_H
#define IDPOOL_POPLOG_H

#include <endian.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define POPLOG_MAGIC      "IDPLOG1\n" /* the first 8 bytes */
#define POPLOG_VERSION    1
#define POPLOG_HEADER_LEN 32
#define POPLOG_RECORD_LEN 24 /* a record without its IDs */

/* The client kind of the header: what kind of client popped (idpool-check
 * reports exposure per kind). */
enum poplog_kind { POPLOG_LPOP, POPLOG_TAKE, POPLOG_KINDS };

/* "lpop", "take": the names of enum poplog_kind. */
extern const char *const poplog_kind_names[POPLOG_KINDS];

/* The header of consumer `consumer`, client kind `kind`, into out. */
void poplog_header(unsigned char out[POPLOG_HEADER_LEN], uint32_t consumer, uint32_t kind);

/* A record's fixed part (its count IDs follow as u64 little-endian) into out. */
void poplog_record(unsigned char out[POPLOG_RECORD_LEN], uint64_t t_send, uint64_t t_recv,
                   uint32_t count);

/* Little-endian u64 and u32 into p, and back (inline: once per ID on hot paths). */
static inline void poplog_put64(unsigned char *p, uint64_t v)
{
    v = htole64(v);
    memcpy(p, &v, 8);
}

static inline void poplog_put32(unsigned char *p, uint32_t v)
{
    v = htole32(v);
    memcpy(p, &v, 4);
}

static inline uint64_t poplog_get64(const unsigned char *p)
{
    uint64_t v;

    memcpy(&v, p, 8);
    return le64toh(v);
}

static inline uint32_t poplog_get32(const unsigned char *p)
{
    uint32_t v;

    memcpy(&v, p, 4);
    return le32toh(v);
}

/* A new pop log at path with its header (stdio). NULL on an error (errno set). */
FILE *poplog_open(const char *path, uint32_t consumer, uint32_t kind);

/* One record: times, the IDs. 0, or -1 on a write error. */
int poplog_write(FILE *f, uint64_t t_send, uint64_t t_recv, const uint64_t *ids, uint32_t n)
    __attribute__((warn_unused_result));

#endif
