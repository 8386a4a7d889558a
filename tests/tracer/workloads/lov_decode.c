/*
 * Test harness for tracer/src/core/lov.c, linked with it alone:
 *   lov_decode FILE... [max]   decode each file as a lustre.lov value, one JSON line each
 *   lov_decode -m              each stdin line as a mountinfo line, one JSON line each
 * `max` (a number after the files, default 4096) bounds the OST indices kept.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lov.h"

static void decode(const char *path, unsigned max)
{
    static unsigned char buf[1 << 17];
    static uint32_t osts[4096];
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(2);
    }
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    struct iol_lov l;
    int rc = iol_lov_decode(buf, n, &l, osts, max);
    printf("{\"rc\": %d, \"magic\": %u, \"flags\": %u, \"stripe_size\": %llu, "
           "\"stripe_count\": %u, \"components\": %u, \"osts\": [",
           rc, l.magic, l.flags, (unsigned long long)l.stripe_size, l.stripe_count,
           l.components);
    for (uint32_t i = 0; i < l.nosts; i++)
        printf("%s%u", i ? ", " : "", osts[i]);
    printf("]}\n");
}

static void mounts(void)
{
    char line[8192], point[256], fsname[IOL_FSNAME_MAX];
    while (fgets(line, sizeof line, stdin)) {
        size_t n = strcspn(line, "\n");
        int len = iol_mountinfo_lustre(line, n, point, sizeof point, fsname);
        if (len < 0)
            printf("null\n");
        else
            printf("{\"point\": \"%s\", \"len\": %d, \"fsname\": \"%s\"}\n", point, len, fsname);
    }
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "-m") == 0) {
        mounts();
        return 0;
    }
    unsigned max = 4096;
    int last = argc - 1;
    char *end;
    unsigned long v = strtoul(argv[last], &end, 10);
    if (*end == '\0' && argc > 2) {
        max = (unsigned)v;
        last--;
    }
    for (int i = 1; i <= last; i++)
        decode(argv[i], max);
    return 0;
}
