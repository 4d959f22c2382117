#include "token.h"

#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#define TOKEN_BYTES 32

int token_new(char *out)
{
    static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    unsigned char raw[TOKEN_BYTES + 1];
    size_t got = 0, o = sizeof(TOKEN_PREFIX) - 1;

    while (got < TOKEN_BYTES) {
        ssize_t n = getrandom(raw + got, TOKEN_BYTES - got, 0);
        if (n <= 0)
            return -1;
        got += (size_t)n;
    }
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

void token_revoked_key(const char *prefix, char *buf, size_t len)
{
    snprintf(buf, len, "%s:revoked-tokens", prefix);
}
