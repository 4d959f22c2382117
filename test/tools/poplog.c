/* poplog — the pop log's encoding (see poplog.h). */
#include "poplog.h"

#include <string.h>

const char *const poplog_kind_names[POPLOG_KINDS] = {"lpop", "take"};

void poplog_header(unsigned char out[POPLOG_HEADER_LEN], uint32_t consumer, uint32_t kind)
{
    memset(out, 0, POPLOG_HEADER_LEN);
    memcpy(out, POPLOG_MAGIC, 8);
    poplog_put32(out + 8, POPLOG_VERSION);
    poplog_put32(out + 12, consumer);
    poplog_put32(out + 16, kind);
}

void poplog_record(unsigned char out[POPLOG_RECORD_LEN], uint64_t t_send, uint64_t t_recv,
                   uint32_t count)
{
    poplog_put64(out, t_send);
    poplog_put64(out + 8, t_recv);
    poplog_put32(out + 16, count);
    poplog_put32(out + 20, 0); /* flags */
}

FILE *poplog_open(const char *path, uint32_t consumer, uint32_t kind)
{
    unsigned char h[POPLOG_HEADER_LEN];
    FILE *f = fopen(path, "wb");

    poplog_header(h, consumer, kind);
    if (f && fwrite(h, 1, sizeof h, f) != sizeof h) {
        fclose(f);
        return NULL;
    }
    return f;
}

int poplog_write(FILE *f, uint64_t t_send, uint64_t t_recv, const uint64_t *ids, uint32_t n)
{
    unsigned char r[POPLOG_RECORD_LEN], id[8];

    poplog_record(r, t_send, t_recv, n);
    if (fwrite(r, 1, sizeof r, f) != sizeof r)
        return -1;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    (void)id;
    return fwrite(ids, 8, n, f) == n ? 0 : -1; /* already little-endian: one call */
#else
    for (uint32_t i = 0; i < n; i++) {
        poplog_put64(id, ids[i]);
        if (fwrite(id, 1, sizeof id, f) != sizeof id)
            return -1;
    }
    return 0;
#endif
}
