/*
 * idpool-keys: src/core/keys.c from the command line, so that the tests can
 * hold the other languages' key names and a real Redis' slots against it.
 *
 *   idpool-keys app PREFIX KEY...  for each pair, its pool, meta and lock
 *                                  keys, one a line
 *   idpool-keys slot               for each line of stdin, a key in hex
 *                                  (any bytes), its Cluster slot
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keys.h"

static int usage(void)
{
    fputs("usage: idpool-keys app PREFIX KEY [PREFIX KEY]... | idpool-keys slot <HEX-KEYS\n",
          stderr);
    return 64;
}

/* The n hex digits at s as bytes into out; -1 when they are not pairs of hex digits. */
static int unhex(const char *s, size_t n, char *out)
{
    if (n % 2)
        return -1;
    for (size_t i = 0; i < n; i += 2) {
        char pair[3] = {s[i], s[i + 1], '\0'};

        if (!isxdigit((unsigned char)pair[0]) || !isxdigit((unsigned char)pair[1]))
            return -1;
        out[i / 2] = (char)strtoul(pair, NULL, 16);
    }
    return 0;
}

static int slots(void)
{
    char line[4096], key[2048];

    while (fgets(line, sizeof(line), stdin)) {
        size_t n = strcspn(line, "\r\n");

        if (unhex(line, n, key) != 0) {
            fprintf(stderr, "idpool-keys: not hex: %.*s\n", (int)n, line);
            return 1;
        }
        printf("%u\n", keys_slot(key, n / 2));
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 4 && argc % 2 == 0 && strcmp(argv[1], "app") == 0) {
        static const enum keys_kind kinds[] = {KEYS_POOL, KEYS_META, KEYS_LOCK};

        for (int a = 2; a < argc; a += 2) {
            for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
                char *k = keys_app_new(argv[a], argv[a + 1], kinds[i]);

                if (k == NULL)
                    return 1;
                puts(k);
                free(k);
            }
        }
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "slot") == 0)
        return slots();
    return usage();
}
