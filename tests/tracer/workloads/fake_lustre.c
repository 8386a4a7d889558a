/*
 * A stand-in for a Lustre client, preloaded after the tracer (LD_PRELOAD="libiolens.so
 * libfakelustre.so"): files under $FAKE_LUSTRE_DIR answer `fgetxattr(fd, "lustre.lov")`
 * with the bytes of $FAKE_LUSTRE_BLOBS/<file name>.lov (the first call) and of
 * <file name>.lov.2 (later calls, when it exists: a PFL layout that grew), ENODATA
 * without a blob; an open of /proc/self/mountinfo reads $FAKE_LUSTRE_MOUNTINFO instead.
 * Every fgetxattr call is counted and the count written to $FAKE_LUSTRE_COUNT at exit.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

static ssize_t (*r_fgetxattr)(int, const char *, void *, size_t);
static int (*r_open)(const char *, int, ...);
static long calls;
static char seen[64][256];
static int nseen;

static int first_time(const char *name)
{
    for (int i = 0; i < nseen; i++)
        if (strcmp(seen[i], name) == 0)
            return 0;
    if (nseen < 64)
        snprintf(seen[nseen++], sizeof seen[0], "%s", name);
    return 1;
}

ssize_t fgetxattr(int fd, const char *name, void *value, size_t size)
{
    if (!r_fgetxattr)
        r_fgetxattr = dlsym(RTLD_NEXT, "fgetxattr");
    calls++;
    const char *dir = getenv("FAKE_LUSTRE_DIR"), *blobs = getenv("FAKE_LUSTRE_BLOBS");
    char link[64], path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = syscall(SYS_readlink, link, path, sizeof path - 1);
    size_t dl = dir ? strlen(dir) : 0;
    if (n <= 0 || !dir || !blobs || strcmp(name, "lustre.lov") != 0 ||
        strncmp(path, dir, dl) != 0 || path[dl] != '/')
        return r_fgetxattr(fd, name, value, size);
    path[n] = '\0';
    const char *base = strrchr(path, '/') + 1;
    char blob[4096];
    FILE *f = NULL;
    if (!first_time(base)) {
        snprintf(blob, sizeof blob, "%s/%s.lov.2", blobs, base);
        f = fopen(blob, "rb");
    }
    if (!f) {
        snprintf(blob, sizeof blob, "%s/%s.lov", blobs, base);
        f = fopen(blob, "rb");
    }
    if (!f) {
        errno = ENODATA;
        return -1;
    }
    static char buf[1 << 17];
    size_t got = fread(buf, 1, sizeof buf, f);
    fclose(f);
    if (size == 0)
        return (ssize_t)got;
    if (got > size) {
        errno = ERANGE;
        return -1;
    }
    memcpy(value, buf, got);
    return (ssize_t)got;
}

int open(const char *p, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    int mode = va_arg(ap, int);
    va_end(ap);
    if (!r_open)
        r_open = dlsym(RTLD_NEXT, "open");
    const char *mi = getenv("FAKE_LUSTRE_MOUNTINFO");
    if (mi && strcmp(p, "/proc/self/mountinfo") == 0)
        p = mi;
    return r_open(p, flags, mode);
}

__attribute__((destructor)) static void report(void)
{
    const char *out = getenv("FAKE_LUSTRE_COUNT");
    if (!out)
        return;
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%ld\n", calls);
    int fd = (int)syscall(SYS_openat, AT_FDCWD, out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
        if (syscall(SYS_write, fd, buf, (size_t)n) < 0) {
        }
        syscall(SYS_close, fd);
    }
}
