#include "token.h"

#include <string.h>
#include <sys/random.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#define TOKEN_BYTES 32

/* n random bytes from the kernel into raw. 0, or -1. */
static int random_bytes(unsigned char *raw, size_t n)
{
    size_t got = 0;

    while (got < n) {
        ssize_t k = getrandom(raw + got, n - got, 0);
        if (k <= 0)
            return -1;
        got += (size_t)k;
    }
    return 0;
}

int token_random_hex(char *out, size_t bytes)
{
    static const char digits[] = "0123456789abcdef";
    unsigned char raw[64];

    if (bytes > sizeof(raw) || random_bytes(raw, bytes) != 0)
        return -1;
    for (size_t i = 0; i < bytes; i++) {
        out[2 * i] = digits[raw[i] >> 4];
        out[2 * i + 1] = digits[raw[i] & 0xf];
    }
    out[2 * bytes] = '\0';
    return 0;
}

int token_new(char *out)
{
    static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    unsigned char raw[TOKEN_BYTES + 1];
    size_t o = sizeof(TOKEN_PREFIX) - 1;

    if (random_bytes(raw, TOKEN_BYTES) != 0)
        return -1;
    raw[TOKEN_BYTES] = 0;
    memcpy(out, TOKEN_PREFIX, o);
    /* 32 bytes = 256 bits = 42 whole sextets and 4 bits: 43 characters, no padding. */
    for (size_t bit = 0; bit < TOKEN_BYTES * 8; bit += 6) {
        size_t i = bit / 8, sh = bit % 8;
        unsigned v = ((unsigned)raw[i] << 8 | raw[i + 1]) >> (10 - sh);
        out[o++] = b64url[v & 63];
    }
    out[o] = '\0';
    memset(raw, 0, sizeof(raw));
    return 0;
}

void token_hash(const char *s, size_t n, char *hex)
{
    static const char digits[] = "0123456789abcdef";
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned mdlen = 0;

    if (EVP_Digest(s, n, md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen != 32) {
        memset(hex, '0', TOKEN_HASH_LEN); /* matches no token: hashes are compared, never 0s */
        hex[TOKEN_HASH_LEN] = '\0';
        return;
    }
    for (unsigned i = 0; i < 32; i++) {
        hex[2 * i] = digits[md[i] >> 4];
        hex[2 * i + 1] = digits[md[i] & 15];
    }
    hex[TOKEN_HASH_LEN] = '\0';
}

int token_hash_valid(const char *hex)
{
    size_t i;

    for (i = 0; hex[i]; i++)
        if (!((hex[i] >= '0' && hex[i] <= '9') || (hex[i] >= 'a' && hex[i] <= 'f')))
            return 0;
    return i == TOKEN_HASH_LEN && strspn(hex, "0") != TOKEN_HASH_LEN;
}

int token_name_valid(const char *name)
{
    size_t n = strlen(name);

    if (n == 0 || n > TOKEN_NAME_MAX)
        return 0;
    return strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") == n;
}

int token_matches(const char *s, size_t n, const char *hex)
{
    char h[TOKEN_HASH_LEN + 1];

    if (!token_hash_valid(hex))
        return 0;
    token_hash(s, n, h);
    return CRYPTO_memcmp(h, hex, TOKEN_HASH_LEN) == 0;
}
