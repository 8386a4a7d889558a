/*
 * Coverage probes for the tracer: each mode makes calls the tracer must see and prints,
 * to stderr, one JSON line per data call it made on a file under BASE, computed by the
 * program itself (never by asking the tracer's wrapped calls):
 *   {"ev": ["<path>", "read"|"write", offset, bytes]}
 * Usage: coverage MODE BASE
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <unistd.h>

#define CHECK(x) do { if ((x) < 0) { perror(#x); exit(99); } } while (0)
static const char *base;
static char bufa[1 << 16];

static void ev(const char *path, const char *op, long off, long n)
{
    if (n > 0)
        dprintf(2, "{\"ev\": [\"%s\", \"%s\", %ld, %ld]}\n", path, op, off, n);
}

static char *at(char *dst, const char *name)
{
    snprintf(dst, 4096, "%s/%s", base, name);
    return dst;
}

/* copy_file_range, sendfile, splice: a read of the source, a write of the destination */
static void transfer(void)
{
    char src[4096], d1[4096], d2[4096], d3[4096], d4[4096];
    const long N = 50000;
    memset(bufa, 'x', sizeof bufa);
    int in = open(at(src, "src"), O_RDWR | O_CREAT | O_TRUNC, 0644);
    CHECK(in);
    CHECK(write(in, bufa, N));
    ev(src, "write", 0, N);
    CHECK(lseek(in, 0, SEEK_SET));
    /* 1. copy_file_range on the fds' own positions */
    int o1 = open(at(d1, "d1"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(o1);
    long pos = 0;
    for (;;) {
        ssize_t r = copy_file_range(in, NULL, o1, NULL, 16384, 0);
        CHECK(r);
        if (r == 0)
            break;
        ev(src, "read", pos, r);
        ev(d1, "write", pos, r);
        pos += r;
    }
    /* 2. explicit offsets: the fds' positions stay where they are */
    int o2 = open(at(d2, "d2"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(o2);
    loff_t oi = 1000, oo = 7;
    ssize_t r = copy_file_range(in, &oi, o2, &oo, 5000, 0);
    CHECK(r);
    ev(src, "read", 1000, r);
    ev(d2, "write", 7, r);
    CHECK(write(o2, bufa, 10)); /* o2's own position is still 0 */
    ev(d2, "write", 0, 10);
    /* 3. sendfile with an offset pointer: in's position (N) does not move */
    int o3 = open(at(d3, "d3"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(o3);
    off_t so = 300;
    r = sendfile(o3, in, &so, 20000);
    CHECK(r);
    ev(src, "read", 300, r);
    ev(d3, "write", 0, r);
    CHECK(lseek(in, 100, SEEK_SET));
    r = sendfile(o3, in, NULL, 1000); /* from in's position, which then advances */
    CHECK(r);
    ev(src, "read", 100, r);
    ev(d3, "write", 20000, r);
    CHECK(read(in, bufa, 50));
    ev(src, "read", 1100, 50);
    /* 4. splice through a pipe: the pipe is not a file */
    int p[2];
    CHECK(pipe(p));
    int o4 = open(at(d4, "d4"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(o4);
    loff_t si = 2000;
    r = splice(in, &si, p[1], NULL, 4096, 0);
    CHECK(r);
    ev(src, "read", 2000, r);
    ssize_t w = splice(p[0], NULL, o4, NULL, (size_t)r, 0);
    CHECK(w);
    ev(d4, "write", 0, w);
    close(p[0]);
    close(p[1]);
    close(in);
    close(o1);
    close(o2);
    close(o3);
    close(o4);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: coverage MODE BASE\n");
        return 2;
    }
    base = argv[2];
    if (!strcmp(argv[1], "transfer"))
        transfer();
    else {
        fprintf(stderr, "unknown mode %s\n", argv[1]);
        return 2;
    }
    return 0;
}
