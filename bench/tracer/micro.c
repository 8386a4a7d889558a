/*
 * Microbenchmarks for the tracer, run plain and under LD_PRELOAD by run.py.
 * Usage: micro MODE DIR N     prints "ns_per_op <value>": the best of 5 repetitions of N
 * calls (wall time / N) - the minimum filters out interference from VM neighbours.
 * Modes: write1 pread4k lseekread openclose create stat unlink ior_write ior_read clock
 * fputc fgetc (one character per call through a FILE: the stdio hot path)
 * writeloop, scatterloop: ONE pass of N calls (1-byte write(); 8-byte pwrite() at random
 * offsets), mean not best, so periodic flushes inside the pass are counted (flush.py).
 * seq4k, strided4k: ONE pass of N 4 KiB pwrite()s, contiguous or IOR-like segments
 * (trace_compression.py).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static char buf[1 << 22];

static void clock_bench(long n)
{
    struct timespec ts;
    volatile unsigned long sink = 0;
    unsigned aux;
    double t;
#define MEASURE(label, stmt)                                                        \
    t = now();                                                                      \
    for (long i = 0; i < n; i++) { stmt; }                                          \
    printf("%s %.2f\n", label, (now() - t) / n);
    MEASURE("clock_gettime(CLOCK_MONOTONIC)", clock_gettime(CLOCK_MONOTONIC, &ts); sink += ts.tv_nsec)
    MEASURE("clock_gettime(CLOCK_MONOTONIC_COARSE)", clock_gettime(CLOCK_MONOTONIC_COARSE, &ts); sink += ts.tv_nsec)
    MEASURE("rdtsc", sink += __rdtsc())
    MEASURE("rdtscp", sink += __rdtscp(&aux))
    (void)sink;
}

int main(int argc, char **argv)
{
    if (argc < 4) return 2;
    const char *mode = argv[1], *dir = argv[2];
    long n = atol(argv[3]);
    char path[4096], p2[4096];
    snprintf(path, sizeof path, "%s/micro.dat", dir);
    memset(buf, 'b', sizeof buf);
    if (!strcmp(mode, "clock")) {
        clock_bench(n);
        return 0;
    }
    int fd = open(path, O_CREAT | O_RDWR, 0644);
    if (fd < 0) return 3;
    if (pwrite(fd, buf, 1 << 20, 0) != 1 << 20) return 4;
    double t0 = 0, t1 = 0;
    long ops = n;
    if (!strcmp(mode, "seq4k") || !strcmp(mode, "strided4k")) {
        /* 4 KiB pwrite()s: contiguous, or IOR-like segments of 8 blocks 64 KiB apart that
           restart 4 KiB further on (a record breaks every 8 calls) */
        int strided = mode[1] == 't';
        t0 = now();
        for (long i = 0; i < n; i++) {
            off_t off = strided ? ((i % 8) * 16 + (i / 8) % 16) * 4096 + (i / 128) * (1 << 20)
                                : (off_t)i * 4096;
            if (pwrite(fd, buf, 4096, off % (256 << 20)) != 4096) return 5;
        }
        t1 = now();
        printf("ns_per_op %.2f\n", (t1 - t0) / n);
        return 0;
    }
    if (!strcmp(mode, "writeloop") || !strcmp(mode, "scatterloop")) {
        int scatter = mode[0] == 's';
        unsigned long x = 88172645463325252ul;
        t0 = now();
        for (long i = 0; i < n; i++) {
            if (scatter) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift: no two offsets merge */
                if (pwrite(fd, buf, 8, (off_t)(x % ((1 << 20) - 8))) != 8) return 5;
            } else if (write(fd, buf, 1) != 1) {
                return 5;
            }
        }
        t1 = now();
        printf("ns_per_op %.2f\n", (t1 - t0) / n);
        return 0;
    }
    double best = 1e30;
    for (int rep = 0; rep < 5; rep++) {
        if (!strcmp(mode, "fputc") || !strcmp(mode, "fgetc")) {
            FILE *fp = fdopen(dup(fd), "r+");
            if (!fp) return 5;
            if (mode[1] == 'p') {
                t0 = now();
                for (long i = 0; i < n; i++) if (fputc('x', fp) == EOF) return 5;
                t1 = now();
            } else {
                for (long i = 0; i < n; i++) if (fputc('x', fp) == EOF) return 5;
                rewind(fp);
                t0 = now();
                for (long i = 0; i < n; i++) if (fgetc(fp) == EOF) return 5;
                t1 = now();
            }
            fclose(fp);
        } else if (!strcmp(mode, "write1")) {
            for (long i = 0; i < 1000; i++) if (write(fd, buf, 1) != 1) return 5;
            t0 = now();
            for (long i = 0; i < n; i++) if (write(fd, buf, 1) != 1) return 5;
            t1 = now();
        } else if (!strcmp(mode, "pread4k")) {
            t0 = now();
            for (long i = 0; i < n; i++)
                if (pread(fd, buf, 4096, (i & 255) * 4096) != 4096) return 5;
            t1 = now();
        } else if (!strcmp(mode, "lseekread")) {
            t0 = now();
            for (long i = 0; i < n; i++) {
                lseek(fd, ((i * 7) & 255) * 4096, SEEK_SET);
                if (read(fd, buf, 4096) != 4096) return 5;
            }
            t1 = now();
        } else if (!strcmp(mode, "openclose")) {
            t0 = now();
            for (long i = 0; i < n; i++) {
                int f = open(path, O_RDONLY);
                if (f < 0) return 5;
                close(f);
            }
            t1 = now();
        } else {
            break;
        }
        if (t1 - t0 < best) best = t1 - t0;
    }
    if (best < 1e30) {
        t0 = 0;
        t1 = best;
    } else if (!strcmp(mode, "mdtest")) {
        /* create+close, stat, unlink of n files in one directory, 3 cycles, best of each */
        struct stat st;
        double bc = 1e30, bs = 1e30, bu = 1e30;
        for (int rep = 0; rep < 3; rep++) {
            double a = now();
            for (long i = 0; i < n; i++) {
                snprintf(p2, sizeof p2, "%s/md.%ld", dir, i);
                int f = open(p2, O_CREAT | O_WRONLY | O_EXCL, 0644);
                if (f < 0) return 6;
                close(f);
            }
            double b = now();
            for (long i = 0; i < n; i++) {
                snprintf(p2, sizeof p2, "%s/md.%ld", dir, i);
                if (stat(p2, &st)) return 7;
            }
            double c = now();
            for (long i = 0; i < n; i++) {
                snprintf(p2, sizeof p2, "%s/md.%ld", dir, i);
                if (unlink(p2)) return 8;
            }
            double d = now();
            if (b - a < bc) bc = b - a;
            if (c - b < bs) bs = c - b;
            if (d - c < bu) bu = d - c;
        }
        printf("create %.1f\nstat %.1f\nunlink %.1f\n", bc / n, bs / n, bu / n);
        return 0;
    } else if (!strncmp(mode, "ior", 3)) {
        /* n = transfer size in KiB over a 256 MiB file: written once untimed, then 5
           passes of sequential overwrite + read back; the best pass of each is reported */
        size_t xfer = (size_t)n * 1024, total = 256u << 20;
        ops = (long)(total / xfer);
        for (long i = 0; i < ops; i++)
            if (pwrite(fd, buf, xfer, (off_t)i * xfer) != (ssize_t)xfer) return 10;
        double bw = 1e30, br = 1e30;
        for (int pass = 0; pass < 5; pass++) {
            double a = now();
            for (long i = 0; i < ops; i++)
                if (pwrite(fd, buf, xfer, (off_t)i * xfer) != (ssize_t)xfer) return 10;
            double b = now();
            for (long i = 0; i < ops; i++)
                if (pread(fd, buf, xfer, (off_t)i * xfer) != (ssize_t)xfer) return 11;
            double c = now();
            if (b - a < bw) bw = b - a;
            if (c - b < br) br = c - b;
        }
        printf("write_MBps %.1f\nread_MBps %.1f\nwrite_ns %.1f\nread_ns %.1f\n",
               total / (bw / 1e9) / 1e6, total / (br / 1e9) / 1e6, bw / ops, br / ops);
        close(fd);
        unlink(path);
        return 0;
    } else {
        return 2;
    }
    close(fd);
    unlink(path);
    printf("ns_per_op %.2f\n", (t1 - t0) / ops);
    return 0;
}
