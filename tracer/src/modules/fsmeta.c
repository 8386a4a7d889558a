/*
 * fsmeta.c - file-system metadata calls beyond open/stat/unlink/rename/mkdir (format 6):
 * truncate and fallocate (TRUNCATE), posix_fadvise (FADVISE), access (ACCESS), link and
 * symlink (LINK), directory listing (READDIR).
 *
 * Same shape as posix.c: call the real function, keep its result and errno, record only
 * successful calls, restore errno. A TRUNCATE record's offset is the length the call set
 * (truncate) or guarantees (fallocate: offset + len); every other op here is a plain
 * metadata record (offset -1). LINK is recorded against the name created (the new path;
 * a symlink's target is only text). READDIR counts the entries readdir() returned on the
 * directory's path; the DIR's descriptor is found with dirfd() (a field read, no system
 * call) and tracked in the fd table from opendir()/fdopendir() to closedir(). glibc's own
 * open/close inside opendir/closedir never reach our wrappers, so closedir() clears the slot.
 * posix_fadvise/posix_fallocate report errors by return value; errno is preserved anyway.
 */
#include "posix.h"

#include <dirent.h>
#include <sys/types.h>

struct dirent64;

/* A metadata record at `off` (-1: none) on the file open as `fd`. */
static inline void fd_at(int op, int fd, int64_t off, uint64_t t0, uint64_t t1)
{
    uint32_t file = iol_fd_file(fd);
    if (file)
        iol_record(op, IOL_LAYER_POSIX, file, off, 0, t0, t1);
}

static inline void path_at(int op, int dirfd, const char *path, int64_t off, uint64_t t0,
                           uint64_t t1)
{
    uint32_t file = iol_file_at(dirfd, path);
    if (file)
        iol_record(op, IOL_LAYER_POSIX, file, off, 0, t0, t1);
}

/* ---- truncate, fallocate ----------------------------------------------------------- */

#define TRUNCATE_WRAPPER(name, offt)                                                    \
    IOL_REAL(int, name, (const char *, offt));                                          \
    IOL_EXPORT int name(const char *path, offt len)                                    \
    {                                                                                   \
        BEGIN(name, -1);                                                                \
        if (iol_skip())                                                                 \
            return real_##name(path, len);                                              \
        PRE();                                                                          \
        int rc = real_##name(path, len);                                                \
        POST();                                                                         \
        if (rc == 0)                                                                    \
            path_at(IOL_OP_TRUNCATE, AT_FDCWD, path, (int64_t)len, t0, t1);             \
        RETURN(rc);                                                                     \
    }

#define FTRUNCATE_WRAPPER(name, offt)                                                   \
    IOL_REAL(int, name, (int, offt));                                                   \
    IOL_EXPORT int name(int fd, offt len)                                              \
    {                                                                                   \
        BEGIN(name, -1);                                                                \
        if (iol_skip())                                                                 \
            return real_##name(fd, len);                                                \
        PRE();                                                                          \
        int rc = real_##name(fd, len);                                                  \
        POST();                                                                         \
        if (rc == 0)                                                                    \
            fd_at(IOL_OP_TRUNCATE, fd, (int64_t)len, t0, t1);                           \
        RETURN(rc);                                                                     \
    }

TRUNCATE_WRAPPER(truncate, off_t)
TRUNCATE_WRAPPER(truncate64, off64_t)
FTRUNCATE_WRAPPER(ftruncate, off_t)
FTRUNCATE_WRAPPER(ftruncate64, off64_t)

#define FALLOCATE_WRAPPER(name, offt)                                                   \
    IOL_REAL(int, name, (int, int, offt, offt));                                        \
    IOL_EXPORT int name(int fd, int mode, offt off, offt len)                          \
    {                                                                                   \
        BEGIN(name, -1);                                                                \
        if (iol_skip())                                                                 \
            return real_##name(fd, mode, off, len);                                     \
        PRE();                                                                          \
        int rc = real_##name(fd, mode, off, len);                                       \
        POST();                                                                         \
        if (rc == 0)                                                                    \
            fd_at(IOL_OP_TRUNCATE, fd, (int64_t)off + (int64_t)len, t0, t1);            \
        RETURN(rc);                                                                     \
    }

/* posix_fallocate and posix_fadvise return an error number (errno untouched) */
#define POSIX_FALLOCATE_WRAPPER(name, offt)                                             \
    IOL_REAL(int, name, (int, offt, offt));                                             \
    IOL_EXPORT int name(int fd, offt off, offt len)                                    \
    {                                                                                   \
        BEGIN(name, ENOSYS);                                                            \
        if (iol_skip())                                                                 \
            return real_##name(fd, off, len);                                           \
        PRE();                                                                          \
        int rc = real_##name(fd, off, len);                                             \
        POST();                                                                         \
        if (rc == 0)                                                                    \
            fd_at(IOL_OP_TRUNCATE, fd, (int64_t)off + (int64_t)len, t0, t1);            \
        RETURN(rc);                                                                     \
    }

FALLOCATE_WRAPPER(fallocate, off_t)
FALLOCATE_WRAPPER(fallocate64, off64_t)
POSIX_FALLOCATE_WRAPPER(posix_fallocate, off_t)
POSIX_FALLOCATE_WRAPPER(posix_fallocate64, off64_t)

/* ---- posix_fadvise (the read-ahead plug-in issues its own by system call) --------- */

