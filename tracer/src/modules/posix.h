/*
 * posix.h - the POSIX layer's record helpers, shared by the fd-level modules
 * (posix.c, transfer.c, tmpfiles.c, fsmeta.c, aio.c): one place decides how a call on a
 * file descriptor becomes a record and moves the tracked offset.
 */
#ifndef IOL_POSIX_H
#define IOL_POSIX_H

#include "../core/iolens.h"
#include "readahead.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>
/* Begin a wrapper: resolve `name`; return `fail` with ENOSYS if nothing is there. */
#define BEGIN(name, fail)                                                               \
    IOL_RESOLVE(name);                                                                  \
    if (UNLIKELY(!real_##name)) {                                                       \
        errno = ENOSYS;                                                                 \
        return fail;                                                                    \
    }

/* ---- helpers ----------------------------------------------------------------------- */

/* A data op at `off` (or at the tracked position when off < 0, which it then advances). */
static inline void data_op(int op, int fd, int64_t off, int64_t n, uint64_t t0, uint64_t t1)
{
    struct iol_fd *f = iol_fd(fd);
    if (!f || !f->file)
        return;
    if (off < 0) {
        off = f->pos;
        f->pos += n;
    }
    if (op == IOL_OP_READ)
        iol_ra_hook(fd, f->file, off, n); /* read-ahead plug-in (readahead.c), opt-in */
    iol_record(op, IOL_LAYER_POSIX, f->file, off, n, t0, t1);
}

static inline void fd_op(int op, int fd, uint64_t t0, uint64_t t1)
{
    uint32_t file = iol_fd_file(fd);
    if (file)
        iol_record(op, IOL_LAYER_POSIX, file, -1, 0, t0, t1);
}

static inline void path_op(int op, int dirfd, const char *path, uint64_t t0, uint64_t t1)
{
    uint32_t file = iol_file_at(dirfd, path);
    if (file)
        iol_record(op, IOL_LAYER_POSIX, file, -1, 0, t0, t1);
}

static inline void opened(int fd, int dirfd, const char *path, int flags, uint64_t t0, uint64_t t1)
{
    if (fd < 0)
        return;
    uint32_t file = iol_file_at(dirfd, path);
    int64_t pos = 0;
    if (flags & O_APPEND) {
        long end = syscall(SYS_lseek, fd, 0L, SEEK_END);
        pos = end > 0 ? end : 0;
    }
    iol_fd_set(fd, file, pos);
    if (!file)
        return;
    iol_record(IOL_OP_OPEN, IOL_LAYER_POSIX, file, -1, 0, t0, t1);
    struct iol_fd *f = iol_fd(fd);
    if (f && (flags & O_ACCMODE) != O_RDONLY)
        f->flags |= IOL_FDF_WRITE;
    iol_layout_opened(fd, file, flags); /* Lustre layout (layout.c), after the timing */
}

static inline void duped(int oldfd, int newfd, uint64_t t0, uint64_t t1)
{
    struct iol_fd *o = iol_fd(oldfd), *n = iol_fd(newfd);
    if (!n || newfd == oldfd)
        return;
    if (!o || !o->file) {
        iol_fd_set(newfd, 0, 0);
        return;
    }
    iol_fd_set(newfd, o->file, o->pos);
    n->flags = o->flags;
    iol_record(IOL_OP_DUP, IOL_LAYER_POSIX, o->file, -1, 0, t0, t1);
}

static inline int needs_mode(int flags)
{
    return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE;
}

#endif /* IOL_POSIX_H */
