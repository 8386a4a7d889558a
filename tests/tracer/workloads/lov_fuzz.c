/*
 * Mutation fuzzing of tracer/src/core/lov.c under AddressSanitizer/UBSan:
 *   lov_fuzz BLOB SEED N      decode N truncated / byte-flipped copies of BLOB
 *   lov_fuzz -m SEED N        parse N mutated copies of a Lustre mountinfo line
 * Every copy is its own heap allocation of exactly its length, so a read one byte past
 * the end is caught. Prints how many decoded; any memory error aborts with a report.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lov.h"

static unsigned char *mutate(const unsigned char *src, size_t n, size_t *len, const char *alphabet)
{
    *len = (size_t)rand() % (n + 1);
    unsigned char *c = malloc(*len ? *len : 1);
    memcpy(c, src, *len);
    for (int k = rand() % 4; k > 0 && *len; k--)
        c[(size_t)rand() % *len] = alphabet ? (unsigned char)alphabet[rand() % 8] : (unsigned char)rand();
    return c;
}

int main(int argc, char **argv)
{
    if (argc != 4)
        return 2;
    srand((unsigned)atoi(argv[2]));
    long n = atol(argv[3]), ok = 0;
    if (strcmp(argv[1], "-m") == 0) {
        static const char line[] =
            "37 35 0:52 / /mnt/my\\040project rw shared:1 - lustre mgs@tcp:/proj/sub/dir rw";
        char point[256], fs[IOL_FSNAME_MAX];
        for (long i = 0; i < n; i++) {
            size_t len;
            unsigned char *c = mutate((const unsigned char *)line, sizeof line - 1, &len, " \\-:/0a7");
            ok += iol_mountinfo_lustre((char *)c, len, point, 1 + (size_t)rand() % 255, fs) >= 0;
            free(c);
        }
    } else {
        static unsigned char buf[1 << 17];
        static uint32_t osts[64];
        FILE *f = fopen(argv[1], "rb");
        if (!f)
            return 3;
        size_t size = fread(buf, 1, sizeof buf, f);
        fclose(f);
        for (long i = 0; i < n; i++) {
            size_t len;
            unsigned char *c = mutate(buf, size, &len, NULL);
            struct iol_lov l;
            ok += iol_lov_decode(c, len, &l, osts, (uint32_t)(rand() % 65)) == 0;
            free(c);
        }
    }
    printf("%ld\n", ok);
    return 0;
}
