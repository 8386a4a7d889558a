/*
 * stride.c - the SIOX Table 1 benchmark: strided 1 KiB reads with compute time between.
 *
 *   stride FILE STRIDE COUNT SLEEP_US EMBED [SIZE]
 *
 * Drops FILE's pages from the page cache (posix_fadvise DONTNEED; the caller may also
 * write 3 to /proc/sys/vm/drop_caches), then COUNT times: sleep SLEEP_US (compute time),
 * lseek to k * STRIDE and read SIZE bytes (default 1024). With EMBED=1 the program itself
 * calls posix_fadvise(WILLNEED) for the next block after each read (SIOX's "embedded
 * fadvise" row). Prints `key value` lines: the mean time of one seek+read(+fadvise) step
 * in microseconds, the pages still resident after the drop (0 when dropping works), and a
 * checksum of the bytes read.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static long resident_pages(int fd, off_t size)
{
    if (size == 0)
        return 0;
    void *p = mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return -1;
    long page = sysconf(_SC_PAGESIZE);
    size_t n = ((size_t)size + (size_t)page - 1) / (size_t)page;
    unsigned char *vec = malloc(n);
    long res = -1;
    if (vec && mincore(p, (size_t)size, vec) == 0) {
        res = 0;
        for (size_t i = 0; i < n; i++)
            res += vec[i] & 1;
    }
    free(vec);
    munmap(p, (size_t)size);
    return res;
}

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: %s FILE STRIDE COUNT SLEEP_US EMBED [SIZE]\n", argv[0]);
        return 2;
    }
    const char *path = argv[1];
    long long stride = atoll(argv[2]);
    long count = atol(argv[3]);
    long sleep_us = atol(argv[4]);
    int embed = atoi(argv[5]);
    size_t size = argc > 6 ? (size_t)atol(argv[6]) : 1024;

    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        perror(path);
        return 1;
    }
    struct stat st;
    fstat(fd, &st);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    long resident = resident_pages(fd, st.st_size);

    char *buf = malloc(size);
    uint64_t sum = 0;
    double busy = 0;
    struct timespec nap = {sleep_us / 1000000, (sleep_us % 1000000) * 1000};
    double t_all = now_us();
    for (long k = 0; k < count; k++) {
        if (sleep_us > 0)
            nanosleep(&nap, NULL);
        double t0 = now_us();
        if (lseek(fd, (off_t)(k * stride), SEEK_SET) < 0) {
            perror("lseek");
            return 1;
        }
        ssize_t n = read(fd, buf, size);
        if (embed)
            posix_fadvise(fd, (off_t)((k + 1) * stride), (off_t)size, POSIX_FADV_WILLNEED);
        busy += now_us() - t0;
        if (n < 0) {
            perror("read");
            return 1;
        }
        for (ssize_t i = 0; i < n; i += 64)
            sum = sum * 31 + (unsigned char)buf[i];
    }
    double total = now_us() - t_all;
    printf("per_read_us %.3f\n", busy / (double)count);
    printf("total_s %.3f\n", total / 1e6);
    printf("resident_after_drop %ld\n", resident);
    printf("checksum %llu\n", (unsigned long long)sum);
    close(fd);
    return 0;
}
