/*
 * load_record — idpool-load --record: each connection's pop log
 * PREFIX.<i>.bin (poplog.h), records of the replies that were parsed, each
 * ID once, buffered and flushed every second (a killed consumer loses at
 * most that much); a take consumer's IDPOOL_* refusals to PREFIX.<i>.refused
 * (lines "t_send_ns t_recv_ns CODE").
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "load.h"
#include "poplog.h"

int write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;

    while (len > 0) {
        ssize_t n = write(fd, p, len);

        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int rec_flush(struct conn *cn)
{
    if (cn->ref_out != NULL && fflush(cn->ref_out) != 0) {
        fprintf(stderr, "idpool-load: %s: %s\n", cn->ref_path, strerror(errno));
        return -1;
    }
    if (cn->rec_fd < 0 || cn->rec_len == 0)
        return 0;
    if (write_all(cn->rec_fd, cn->rec_buf, cn->rec_len) != 0) {
        fprintf(stderr, "idpool-load: %s: %s\n", cn->rec_path, strerror(errno));
        return -1;
    }
    cn->rec_len = 0;
    return 0;
}

/* Creates PREFIX.<i>.bin with its header. */
int rec_open(struct conn *cn, const char *prefix)
{
    unsigned char hdr[POPLOG_HEADER_LEN];
    size_t n = strlen(prefix) + 32;

    cn->rec_path = malloc(n);
    cn->rec_cap = REC_BUF;
    if (cn->rec_cap < 2 * (POPLOG_RECORD_LEN + 8 * cn->ids_cap))
        cn->rec_cap = 2 * (POPLOG_RECORD_LEN + 8 * cn->ids_cap);
    cn->rec_buf = malloc(cn->rec_cap);
    if (cn->rec_path == NULL || cn->rec_buf == NULL) {
        fprintf(stderr, "idpool-load: out of memory\n");
        return -1;
    }
    snprintf(cn->rec_path, n, "%s.%u.bin", prefix, cn->idx);
    cn->rec_fd = open(cn->rec_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (cn->rec_fd < 0) {
        fprintf(stderr, "idpool-load: %s: %s\n", cn->rec_path, strerror(errno));
        return -1;
    }
    poplog_header(hdr, cn->idx, cn->o->mode == MODE_TAKE ? POPLOG_TAKE : POPLOG_LPOP);
    if (write_all(cn->rec_fd, hdr, sizeof hdr) != 0) {
        fprintf(stderr, "idpool-load: %s: %s\n", cn->rec_path, strerror(errno));
        return -1;
    }
    if (cn->o->mode != MODE_TAKE)
        return 0;
    cn->ref_path = malloc(n);
    if (cn->ref_path == NULL) {
        fprintf(stderr, "idpool-load: out of memory\n");
        return -1;
    }
    snprintf(cn->ref_path, n, "%s.%u.refused", prefix, cn->idx);
    cn->ref_out = fopen(cn->ref_path, "we");
    if (cn->ref_out == NULL) {
        fprintf(stderr, "idpool-load: %s: %s\n", cn->ref_path, strerror(errno));
        return -1;
    }
    return 0;
}

/* Flushes the logs once a second (a killed consumer loses at most that much). */
static int rec_tick(struct conn *cn, uint64_t now)
{
    if (now - cn->rec_flushed_ns < REC_FLUSH_NS)
        return 0;
    cn->rec_flushed_ns = now;
    return rec_flush(cn);
}

/* take: logs one IDPOOL_* refusal (its code: the error's first word). */
int ref_put(struct conn *cn, uint64_t t_send, uint64_t t_recv, const char *what)
{
    int len = (int)strcspn(what, " \r\n");

    if (cn->ref_out == NULL)
        return 0;
    if (fprintf(cn->ref_out, "%" PRIu64 " %" PRIu64 " %.*s\n", t_send, t_recv, len, what) < 0) {
        fprintf(stderr, "idpool-load: %s: %s\n", cn->ref_path, strerror(errno));
        return -1;
    }
    return rec_tick(cn, t_recv);
}

/* Appends one record: a reply received, with its IDs (none: an empty pop). */
int rec_put(struct conn *cn, uint64_t t_send, uint64_t t_recv, const uint64_t *ids, size_t n)
{
    size_t need = POPLOG_RECORD_LEN + 8 * n;
    unsigned char *p;

    if (cn->rec_len + need > cn->rec_cap && rec_flush(cn) != 0)
        return -1;
    p = cn->rec_buf + cn->rec_len;
    poplog_record(p, t_send, t_recv, (uint32_t)n);
    p += POPLOG_RECORD_LEN;
    for (size_t i = 0; i < n; i++, p += 8)
        poplog_put64(p, ids[i]);
    cn->rec_len += need;
    return rec_tick(cn, t_recv);
}
