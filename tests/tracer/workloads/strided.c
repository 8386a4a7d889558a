/*
 * strided.c - read patterns for the read-ahead plug-in tests (tests/tracer/test_readahead.py).
 *
 *   strided data FILE STRIDE SIZE COUNT   strided reads (pread and lseek+read, readv,
 *                                          preadv), then reads past EOF and failing calls;
 *                                          the bytes read go to stdout, every return value
 *                                          and errno to stderr
 *   strided random FILE SIZE COUNT         reads at pseudo-random offsets
 *   strided seq FILE SIZE COUNT            contiguous read()s
 *   strided resident FILE STRIDE COUNT     drop FILE's pages, pread COUNT blocks of 1 KiB at
 *                                          k * STRIDE, then print whether the pages of
 *                                          blocks COUNT (the next predicted) and COUNT + 3
 *                                          are in the page cache (mincore, waiting up to
 *                                          5 s for the next one: WILLNEED is asynchronous)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

static void report(const char *what, long long rc)
{
    fprintf(stderr, "%s rc=%lld errno=%d\n", what, rc, rc < 0 ? errno : 0);
}

static void out(const char *buf, ssize_t n)
{
    if (n > 0 && fwrite(buf, 1, (size_t)n, stdout) != (size_t)n)
        exit(3);
}

static int data(const char *path, long long stride, size_t size, long count)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return 1;
    char *buf = malloc(size * 2);
    for (long k = 0; k < count; k++) {
        off_t at = (off_t)(k * stride);
        ssize_t n;
        switch (k / 8 % 4) { /* runs of 8 calls of each kind, all on one strided stream */
        case 0:
            n = pread(fd, buf, size, at);
            break;
        case 1:
            lseek(fd, at, SEEK_SET);
            n = read(fd, buf, size);
            break;
        case 2: {
            struct iovec iov[2] = {{buf, size / 2}, {buf + size / 2, size - size / 2}};
            n = preadv(fd, iov, 2, at);
            break;
        }
        default: {
            lseek(fd, at, SEEK_SET);
            struct iovec iov[1] = {{buf, size}};
            n = readv(fd, iov, 1);
        }
        }
        report("read", n);
        out(buf, n);
    }
    struct stat st;
    fstat(fd, &st);
    ssize_t n = pread(fd, buf, size, st.st_size - (off_t)size / 2); /* short read at EOF */
    report("pread-tail", n);
    out(buf, n);
    report("pread-eof", pread(fd, buf, size, st.st_size + 4096));
    lseek(fd, 0, SEEK_END);
    report("read-eof", read(fd, buf, size));
    report("pread-negative", pread(fd, buf, size, -1));
    close(fd);
    report("read-closed", read(fd, buf, size));
    report("read-badfd", read(-1, buf, size));
    free(buf);
    return 0;
}

static int random_reads(const char *path, size_t size, long count)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return 1;
    struct stat st;
    fstat(fd, &st);
    char *buf = malloc(size);
    unsigned long x = 12345;
    for (long k = 0; k < count; k++) {
        x = x * 6364136223846793005ul + 1442695040888963407ul;
        off_t at = (off_t)((x >> 20) % (unsigned long)(st.st_size - (off_t)size));
        out(buf, pread(fd, buf, size, at));
    }
    close(fd);
    return 0;
}

static int seq_reads(const char *path, size_t size, long count)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return 1;
    char *buf = malloc(size);
    for (long k = 0; k < count; k++)
        out(buf, read(fd, buf, size));
    close(fd);
    return 0;
}

static int resident(const char *path, long long stride, long count)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return 1;
    struct stat st;
    fstat(fd, &st);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    unsigned char *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED)
        return 1;
    long page = sysconf(_SC_PAGESIZE);
    size_t pages = ((size_t)st.st_size + (size_t)page - 1) / (size_t)page;
    unsigned char *vec = malloc(pages);
    mincore(map, (size_t)st.st_size, vec);
    long before = 0;
    for (size_t i = 0; i < pages; i++)
        before += vec[i] & 1;
    char buf[1024];
    for (long k = 0; k < count; k++)
        if (pread(fd, buf, sizeof buf, (off_t)(k * stride)) != (ssize_t)sizeof buf)
            return 1;
    /* WILLNEED only starts the read: give a busy machine up to 5 s to finish it */
    size_t next = (size_t)(count * stride / page);
    for (int tries = 0; tries < 500; tries++) {
        mincore(map, (size_t)st.st_size, vec);
        if (vec[next] & 1)
            break;
        usleep(10000);
    }
    printf("resident_before %ld\n", before);
    printf("next %d\n", vec[next] & 1);
    printf("later %d\n", vec[(size_t)((count + 3) * stride / page)] & 1);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 6 && strcmp(argv[1], "data") == 0)
        return data(argv[2], atoll(argv[3]), (size_t)atol(argv[4]), atol(argv[5]));
    if (argc >= 5 && strcmp(argv[1], "random") == 0)
        return random_reads(argv[2], (size_t)atol(argv[3]), atol(argv[4]));
    if (argc >= 5 && strcmp(argv[1], "seq") == 0)
        return seq_reads(argv[2], (size_t)atol(argv[3]), atol(argv[4]));
    if (argc >= 5 && strcmp(argv[1], "resident") == 0)
        return resident(argv[2], atoll(argv[3]), atol(argv[4]));
    fprintf(stderr, "usage: see the comment at the top of strided.c\n");
    return 2;
}
