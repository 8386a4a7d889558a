/*
 * Test workloads for the tracer. Each process counts its own successful calls and bytes
 * on files under BASE and prints one JSON line:
 *   {"pid": P, "read_bytes": R, "write_bytes": W, "ops": {"open": n, ...}}
 * Usage: workload MODE BASE [N]
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *OPS[] = {"read", "write", "open", "close", "stat", "unlink", "rename",
                            "mkdir", "rmdir", "fsync", "seek", "mmap", "dup", "flush"};
enum { R, W, OPEN, CLOSE, STAT, UNLINK, RENAME, MKDIR, RMDIR, FSYNC, SEEK, MMAP, DUP, FLUSH };
static long ops[14], rbytes, wbytes;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static const char *base;
static char buf[1 << 20];

#define COUNT(op, n) do { pthread_mutex_lock(&mu); ops[op]++; \
    if (op == R) rbytes += (n); \
    if (op == W) wbytes += (n); \
    pthread_mutex_unlock(&mu); } while (0)
#define CHECK(x) do { if ((x) < 0) { perror(#x); exit(99); } } while (0)

static void report(void)
{
    char out[1024];
    int n = snprintf(out, sizeof out, "{\"pid\": %d, \"read_bytes\": %ld, \"write_bytes\": %ld, \"ops\": {",
                     getpid(), rbytes, wbytes);
    for (int i = 0; i < 14; i++)
        n += snprintf(out + n, sizeof out - n, "%s\"%s\": %ld", i ? ", " : "", OPS[i], ops[i]);
    n += snprintf(out + n, sizeof out - n, "}}\n");
    /* one write to a pipe: lines from several processes do not interleave */
    ssize_t w = write(1, out, n);
    (void)w;
}

static char *path(char *dst, const char *name, int i)
{
    sprintf(dst, "%s/%s.%d", base, name, i);
    return dst;
}

static int xopen(const char *p, int flags)
{
    int fd = open(p, flags, 0644);
    CHECK(fd);
    COUNT(OPEN, 0);
    return fd;
}
static void xclose(int fd) { CHECK(close(fd)); COUNT(CLOSE, 0); }
static void xwrite(int fd, size_t n) { ssize_t r = write(fd, buf, n); CHECK(r); COUNT(W, r); }
static void xpwrite(int fd, size_t n, off_t o) { ssize_t r = pwrite(fd, buf, n, o); CHECK(r); COUNT(W, r); }
static void xread(int fd, size_t n) { ssize_t r = read(fd, buf, n); CHECK(r); COUNT(R, r); }
static void xpread(int fd, size_t n, off_t o) { ssize_t r = pread(fd, buf, n, o); CHECK(r); COUNT(R, r); }

/* N-N: each call writes its own file sequentially, then reads it back with mixed calls */
static void nn(int i, int blocks, size_t bs)
{
    char p[4096];
    int fd = xopen(path(p, "nn", i), O_CREAT | O_TRUNC | O_RDWR);
    for (int b = 0; b < blocks; b++)
        xwrite(fd, bs);
    CHECK(fsync(fd)); COUNT(FSYNC, 0);
    CHECK(lseek(fd, 0, SEEK_SET)); COUNT(SEEK, 0);
    for (int b = 0; b < blocks / 2; b++)
        xread(fd, bs);
    for (int b = 0; b < blocks / 2; b++)
        xpread(fd, bs, (off_t)b * bs);
    struct iovec iov[2] = {{buf, 100}, {buf + 100, 200}};
    ssize_t r = preadv(fd, iov, 2, 0); CHECK(r); COUNT(R, r);
    r = pwritev(fd, iov, 2, 0); CHECK(r); COUNT(W, r);
    r = writev(fd, iov, 2); CHECK(r); COUNT(W, r);
    int d = dup(fd); CHECK(d); COUNT(DUP, 0);
    xclose(d);
    struct stat st;
    CHECK(fstat(fd, &st)); COUNT(STAT, 0);
    xclose(fd);
}

