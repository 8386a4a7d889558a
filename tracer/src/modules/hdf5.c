/*
 * hdf5.c - the HDF5 layer: H5F (file) and H5D (dataset) calls.
 *
 * Built like mpiio.c: the wrappers interpose the H5 names with dlsym(RTLD_NEXT), no
 * hdf5.h, no link against libhdf5; nothing here runs until the program calls an H5
 * function, so the tracer builds and loads without HDF5 installed. HDF5 records sit
 * above the MPI-IO and POSIX records the library issues for them: they share the file
 * (same path, hence file index) and lie around them in time on the same thread.
 * Analyses count bytes from the lowest layer and use this one for what the program asked.
 *
 * Types: hid_t is int64_t and herr_t int since HDF5 1.10 (older releases, with a 32-bit
 * hid_t, are not supported). H5S_ALL is 0.
 *
 * A libhdf5 loaded RTLD_LOCAL (h5py's wheels bundle one, loaded by Python's dlopen) is
 * found through iol_local_sym() (local_sym.h): the calls still reach these wrappers first.
 *
 * What is recorded (successful calls only):
 *   H5Fcreate, H5Fopen    open of the file (the path passed)
 *   H5Fclose              close
 *   H5Fflush              flush (op "flush")
 *   H5Dcreate2, H5Dopen2  stat on the file: a dataset lookup is metadata, not a file open
 *   H5Dwrite, H5Dread     write/read of (selected elements x memory type size) bytes, the
 *                         amount the program asked for, as Darshan's H5D module counts;
 *                         offset -1: a selection has no byte offset in the file (chunks,
 *                         filters, and the library's metadata put the bytes elsewhere),
 *                         the POSIX records below carry the real offsets.
 * Not wrapped: H5Dwrite_multi/H5Dread_multi and the *_async forms of HDF5 1.14, H5Dcreate1,
 * H5Dopen1 (deprecated), attributes (H5A), direct chunk I/O (H5Dwrite_chunk).
 */
#include "../core/iolens.h"
#include "local_sym.h"

#include <string.h>

typedef int64_t hid;
typedef int herr;
typedef unsigned long long hsize; /* hsize_t */

#define H5_FAIL (-1)

/* Depth of HDF5 wrappers on this thread: a public call the library makes from inside
   another is not counted twice. */
static IOL_TLS int hdf5_depth;

static void *resolve(const char *name)
{
    return iol_local_sym(name, "hdf5");
}

