/*
 * posix.c - the POSIX I/O layer: file descriptors.
 *
 * Every wrapper: resolve the next definition, pass through if the tracer is off or
 * re-entered, else time the real call, keep its result and errno, record what it did
 * (successful calls only; bytes as returned), restore errno, return the result.
 * File offsets for read()/write() come from our own per-fd position, updated by every
 * wrapper that moves it (no lseek() system call per read). To add a layer, copy this
 * file's shape: one file per layer, records tagged with its IOL_LAYER_*.
 */

#include "posix.h"

#include <fcntl.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

struct statx;

/* ---- open family ------------------------------------------------------------------- */

#define OPEN_WRAPPER(name)                                                              \
    IOL_REAL(int, name, (const char *, int, ...));                                      \
    IOL_EXPORT int name(const char *path, int flags, ...)                              \
    {                                                                                   \
        mode_t mode = 0;                                                                \
        if (needs_mode(flags)) {                                                        \
            va_list ap;                                                                 \
            va_start(ap, flags);                                                        \
            mode = (mode_t)va_arg(ap, int);                                             \
            va_end(ap);                                                                 \
        }                                                                               \
        BEGIN(name, -1);                                                                \
        if (iol_skip())                                                                 \
            return real_##name(path, flags, mode);                                      \
        PRE();                                                                          \
        int rc = real_##name(path, flags, mode);                                        \
        POST();                                                                         \
        opened(rc, AT_FDCWD, path, flags, t0, t1);                                      \
        RETURN(rc);                                                                     \
    }

#define OPENAT_WRAPPER(name)                                                            \
    IOL_REAL(int, name, (int, const char *, int, ...));                                 \
    IOL_EXPORT int name(int dirfd, const char *path, int flags, ...)                   \
    {                                                                                   \
        mode_t mode = 0;                                                                \
        if (needs_mode(flags)) {                                                        \
            va_list ap;                                                                 \
            va_start(ap, flags);                                                        \
            mode = (mode_t)va_arg(ap, int);                                             \
            va_end(ap);                                                                 \
        }                                                                               \
        BEGIN(name, -1);                                                                \
        if (iol_skip())                                                                 \
            return real_##name(dirfd, path, flags, mode);                               \
        PRE();                                                                          \
        int rc = real_##name(dirfd, path, flags, mode);                                 \
        POST();                                                                         \
        opened(rc, dirfd, path, flags, t0, t1);                                         \
        RETURN(rc);                                                                     \
    }

/* _FORTIFY_SOURCE variants: no mode argument */
#define OPEN2_WRAPPER(name)                                                             \
    IOL_REAL(int, name, (const char *, int));                                           \
    IOL_EXPORT int name(const char *path, int flags)                                   \
    {                                                                                   \
        BEGIN(name, -1);                                                                \
        if (iol_skip())                                                                 \
            return real_##name(path, flags);                                            \
        PRE();                                                                          \
        int rc = real_##name(path, flags);                                              \
        POST();                                                                         \
        opened(rc, AT_FDCWD, path, flags, t0, t1);                                      \
        RETURN(rc);                                                                     \
    }

#define OPENAT2_WRAPPER(name)                                                           \
    IOL_REAL(int, name, (int, const char *, int));                                      \
    IOL_EXPORT int name(int dirfd, const char *path, int flags)                        \
    {                                                                                   \
        BEGIN(name, -1);                                                                \
        if (iol_skip())                                                                 \
            return real_##name(dirfd, path, flags);                                     \
        PRE();                                                                          \
        int rc = real_##name(dirfd, path, flags);                                       \
        POST();                                                                         \
        opened(rc, dirfd, path, flags, t0, t1);                                         \
        RETURN(rc);                                                                     \
    }

