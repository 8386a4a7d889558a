/*
 * transfer.c - in-kernel copies: copy_file_range(), sendfile(), splice().
 *
 * `cp`, `cat` (coreutils >= 9) and Python's shutil.copyfile move their data with these,
 * never with read()/write(). Each successful call is recorded as what it is for the two
 * files: a read of the source and a write of the destination, of the bytes returned.
 * An explicit offset pointer is where the copy happened (the fd's offset does not move);
 * a NULL pointer means the fd's own offset, which then advances. Pipes are not files:
 * their fds are untraced, so only the file side of a splice() is recorded.
 */
#include "posix.h"

#include <sys/types.h>

/* Record one copy: `in_off`/`out_off` are the explicit offsets, -1 for the fd's own.
   An offset pointer is read only after a successful call (which advanced it by the bytes
   copied): a bad pointer then fails in the kernel with EFAULT, never in the tracer. */
#define START(p, rc) ((p) ? (int64_t)*(p) - (int64_t)(rc) : -1)
static inline void copied(int in, int64_t in_off, int out, int64_t out_off, int64_t n,
                          uint64_t t0, uint64_t t1)
{
    data_op(IOL_OP_READ, in, in_off, n, t0, t1);
    data_op(IOL_OP_WRITE, out, out_off, n, t0, t1);
}

IOL_REAL(ssize_t, copy_file_range, (int, off64_t *, int, off64_t *, size_t, unsigned));
IOL_EXPORT ssize_t copy_file_range(int in, off64_t *in_off, int out, off64_t *out_off,
                                   size_t len, unsigned flags)
{
    BEGIN(copy_file_range, -1);
    if (iol_skip())
        return real_copy_file_range(in, in_off, out, out_off, len, flags);
    PRE();
    ssize_t rc = real_copy_file_range(in, in_off, out, out_off, len, flags);
    POST();
    if (rc >= 0)
        copied(in, START(in_off, rc), out, START(out_off, rc), rc, t0, t1);
    RETURN(rc);
}

#define SENDFILE_WRAPPER(name, offt)                                                    \
    IOL_REAL(ssize_t, name, (int, int, offt *, size_t));                                \
    IOL_EXPORT ssize_t name(int out, int in, offt *off, size_t count)                  \
    {                                                                                   \
        BEGIN(name, -1);                                                                \
        if (iol_skip())                                                                 \
            return real_##name(out, in, off, count);                                    \
        PRE();                                                                          \
        ssize_t rc = real_##name(out, in, off, count);                                  \
        POST();                                                                         \
        if (rc >= 0)                                                                    \
            copied(in, START(off, rc), out, -1, rc, t0, t1);                            \
        RETURN(rc);                                                                     \
    }

SENDFILE_WRAPPER(sendfile, off_t)
SENDFILE_WRAPPER(sendfile64, off64_t)

IOL_REAL(ssize_t, splice, (int, off64_t *, int, off64_t *, size_t, unsigned));
IOL_EXPORT ssize_t splice(int in, off64_t *in_off, int out, off64_t *out_off, size_t len,
                          unsigned flags)
{
    BEGIN(splice, -1);
    if (iol_skip())
        return real_splice(in, in_off, out, out_off, len, flags);
    PRE();
    ssize_t rc = real_splice(in, in_off, out, out_off, len, flags);
    POST();
    if (rc >= 0)
        copied(in, START(in_off, rc), out, START(out_off, rc), rc, t0, t1);
    RETURN(rc);
}
