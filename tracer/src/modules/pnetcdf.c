/*
 * pnetcdf.c - the PnetCDF layer: ncmpi_ file and variable calls.
 *
 * Built like mpiio.c and hdf5.c: dlsym(RTLD_NEXT) interposition (falling back to a
 * libpnetcdf loaded RTLD_LOCAL, local_sym.h), no pnetcdf.h or mpi.h, MPI handles opaque
 * (uintptr_t), MPI_Offset 64-bit; nothing runs until an ncmpi_ function is called, so
 * the tracer builds and loads without PnetCDF. PnetCDF records sit above the MPI-IO
 * records the library issues (and those above POSIX): same file, enclosing time span.
 *
 * What is recorded (successful calls only):
 *   ncmpi_create, ncmpi_open   open of the file (the path passed)
 *   ncmpi_close                close
 *   ncmpi_sync                 fsync
 *   ncmpi_put_vara_<T>[_all], ncmpi_get_vara_<T>[_all] for every external type T (text,
 *                              schar, uchar, short, ushort, int, uint, long, float, double,
 *                              longlong, ulonglong): write/read of prod(count[0..ndims-1])
 *                              x sizeof(T) bytes, the amount the program asked for (the
 *                              in-memory type's size; a scalar variable moves one element);
 *                              offset -1, as for HDF5: a subarray has no single byte offset.
 * Not wrapped: the flexible API (ncmpi_put_vara, a buffer MPI datatype), var/var1/vars/
 * varm/varn forms, nonblocking iput/iget/bput, attributes.
 */
#include "../core/iolens.h"
#include "local_sym.h"

typedef uintptr_t mpi_h;   /* MPI_Comm, MPI_Info */
typedef long long mpi_off; /* MPI_Offset */

#define NC_OK 0
#define NC_FAIL (-1) /* only returned if no PnetCDF library is loaded */

static IOL_TLS int nc_depth; /* a call PnetCDF makes from inside another is not counted */