#define FADVISE_WRAPPER(name, offt)                                                     \
    IOL_REAL(int, name, (int, offt, offt, int));                                        \
    IOL_EXPORT int name(int fd, offt off, offt len, int advice)                        \
    {                                                                                   \
        BEGIN(name, ENOSYS);                                                            \
        if (iol_skip())                                                                 \
            return real_##name(fd, off, len, advice);                                   \
        PRE();                                                                          \
        int rc = real_##name(fd, off, len, advice);                                     \
        POST();                                                                         \
        if (rc == 0)                                                                    \
            fd_at(IOL_OP_FADVISE, fd, -1, t0, t1);                                      \
        RETURN(rc);                                                                     \
    }

FADVISE_WRAPPER(posix_fadvise, off_t)
FADVISE_WRAPPER(posix_fadvise64, off64_t)

/* ---- access ------------------------------------------------------------------------ */

#define ACCESS_WRAPPER(name)                                                            \
    IOL_REAL(int, name, (const char *, int));                                           \
    IOL_EXPORT int name(const char *path, int mode)                                    \
    {                                                                                   \
        BEGIN(name, -1);                                                                \
        if (iol_skip())                                                                 \
            return real_##name(path, mode);                                             \
        PRE();                                                                          \
        int rc = real_##name(path, mode);                                               \
        POST();                                                                         \
        if (rc == 0)                                                                    \
            path_at(IOL_OP_ACCESS, AT_FDCWD, path, -1, t0, t1);                         \
        RETURN(rc);                                                                     \
    }

ACCESS_WRAPPER(access)
ACCESS_WRAPPER(euidaccess)
ACCESS_WRAPPER(eaccess)

IOL_REAL(int, faccessat, (int, const char *, int, int));
IOL_EXPORT int faccessat(int dirfd, const char *path, int mode, int flags)
{
    BEGIN(faccessat, -1);
    if (iol_skip())
        return real_faccessat(dirfd, path, mode, flags);
    PRE();
    int rc = real_faccessat(dirfd, path, mode, flags);
    POST();
    if (rc == 0)
        path_at(IOL_OP_ACCESS, dirfd, path, -1, t0, t1);
    RETURN(rc);
}

/* ---- link, symlink: recorded against the new name ---------------------------------- */

IOL_REAL(int, link, (const char *, const char *));
IOL_EXPORT int link(const char *from, const char *to)
{
    BEGIN(link, -1);
    if (iol_skip())
        return real_link(from, to);
    PRE();
    int rc = real_link(from, to);
    POST();
    if (rc == 0)
        path_at(IOL_OP_LINK, AT_FDCWD, to, -1, t0, t1);
    RETURN(rc);
}

IOL_REAL(int, linkat, (int, const char *, int, const char *, int));
IOL_EXPORT int linkat(int fromfd, const char *from, int tofd, const char *to, int flags)
{
    BEGIN(linkat, -1);
    if (iol_skip())
        return real_linkat(fromfd, from, tofd, to, flags);
    PRE();
    int rc = real_linkat(fromfd, from, tofd, to, flags);
    POST();
    if (rc == 0)
        path_at(IOL_OP_LINK, tofd, to, -1, t0, t1);
    RETURN(rc);
}

IOL_REAL(int, symlink, (const char *, const char *));
IOL_EXPORT int symlink(const char *target, const char *path)
{
    BEGIN(symlink, -1);
    if (iol_skip())
        return real_symlink(target, path);
    PRE();
    int rc = real_symlink(target, path);
    POST();
    if (rc == 0)
        path_at(IOL_OP_LINK, AT_FDCWD, path, -1, t0, t1);
    RETURN(rc);
}

IOL_REAL(int, symlinkat, (const char *, int, const char *));
IOL_EXPORT int symlinkat(const char *target, int dirfd, const char *path)
{
    BEGIN(symlinkat, -1);
    if (iol_skip())
        return real_symlinkat(target, dirfd, path);
    PRE();
    int rc = real_symlinkat(target, dirfd, path);
    POST();
    if (rc == 0)
        path_at(IOL_OP_LINK, dirfd, path, -1, t0, t1);
    RETURN(rc);
}

/* ---- directory listing ------------------------------------------------------------- */

IOL_REAL(DIR *, opendir, (const char *));
IOL_EXPORT DIR *opendir(const char *path)
{
    BEGIN(opendir, NULL);
    if (iol_skip())
        return real_opendir(path);
    DIR *d = real_opendir(path);
    int saved_errno = errno;
    iol_guard = 1;
    if (d)
        iol_fd_set(dirfd(d), iol_file_at(AT_FDCWD, path), 0);
    iol_guard = 0;
    errno = saved_errno;
    return d;
}

/* fdopendir: the descriptor keeps whatever file the open wrapper gave it */

#define READDIR_WRAPPER(name, ent)                                                      \
    IOL_REAL(struct ent *, name, (DIR *));                                              \
    IOL_EXPORT struct ent *name(DIR *d)                                                \
    {                                                                                   \
        BEGIN(name, NULL);                                                              \
        if (iol_skip())                                                                 \
            return real_##name(d);                                                      \
        PRE();                                                                          \
        struct ent *rc = real_##name(d);                                                \
        POST();                                                                         \
        if (rc)                                                                         \
            fd_at(IOL_OP_READDIR, dirfd(d), -1, t0, t1);                                \
        RETURN(rc);                                                                     \
    }

READDIR_WRAPPER(readdir, dirent)
READDIR_WRAPPER(readdir64, dirent64)

IOL_REAL(int, closedir, (DIR *));
IOL_EXPORT int closedir(DIR *d)
{
    BEGIN(closedir, -1);
    __asm__("" : "+r"(d)); /* dirent.h says nonnull, but glibc fails NULL with EINVAL */
    if (d && g.state == IOL_ON) {
        int fd = dirfd(d);
        if (fd >= 0)
            iol_fd_set(fd, 0, 0); /* glibc closes it internally, unseen by close() */
    }
    return real_closedir(d);
}
