/*
 * stdio.c - the STDIO layer: FILE streams.
 *
 * glibc's stdio does its own read()/write() through internal aliases, so those calls do
 * not reach posix.c and nothing is counted twice. A stream is found through its file
 * descriptor (fp->_fileno); its offset is tracked separately from the POSIX one (spos).
 * Variadic functions are forwarded to the v* forms. fscanf's byte count is the change of
 * ftello() across the call (Darshan does the same).
 */
#include "stream.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static void sopened(FILE *fp, const char *path, const char *mode, uint64_t t0, uint64_t t1)
{
    int fd = fd_of(fp);
    uint32_t file = path ? iol_file_of_path(path) : iol_fd_file(fd);
    struct iol_fd *f = iol_fd(fd);
    if (!f || !file)
        return;
    if (path) {
        iol_fd_set(fd, file, 0);
        if (mode && (strchr(mode, 'w') || strchr(mode, 'a') || strchr(mode, '+')))
            f->flags |= IOL_FDF_WRITE;
    }
    f->spos = 0;
    if (mode && (mode[0] == 'a' || !path)) {
        int64_t p = tell(fp);
        f->spos = p > 0 ? p : 0;
    }
    iol_record(IOL_OP_OPEN, IOL_LAYER_STDIO, file, -1, 0, t0, t1);
    if (path)
        iol_layout_opened(fd, file, 0); /* Lustre layout (layout.c), after the timing */
}

#define FOPEN_WRAPPER(name)                                                             \
    IOL_REAL(FILE *, name, (const char *, const char *));                               \
    IOL_EXPORT FILE *name(const char *path, const char *mode)                          \
    {                                                                                   \
        BEGIN(name, NULL);                                                              \
        if (iol_skip())                                                                 \
            return real_##name(path, mode);                                             \
        PRE();                                                                          \
        FILE *rc = real_##name(path, mode);                                             \
        POST();                                                                         \
        if (rc)                                                                         \
            sopened(rc, path, mode, t0, t1);                                            \
        RETURN(rc);                                                                     \
    }

FOPEN_WRAPPER(fopen)
FOPEN_WRAPPER(fopen64)

#define FREOPEN_WRAPPER(name)                                                           \
    IOL_REAL(FILE *, name, (const char *, const char *, FILE *));                       \
    IOL_EXPORT FILE *name(const char *path, const char *mode, FILE *fp)                \
    {                                                                                   \
        BEGIN(name, NULL);                                                              \
        if (iol_skip())                                                                 \
            return real_##name(path, mode, fp);                                         \
        PRE();                                                                          \
        int old = fd_of(fp);                                                            \
        FILE *rc = real_##name(path, mode, fp);                                         \
        POST();                                                                         \
        if (rc && path) {                                                               \
            if (old != fd_of(rc))                                                       \
                iol_fd_set(old, 0, 0);                                                  \
            sopened(rc, path, mode, t0, t1);                                            \
        }                                                                               \
        RETURN(rc);                                                                     \
    }

FREOPEN_WRAPPER(freopen)
FREOPEN_WRAPPER(freopen64)

IOL_REAL(FILE *, fdopen, (int, const char *));
IOL_EXPORT FILE *fdopen(int fd, const char *mode)
{
    BEGIN(fdopen, NULL);
    if (iol_skip())
        return real_fdopen(fd, mode);
    PRE();
    FILE *rc = real_fdopen(fd, mode);
    POST();
    if (rc)
        sopened(rc, NULL, mode, t0, t1);
    RETURN(rc);
}

IOL_REAL(int, fclose, (FILE *));
IOL_EXPORT int fclose(FILE *fp)
{
    BEGIN(fclose, EOF);
    if (iol_skip())
        return real_fclose(fp);
    int fd = fd_of(fp);
    iol_layout_closing(fd); /* a PFL layout the writes grew (untimed; errno kept) */
    PRE();
    uint32_t file = iol_fd_file(fd);
    int rc = real_fclose(fp);
    POST();
    if (file) {
        iol_fd_set(fd, 0, 0);
        if (rc == 0)
            iol_record(IOL_OP_CLOSE, IOL_LAYER_STDIO, file, -1, 0, t0, t1);
    }
    RETURN(rc);
}

