/*
 * stdio_text.c - the STDIO layer's character, line and formatted calls, and the
 * position calls that are not seeks by offset (rewind, fsetpos, fgetpos, ungetc).
 *
 * Character calls are hot: consecutive ones on a stream are contiguous 1-byte accesses
 * merged into one record, and a call served from the buffer is not timed (char_merged;
 * docs/performance.md has the measured cost).
 * glibc inlines the *_unlocked character calls and getchar/putchar into the program at
 * -O2 (bits/stdio.h), so those reach the tracer only from unoptimised code or through a
 * function pointer; the wrappers below catch every call that is made through the PLT.
 * dprintf() writes to a file descriptor, so it is recorded in the POSIX layer.
 */
#include "stream.h"

#include <stdarg.h>
#include <string.h>

/* bits/stdio.h makes these macros when optimising; the wrappers need the names */
#undef fread_unlocked
#undef fwrite_unlocked

/* ---- characters ---------------------------------------------------------------------- */

/*
 * A character call served from the FILE buffer (no system call) costs ~5 ns; two clock
 * reads would cost more than the call (rdtsc traps on some VMs: 130 ns here). So such a
 * call, when it continues this thread's last record (same op, stream, 1-byte contiguous
 * run), only bumps that record's count: no clock read, no duration (it did no I/O). The
 * record's end time is then that of the last call that was timed (the one that started
 * the run, or refilled/flushed the buffer). Any other call takes the timed path.
 */
static inline int char_merged(int op, FILE *fp)
{
    struct iol_fd *f = iol_fd(fd_of(fp));
    struct iol_chunk *c = iol_chunk_tls;
    if (!f || !f->file || !c || !c->n)
        return 0;
    struct iol_record *r = &c->recs[c->n - 1];
    if (r->op != op || r->layer != IOL_LAYER_STDIO || r->file != f->file || r->size != 1 ||
        r->offset + (int64_t)r->count * (r->count == 1 ? 1 : r->stride) != f->spos ||
        (r->count > 1 && r->stride != 1))
        return 0;
    r->stride = 1;
    r->count++;
    f->spos++;
    return 1;
}

/* Untimed when buffered and mergeable, else the usual timed wrapper body. */
#define CHAR_BODY(call, buffered, op, fpx)                                                  if (iol_skip())                                                                             return call;                                                                        if (buffered) {                                                                             int rc = call;                                                                          int e = errno;                                                                          iol_guard = 1;                                                                          int done = rc == EOF || char_merged(op, fpx);                                           iol_guard = 0;                                                                          errno = e;                                                                              if (done)                                                                                   return rc;                                                                          uint64_t t = iol_now();                                                                 e = errno;                                                                              iol_guard = 1;                                                                          sdata(op, fpx, 1, t, t);                                                                iol_guard = 0;                                                                          errno = e;                                                                              return rc;                                                                          }                                                                                       PRE();                                                                                  int rc = call;                                                                          POST();                                                                                 if (rc != EOF)                                                                              sdata(op, fpx, 1, t0, t1);                                                          RETURN(rc)

#define WBUF(fp) ((fp)->_IO_write_ptr < (fp)->_IO_write_end)
#define RBUF(fp) ((fp)->_IO_read_ptr < (fp)->_IO_read_end)

