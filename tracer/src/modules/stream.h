/*
 * stream.h - the STDIO layer's record helpers, shared by stdio.c (open/close, blocks,
 * seeks) and stdio_text.c (characters, lines, formatted output): a stream is found
 * through its fd, and its offset (spos) is tracked apart from the POSIX one.
 */
#ifndef IOL_STREAM_H
#define IOL_STREAM_H

#include "posix.h"

#include <stdio.h>

IOL_REAL(off_t, ftello, (FILE *));

static inline int fd_of(FILE *fp) { return fp ? fp->_fileno : -1; }

static inline void sdata(int op, FILE *fp, int64_t n, uint64_t t0, uint64_t t1)
{
    struct iol_fd *f = iol_fd(fd_of(fp));
    if (!f || !f->file)
        return;
    int64_t off = f->spos;
    f->spos += n;
    iol_record(op, IOL_LAYER_STDIO, f->file, off, n, t0, t1);
}

static inline void smeta(int op, FILE *fp, uint64_t t0, uint64_t t1)
{
    uint32_t file = iol_fd_file(fd_of(fp));
    if (file)
        iol_record(op, IOL_LAYER_STDIO, file, -1, 0, t0, t1);
}

static inline int64_t tell(FILE *fp)
{
    IOL_RESOLVE(ftello);
    return real_ftello ? (int64_t)real_ftello(fp) : -1;
}

#endif /* IOL_STREAM_H */
