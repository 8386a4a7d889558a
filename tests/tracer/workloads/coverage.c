/*
 * Coverage probes for the tracer: each mode makes calls the tracer must see and prints,
 * to stderr, one JSON line per data call it made on a file under BASE, computed by the
 * program itself (never by asking the tracer's wrapped calls):
 *   {"ev": ["<path>", "read"|"write", offset, bytes]}
 * Usage: coverage MODE BASE
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <aio.h>
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

/* character, line and formatted stdio calls, and rewind/fgetpos/fsetpos/ungetc; the
   *_unlocked character calls go through pointers, as glibc inlines them at -O2 */
static int (*volatile p_fputc_unlocked)(int, FILE *) = fputc_unlocked;
static int (*volatile p_putc_unlocked)(int, FILE *) = putc_unlocked;
static int (*volatile p_fgetc_unlocked)(FILE *) = fgetc_unlocked;
static int (*volatile p_getc_unlocked)(FILE *) = getc_unlocked;

static int vp(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vprintf(fmt, ap);
    va_end(ap);
    return n;
}

static void text(void)
{
    char s1[4096], out[4096], dp[4096], line[256];
    FILE *fp = fopen(at(s1, "s1"), "w+");
    if (!fp)
        exit(99);
    long off = 0, n;
    for (int i = 0; i < 1000; i++, off++) {
        CHECK(fputc('a' + i % 26, fp));
        ev(s1, "write", off, 1);
    }
    for (int i = 0; i < 100; i++, off++) {
        CHECK(putc('A', fp));
        ev(s1, "write", off, 1);
    }
    for (int i = 0; i < 50; i++, off += 2) {
        CHECK(p_fputc_unlocked('b', fp));
        ev(s1, "write", off, 1);
        CHECK(p_putc_unlocked('c', fp));
        ev(s1, "write", off + 1, 1);
    }
    CHECK(fputs_unlocked("hello\n", fp));
    ev(s1, "write", off, 6);
    off += 6;
    memset(bufa, 'q', 100);
    n = (long)fwrite_unlocked(bufa, 1, 100, fp);
    ev(s1, "write", off, n);
    off += n;
    n = fprintf(fp, "line %d\n", 42);
    CHECK(n);
    ev(s1, "write", off, n);
    off += n;
    rewind(fp);
    off = 0;
    for (int i = 0; i < 10; i++) {
        CHECK(fgetc(fp));
        ev(s1, "read", off++, 1);
        CHECK(getc(fp));
        ev(s1, "read", off++, 1);
        CHECK(p_fgetc_unlocked(fp));
        ev(s1, "read", off++, 1);
        CHECK(p_getc_unlocked(fp));
        ev(s1, "read", off++, 1);
    }
    int c = fgetc(fp);
    ev(s1, "read", off, 1);
    CHECK(ungetc(c, fp));
    CHECK(fgetc(fp));
    ev(s1, "read", off++, 1);
    fpos_t pos;
    CHECK(fgetpos(fp, &pos));
    for (int i = 0; i < 5; i++) {
        CHECK(fgetc(fp));
        ev(s1, "read", off + i, 1);
    }
    CHECK(fsetpos(fp, &pos));
    for (int i = 0; i < 5; i++) {
        CHECK(fgetc(fp));
        ev(s1, "read", off + i, 1);
    }
    off += 5;
    char *l = NULL;
    size_t cap = 0;
    n = getline(&l, &cap, fp); /* up to the end of "hello\n" */
    CHECK(n);
    ev(s1, "read", off, n);
    off += n;
    CHECK(fgets_unlocked(line, 30, fp) ? 0 : -1);
    n = (long)strlen(line);
    ev(s1, "read", off, n);
    off += n;
    n = (long)fread_unlocked(line, 1, 20, fp);
    ev(s1, "read", off, n);
    off += n;
    n = getdelim(&l, &cap, '\n', fp);
    CHECK(n);
    ev(s1, "read", off, n);
    free(l);
    fclose(fp);
    /* stdout, reopened onto a file */
    fflush(stdout);
    if (!freopen(at(out, "out"), "w", stdout))
        exit(99);
    off = 0;
    n = printf("x=%d\n", 5);
    ev(out, "write", off, n);
    off += n;
    CHECK(puts("abc"));
    ev(out, "write", off, 4);
    off += 4;
    CHECK(putchar('z'));
    ev(out, "write", off, 1);
    off += 1;
    n = vp("%s-%d\n", "vp", 7);
    ev(out, "write", off, n);
    fflush(stdout);
    /* dprintf writes to a file descriptor: the POSIX layer */
    int fd = open(at(dp, "dp"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(fd);
    n = dprintf(fd, "%s=%d\n", "dp", 12345);
    ev(dp, "write", 0, n);
    n = dprintf(fd, "%s\n", "again");
    ev(dp, "write", 9, n);
    close(fd);
}

/* the mkstemp family and tmpfile: files glibc opens with its internal open */
static void tmpfiles(void)
{
    char t[4][4096];
    memset(bufa, 't', 4096);
    int fds[4];
    snprintf(t[0], 4096, "%s/a-XXXXXX", base);
    fds[0] = mkstemp(t[0]);
    snprintf(t[1], 4096, "%s/b-XXXXXX", base);
    fds[1] = mkostemp(t[1], O_CLOEXEC);
    snprintf(t[2], 4096, "%s/c-XXXXXX.dat", base);
    fds[2] = mkstemps(t[2], 4);
    snprintf(t[3], 4096, "%s/d-XXXXXX.dat", base);
    fds[3] = mkostemps(t[3], 4, O_APPEND);
    for (int i = 0; i < 4; i++) {
        CHECK(fds[i]);
        CHECK(write(fds[i], bufa, 1000 + i));
        ev(t[i], "write", 0, 1000 + i);
        CHECK(pread(fds[i], bufa, 100, 10));
        ev(t[i], "read", 10, 100);
        close(fds[i]);
    }
    FILE *fp = tmpfile();
    if (!fp)
        exit(99);
    char link[64], tp[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fileno(fp));
    ssize_t n = readlink(link, tp, sizeof tp - 1);
    CHECK(n);
    tp[n] = 0;
    size_t w = fwrite(bufa, 1, 3000, fp);
    ev(tp, "write", 0, (long)w);
    rewind(fp);
    size_t r = fread(bufa, 1, 4096, fp);
    ev(tp, "read", 0, (long)r);
    fclose(fp);
}

/* close_range/closefrom, then the fds reused by pipes: pipe I/O is not file I/O */
static void closerange(int use_closefrom)
{
    char f[4096];
    memset(bufa, 'r', 8192);
    int fd = open(at(f, "f"), O_RDWR | O_CREAT | O_TRUNC, 0644);
    CHECK(fd);
    CHECK(write(fd, bufa, 8192));
    ev(f, "write", 0, 8192);
    int fd2 = dup(fd);
    CHECK(fd2);
    if (use_closefrom)
        closefrom(fd);
    else
        CHECK(close_range((unsigned)fd, ~0U, 0));
    int p[2];
    CHECK(pipe(p)); /* the lowest free fds: the file's */
    if (p[0] != fd && p[1] != fd)
        exit(98);
    for (int i = 0; i < 5; i++) {
        CHECK(write(p[1], bufa, 1000));
        CHECK(read(p[0], bufa, 1000));
    }
}

/* POSIX AIO: aio_write, aio_read, lio_listio; bytes as aio_return() reports them */
static void aio(void)
{
    char f[4096];
    static char b[4][20000];
    memset(b, 'a', sizeof b);
    int fd = open(at(f, "aio"), O_RDWR | O_CREAT | O_TRUNC, 0644);
    CHECK(fd);
    struct aiocb w = {.aio_fildes = fd, .aio_buf = b[0], .aio_nbytes = 20000, .aio_offset = 0};
    CHECK(aio_write(&w));
    const struct aiocb *one[1] = {&w};
    while (aio_error(&w) == EINPROGRESS)
        aio_suspend(one, 1, NULL);
    ssize_t n = aio_return(&w);
    CHECK(n);
    ev(f, "write", 0, n);
    struct aiocb r = {.aio_fildes = fd, .aio_buf = b[1], .aio_nbytes = 5000, .aio_offset = 100};
    CHECK(aio_read(&r));
    one[0] = &r;
    while (aio_error(&r) == EINPROGRESS)
        aio_suspend(one, 1, NULL);
    n = aio_return(&r);
    CHECK(n);
    ev(f, "read", 100, n);
    struct aiocb l[3] = {
        {.aio_fildes = fd, .aio_lio_opcode = LIO_WRITE, .aio_buf = b[2], .aio_nbytes = 3000,
         .aio_offset = 20000},
        {.aio_fildes = fd, .aio_lio_opcode = LIO_READ, .aio_buf = b[3], .aio_nbytes = 700,
         .aio_offset = 1000},
        {.aio_fildes = fd, .aio_lio_opcode = LIO_NOP},
    };
    struct aiocb *list[3] = {&l[0], &l[1], &l[2]};
    CHECK(lio_listio(LIO_WAIT, list, 3, NULL));
    n = aio_return(&l[0]);
    CHECK(n);
    ev(f, "write", 20000, n);
    n = aio_return(&l[1]);
    CHECK(n);
    ev(f, "read", 1000, n);
    close(fd);
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
    else if (!strcmp(argv[1], "text"))
        text();
    else if (!strcmp(argv[1], "tmp"))
        tmpfiles();
    else if (!strcmp(argv[1], "close_range"))
        closerange(0);
    else if (!strcmp(argv[1], "closefrom"))
        closerange(1);
    else if (!strcmp(argv[1], "aio"))
        aio();
    else {
        fprintf(stderr, "unknown mode %s\n", argv[1]);
        return 2;
    }
    return 0;
}