#define CREAT_WRAPPER(name)                                                             \
    IOL_REAL(int, name, (const char *, mode_t));                                        \
    IOL_EXPORT int name(const char *path, mode_t mode)                                 \
    {                                                                                   \
        BEGIN(name, -1);                                                                \
        if (iol_skip())                                                                 \
            return real_##name(path, mode);                                             \
        PRE();                                                                          \
        int rc = real_##name(path, mode);                                               \
        POST();                                                                         \
        opened(rc, AT_FDCWD, path, O_WRONLY | O_CREAT | O_TRUNC, t0, t1);               \
        RETURN(rc);                                                                     \
    }

OPEN_WRAPPER(open)
OPEN_WRAPPER(open64)
OPENAT_WRAPPER(openat)
OPENAT_WRAPPER(openat64)
OPEN2_WRAPPER(__open_2)
OPEN2_WRAPPER(__open64_2)
OPENAT2_WRAPPER(__openat_2)
OPENAT2_WRAPPER(__openat64_2)
CREAT_WRAPPER(creat)
CREAT_WRAPPER(creat64)

IOL_REAL(int, close, (int));
IOL_EXPORT int close(int fd)
{
    IOL_RESOLVE(close);
    if (UNLIKELY(!real_close))
        return (int)syscall(SYS_close, fd);
    if (iol_skip())
        return real_close(fd);
    iol_layout_closing(fd); /* a PFL layout the writes grew (untimed; errno kept) */
    PRE();
    uint32_t file = iol_fd_file(fd);
    int rc = real_close(fd);
    POST();
    if (file) {
        iol_fd_set(fd, 0, 0); /* Linux releases the fd even when close() fails */
        if (rc == 0)
            iol_record(IOL_OP_CLOSE, IOL_LAYER_POSIX, file, -1, 0, t0, t1);
    }
    RETURN(rc);
}

/* ---- data -------------------------------------------------------------------------- */