#define PUTC_WRAPPER(name)                                                              \
    IOL_REAL(int, name, (int, FILE *));                                                 \
    IOL_EXPORT int name(int c, FILE *fp)                                               \
    {                                                                                   \
        BEGIN(name, EOF);                                                               \
        CHAR_BODY(real_##name(c, fp), WBUF(fp), IOL_OP_WRITE, fp);                      \
    }

PUTC_WRAPPER(fputc)
PUTC_WRAPPER(putc)
PUTC_WRAPPER(fputc_unlocked)
PUTC_WRAPPER(putc_unlocked)

#define GETC_WRAPPER(name)                                                              \
    IOL_REAL(int, name, (FILE *));                                                      \
    IOL_EXPORT int name(FILE *fp)                                                      \
    {                                                                                   \
        BEGIN(name, EOF);                                                               \
        CHAR_BODY(real_##name(fp), RBUF(fp), IOL_OP_READ, fp);                          \
    }

GETC_WRAPPER(fgetc)
GETC_WRAPPER(getc)
GETC_WRAPPER(fgetc_unlocked)
GETC_WRAPPER(getc_unlocked)

#define PUTCHAR_WRAPPER(name)                                                           \
    IOL_REAL(int, name, (int));                                                         \
    IOL_EXPORT int name(int c)                                                         \
    {                                                                                   \
        BEGIN(name, EOF);                                                               \
        CHAR_BODY(real_##name(c), WBUF(stdout), IOL_OP_WRITE, stdout);                  \
    }

PUTCHAR_WRAPPER(putchar)
PUTCHAR_WRAPPER(putchar_unlocked)

#define GETCHAR_WRAPPER(name)                                                           \
    IOL_REAL(int, name, (void));                                                        \
    IOL_EXPORT int name(void)                                                          \
    {                                                                                   \
        BEGIN(name, EOF);                                                               \
        CHAR_BODY(real_##name(), RBUF(stdin), IOL_OP_READ, stdin);                      \
    }

GETCHAR_WRAPPER(getchar)
GETCHAR_WRAPPER(getchar_unlocked)

/* ungetc() moves the stream back one byte: the next read starts there again */
IOL_REAL(int, ungetc, (int, FILE *));
IOL_EXPORT int ungetc(int c, FILE *fp)
{
    BEGIN(ungetc, EOF);
    int rc = real_ungetc(c, fp);
    struct iol_fd *f = iol_fd(fd_of(fp));
    if (rc != EOF && f && f->file && f->spos > 0)
        f->spos--;
    return rc;
}

/* ---- lines and blocks ---------------------------------------------------------------- */

#define GETDELIM_WRAPPER(name)                                                          \
    IOL_REAL(ssize_t, name, (char **, size_t *, int, FILE *));                          \
    IOL_EXPORT ssize_t name(char **line, size_t *cap, int delim, FILE *fp)             \
    {                                                                                   \
        BEGIN(name, -1);                                                                \
        if (iol_skip())                                                                 \
            return real_##name(line, cap, delim, fp);                                   \
        PRE();                                                                          \
        ssize_t rc = real_##name(line, cap, delim, fp);                                 \
        POST();                                                                         \
        if (rc > 0)                                                                     \
            sdata(IOL_OP_READ, fp, rc, t0, t1);                                         \
        RETURN(rc);                                                                     \
    }

GETDELIM_WRAPPER(getdelim)
GETDELIM_WRAPPER(__getdelim)

IOL_REAL(ssize_t, getline, (char **, size_t *, FILE *));
IOL_EXPORT ssize_t getline(char **line, size_t *cap, FILE *fp)
{
    BEGIN(getline, -1);
    if (iol_skip())
        return real_getline(line, cap, fp);
    PRE();
    ssize_t rc = real_getline(line, cap, fp);
    POST();
    if (rc > 0)
        sdata(IOL_OP_READ, fp, rc, t0, t1);
    RETURN(rc);
}

IOL_REAL(int, puts, (const char *));
IOL_EXPORT int puts(const char *s)
{
    BEGIN(puts, EOF);
    if (iol_skip())
        return real_puts(s);
    PRE();
    int rc = real_puts(s);
    POST();
    if (rc >= 0)
        sdata(IOL_OP_WRITE, stdout, (int64_t)strlen(s) + 1, t0, t1);
    RETURN(rc);
}

IOL_REAL(int, fputs_unlocked, (const char *, FILE *));
IOL_EXPORT int fputs_unlocked(const char *s, FILE *fp)
{
    BEGIN(fputs_unlocked, EOF);
    if (iol_skip())
        return real_fputs_unlocked(s, fp);
    PRE();
    int rc = real_fputs_unlocked(s, fp);
    POST();
    if (rc >= 0)
        sdata(IOL_OP_WRITE, fp, (int64_t)strlen(s), t0, t1);
    RETURN(rc);
}

IOL_REAL(char *, fgets_unlocked, (char *, int, FILE *));
IOL_EXPORT char *fgets_unlocked(char *s, int n, FILE *fp)
{
    BEGIN(fgets_unlocked, NULL);
    if (iol_skip())
        return real_fgets_unlocked(s, n, fp);
    PRE();
    char *rc = real_fgets_unlocked(s, n, fp);
    POST();
    if (rc)
        sdata(IOL_OP_READ, fp, (int64_t)strlen(rc), t0, t1);
    RETURN(rc);
}

IOL_REAL(char *, __fgets_unlocked_chk, (char *, size_t, int, FILE *));
IOL_EXPORT char *__fgets_unlocked_chk(char *s, size_t size, int n, FILE *fp)
{
    BEGIN(__fgets_unlocked_chk, NULL);
    if (iol_skip())
        return real___fgets_unlocked_chk(s, size, n, fp);
    PRE();
    char *rc = real___fgets_unlocked_chk(s, size, n, fp);
    POST();
    if (rc)
        sdata(IOL_OP_READ, fp, (int64_t)strlen(rc), t0, t1);
    RETURN(rc);
}

#define FRW_UNLOCKED_WRAPPER(name, op, cq)                                              \
    IOL_REAL(size_t, name, (cq void *, size_t, size_t, FILE *));                        \
    IOL_EXPORT size_t name(cq void *ptr, size_t size, size_t n, FILE *fp)              \
    {                                                                                   \
        BEGIN(name, 0);                                                                 \
        if (iol_skip())                                                                 \
            return real_##name(ptr, size, n, fp);                                       \
        PRE();                                                                          \
        size_t rc = real_##name(ptr, size, n, fp);                                      \
        POST();                                                                         \
        sdata(op, fp, (int64_t)(rc * size), t0, t1);                                    \
        RETURN(rc);                                                                     \
    }

FRW_UNLOCKED_WRAPPER(fread_unlocked, IOL_OP_READ, )
FRW_UNLOCKED_WRAPPER(fwrite_unlocked, IOL_OP_WRITE, const)

IOL_REAL(size_t, __fread_unlocked_chk, (void *, size_t, size_t, size_t, FILE *));
IOL_EXPORT size_t __fread_unlocked_chk(void *ptr, size_t ptrlen, size_t size, size_t n,
                                       FILE *fp)
{
    BEGIN(__fread_unlocked_chk, 0);
    if (iol_skip())
        return real___fread_unlocked_chk(ptr, ptrlen, size, n, fp);
    PRE();
    size_t rc = real___fread_unlocked_chk(ptr, ptrlen, size, n, fp);
    POST();
    sdata(IOL_OP_READ, fp, (int64_t)(rc * size), t0, t1);
    RETURN(rc);
}

/* ---- formatted output: variadic forms forward to the v* forms ------------------------- */

IOL_REAL(int, vprintf, (const char *, va_list));
IOL_EXPORT int vprintf(const char *fmt, va_list ap)
{
    BEGIN(vprintf, -1);
    if (iol_skip())
        return real_vprintf(fmt, ap);
    PRE();
    int rc = real_vprintf(fmt, ap);
    POST();
    if (rc >= 0)
        sdata(IOL_OP_WRITE, stdout, rc, t0, t1);
    RETURN(rc);
}

IOL_EXPORT int printf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = vprintf(fmt, ap);
    va_end(ap);
    return rc;
}

IOL_REAL(int, __vprintf_chk, (int, const char *, va_list));
IOL_EXPORT int __vprintf_chk(int flag, const char *fmt, va_list ap)
{
    BEGIN(__vprintf_chk, -1);
    if (iol_skip())
        return real___vprintf_chk(flag, fmt, ap);
    PRE();
    int rc = real___vprintf_chk(flag, fmt, ap);
    POST();
    if (rc >= 0)
        sdata(IOL_OP_WRITE, stdout, rc, t0, t1);
    RETURN(rc);
}

IOL_EXPORT int __printf_chk(int flag, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = __vprintf_chk(flag, fmt, ap);
    va_end(ap);
    return rc;
}

IOL_REAL(int, vdprintf, (int, const char *, va_list));
IOL_EXPORT int vdprintf(int fd, const char *fmt, va_list ap)
{
    BEGIN(vdprintf, -1);
    if (iol_skip())
        return real_vdprintf(fd, fmt, ap);
    PRE();
    int rc = real_vdprintf(fd, fmt, ap);
    POST();
    if (rc >= 0)
        data_op(IOL_OP_WRITE, fd, -1, rc, t0, t1);
    RETURN(rc);
}

IOL_EXPORT int dprintf(int fd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = vdprintf(fd, fmt, ap);
    va_end(ap);
    return rc;
}

IOL_REAL(int, __vdprintf_chk, (int, int, const char *, va_list));
IOL_EXPORT int __vdprintf_chk(int fd, int flag, const char *fmt, va_list ap)
{
    BEGIN(__vdprintf_chk, -1);
    if (iol_skip())
        return real___vdprintf_chk(fd, flag, fmt, ap);
    PRE();
    int rc = real___vdprintf_chk(fd, flag, fmt, ap);
    POST();
    if (rc >= 0)
        data_op(IOL_OP_WRITE, fd, -1, rc, t0, t1);
    RETURN(rc);
}

IOL_EXPORT int __dprintf_chk(int fd, int flag, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = __vdprintf_chk(fd, flag, fmt, ap);
    va_end(ap);
    return rc;
}

/* ---- positions ------------------------------------------------------------------------ */

static inline void spos_set(FILE *fp, int64_t pos, uint64_t t0, uint64_t t1)
{
    struct iol_fd *f = iol_fd(fd_of(fp));
    if (!f || !f->file || pos < 0)
        return;
    f->spos = pos;
    iol_record(IOL_OP_SEEK, IOL_LAYER_STDIO, f->file, pos, 0, t0, t1);
}

IOL_REAL(void, rewind, (FILE *));
IOL_EXPORT void rewind(FILE *fp)
{
    IOL_RESOLVE(rewind);
    if (UNLIKELY(!real_rewind))
        return;
    if (iol_skip()) {
        real_rewind(fp);
        return;
    }
    PRE();
    real_rewind(fp);
    POST();
    spos_set(fp, 0, t0, t1);
    iol_guard = 0;
    errno = saved_errno;
}

/* fpos_t holds the byte offset in __pos (glibc); fgetpos is a position query, like ftell */
#define FPOS_WRAPPER(name, post, cq)                                                    \
    IOL_REAL(int, name, (FILE *, cq post *));                                           \
    IOL_EXPORT int name(FILE *fp, cq post *pos)                                        \
    {                                                                                   \
        BEGIN(name, -1);                                                                \
        if (iol_skip())                                                                 \
            return real_##name(fp, pos);                                                \
        PRE();                                                                          \
        int rc = real_##name(fp, pos);                                                  \
        POST();                                                                         \
        if (rc == 0)                                                                    \
            spos_set(fp, (int64_t)pos->__pos, t0, t1);                                  \
        RETURN(rc);                                                                     \
    }

FPOS_WRAPPER(fsetpos, fpos_t, const)
FPOS_WRAPPER(fsetpos64, fpos64_t, const)
FPOS_WRAPPER(fgetpos, fpos_t, )
FPOS_WRAPPER(fgetpos64, fpos64_t, )