IOL_REAL(size_t, fread, (void *, size_t, size_t, FILE *));
IOL_EXPORT size_t fread(void *ptr, size_t size, size_t n, FILE *fp)
{
    BEGIN(fread, 0);
    if (iol_skip())
        return real_fread(ptr, size, n, fp);
    PRE();
    size_t rc = real_fread(ptr, size, n, fp);
    POST();
    sdata(IOL_OP_READ, fp, (int64_t)(rc * size), t0, t1);
    RETURN(rc);
}

IOL_REAL(size_t, fwrite, (const void *, size_t, size_t, FILE *));
IOL_EXPORT size_t fwrite(const void *ptr, size_t size, size_t n, FILE *fp)
{
    BEGIN(fwrite, 0);
    if (iol_skip())
        return real_fwrite(ptr, size, n, fp);
    PRE();
    size_t rc = real_fwrite(ptr, size, n, fp);
    POST();
    sdata(IOL_OP_WRITE, fp, (int64_t)(rc * size), t0, t1);
    RETURN(rc);
}

static void sseek(FILE *fp, int64_t off, int whence, uint64_t t0, uint64_t t1)
{
    struct iol_fd *f = iol_fd(fd_of(fp));
    if (!f || !f->file)
        return;
    int64_t pos = whence == SEEK_SET ? off : tell(fp);
    if (pos >= 0)
        f->spos = pos;
    iol_record(IOL_OP_SEEK, IOL_LAYER_STDIO, f->file, pos >= 0 ? pos : 0, 0, t0, t1);
}

#define FSEEK_WRAPPER(name, offt)                                                       \
    IOL_REAL(int, name, (FILE *, offt, int));                                           \
    IOL_EXPORT int name(FILE *fp, offt off, int whence)                                \
    {                                                                                   \
        BEGIN(name, -1);                                                                \
        if (iol_skip())                                                                 \
            return real_##name(fp, off, whence);                                        \
        PRE();                                                                          \
        int rc = real_##name(fp, off, whence);                                          \
        POST();                                                                         \
        if (rc == 0)                                                                    \
            sseek(fp, (int64_t)off, whence, t0, t1);                                    \
        RETURN(rc);                                                                     \
    }

FSEEK_WRAPPER(fseek, long)
FSEEK_WRAPPER(fseeko, off_t)
FSEEK_WRAPPER(fseeko64, off_t)

/* ftell is a position query: counted as a seek, like lseek(fd, 0, SEEK_CUR) */
#define FTELL_WRAPPER(name, offt)                                                       \
    IOL_REAL(offt, name, (FILE *));                                                     \
    IOL_EXPORT offt name(FILE *fp)                                                     \
    {                                                                                   \
        BEGIN(name, -1);                                                                \
        if (iol_skip())                                                                 \
            return real_##name(fp);                                                     \
        PRE();                                                                          \
        offt rc = real_##name(fp);                                                      \
        POST();                                                                         \
        struct iol_fd *f = iol_fd(fd_of(fp));                                           \
        if (rc >= 0 && f && f->file) {                                                  \
            f->spos = rc;                                                               \
            iol_record(IOL_OP_SEEK, IOL_LAYER_STDIO, f->file, rc, 0, t0, t1);           \
        }                                                                               \
        RETURN(rc);                                                                     \
    }

FTELL_WRAPPER(ftell, long)
FTELL_WRAPPER(ftello64, off_t)

IOL_EXPORT off_t ftello(FILE *fp)
{
    BEGIN(ftello, -1);
    if (iol_skip())
        return real_ftello(fp);
    PRE();
    off_t rc = real_ftello(fp);
    POST();
    struct iol_fd *f = iol_fd(fd_of(fp));
    if (rc >= 0 && f && f->file) {
        f->spos = rc;
        iol_record(IOL_OP_SEEK, IOL_LAYER_STDIO, f->file, rc, 0, t0, t1);
    }
    RETURN(rc);
}

