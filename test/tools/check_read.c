/*
 * check_read — idpool-check's inputs: pop logs (poplog.h) and --list files
 * record by record, and the helpers of the text side files (--leases,
 * --llen, --alerts). Anything malformed is an error naming the file and
 * the byte offset or line.
 */
#define _GNU_SOURCE /* fread_unlocked: one reader thread, no stdio locking per record */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "resp.h"

/* Parses a canonical unsigned decimal into *out; -1 on anything else. */
int parse_u64(const char *s, uint64_t *out)
{
    return s ? u64_parse(s, strlen(s), out) : -1;
}

/*
 * Reads one pop log and calls fn for every record. Anything malformed is an
 * error naming the file and the byte offset, a header or record cut short
 * included: a count running past the end of the file may as well be a
 * corrupt count in the middle, and ignoring the rest would hide its records.
 */
__attribute__((warn_unused_result)) static int log_scan(struct check *c, uint32_t file,
                                                        record_fn fn)
{
    struct logfile *lf = &c->files[file];
    const char *path = lf->path;
    unsigned char hdr[POPLOG_HEADER_LEN];
    uint64_t *buf = NULL;
    size_t cap = 0;
    uint64_t off = 0, size;
    struct stat st;
    int rc = -1;
    FILE *f = fopen(path, "rb");

    if (!f) {
        fprintf(stderr, "idpool-check: %s: %s\n", path, strerror(errno));
        return -1;
    }
    setvbuf(f, NULL, _IOFBF, 1 << 20);
    if (fstat(fileno(f), &st) < 0) {
        fprintf(stderr, "idpool-check: %s: %s\n", path, strerror(errno));
        goto out;
    }
    size = (uint64_t)st.st_size;
    if (lf->scanned && lf->size < size) /* a consumer still writing: read what was checked */
        size = lf->size;
    lf->scanned = true;
    lf->size = size;
    if (size < POPLOG_HEADER_LEN) {
        fprintf(stderr,
                "idpool-check: %s: byte offset 0: truncated header (%" PRIu64 " of %d bytes)\n",
                path, size, POPLOG_HEADER_LEN);
        goto out;
    }
    if (fread(hdr, 1, POPLOG_HEADER_LEN, f) != POPLOG_HEADER_LEN) {
        fprintf(stderr, "idpool-check: %s: byte offset 0: read error\n", path);
        goto out;
    }
    if (memcmp(hdr, POPLOG_MAGIC, 8)) {
        fprintf(stderr, "idpool-check: %s: byte offset 0: bad magic\n", path);
        goto out;
    }
    if (poplog_get32(hdr + 8) != POPLOG_VERSION) {
        fprintf(stderr, "idpool-check: %s: byte offset 8: unsupported version %" PRIu32 "\n", path,
                poplog_get32(hdr + 8));
        goto out;
    }
    lf->consumer = poplog_get32(hdr + 12);
    lf->kind = poplog_get32(hdr + 16);
    if (lf->kind >= POPLOG_KINDS) {
        fprintf(stderr, "idpool-check: %s: byte offset 16: unknown client kind %" PRIu32 "\n", path,
                lf->kind);
        goto out;
    }
    off = POPLOG_HEADER_LEN;
    while (off < size) {
        unsigned char rh[POPLOG_RECORD_LEN];
        uint64_t left = size - off;

        if (left < POPLOG_RECORD_LEN) {
            fprintf(stderr,
                    "idpool-check: %s: byte offset %" PRIu64 ": truncated record header (%" PRIu64
                    " of %d bytes)\n",
                    path, off, left, POPLOG_RECORD_LEN);
            goto out;
        }
        if (fread_unlocked(rh, 1, POPLOG_RECORD_LEN, f) != POPLOG_RECORD_LEN) {
            fprintf(stderr, "idpool-check: %s: byte offset %" PRIu64 ": read error\n", path, off);
            goto out;
        }
        uint64_t t_send = poplog_get64(rh), t_recv = poplog_get64(rh + 8);
        uint32_t count = poplog_get32(rh + 16), flags = poplog_get32(rh + 20);
        if (flags != 0) {
            fprintf(stderr, "idpool-check: %s: byte offset %" PRIu64 ": bad flags %" PRIu32 "\n",
                    path, off, flags);
            goto out;
        }
        if (t_recv < t_send) {
            fprintf(stderr,
                    "idpool-check: %s: byte offset %" PRIu64 ": t_recv %" PRIu64
                    " before t_send %" PRIu64 "\n",
                    path, off, t_recv, t_send);
            goto out;
        }
        if ((uint64_t)count * 8 > left - POPLOG_RECORD_LEN) {
            fprintf(stderr,
                    "idpool-check: %s: byte offset %" PRIu64 ": count %" PRIu32 " needs %" PRIu64
                    " bytes, %" PRIu64 " left (truncated record or bad count)\n",
                    path, off, count, (uint64_t)count * 8, left - POPLOG_RECORD_LEN);
            goto out;
        }
        if (grow(&buf, &cap, count ? count : 1, sizeof *buf) < 0)
            goto out;
        if (fread_unlocked(buf, 8, count, f) != count) {
            fprintf(stderr, "idpool-check: %s: byte offset %" PRIu64 ": read error\n", path,
                    off + POPLOG_RECORD_LEN);
            goto out;
        }
        for (uint32_t i = 0; i < count; i++)
            buf[i] = le64toh(buf[i]);
        fn(c, file, off, t_send, t_recv, buf, count);
        off += POPLOG_RECORD_LEN + (uint64_t)count * 8;
    }
    rc = 0;
out:
    free(buf);
    fclose(f);
    return rc;
}

