/* A small POSIX program that reports its own bandwidth per direction as benchmarks do:
 * each write() and read() is timed with CLOCK_MONOTONIC, and the bytes are divided by the
 * summed time of the calls (tests/analyze/test_bandwidth.py).
 *
 * usage: bandwidth_posix FILE BLOCK_BYTES BLOCKS
 * prints: write_bytes write_seconds read_bytes read_seconds
 */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s FILE BLOCK_BYTES BLOCKS\n", argv[0]);
        return 2;
    }
    size_t block = strtoul(argv[2], NULL, 10);
    long blocks = atol(argv[3]);
    char *buf = malloc(block);
    memset(buf, 'x', block);
    int fd = open(argv[1], O_CREAT | O_RDWR | O_TRUNC, 0600);
    if (fd < 0 || !buf) return 1;
    double w = 0.0, r = 0.0, t;
    long moved_w = 0, moved_r = 0;
    for (long i = 0; i < blocks; i++) {
        t = now();
        moved_w += write(fd, buf, block);
        w += now() - t;
    }
    lseek(fd, 0, SEEK_SET);
    for (long i = 0; i < blocks; i++) {
        t = now();
        moved_r += read(fd, buf, block);
        r += now() - t;
    }
    close(fd);
    printf("%ld %.9f %ld %.9f\n", moved_w, w, moved_r, r);
    free(buf);
    return 0;
}