IOL_REAL(int, fflush, (FILE *));
IOL_EXPORT int fflush(FILE *fp)
{
    BEGIN(fflush, EOF);
    if (!fp || iol_skip())
        return real_fflush(fp);
    PRE();
    int rc = real_fflush(fp);
    POST();
    if (rc == 0)
        smeta(IOL_OP_FLUSH, fp, t0, t1);
    RETURN(rc);
}

IOL_REAL(int, vfprintf, (FILE *, const char *, va_list));
IOL_EXPORT int vfprintf(FILE *fp, const char *fmt, va_list ap)
{
    BEGIN(vfprintf, -1);
    if (iol_skip())
        return real_vfprintf(fp, fmt, ap);
    PRE();
    int rc = real_vfprintf(fp, fmt, ap);
    POST();
    if (rc >= 0)
        sdata(IOL_OP_WRITE, fp, rc, t0, t1);
    RETURN(rc);
}

IOL_EXPORT int fprintf(FILE *fp, const char *fmt, ...)
{
    va_list ap;
    BEGIN(vfprintf, -1);
    va_start(ap, fmt);
    if (iol_skip()) {
        int r = real_vfprintf(fp, fmt, ap);
        va_end(ap);
        return r;
    }
    PRE();
    int rc = real_vfprintf(fp, fmt, ap);
    POST();
    va_end(ap);
    if (rc >= 0)
        sdata(IOL_OP_WRITE, fp, rc, t0, t1);
    RETURN(rc);
}

/* _FORTIFY_SOURCE forms */
IOL_REAL(int, __vfprintf_chk, (FILE *, int, const char *, va_list));
IOL_EXPORT int __vfprintf_chk(FILE *fp, int flag, const char *fmt, va_list ap)
{
    BEGIN(__vfprintf_chk, -1);
    if (iol_skip())
        return real___vfprintf_chk(fp, flag, fmt, ap);
    PRE();
    int rc = real___vfprintf_chk(fp, flag, fmt, ap);
    POST();
    if (rc >= 0)
        sdata(IOL_OP_WRITE, fp, rc, t0, t1);
    RETURN(rc);
}

IOL_EXPORT int __fprintf_chk(FILE *fp, int flag, const char *fmt, ...)
{
    va_list ap;
    BEGIN(__vfprintf_chk, -1);
    va_start(ap, fmt);
    if (iol_skip()) {
        int r = real___vfprintf_chk(fp, flag, fmt, ap);
        va_end(ap);
        return r;
    }
    PRE();
    int rc = real___vfprintf_chk(fp, flag, fmt, ap);
    POST();
    va_end(ap);
    if (rc >= 0)
        sdata(IOL_OP_WRITE, fp, rc, t0, t1);
    RETURN(rc);
}

/* scanf family: bytes consumed = ftello() after - before (0 on unseekable streams) */
#define VSCAN_BODY(realfn)                                                              \
    if (iol_skip())                                                                     \
        return realfn(fp, fmt, ap);                                                     \
    PRE();                                                                              \
    int64_t before = tell(fp);                                                          \
    int rc = realfn(fp, fmt, ap);                                                       \
    int64_t after = tell(fp);                                                           \
    POST();                                                                             \
    if (rc != EOF || after > before)                                                    \
        sdata(IOL_OP_READ, fp, (before >= 0 && after > before) ? after - before : 0, t0, t1); \
    RETURN(rc)

/* <stdio.h> renames fscanf/vfscanf to __isoc99_*: define the plain names by asm label */
IOL_EXPORT int iol_vfscanf(FILE *fp, const char *fmt, va_list ap) __asm__("vfscanf");
IOL_EXPORT int iol_fscanf(FILE *fp, const char *fmt, ...) __asm__("fscanf");

IOL_REAL(int, vfscanf, (FILE *, const char *, va_list));
IOL_EXPORT int iol_vfscanf(FILE *fp, const char *fmt, va_list ap)
{
    BEGIN(vfscanf, EOF);
    VSCAN_BODY(real_vfscanf);
}