/* Opens a text side file; NULL with a message on failure. */
FILE *open_text(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        fprintf(stderr, "idpool-check: %s: %s\n", path, strerror(errno));
    return f;
}

/* True for blank and '#' lines of a text side file. */
bool skip_line(const char *line)
{
    line += strspn(line, " \t\r\n");
    return !*line || *line == '#';
}

/* Splits the first two whitespace-separated numbers off a line. */
int two_numbers(char *line, uint64_t *a, uint64_t *b)
{
    char *save = NULL;
    char *x = strtok_r(line, " \t\r\n", &save);
    char *y = strtok_r(NULL, " \t\r\n", &save);
    return parse_u64(x, a) || parse_u64(y, b) ? -1 : 0;
}

/*
 * Reads a --list file (decimal IDs, one per line, blank and '#' lines
 * skipped) and calls fn with them in chunks, as records without times;
 * offset is the line number of a chunk's first ID.
 */
__attribute__((warn_unused_result)) static int list_scan(struct check *c, uint32_t file,
                                                         record_fn fn)
{
    enum { CHUNK = 1024 };
    const char *path = c->files[file].path;
    uint64_t buf[CHUNK], first = 0;
    size_t n = 0, len = 0, lineno = 0;
    char *line = NULL;
    int rc = -1;
    FILE *f = open_text(path);

    if (!f)
        return -1;
    while (getline(&line, &len, f) > 0) {
        char *save = NULL, *tok;
        lineno++;
        if (skip_line(line))
            continue;
        tok = strtok_r(line, " \t\r\n", &save);
        if (parse_u64(tok, &buf[n]) < 0 || strtok_r(NULL, " \t\r\n", &save)) {
            fprintf(stderr, "idpool-check: %s:%zu: expected one decimal ID\n", path, lineno);
            goto out;
        }
        if (n++ == 0)
            first = lineno;
        if (n == CHUNK) {
            fn(c, file, first, 0, 0, buf, (uint32_t)n);
            n = 0;
        }
    }
    if (ferror(f)) {
        fprintf(stderr, "idpool-check: %s: read error\n", path);
        goto out;
    }
    if (n)
        fn(c, file, first, 0, 0, buf, (uint32_t)n);
    rc = 0;
out:
    free(line);
    fclose(f);
    return rc;
}

/* Reads input file (a pop log or a --list) and calls fn for each record. */
int input_scan(struct check *c, uint32_t file, record_fn fn)
{
    if (c->files[file].is_list)
        return list_scan(c, file, fn);
    return log_scan(c, file, fn);
}