#define BEGIN(name)                                                                     \
    if (UNLIKELY(!__atomic_load_n(&real_##name, __ATOMIC_RELAXED)))                     \
        __atomic_store_n(&real_##name, (__typeof__(real_##name))resolve(#name),        \
                         __ATOMIC_RELAXED);                                             \
    if (UNLIKELY(!real_##name))                                                         \
        return H5_FAIL;

#define SKIP() (hdf5_depth || iol_skip())

#define CALL(type, rc, expr)                                                            \
    hdf5_depth++;                                                                       \
    uint64_t t0 = iol_now();                                                            \
    type rc = expr;                                                                     \
    uint64_t t1 = iol_now();                                                            \
    int saved_errno = errno;                                                            \
    iol_guard = 1

/* Lower the depth after our bookkeeping (helpers below call into HDF5), then return. */
#define DONE(rc)                                                                        \
    do {                                                                                \
        hdf5_depth--;                                                                   \
        RETURN(rc);                                                                     \
    } while (0)

/* ---- helpers from the HDF5 library, resolved on first use ------------------------- */

#define HELPER(ret, var, name, params)                                                  \
    static ret(*var) params;                                                            \
    if (UNLIKELY(!var))                                                                 \
        var = (ret(*) params)resolve(name)

/* The file an HDF5 object (file, dataset, group) lives in, by the name it was opened
   with; 0 if unknown. Relative names resolve against the current directory. */
static uint32_t file_of(hid obj)
{
    HELPER(long, get_name, "H5Fget_name", (hid, char *, size_t));
    char path[4096];
    if (!get_name)
        return 0;
    long n = get_name(obj, path, sizeof path);
    if (n <= 0 || (size_t)n >= sizeof path)
        return 0;
    return iol_file_of_path(path);
}

/* Bytes of an H5Dread/H5Dwrite: the selected elements (memory space, else file space,
   else the whole dataset) times the memory type's size. */
static int64_t transfer_bytes(hid dset, hid mem_type, hid mem_space, hid file_space)
{
    HELPER(long long, npoints, "H5Sget_select_npoints", (hid));
    HELPER(size_t, type_size, "H5Tget_size", (hid));
    HELPER(hid, get_space, "H5Dget_space", (hid));
    HELPER(herr, space_close, "H5Sclose", (hid));
    if (!npoints || !type_size)
        return 0;
    long long n = -1;
    if (mem_space != 0)
        n = npoints(mem_space);
    else if (file_space != 0)
        n = npoints(file_space);
    else if (get_space && space_close) {
        hid space = get_space(dset);
        if (space >= 0) {
            n = npoints(space);
            space_close(space);
        }
    }
    size_t size = type_size(mem_type);
    if (n <= 0 || size == 0)
        return 0;
    return (int64_t)n * (int64_t)size;
}

static void meta(int op, uint32_t file, uint64_t t0, uint64_t t1)
{
    if (file)
        iol_record(op, IOL_LAYER_HDF5, file, -1, 0, t0, t1);
}

/* ---- H5F: files -------------------------------------------------------------------- */

IOL_REAL(hid, H5Fcreate, (const char *, unsigned, hid, hid));
IOL_EXPORT hid H5Fcreate(const char *name, unsigned flags, hid fcpl, hid fapl)
{
    BEGIN(H5Fcreate);
    if (SKIP())
        return real_H5Fcreate(name, flags, fcpl, fapl);
    CALL(hid, rc, real_H5Fcreate(name, flags, fcpl, fapl));
    if (rc >= 0 && name)
        meta(IOL_OP_OPEN, iol_file_of_path(name), t0, t1);
    DONE(rc);
}

IOL_REAL(hid, H5Fopen, (const char *, unsigned, hid));
IOL_EXPORT hid H5Fopen(const char *name, unsigned flags, hid fapl)
{
    BEGIN(H5Fopen);
    if (SKIP())
        return real_H5Fopen(name, flags, fapl);
    CALL(hid, rc, real_H5Fopen(name, flags, fapl));
    if (rc >= 0 && name)
        meta(IOL_OP_OPEN, iol_file_of_path(name), t0, t1);
    DONE(rc);
}

IOL_REAL(herr, H5Fclose, (hid));
IOL_EXPORT herr H5Fclose(hid fid)
{
    BEGIN(H5Fclose);
    if (SKIP())
        return real_H5Fclose(fid);
    hdf5_depth++;
    uint32_t file = file_of(fid); /* before the id goes away */
    hdf5_depth--;
    CALL(herr, rc, real_H5Fclose(fid));
    if (rc >= 0)
        meta(IOL_OP_CLOSE, file, t0, t1);
    DONE(rc);
}

IOL_REAL(herr, H5Fflush, (hid, int));
IOL_EXPORT herr H5Fflush(hid obj, int scope)
{
    BEGIN(H5Fflush);
    if (SKIP())
        return real_H5Fflush(obj, scope);
    CALL(herr, rc, real_H5Fflush(obj, scope));
    if (rc >= 0)
        meta(IOL_OP_FLUSH, file_of(obj), t0, t1);
    DONE(rc);
}

/* ---- H5D: datasets ----------------------------------------------------------------- */

IOL_REAL(hid, H5Dcreate2, (hid, const char *, hid, hid, hid, hid, hid));
IOL_EXPORT hid H5Dcreate2(hid loc, const char *name, hid type, hid space, hid lcpl, hid dcpl,
                          hid dapl)
{
    BEGIN(H5Dcreate2);
    if (SKIP())
        return real_H5Dcreate2(loc, name, type, space, lcpl, dcpl, dapl);
    CALL(hid, rc, real_H5Dcreate2(loc, name, type, space, lcpl, dcpl, dapl));
    if (rc >= 0)
        meta(IOL_OP_STAT, file_of(rc), t0, t1);
    DONE(rc);
}

IOL_REAL(hid, H5Dopen2, (hid, const char *, hid));
IOL_EXPORT hid H5Dopen2(hid loc, const char *name, hid dapl)
{
    BEGIN(H5Dopen2);
    if (SKIP())
        return real_H5Dopen2(loc, name, dapl);
    CALL(hid, rc, real_H5Dopen2(loc, name, dapl));
    if (rc >= 0)
        meta(IOL_OP_STAT, file_of(rc), t0, t1);
    DONE(rc);
}

#define DATA_WRAPPER(name, op, cq)                                                      \
    IOL_REAL(herr, name, (hid, hid, hid, hid, hid, cq void *));                         \
    IOL_EXPORT herr name(hid dset, hid mtype, hid mspace, hid fspace, hid dxpl, cq void *buf) \
    {                                                                                   \
        BEGIN(name);                                                                    \
        if (SKIP())                                                                     \
            return real_##name(dset, mtype, mspace, fspace, dxpl, buf);                 \
        CALL(herr, rc, real_##name(dset, mtype, mspace, fspace, dxpl, buf));            \
        if (rc >= 0) {                                                                  \
            uint32_t file = file_of(dset);                                              \
            if (file)                                                                   \
                iol_record(op, IOL_LAYER_HDF5, file, -1,                                \
                           transfer_bytes(dset, mtype, mspace, fspace), t0, t1);        \
        }                                                                               \
        DONE(rc);                                                                       \
    }

DATA_WRAPPER(H5Dwrite, IOL_OP_WRITE, const)
DATA_WRAPPER(H5Dread, IOL_OP_READ, )
