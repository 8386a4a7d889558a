/*
 * What a Lustre layout costs the tracer, in pieces that can be measured off Lustre:
 *   lov_cost xattr DIR N        fgetxattr("lustre.lov") on a non-Lustre file: the one call
 *                               a directory's first file pays (EOPNOTSUPP)
 *   lov_cost xattr_ok DIR N     fgetxattr of a 416-byte user.* xattr (a 16-stripe v1
 *                               layout's size): the system call a Lustre file pays
 *   lov_cost decode BLOB N      iol_lov_decode of the bytes in BLOB
 * Each prints "<mode> <ns per call>", the best of 5 repetitions of N calls.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "lov.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc != 4)
        return 2;
    const char *mode = argv[1];
    long n = atol(argv[3]);
    static unsigned char buf[1 << 17];
    static uint32_t osts[4096];
    double best = 1e30;
    int fd = -1;
    size_t len = 0;
    if (!strcmp(mode, "decode")) {
        FILE *f = fopen(argv[2], "rb");
        if (!f)
            return 3;
        len = fread(buf, 1, sizeof buf, f);
        fclose(f);
    } else {
        char path[4096];
        snprintf(path, sizeof path, "%s/lov_cost.dat", argv[2]);
        fd = open(path, O_CREAT | O_RDWR, 0644);
        if (fd < 0)
            return 3;
        if (!strcmp(mode, "xattr_ok")) {
            memset(buf, 'l', 416);
            if (fsetxattr(fd, "user.iolens_bench", buf, 416, 0) != 0) {
                printf("%s nan\n", mode); /* no user xattrs on this file system */
                return 0;
            }
        }
    }
    volatile long sink = 0;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now();
        for (long i = 0; i < n; i++) {
            if (!strcmp(mode, "decode")) {
                struct iol_lov l;
                sink += iol_lov_decode(buf, len, &l, osts, 4096) + l.nosts;
            } else if (!strcmp(mode, "xattr")) {
                sink += fgetxattr(fd, "lustre.lov", buf, 4096);
            } else {
                sink += fgetxattr(fd, "user.iolens_bench", buf, 4096);
            }
        }
        double t = (now() - t0) / n;
        if (t < best)
            best = t;
    }
    printf("%s %.1f\n", mode, best);
    return 0;
}
