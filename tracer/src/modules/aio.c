/*
 * aio.c - POSIX AIO: aio_read/aio_write/lio_listio requests, counted at aio_return().
 *
 * The bytes a request moved are known only when the program collects its result, so the
 * record is made by aio_return() (once per request, as POSIX requires): a read or write
 * of the returned bytes at the request's aio_offset on its aio_fildes. The operation is
 * the request's aio_lio_opcode: the program sets it for lio_listio(), and glibc sets it
 * when aio_read()/aio_write() queue a request (LIO_READ/LIO_WRITE, 64-bit forms with
 * bit 7 set). The record's time is the collection, not the transfer, which the tracer
 * cannot see (glibc's helper threads do it through internal calls). A request never
 * collected is not counted.
 */
#include "posix.h"

#include <aio.h>

static inline void collected(const struct aiocb *cb, ssize_t rc, uint64_t t0, uint64_t t1)
{
    int code = cb->aio_lio_opcode & 127;
    if (code == LIO_READ || code == LIO_WRITE)
        data_op(code == LIO_READ ? IOL_OP_READ : IOL_OP_WRITE, cb->aio_fildes,
                cb->aio_offset < 0 ? 0 : (int64_t)cb->aio_offset, rc, t0, t1);
}

#define AIO_RETURN_WRAPPER(name, cbt)                                                   \
    IOL_REAL(ssize_t, name, (cbt *));                                                   \
    IOL_EXPORT ssize_t name(cbt *cb)                                                   \
    {                                                                                   \
        BEGIN(name, -1);                                                                \
        if (iol_skip())                                                                 \
            return real_##name(cb);                                                     \
        PRE();                                                                          \
        ssize_t rc = real_##name(cb);                                                   \
        POST();                                                                         \
        if (rc >= 0)                                                                    \
            collected((const struct aiocb *)cb, rc, t0, t1);                            \
        RETURN(rc);                                                                     \
    }

AIO_RETURN_WRAPPER(aio_return, struct aiocb)
AIO_RETURN_WRAPPER(aio_return64, struct aiocb64)