static void *thread_main(void *arg)
{
    int i = (int)(long)arg;
    nn(100 + i, 64, 4096);
    char p[4096];
    int fd = xopen(path(p, "shared", 0), O_CREAT | O_RDWR);
    for (int k = 0; k < 50; k++)
        xpwrite(fd, 512, (off_t)(k * 8 + i) * 512);
    xclose(fd);
    return NULL;
}

/* forks from a thread, as Open MPI's mpirun launches ranks from several at once */
static void *fork_loop(void *arg)
{
    (void)arg;
    for (int k = 0; k < 100; k++) {
        pid_t c = fork();
        if (c == 0) _exit(0);
        int st;
        if (c < 0 || waitpid(c, &st, 0) != c) return (void *)1;
    }
    return NULL;
}

static void small(int n)
{
    char p[4096];
    int fd = xopen(path(p, "small", 0), O_CREAT | O_TRUNC | O_WRONLY);
    for (int k = 0; k < n; k++)
        xwrite(fd, 1);
    xclose(fd);
}

static void strided(int rank, int nprocs, int iters, size_t bs)
{
    char p[4096];
    int fd = xopen(path(p, "n1", 0), O_CREAT | O_WRONLY);
    for (int k = 0; k < iters; k++)
        xpwrite(fd, bs, ((off_t)k * nprocs + rank) * bs);
    xclose(fd);
}

static void stdio_mode(void)
{
    char p[4096];
    FILE *f = fopen(path(p, "stdio", 0), "w");
    if (!f) exit(98);
    COUNT(OPEN, 0);
    for (int k = 0; k < 100; k++) {
        int r = fprintf(f, "line %d %s\n", k, "abcdef");
        CHECK(r); COUNT(W, r);
    }
    CHECK(fputs("hello world\n", f)); COUNT(W, 12);
    size_t w = fwrite(buf, 16, 64, f); COUNT(W, w * 16);
    CHECK(fflush(f)); COUNT(FLUSH, 0);
    long t = ftell(f); CHECK(t); COUNT(SEEK, 0);
    CHECK(fclose(f) ? -1 : 0); COUNT(CLOSE, 0);

    f = fopen(p, "r");
    if (!f) exit(98);
    COUNT(OPEN, 0);
    char word[64]; int num;
    long before = ftell(f); COUNT(SEEK, 0);
    int s = fscanf(f, "%63s %d", word, &num);
    if (s != 2) exit(97);
    long after = ftell(f); COUNT(SEEK, 0);
    COUNT(R, after - before);
    char line[256];
    while (fgets(line, sizeof line, f)) {
        COUNT(R, (long)strlen(line));
        if (strncmp(line, "hello", 5) == 0) break;
    }
    size_t rd = fread(buf, 16, 64, f); COUNT(R, rd * 16);
    rd = fread(buf, 1, 100, f); COUNT(R, rd); /* at EOF: 0 bytes, still a call */
    CHECK(fseek(f, 10, SEEK_SET)); COUNT(SEEK, 0);
    rd = fread(buf, 1, 5, f); COUNT(R, rd);
    CHECK(fclose(f) ? -1 : 0); COUNT(CLOSE, 0);
}

static void meta(int n)
{
    char d[4096], p[4096];
    sprintf(d, "%s/mdir", base);
    CHECK(mkdir(d, 0755)); COUNT(MKDIR, 0);
    for (int i = 0; i < n; i++) {
        sprintf(p, "%s/f.%d", d, i);
        xclose(xopen(p, O_CREAT | O_WRONLY));
    }
    struct stat st;
    for (int i = 0; i < n; i++) {
        sprintf(p, "%s/f.%d", d, i);
        CHECK(stat(p, &st)); COUNT(STAT, 0);
    }
    sprintf(p, "%s/f.%d", d, 0);
    char q[4096];
    sprintf(q, "%s/renamed", d);
    CHECK(rename(p, q)); COUNT(RENAME, 0);
    CHECK(unlink(q)); COUNT(UNLINK, 0);
    for (int i = 1; i < n; i++) {
        sprintf(p, "%s/f.%d", d, i);
        CHECK(unlink(p)); COUNT(UNLINK, 0);
    }
    CHECK(rmdir(d)); COUNT(RMDIR, 0);
}

