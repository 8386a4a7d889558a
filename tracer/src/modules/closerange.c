/*
 * closerange.c - close_range() and closefrom(): many fds closed in one call.
 *
 * Without these wrappers the fd table keeps the closed files, and the next pipe or
 * socket that reuses such an fd has its I/O counted as I/O of the closed file. Each
 * traced fd in the range is recorded as closed and forgotten; with CLOSE_RANGE_CLOEXEC
 * the fds stay open, so nothing changes. The scan stops at the table's size (the
 * RLIMIT_NOFILE the process started with, at most 2^20 fds).
 */
#include "posix.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

/* Before the real call: let a written Lustre file re-read its layout (as close() does). */
static void closing(unsigned first, unsigned last)
{
    if (!g.layouts_on)
        return;
    for (unsigned fd = first; fd <= last && fd < (unsigned)g.fd_cap; fd++)
        if (g.fds[fd].file)
            iol_layout_closing((int)fd);
}

static void forget(unsigned first, unsigned last, uint64_t t0, uint64_t t1)
{
    for (unsigned fd = first; fd <= last && fd < (unsigned)g.fd_cap; fd++) {
        uint32_t file = iol_fd_file((int)fd);
        if (!file)
            continue;
        iol_fd_set((int)fd, 0, 0);
        iol_record(IOL_OP_CLOSE, IOL_LAYER_POSIX, file, -1, 0, t0, t1);
    }
}

IOL_REAL(int, close_range, (unsigned, unsigned, int));
IOL_EXPORT int close_range(unsigned first, unsigned last, int flags)
{
    BEGIN(close_range, -1);
    if ((flags & CLOSE_RANGE_CLOEXEC) || iol_skip())
        return real_close_range(first, last, flags);
    closing(first, last);
    PRE();
    int rc = real_close_range(first, last, flags);
    POST();
    if (rc == 0)
        forget(first, last, t0, t1);
    RETURN(rc);
}

IOL_REAL(void, closefrom, (int));
IOL_EXPORT void closefrom(int lowfd)
{
    IOL_RESOLVE(closefrom);
    if (UNLIKELY(!real_closefrom))
        return;
    if (lowfd < 0 || iol_skip()) {
        real_closefrom(lowfd);
        return;
    }
    closing((unsigned)lowfd, ~0U);
    PRE();
    real_closefrom(lowfd); /* cannot fail: glibc aborts if it cannot close them all */
    POST();
    forget((unsigned)lowfd, ~0U, t0, t1);
    iol_guard = 0;
    errno = saved_errno;
}