#define BEGIN(name)                                                                     \
    if (UNLIKELY(!__atomic_load_n(&real_##name, __ATOMIC_RELAXED)))                     \
        __atomic_store_n(&real_##name,                                                  \
                         (__typeof__(real_##name))iol_local_sym(#name, "pnetcdf"),      \
                         __ATOMIC_RELAXED);                                             \
    if (UNLIKELY(!real_##name))                                                         \
        return NC_FAIL;

#define SKIP() (nc_depth || iol_skip())

#define CALL(rc, expr)                                                                  \
    nc_depth++;                                                                         \
    uint64_t t0 = iol_now();                                                            \
    int rc = expr;                                                                      \
    uint64_t t1 = iol_now();                                                            \
    int saved_errno = errno;                                                            \
    iol_guard = 1

#define DONE(rc)                                                                        \
    do {                                                                                \
        nc_depth--;                                                                     \
        RETURN(rc);                                                                     \
    } while (0)

/* ---- ncid -> file index ------------------------------------------------------------- */

#define NCID_SLOTS 65536 /* PnetCDF's ncids are small non-negative ints */

static uint32_t ncid_file[NCID_SLOTS];

static uint32_t file_of(int ncid)
{
    return ncid >= 0 && ncid < NCID_SLOTS ? __atomic_load_n(&ncid_file[ncid], __ATOMIC_ACQUIRE)
                                          : 0;
}

static void set_file(int ncid, uint32_t file)
{
    if (ncid >= 0 && ncid < NCID_SLOTS)
        __atomic_store_n(&ncid_file[ncid], file, __ATOMIC_RELEASE);
}

static void meta(int op, uint32_t file, uint64_t t0, uint64_t t1)
{
    if (file)
        iol_record(op, IOL_LAYER_PNETCDF, file, -1, 0, t0, t1);
}

/* Elements of a vara access: the product of count[] over the variable's dimensions. */
static int64_t elements(int ncid, int varid, const mpi_off *count)
{
    static int (*ndims_of)(int, int, int *);
    if (UNLIKELY(!ndims_of))
        ndims_of = (int (*)(int, int, int *))iol_local_sym("ncmpi_inq_varndims", "pnetcdf");
    int ndims = -1;
    if (!ndims_of || ndims_of(ncid, varid, &ndims) != NC_OK || ndims < 0)
        return 0;
    int64_t n = 1;
    for (int i = 0; i < ndims; i++) {
        if (!count || count[i] < 0)
            return 0;
        n *= count[i];
    }
    return n;
}

/* ---- files ------------------------------------------------------------------------- */

#define OPEN_WRAPPER(name)                                                              \
    IOL_REAL(int, name, (mpi_h, const char *, int, mpi_h, int *));                      \
    IOL_EXPORT int name(mpi_h comm, const char *path, int mode, mpi_h info, int *ncid)  \
    {                                                                                   \
        BEGIN(name);                                                                    \
        if (SKIP())                                                                     \
            return real_##name(comm, path, mode, info, ncid);                           \
        CALL(rc, real_##name(comm, path, mode, info, ncid));                            \
        if (rc == NC_OK && ncid && path) {                                              \
            uint32_t file = iol_file_of_path(path);                                     \
            set_file(*ncid, file);                                                      \
            meta(IOL_OP_OPEN, file, t0, t1);                                            \
        }                                                                               \
        DONE(rc);                                                                       \
    }

OPEN_WRAPPER(ncmpi_create)
OPEN_WRAPPER(ncmpi_open)

IOL_REAL(int, ncmpi_close, (int));
IOL_EXPORT int ncmpi_close(int ncid)
{
    BEGIN(ncmpi_close);
    if (SKIP())
        return real_ncmpi_close(ncid);
    uint32_t file = file_of(ncid);
    CALL(rc, real_ncmpi_close(ncid));
    if (rc == NC_OK) {
        meta(IOL_OP_CLOSE, file, t0, t1);
        set_file(ncid, 0);
    }
    DONE(rc);
}

IOL_REAL(int, ncmpi_sync, (int));
IOL_EXPORT int ncmpi_sync(int ncid)
{
    BEGIN(ncmpi_sync);
    if (SKIP())
        return real_ncmpi_sync(ncid);
    CALL(rc, real_ncmpi_sync(ncid));
    if (rc == NC_OK)
        meta(IOL_OP_FSYNC, file_of(ncid), t0, t1);
    DONE(rc);
}

/* ---- variables: vara of every type, collective and independent --------------------- */

#define VARA_WRAPPER(name, op, cq, T)                                                   \
    IOL_REAL(int, name, (int, int, const mpi_off *, const mpi_off *, cq T *));          \
    IOL_EXPORT int name(int ncid, int varid, const mpi_off *start, const mpi_off *count, \
                        cq T *buf)                                                      \
    {                                                                                   \
        BEGIN(name);                                                                    \
        if (SKIP())                                                                     \
            return real_##name(ncid, varid, start, count, buf);                         \
        CALL(rc, real_##name(ncid, varid, start, count, buf));                          \
        uint32_t file = file_of(ncid);                                                  \
        if (rc == NC_OK && file)                                                        \
            iol_record(op, IOL_LAYER_PNETCDF, file, -1,                                 \
                       elements(ncid, varid, count) * (int64_t)sizeof(T), t0, t1);      \
        DONE(rc);                                                                       \
    }

#define TYPE_WRAPPERS(suffix, T)                                                        \
    VARA_WRAPPER(ncmpi_put_vara_##suffix, IOL_OP_WRITE, const, T)                       \
    VARA_WRAPPER(ncmpi_put_vara_##suffix##_all, IOL_OP_WRITE, const, T)                 \
    VARA_WRAPPER(ncmpi_get_vara_##suffix, IOL_OP_READ, , T)                             \
    VARA_WRAPPER(ncmpi_get_vara_##suffix##_all, IOL_OP_READ, , T)

TYPE_WRAPPERS(text, char)
TYPE_WRAPPERS(schar, signed char)
TYPE_WRAPPERS(uchar, unsigned char)
TYPE_WRAPPERS(short, short)
TYPE_WRAPPERS(ushort, unsigned short)
TYPE_WRAPPERS(int, int)
TYPE_WRAPPERS(uint, unsigned int)
TYPE_WRAPPERS(long, long)
TYPE_WRAPPERS(float, float)
TYPE_WRAPPERS(double, double)
TYPE_WRAPPERS(longlong, long long)
TYPE_WRAPPERS(ulonglong, unsigned long long)