#define RW_WRAPPER(name, op, sysno, cq)                                                 \
    IOL_REAL(ssize_t, name, (int, cq void *, size_t));                                  \
    IOL_EXPORT ssize_t name(int fd, cq void *buf, size_t n)                            \
    {                                                                                   \
        IOL_RESOLVE(name);                                                              \
        if (UNLIKELY(!real_##name))                                                     \
            return syscall(sysno, fd, buf, n);                                          \
        if (iol_skip())                                                                 \
            return real_##name(fd, buf, n);                                             \
        PRE();                                                                          \
        ssize_t rc = real_##name(fd, buf, n);                                           \
        POST();                                                                         \
        if (rc >= 0)                                                                    \
            data_op(op, fd, -1, rc, t0, t1);                                            \
        RETURN(rc);                                                                     \
    }

RW_WRAPPER(read, IOL_OP_READ, SYS_read, )
RW_WRAPPER(write, IOL_OP_WRITE, SYS_write, const)

#define PRW_WRAPPER(name, op, cq)                                                       \
    IOL_REAL(ssize_t, name, (int, cq void *, size_t, off_t));                           \
    IOL_EXPORT ssize_t name(int fd, cq void *buf, size_t n, off_t off)                 \
    {                                                                                   \
        BEGIN(name, -1);                                                                \
        if (iol_skip())                                                                 \
            return real_##name(fd, buf, n, off);                                        \
        PRE();                                                                          \
        ssize_t rc = real_##name(fd, buf, n, off);                                      \
        POST();                                                                         \
        if (rc >= 0)                                                                    \
            data_op(op, fd, off < 0 ? 0 : off, rc, t0, t1);                             \
        RETURN(rc);                                                                     \
    }

PRW_WRAPPER(pread, IOL_OP_READ, )
PRW_WRAPPER(pread64, IOL_OP_READ, )
PRW_WRAPPER(pwrite, IOL_OP_WRITE, const)
PRW_WRAPPER(pwrite64, IOL_OP_WRITE, const)

#define RWV_WRAPPER(name, op)                                                           \
    IOL_REAL(ssize_t, name, (int, const struct iovec *, int));                          \
    IOL_EXPORT ssize_t name(int fd, const struct iovec *iov, int cnt)                  \
    {                                                                                   \
        BEGIN(name, -1);                                                                \
        if (iol_skip())                                                                 \
            return real_##name(fd, iov, cnt);                                           \
        PRE();                                                                          \
        ssize_t rc = real_##name(fd, iov, cnt);                                         \
        POST();                                                                         \
        if (rc >= 0)                                                                    \
            data_op(op, fd, -1, rc, t0, t1);                                            \
        RETURN(rc);                                                                     \
    }

RWV_WRAPPER(readv, IOL_OP_READ)
RWV_WRAPPER(writev, IOL_OP_WRITE)

#define PRWV_WRAPPER(name, op)                                                          \
    IOL_REAL(ssize_t, name, (int, const struct iovec *, int, off_t));                   \
    IOL_EXPORT ssize_t name(int fd, const struct iovec *iov, int cnt, off_t off)       \
    {                                                                                   \
        BEGIN(name, -1);                                                                \
        if (iol_skip())                                                                 \
            return real_##name(fd, iov, cnt, off);                                      \
        PRE();                                                                          \
        ssize_t rc = real_##name(fd, iov, cnt, off);                                    \
        POST();                                                                         \
        if (rc >= 0)                                                                    \
            data_op(op, fd, off < 0 ? 0 : off, rc, t0, t1);                             \
        RETURN(rc);                                                                     \
    }

PRWV_WRAPPER(preadv, IOL_OP_READ)
PRWV_WRAPPER(preadv64, IOL_OP_READ)
PRWV_WRAPPER(pwritev, IOL_OP_WRITE)
PRWV_WRAPPER(pwritev64, IOL_OP_WRITE)

/* offset -1 means "the current position, and advance it", as for readv()/writev() */
#define PRWV2_WRAPPER(name, op)                                                         \
    IOL_REAL(ssize_t, name, (int, const struct iovec *, int, off_t, int));              \
    IOL_EXPORT ssize_t name(int fd, const struct iovec *iov, int cnt, off_t off, int fl) \
    {                                                                                   \
        BEGIN(name, -1);                                                                \
        if (iol_skip())                                                                 \
            return real_##name(fd, iov, cnt, off, fl);                                  \
        PRE();                                                                          \
        ssize_t rc = real_##name(fd, iov, cnt, off, fl);                                \
        POST();                                                                         \
        if (rc >= 0)                                                                    \
            data_op(op, fd, off < 0 ? -1 : off, rc, t0, t1);                            \
        RETURN(rc);                                                                     \
    }

PRWV2_WRAPPER(preadv2, IOL_OP_READ)
PRWV2_WRAPPER(preadv64v2, IOL_OP_READ)
PRWV2_WRAPPER(pwritev2, IOL_OP_WRITE)
PRWV2_WRAPPER(pwritev64v2, IOL_OP_WRITE)

#define LSEEK_WRAPPER(name)                                                             \
    IOL_REAL(off_t, name, (int, off_t, int));                                           \
    IOL_EXPORT off_t name(int fd, off_t off, int whence)                               \
    {                                                                                   \
        BEGIN(name, -1);                                                                \
        if (iol_skip())                                                                 \
            return real_##name(fd, off, whence);                                        \
        PRE();                                                                          \
        off_t rc = real_##name(fd, off, whence);                                        \
        POST();                                                                         \
        struct iol_fd *f = iol_fd(fd);                                                  \
        if (rc >= 0 && f && f->file) {                                                  \
            f->pos = rc;                                                                \
            iol_record(IOL_OP_SEEK, IOL_LAYER_POSIX, f->file, rc, 0, t0, t1);           \
        }                                                                               \
        RETURN(rc);                                                                     \
    }

LSEEK_WRAPPER(lseek)
LSEEK_WRAPPER(lseek64)

#define FD_WRAPPER(name, op)                                                            \
    IOL_REAL(int, name, (int));                                                         \
    IOL_EXPORT int name(int fd)                                                        \
    {                                                                                   \
        BEGIN(name, -1);                                                                \
        if (iol_skip())                                                                 \
            return real_##name(fd);                                                     \
        PRE();                                                                          \
        int rc = real_##name(fd);                                                       \
        POST();                                                                         \
        if (rc == 0)                                                                    \
            fd_op(op, fd, t0, t1);                                                      \
        RETURN(rc);                                                                     \
    }

FD_WRAPPER(fsync, IOL_OP_FSYNC)
FD_WRAPPER(fdatasync, IOL_OP_FSYNC)

/* ---- stat family ------------------------------------------------------------------- */

#define STAT_WRAPPER(name, st)                                                          \
    IOL_REAL(int, name, (const char *, struct st *));                                   \
    IOL_EXPORT int name(const char *path, struct st *buf)                              \
    {                                                                                   \
        BEGIN(name, -1);                                                                \
        if (iol_skip())                                                                 \
            return real_##name(path, buf);                                              \
        PRE();                                                                          \
        int rc = real_##name(path, buf);                                                \
        POST();                                                                         \
        if (rc == 0)                                                                    \
            path_op(IOL_OP_STAT, AT_FDCWD, path, t0, t1);                               \
        RETURN(rc);                                                                     \
    }

#define FSTAT_WRAPPER(name, st)                                                         \
    IOL_REAL(int, name, (int, struct st *));                                            \
    IOL_EXPORT int name(int fd, struct st *buf)                                        \
    {                                                                                   \
        BEGIN(name, -1);                                                                \
        if (iol_skip())                                                                 \
            return real_##name(fd, buf);                                                \
        PRE();                                                                          \
        int rc = real_##name(fd, buf);                                                  \
        POST();                                                                         \
        if (rc == 0)                                                                    \
            fd_op(IOL_OP_STAT, fd, t0, t1);                                             \
        RETURN(rc);                                                                     \
    }

static inline void at_stat(int dirfd, const char *path, int flags, uint64_t t0, uint64_t t1)
{
    if ((flags & AT_EMPTY_PATH) && path && !path[0])
        fd_op(IOL_OP_STAT, dirfd, t0, t1);
    else
        path_op(IOL_OP_STAT, dirfd, path, t0, t1);
}

#define FSTATAT_WRAPPER(name, st)                                                       \
    IOL_REAL(int, name, (int, const char *, struct st *, int));                         \
    IOL_EXPORT int name(int dirfd, const char *path, struct st *buf, int flags)        \
    {                                                                                   \
        BEGIN(name, -1);                                                                \
        if (iol_skip())                                                                 \
            return real_##name(dirfd, path, buf, flags);                                \
        PRE();                                                                          \
        int rc = real_##name(dirfd, path, buf, flags);                                  \
        POST();                                                                         \
        if (rc == 0)                                                                    \
            at_stat(dirfd, path, flags, t0, t1);                                        \
        RETURN(rc);                                                                     \
    }

/* glibc < 2.33 ABI: stat() was an inline calling __xstat(_STAT_VER, ...) */
#define XSTAT_WRAPPER(name, st)                                                         \
    IOL_REAL(int, name, (int, const char *, struct st *));                              \
    IOL_EXPORT int name(int ver, const char *path, struct st *buf)                     \
    {                                                                                   \
        BEGIN(name, -1);                                                                \
        if (iol_skip())                                                                 \
            return real_##name(ver, path, buf);                                         \
        PRE();                                                                          \
        int rc = real_##name(ver, path, buf);                                           \
        POST();                                                                         \
        if (rc == 0)                                                                    \
            path_op(IOL_OP_STAT, AT_FDCWD, path, t0, t1);                               \
        RETURN(rc);                                                                     \
    }

#define FXSTAT_WRAPPER(name, st)                                                        \
    IOL_REAL(int, name, (int, int, struct st *));                                       \
    IOL_EXPORT int name(int ver, int fd, struct st *buf)                               \
    {                                                                                   \
        BEGIN(name, -1);                                                                \
        if (iol_skip())                                                                 \
            return real_##name(ver, fd, buf);                                           \
        PRE();                                                                          \
        int rc = real_##name(ver, fd, buf);                                             \
        POST();                                                                         \
        if (rc == 0)                                                                    \
            fd_op(IOL_OP_STAT, fd, t0, t1);                                             \
        RETURN(rc);                                                                     \
    }

#define FXSTATAT_WRAPPER(name, st)                                                      \
    IOL_REAL(int, name, (int, int, const char *, struct st *, int));                    \
    IOL_EXPORT int name(int ver, int dirfd, const char *path, struct st *buf, int flags) \
    {                                                                                   \
        BEGIN(name, -1);                                                                \
        if (iol_skip())                                                                 \
            return real_##name(ver, dirfd, path, buf, flags);                           \
        PRE();                                                                          \
        int rc = real_##name(ver, dirfd, path, buf, flags);                             \
        POST();                                                                         \
        if (rc == 0)                                                                    \
            at_stat(dirfd, path, flags, t0, t1);                                        \
        RETURN(rc);                                                                     \
    }

STAT_WRAPPER(stat, stat)
STAT_WRAPPER(stat64, stat64)
STAT_WRAPPER(lstat, stat)
STAT_WRAPPER(lstat64, stat64)
FSTAT_WRAPPER(fstat, stat)
FSTAT_WRAPPER(fstat64, stat64)
FSTATAT_WRAPPER(fstatat, stat)
FSTATAT_WRAPPER(fstatat64, stat64)
XSTAT_WRAPPER(__xstat, stat)
XSTAT_WRAPPER(__xstat64, stat64)
XSTAT_WRAPPER(__lxstat, stat)
XSTAT_WRAPPER(__lxstat64, stat64)
FXSTAT_WRAPPER(__fxstat, stat)
FXSTAT_WRAPPER(__fxstat64, stat64)
FXSTATAT_WRAPPER(__fxstatat, stat)
FXSTATAT_WRAPPER(__fxstatat64, stat64)

IOL_REAL(int, statx, (int, const char *, int, unsigned, struct statx *));
IOL_EXPORT int statx(int dirfd, const char *path, int flags, unsigned mask, struct statx *buf)
{
    BEGIN(statx, -1);
    if (iol_skip())
        return real_statx(dirfd, path, flags, mask, buf);
    PRE();
    int rc = real_statx(dirfd, path, flags, mask, buf);
    POST();
    if (rc == 0)
        at_stat(dirfd, path, flags, t0, t1);
    RETURN(rc);
}

/* ---- namespace --------------------------------------------------------------------- */

#define PATH_WRAPPER(name, op)                                                          \
    IOL_REAL(int, name, (const char *));                                                \
    IOL_EXPORT int name(const char *path)                                              \
    {                                                                                   \
        BEGIN(name, -1);                                                                \
        if (iol_skip())                                                                 \
            return real_##name(path);                                                   \
        PRE();                                                                          \
        int rc = real_##name(path);                                                     \
        POST();                                                                         \
        if (rc == 0)                                                                    \
            path_op(op, AT_FDCWD, path, t0, t1);                                        \
        RETURN(rc);                                                                     \
    }

PATH_WRAPPER(unlink, IOL_OP_UNLINK)
PATH_WRAPPER(rmdir, IOL_OP_RMDIR)

IOL_REAL(int, unlinkat, (int, const char *, int));
IOL_EXPORT int unlinkat(int dirfd, const char *path, int flags)
{
    BEGIN(unlinkat, -1);
    if (iol_skip())
        return real_unlinkat(dirfd, path, flags);
    PRE();
    int rc = real_unlinkat(dirfd, path, flags);
    POST();
    if (rc == 0)
        path_op((flags & AT_REMOVEDIR) ? IOL_OP_RMDIR : IOL_OP_UNLINK, dirfd, path, t0, t1);
    RETURN(rc);
}

IOL_REAL(int, mkdir, (const char *, mode_t));
IOL_EXPORT int mkdir(const char *path, mode_t mode)
{
    BEGIN(mkdir, -1);
    if (iol_skip())
        return real_mkdir(path, mode);
    PRE();
    int rc = real_mkdir(path, mode);
    POST();
    if (rc == 0)
        path_op(IOL_OP_MKDIR, AT_FDCWD, path, t0, t1);
    RETURN(rc);
}

IOL_REAL(int, mkdirat, (int, const char *, mode_t));
IOL_EXPORT int mkdirat(int dirfd, const char *path, mode_t mode)
{
    BEGIN(mkdirat, -1);
    if (iol_skip())
        return real_mkdirat(dirfd, path, mode);
    PRE();
    int rc = real_mkdirat(dirfd, path, mode);
    POST();
    if (rc == 0)
        path_op(IOL_OP_MKDIR, dirfd, path, t0, t1);
    RETURN(rc);
}

/* rename is recorded against the source path */
IOL_REAL(int, rename, (const char *, const char *));
IOL_EXPORT int rename(const char *from, const char *to)
{
    BEGIN(rename, -1);
    if (iol_skip())
        return real_rename(from, to);
    PRE();
    int rc = real_rename(from, to);
    POST();
    if (rc == 0)
        path_op(IOL_OP_RENAME, AT_FDCWD, from, t0, t1);
    RETURN(rc);
}

IOL_REAL(int, renameat, (int, const char *, int, const char *));
IOL_EXPORT int renameat(int fromfd, const char *from, int tofd, const char *to)
{
    BEGIN(renameat, -1);
    if (iol_skip())
        return real_renameat(fromfd, from, tofd, to);
    PRE();
    int rc = real_renameat(fromfd, from, tofd, to);
    POST();
    if (rc == 0)
        path_op(IOL_OP_RENAME, fromfd, from, t0, t1);
    RETURN(rc);
}

IOL_REAL(int, renameat2, (int, const char *, int, const char *, unsigned));
IOL_EXPORT int renameat2(int fromfd, const char *from, int tofd, const char *to, unsigned fl)
{
    BEGIN(renameat2, -1);
    if (iol_skip())
        return real_renameat2(fromfd, from, tofd, to, fl);
    PRE();
    int rc = real_renameat2(fromfd, from, tofd, to, fl);
    POST();
    if (rc == 0)
        path_op(IOL_OP_RENAME, fromfd, from, t0, t1);
    RETURN(rc);
}

/* ---- dup family, mmap -------------------------------------------------------------- */

IOL_REAL(int, dup, (int));
IOL_EXPORT int dup(int fd)
{
    BEGIN(dup, -1);
    if (iol_skip())
        return real_dup(fd);
    PRE();
    int rc = real_dup(fd);
    POST();
    if (rc >= 0)
        duped(fd, rc, t0, t1);
    RETURN(rc);
}

IOL_REAL(int, dup2, (int, int));
IOL_EXPORT int dup2(int fd, int fd2)
{
    BEGIN(dup2, -1);
    if (iol_skip())
        return real_dup2(fd, fd2);
    PRE();
    int rc = real_dup2(fd, fd2);
    POST();
    if (rc >= 0)
        duped(fd, rc, t0, t1);
    RETURN(rc);
}

IOL_REAL(int, dup3, (int, int, int));
IOL_EXPORT int dup3(int fd, int fd2, int flags)
{
    BEGIN(dup3, -1);
    if (iol_skip())
        return real_dup3(fd, fd2, flags);
    PRE();
    int rc = real_dup3(fd, fd2, flags);
    POST();
    if (rc >= 0)
        duped(fd, rc, t0, t1);
    RETURN(rc);
}

/* fcntl: only F_DUPFD/F_DUPFD_CLOEXEC are recorded; the argument is passed on as a
   pointer-sized value, as glibc itself does */
#define FCNTL_WRAPPER(name)                                                             \
    IOL_REAL(int, name, (int, int, ...));                                               \
    IOL_EXPORT int name(int fd, int cmd, ...)                                          \
    {                                                                                   \
        va_list ap;                                                                     \
        va_start(ap, cmd);                                                              \
        void *arg = va_arg(ap, void *);                                                 \
        va_end(ap);                                                                     \
        BEGIN(name, -1);                                                                \
        if ((cmd != F_DUPFD && cmd != F_DUPFD_CLOEXEC) || iol_skip())                   \
            return real_##name(fd, cmd, arg);                                           \
        PRE();                                                                          \
        int rc = real_##name(fd, cmd, arg);                                             \
        POST();                                                                         \
        if (rc >= 0)                                                                    \
            duped(fd, rc, t0, t1);                                                      \
        RETURN(rc);                                                                     \
    }

FCNTL_WRAPPER(fcntl)
FCNTL_WRAPPER(fcntl64)

#define MMAP_WRAPPER(name)                                                              \
    IOL_REAL(void *, name, (void *, size_t, int, int, int, off_t));                     \
    IOL_EXPORT void *name(void *addr, size_t len, int prot, int flags, int fd, off_t off) \
    {                                                                                   \
        BEGIN(name, MAP_FAILED);                                                        \
        if ((flags & MAP_ANONYMOUS) || fd < 0 || iol_skip())                            \
            return real_##name(addr, len, prot, flags, fd, off);                        \
        PRE();                                                                          \
        void *rc = real_##name(addr, len, prot, flags, fd, off);                        \
        POST();                                                                         \
        if (rc != MAP_FAILED)                                                           \
            fd_op(IOL_OP_MMAP, fd, t0, t1);                                             \
        RETURN(rc);                                                                     \
    }

MMAP_WRAPPER(mmap)
MMAP_WRAPPER(mmap64)

/* ---- working directory (for relative paths) ---------------------------------------- */

IOL_REAL(int, chdir, (const char *));
IOL_EXPORT int chdir(const char *path)
{
    BEGIN(chdir, -1);
    int rc = real_chdir(path);
    int e = errno;
    if (rc == 0 && g.state == IOL_ON)
        iol_cwd_refresh();
    errno = e;
    return rc;
}

IOL_REAL(int, fchdir, (int));
IOL_EXPORT int fchdir(int fd)
{
    BEGIN(fchdir, -1);
    int rc = real_fchdir(fd);
    int e = errno;
    if (rc == 0 && g.state == IOL_ON)
        iol_cwd_refresh();
    errno = e;
    return rc;
}

/* ---- _FORTIFY_SOURCE forms (default on some distributions at -O2) ------------------ */

IOL_REAL(ssize_t, __read_chk, (int, void *, size_t, size_t));
IOL_EXPORT ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
    BEGIN(__read_chk, -1);
    if (iol_skip())
        return real___read_chk(fd, buf, n, buflen);
    PRE();
    ssize_t rc = real___read_chk(fd, buf, n, buflen);
    POST();
    if (rc >= 0)
        data_op(IOL_OP_READ, fd, -1, rc, t0, t1);
    RETURN(rc);
}

#define PREAD_CHK_WRAPPER(name)                                                         \
    IOL_REAL(ssize_t, name, (int, void *, size_t, off_t, size_t));                      \
    IOL_EXPORT ssize_t name(int fd, void *buf, size_t n, off_t off, size_t buflen)     \
    {                                                                                   \
        BEGIN(name, -1);                                                                \
        if (iol_skip())                                                                 \
            return real_##name(fd, buf, n, off, buflen);                                \
        PRE();                                                                          \
        ssize_t rc = real_##name(fd, buf, n, off, buflen);                              \
        POST();                                                                         \
        if (rc >= 0)                                                                    \
            data_op(IOL_OP_READ, fd, off < 0 ? 0 : off, rc, t0, t1);                    \
        RETURN(rc);                                                                     \
    }

PREAD_CHK_WRAPPER(__pread_chk)
PREAD_CHK_WRAPPER(__pread64_chk)