IOL_REAL(int, __isoc99_vfscanf, (FILE *, const char *, va_list));
IOL_EXPORT int __isoc99_vfscanf(FILE *fp, const char *fmt, va_list ap)
{
    BEGIN(__isoc99_vfscanf, EOF);
    VSCAN_BODY(real___isoc99_vfscanf);
}

static int scan_va(int (*fn)(FILE *, const char *, va_list), FILE *fp, const char *fmt,
                   va_list ap)
{
    VSCAN_BODY(fn);
}

IOL_EXPORT int iol_fscanf(FILE *fp, const char *fmt, ...)
{
    BEGIN(vfscanf, EOF);
    va_list ap;
    va_start(ap, fmt);
    int rc = scan_va(real_vfscanf, fp, fmt, ap);
    va_end(ap);
    return rc;
}

IOL_EXPORT int __isoc99_fscanf(FILE *fp, const char *fmt, ...)
{
    BEGIN(__isoc99_vfscanf, EOF);
    va_list ap;
    va_start(ap, fmt);
    int rc = scan_va(real___isoc99_vfscanf, fp, fmt, ap);
    va_end(ap);
    return rc;
}

IOL_REAL(char *, fgets, (char *, int, FILE *));
IOL_EXPORT char *fgets(char *s, int n, FILE *fp)
{
    BEGIN(fgets, NULL);
    if (iol_skip())
        return real_fgets(s, n, fp);
    PRE();
    char *rc = real_fgets(s, n, fp);
    POST();
    if (rc)
        sdata(IOL_OP_READ, fp, (int64_t)strlen(rc), t0, t1);
    RETURN(rc);
}

IOL_REAL(int, fputs, (const char *, FILE *));
IOL_EXPORT int fputs(const char *s, FILE *fp)
{
    BEGIN(fputs, EOF);
    if (iol_skip())
        return real_fputs(s, fp);
    PRE();
    int rc = real_fputs(s, fp);
    POST();
    if (rc >= 0)
        sdata(IOL_OP_WRITE, fp, (int64_t)strlen(s), t0, t1);
    RETURN(rc);
}

/* ---- _FORTIFY_SOURCE and C2x forms -------------------------------------------------- */

IOL_REAL(size_t, __fread_chk, (void *, size_t, size_t, size_t, FILE *));
IOL_EXPORT size_t __fread_chk(void *ptr, size_t ptrlen, size_t size, size_t n, FILE *fp)
{
    BEGIN(__fread_chk, 0);
    if (iol_skip())
        return real___fread_chk(ptr, ptrlen, size, n, fp);
    PRE();
    size_t rc = real___fread_chk(ptr, ptrlen, size, n, fp);
    POST();
    sdata(IOL_OP_READ, fp, (int64_t)(rc * size), t0, t1);
    RETURN(rc);
}

IOL_REAL(char *, __fgets_chk, (char *, size_t, int, FILE *));
IOL_EXPORT char *__fgets_chk(char *s, size_t size, int n, FILE *fp)
{
    BEGIN(__fgets_chk, NULL);
    if (iol_skip())
        return real___fgets_chk(s, size, n, fp);
    PRE();
    char *rc = real___fgets_chk(s, size, n, fp);
    POST();
    if (rc)
        sdata(IOL_OP_READ, fp, (int64_t)strlen(rc), t0, t1);
    RETURN(rc);
}

/* glibc >= 2.38 maps fscanf to __isoc23_fscanf under C2x; unresolved (ENOSYS) before */
IOL_REAL(int, __isoc23_vfscanf, (FILE *, const char *, va_list));
IOL_EXPORT int __isoc23_vfscanf(FILE *fp, const char *fmt, va_list ap)
{
    BEGIN(__isoc23_vfscanf, EOF);
    VSCAN_BODY(real___isoc23_vfscanf);
}

IOL_EXPORT int __isoc23_fscanf(FILE *fp, const char *fmt, ...)
{
    BEGIN(__isoc23_vfscanf, EOF);
    va_list ap;
    va_start(ap, fmt);
    int rc = scan_va(real___isoc23_vfscanf, fp, fmt, ap);
    va_end(ap);
    return rc;
}
