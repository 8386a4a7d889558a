/*
 * tmpfiles.c - temporary files: the mkstemp family, mkdtemp, tmpfile.
 *
 * glibc opens these files with its internal open, which no wrapper sees, so without
 * these wrappers their I/O has no file and vanishes from the trace. mkstemp's file is
 * named by the filled-in template; tmpfile's has no name (O_TMPFILE, or unlinked at
 * once), so it is named by its /proc/self/fd link, e.g. "/tmp/#1234 (deleted)": the
 * directory it lives in (which file system) is what matters for diagnosis.
 */
#include "stream.h"

#define MKSTEMP_WRAPPER(name, params, args, oflags)                                     \
    IOL_REAL(int, name, params);                                                        \
    IOL_EXPORT int name params                                                         \
    {                                                                                   \
        BEGIN(name, -1);                                                                \
        if (iol_skip())                                                                 \
            return real_##name args;                                                    \
        PRE();                                                                          \
        int rc = real_##name args;                                                      \
        POST();                                                                         \
        opened(rc, AT_FDCWD, tmpl, O_RDWR | O_CREAT | O_EXCL | (oflags), t0, t1);      \
        RETURN(rc);                                                                     \
    }

MKSTEMP_WRAPPER(mkstemp, (char *tmpl), (tmpl), 0)
MKSTEMP_WRAPPER(mkstemp64, (char *tmpl), (tmpl), 0)
MKSTEMP_WRAPPER(mkostemp, (char *tmpl, int fl), (tmpl, fl), fl)
MKSTEMP_WRAPPER(mkostemp64, (char *tmpl, int fl), (tmpl, fl), fl)
MKSTEMP_WRAPPER(mkstemps, (char *tmpl, int sl), (tmpl, sl), 0)
MKSTEMP_WRAPPER(mkstemps64, (char *tmpl, int sl), (tmpl, sl), 0)
MKSTEMP_WRAPPER(mkostemps, (char *tmpl, int sl, int fl), (tmpl, sl, fl), fl)
MKSTEMP_WRAPPER(mkostemps64, (char *tmpl, int sl, int fl), (tmpl, sl, fl), fl)

IOL_REAL(char *, mkdtemp, (char *));
IOL_EXPORT char *mkdtemp(char *tmpl)
{
    BEGIN(mkdtemp, NULL);
    if (iol_skip())
        return real_mkdtemp(tmpl);
    PRE();
    char *rc = real_mkdtemp(tmpl);
    POST();
    if (rc)
        path_op(IOL_OP_MKDIR, AT_FDCWD, rc, t0, t1);
    RETURN(rc);
}

/* The unnamed file behind `fd`, by its /proc link (no allocation; raw system call). */
static uint32_t unnamed_file(int fd)
{
    char link[64], path[IOL_PATH_MAX];
    int n = 0;
    const char *pre = "/proc/self/fd/";
    while (pre[n]) {
        link[n] = pre[n];
        n++;
    }
    char digits[12];
    int k = 0;
    unsigned v = (unsigned)fd;
    do {
        digits[k++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (k)
        link[n++] = digits[--k];
    link[n] = 0;
    long len = syscall(SYS_readlink, link, path, sizeof path - 1);
    if (len <= 0)
        return iol_file_named("<TMPFILE>");
    path[len] = 0;
    return iol_file_named(path);
}

#define TMPFILE_WRAPPER(name)                                                           \
    IOL_REAL(FILE *, name, (void));                                                     \
    IOL_EXPORT FILE *name(void)                                                        \
    {                                                                                   \
        BEGIN(name, NULL);                                                              \
        if (iol_skip())                                                                 \
            return real_##name();                                                       \
        PRE();                                                                          \
        FILE *rc = real_##name();                                                       \
        POST();                                                                         \
        int fd = fd_of(rc);                                                             \
        uint32_t file = rc ? unnamed_file(fd) : 0;                                      \
        if (file && iol_fd(fd)) {                                                       \
            iol_fd_set(fd, file, 0);                                                    \
            iol_fd(fd)->flags |= IOL_FDF_WRITE;                                         \
            iol_record(IOL_OP_OPEN, IOL_LAYER_STDIO, file, -1, 0, t0, t1);              \
        }                                                                               \
        RETURN(rc);                                                                     \
    }

TMPFILE_WRAPPER(tmpfile)
TMPFILE_WRAPPER(tmpfile64)
