/*
 * A stand-in for Darshan: another LD_PRELOAD interposer on write/pwrite/open/close that
 * counts calls and reports them on stderr at exit. Used to check both preload orders.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

static long n_write, n_open, n_close;
static ssize_t (*r_write)(int, const void *, size_t);
static int (*r_open)(const char *, int, ...);
static int (*r_close)(int);

ssize_t write(int fd, const void *b, size_t n)
{
    if (!r_write) r_write = dlsym(RTLD_NEXT, "write");
    if (fd > 2) n_write++;
    return r_write(fd, b, n);
}

int open(const char *p, int flags, ...)
{
    va_list ap; va_start(ap, flags); int mode = va_arg(ap, int); va_end(ap);
    if (!r_open) r_open = dlsym(RTLD_NEXT, "open");
    n_open++;
    return r_open(p, flags, mode);
}

int close(int fd)
{
    if (!r_close) r_close = dlsym(RTLD_NEXT, "close");
    n_close++;
    return r_close(fd);
}

__attribute__((destructor)) static void report(void)
{
    char buf[128];
    int n = snprintf(buf, sizeof buf, "fake-darshan: write=%ld open=%ld close=%ld\n",
                     n_write, n_open, n_close);
    if (r_write) r_write(2, buf, (size_t)n);
}
