/*
 * fuzz_sqlerr — libFuzzer target for sqlerr_denied_text(), which reads a
 * MySQL server's error message (whatever a server or a proxy may send).
 *
 * The first two bytes pick the error number (one of the four refusals or
 * another), the third the output buffer's size (1..64 or 256); the rest is
 * the message. Invariants: the text is NUL-terminated inside the buffer,
 * never longer than it; for a table refusal whose message (shorter than 100
 * bytes) names both the command and the table, it reads "<command> denied
 * on <db>.<table>".
 */
#include "fuzz.h"
#include "sqlerr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const unsigned nums[] = {1044, 1045, 1142, 1143, 1146, 0};
    char msg[1024], out[257];
    size_t len, cap, n;
    unsigned e;

    if (size < 3)
        return 0;
    e = nums[data[0] % (sizeof(nums) / sizeof(nums[0]))];
    cap = data[2] == 0 ? 256 : (size_t)(data[2] % 64) + 1;
    n = size - 3 < sizeof(msg) - 1 ? size - 3 : sizeof(msg) - 1;
    memcpy(msg, data + 3, n);
    msg[n] = '\0';
    memset(out, 'X', sizeof(out));
    out[cap] = 'Z'; /* the byte after the buffer: never written */
    sqlerr_denied_text(e, msg, (data[1] & 1) ? "idpool" : "db", out, cap);
    len = strnlen(out, cap);
    CHECK(len < cap);
    CHECK(out[cap] == 'Z');
    if (e == 1142 && cap == 256 && n < 100 && strstr(msg, " command denied to user ") &&
        strstr(msg, " for table ")) /* (a message this short cannot be cut) */
        CHECK(strstr(out, " denied on ") != NULL);
    return 0;
}