/* random-offset pwrites: nothing merges, so the record budget fills */
static void scatter(int n)
{
    char p[4096];
    int fd = xopen(path(p, "scatter", 0), O_CREAT | O_WRONLY);
    unsigned s = 12345;
    for (int k = 0; k < n; k++) {
        s = s * 1103515245u + 12345u;
        xpwrite(fd, 8, (off_t)((s >> 8) % 100000) * 8);
    }
    xclose(fd);
}

static volatile sig_atomic_t ticks;
static int sigfd = -1;
static void on_alarm(int sig)
{
    (void)sig;
    int e = errno;
    if (sigfd >= 0 && write(sigfd, "s", 1) == 1)
        ticks++;
    errno = e;
}

int main(int argc, char **argv)
{
    if (argc < 3) return 2;
    const char *mode = argv[1];
    base = argv[2];
    int n = argc > 3 ? atoi(argv[3]) : 4;
    memset(buf, 'x', sizeof buf);
    if (!strcmp(mode, "nn")) {
        nn(0, 256, 4096);
    } else if (!strcmp(mode, "threads")) {
        pthread_t t[16];
        for (long i = 0; i < n; i++) pthread_create(&t[i], NULL, thread_main, (void *)i);
        for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
    } else if (!strcmp(mode, "thread_forks")) {
        pthread_t t[16];
        void *bad = NULL;
        for (long i = 0; i < n; i++) pthread_create(&t[i], NULL, fork_loop, NULL);
        for (int i = 0; i < n; i++) {
            void *r;
            pthread_join(t[i], &r);
            bad = bad ? bad : r;
        }
        if (bad) return 3;
        nn(0, 16, 4096);
    } else if (!strcmp(mode, "fork") || !strcmp(mode, "fork_exit") || !strcmp(mode, "n1")) {
        /* n children; parent does I/O too; children end with exit() or _exit() */
        for (int i = 0; i < n; i++) {
            pid_t c = fork();
            if (c == 0) {
                memset(ops, 0, sizeof ops); rbytes = wbytes = 0;
                if (!strcmp(mode, "n1")) strided(i, n, 200, 4096); else nn(i + 1, 32, 8192);
                report();
                if (!strcmp(mode, "fork_exit")) _exit(0);
                exit(0);
            }
            int st; waitpid(c, &st, 0); /* one at a time: stdout lines stay whole */
            if (!WIFEXITED(st) || WEXITSTATUS(st)) return 3;
        }
        if (strcmp(mode, "n1")) nn(0, 16, 4096);
    } else if (!strcmp(mode, "small")) {
        small(n);
    } else if (!strcmp(mode, "stdio")) {
        stdio_mode();
    } else if (!strcmp(mode, "meta")) {
        meta(n);
    } else if (!strcmp(mode, "compat")) {
        /* pre-2.33 glibc stat ABI, reached the way old binaries reach it */
        char p[4096];
        xclose(xopen(path(p, "compat", 0), O_CREAT | O_WRONLY));
        int fd = xopen(p, O_RDONLY);
        struct stat st;
        int (*xs)(int, const char *, struct stat *) = dlsym(RTLD_DEFAULT, "__xstat");
        int (*lxs)(int, const char *, struct stat *) = dlsym(RTLD_DEFAULT, "__lxstat");
        int (*fxs)(int, int, struct stat *) = dlsym(RTLD_DEFAULT, "__fxstat");
        if (xs) { CHECK(xs(1, p, &st)); COUNT(STAT, 0); }
        if (lxs) { CHECK(lxs(1, p, &st)); COUNT(STAT, 0); }
        if (fxs) { CHECK(fxs(1, fd, &st)); COUNT(STAT, 0); }
        CHECK(fstatat(AT_FDCWD, p, &st, 0)); COUNT(STAT, 0);
        int d = fcntl(fd, F_DUPFD, 10); CHECK(d); COUNT(DUP, 0);
        xread(d, 10);
        xclose(d);
        int e = dup2(fd, 20); CHECK(e); COUNT(DUP, 0);
        xclose(e);
        void *m = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
        if (m != MAP_FAILED) { COUNT(MMAP, 0); munmap(m, 4096); }
        xclose(fd);
        fd = xopen(path(p, "compat", 1), O_CREAT | O_WRONLY | O_APPEND);
        xwrite(fd, 100);
        xclose(fd);
        fd = openat(AT_FDCWD, p, O_RDONLY); CHECK(fd); COUNT(OPEN, 0);
        struct iovec iov[2] = {{buf, 30}, {buf + 30, 70}};
        ssize_t r = readv(fd, iov, 2); CHECK(r); COUNT(R, r);
        r = preadv2(fd, iov, 2, 0, 0); CHECK(r); COUNT(R, r);
        CHECK(fdatasync(fd)); COUNT(FSYNC, 0);
        xclose(fd);
        int c = creat(path(p, "compat", 2), 0644); CHECK(c); COUNT(OPEN, 0);
        xclose(c);
    } else if (!strcmp(mode, "scatter")) {
        scatter(n);
    } else if (!strcmp(mode, "exec")) {
        nn(0, 8, 4096);
        report();
        memset(ops, 0, sizeof ops); rbytes = wbytes = 0;
        char *args[] = {argv[0], "nn", (char *)base, NULL};
        /* a failing exec first: tracing must go on */
        if (execv("/nonexistent/program", args) != -1 || errno != ENOENT) return 5;
        nn(1, 8, 4096);
        report();
        memset(ops, 0, sizeof ops); rbytes = wbytes = 0;
        execv(argv[0], args);
        return 6;
    } else if (!strcmp(mode, "vfork")) {
        nn(0, 8, 4096);
        pid_t c = vfork();
        if (c == 0) {
            if (n == 1) _exit(7);
            char *args[] = {"/bin/echo", "from-vfork-child", NULL};
            execv(args[0], args);
            _exit(8);
        }
        int st; waitpid(c, &st, 0);
        nn(1, 8, 4096);
        report();
        return WIFEXITED(st) ? WEXITSTATUS(st) : 9;
    } else if (!strcmp(mode, "signals")) {
        char p[4096];
        sigfd = xopen(path(p, "sig", 0), O_CREAT | O_TRUNC | O_WRONLY);
        struct sigaction sa = {0};
        sa.sa_handler = on_alarm;
        sa.sa_flags = SA_RESTART;
        sigaction(SIGALRM, &sa, NULL);
        struct itimerval it = {{0, 200}, {0, 200}};
        setitimer(ITIMER_REAL, &it, NULL);
        int fd = xopen(path(p, "sigdata", 0), O_CREAT | O_TRUNC | O_RDWR);
        for (int k = 0; k < 20000; k++) xwrite(fd, 64);
        struct itimerval off = {{0, 0}, {0, 0}};
        setitimer(ITIMER_REAL, &off, NULL);
        xclose(fd);
        int tk = ticks;
        ops[W] += tk; wbytes += tk;
        sigfd = -1;
        printf("signals handled: %s\n", tk > 0 ? "yes" : "no");
        fflush(stdout);
        if (n == 1) {
            report();
            raise(SIGTERM); /* killed by a signal: exit status must be the same */
        }
    } else if (!strcmp(mode, "uexit")) {
        nn(0, 8, 4096);
        report();
        _exit(3);
    } else if (!strcmp(mode, "closed_stdio")) {
        close(0); close(1); close(2);
        nn(0, 8, 4096); /* fds 0.. now reused for our files */
        char p[4096];
        FILE *f = fopen(path(p, "out", 0), "w");
        fprintf(f, "done\n");
        fclose(f);
        return 4;
    } else if (!strcmp(mode, "errno")) {
        int fd = open("/nonexistent/x", O_RDONLY);
        printf("open %d %d\n", fd, errno);
        errno = 0;
        printf("read %zd %d\n", read(-1, buf, 1), errno);
        errno = 0;
        struct stat st;
        printf("stat %d %d\n", stat("/nonexistent", &st), errno);
        errno = 1234; /* a successful call leaves errno alone */
        char p[4096];
        fd = open(path(p, "e", 0), O_CREAT | O_WRONLY, 0644);
        write(fd, "x", 1);
        close(fd);
        printf("success errno %d\n", errno);
        FILE *f = fopen("/nonexistent/y", "r");
        printf("fopen %p %d\n", (void *)f, errno);
    } else {
        return 2;
    }
    report();
    return 0;
}
