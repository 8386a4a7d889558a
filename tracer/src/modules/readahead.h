/*
 * readahead.h - the read-ahead plug-in's hook (SIOX FadviseReadAhead), see readahead.c.
 *
 * The POSIX read wrappers call iol_ra_hook() after every successful read on a traced
 * file. When IOLENS_READAHEAD is not set the hook is one predictable branch on a global
 * flag; nothing else runs.
 */
#ifndef IOLENS_READAHEAD_H
#define IOLENS_READAHEAD_H

#include "../core/iolens.h"

/* 1 when IOLENS_READAHEAD enabled the plug-in (set once, in iol_init). */
IOL_HIDDEN extern int iol_ra_on;

IOL_HIDDEN void iol_ra_read(int fd, uint32_t file, int64_t off, int64_t n);

/* After a read of `n` bytes at `off` on `fd` (open on traced file index `file`). */
static inline void iol_ra_hook(int fd, uint32_t file, int64_t off, int64_t n)
{
    if (UNLIKELY(iol_ra_on))
        iol_ra_read(fd, file, off, n);
}

#endif /* IOLENS_READAHEAD_H */
