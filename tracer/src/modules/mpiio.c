/*
 * mpiio.c - the MPI-IO layer: MPI_File_* calls.
 *
 * Like Darshan's MPI-IO module, the calls are recorded as their own layer while the POSIX
 * calls the MPI library makes for them are still recorded by posix.c: an MPI-IO record
 * and the POSIX records it caused share the file (same path, hence the same file index
 * and file_id), the process, and a time window (the POSIX records lie inside the MPI-IO
 * call's [t_start, t_end] on the same thread, or on an aggregator's during a collective).
 * Analyses count bytes from the lower layer and the access pattern from this one.
 *
 * No PMPI: the wrappers interpose the MPI_ names with dlsym(RTLD_NEXT), exactly like the
 * libc wrappers, so they stack with other tools (a PMPI-based profiler still sees the
 * calls). Nothing here runs until an MPI_File_* function is called, which only a program
 * linked with an MPI library does; the library itself never needs MPI to build or load.
 *
 * No mpi.h either: handles are opaque. Open MPI's handles are pointers, MPICH's are ints
 * (MPI_File is a pointer in both); on x86-64 either travels in one integer register, so a
 * uintptr_t passes any of them through unchanged. MPI_Offset is 64-bit in both.
 * Helpers (type size, file position, info keys) are called through their PMPI_ names so
 * that another tool's MPI_ wrappers never see the tracer's own calls.
 *
 * What is recorded (successful calls only):
 *   open (+ the MPI_Info hints passed, written in the HINTS section; with hints injected by
 *   mpi_hints.c, the effective value of each hint asked for), close, sync (fsync),
 *   set_view (seek, at the view's displacement), delete (unlink);
 *   read/write in every form: blocking, nonblocking (i*, at issue time, as Darshan does),
 *   collective (_all), explicit offset (_at), split collective (_begin .. _end, one record
 *   spanning both), shared and ordered file pointers (offset -1: not queried, since reading
 *   the shared pointer costs a lock on some implementations).
 * Sizes are count x the datatype's size (the requested amount, as Darshan counts);
 * offsets are absolute byte offsets of the first byte (MPI_File_get_byte_offset).
 */
#include "../core/iolens.h"
#include "mpi_hints.h"

#include <dlfcn.h>
#include <string.h>

typedef uintptr_t mpi_h;    /* MPI_Comm, MPI_Info, MPI_Datatype, MPI_Request, MPI_File */
typedef long long mpi_off;  /* MPI_Offset */
typedef void mpi_status;    /* MPI_Status: only ever passed by pointer */

#define MPI_OK 0
#define MPI_FAIL 16 /* MPI_ERR_OTHER in Open MPI: only returned if no MPI library is loaded */
#define MPICH_INFO_NULL 0x1c000000u

/* Depth of MPI-IO wrappers on this thread: an MPI-IO call the library makes from inside
   another one (ROMIO's split collectives, HDF5 over MPI-IO over ...) is not counted twice. */
static IOL_TLS int mpiio_depth;

#define BEGIN(name)                                                                     \
    IOL_RESOLVE(name);                                                                  \
    if (UNLIKELY(!real_##name))                                                         \
        return MPI_FAIL;

#define SKIP() (mpiio_depth || iol_skip())

#define CALL(rc, expr)                                                                  \
    mpiio_depth++;                                                                      \
    uint64_t t0 = iol_now();                                                            \
    int rc = expr;                                                                      \
    uint64_t t1 = iol_now();                                                            \
    mpiio_depth--;                                                                      \
    int saved_errno = errno;                                                            \
    iol_guard = 1

/* ---- helpers from the MPI library, resolved on first use --------------------------- */

static void *helper(const char *pmpi_name)
{
    void *p = iol_dlsym(pmpi_name);
    if (!p)
        p = iol_dlsym(pmpi_name + 1); /* "PMPI_x" -> "MPI_x" */
    return p;
}

#define HELPER(ret, var, name, params)                                                  \
    static ret(*var) params;                                                            \
    if (UNLIKELY(!var))                                                                 \
        var = (ret(*) params)helper(name)

static int64_t type_bytes(mpi_h type, int count)
{
    HELPER(int, type_size, "PMPI_Type_size", (mpi_h, int *));
    int size = 0;
    if (count <= 0 || !type_size || type_size(type, &size) != MPI_OK || size < 0)
        return 0;
    return (int64_t)count * size;
}

/* Absolute byte offset of view-relative `off` (etype units), or -1. */
static int64_t byte_offset(mpi_h fh, mpi_off off)
{
    HELPER(int, get_byte_offset, "PMPI_File_get_byte_offset", (mpi_h, mpi_off, mpi_off *));
    mpi_off disp = 0;
    if (off < 0 || !get_byte_offset || get_byte_offset(fh, off, &disp) != MPI_OK || disp < 0)
        return -1;
    return disp;
}

/* The individual file pointer (view-relative), read before a call moves it; -1 if unknown. */
static mpi_off position(mpi_h fh)
{
    HELPER(int, get_position, "PMPI_File_get_position", (mpi_h, mpi_off *));
    mpi_off pos = -1;
    int saved = iol_guard;
    iol_guard = 1;
    if (!get_position || get_position(fh, &pos) != MPI_OK)
        pos = -1;
    iol_guard = saved;
    return pos;
}

/* ---- MPI_File handle -> file index --------------------------------------------------- */

#define FH_SLOTS 4096u /* open MPI files at once; beyond that a file's calls are not traced */
#define FH_EMPTY 0u
#define FH_GONE 1u     /* a closed handle's slot: probing continues past it */

static struct {
    uintptr_t fh;
    uint32_t file;
} fh_map[FH_SLOTS];

static uint32_t fh_slot(uintptr_t fh)
{
    uint64_t h = (uint64_t)fh * 0x9e3779b97f4a7c15ull;
    return (uint32_t)(h >> 40) & (FH_SLOTS - 1);
}

static void fh_put(uintptr_t fh, uint32_t file)
{
    if (fh <= FH_GONE)
        return;
    uint32_t i = fh_slot(fh);
    for (uint32_t n = 0; n < FH_SLOTS; n++, i = (i + 1) & (FH_SLOTS - 1)) {
        uintptr_t k = __atomic_load_n(&fh_map[i].fh, __ATOMIC_ACQUIRE);
        if (k == fh) {
            __atomic_store_n(&fh_map[i].file, file, __ATOMIC_RELEASE);
            return;
        }
        if ((k == FH_EMPTY || k == FH_GONE) &&
            __atomic_compare_exchange_n(&fh_map[i].fh, &k, FH_GONE, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
            /* claimed (marked GONE while we fill it, so lookups pass it by) */
            __atomic_store_n(&fh_map[i].file, file, __ATOMIC_RELEASE);
            __atomic_store_n(&fh_map[i].fh, fh, __ATOMIC_RELEASE);
            return;
        }
    }
}

static uint32_t fh_file(uintptr_t fh)
{
    if (fh <= FH_GONE)
        return 0;
    uint32_t i = fh_slot(fh);
    for (uint32_t n = 0; n < FH_SLOTS; n++, i = (i + 1) & (FH_SLOTS - 1)) {
        uintptr_t k = __atomic_load_n(&fh_map[i].fh, __ATOMIC_ACQUIRE);
        if (k == fh)
            return __atomic_load_n(&fh_map[i].file, __ATOMIC_ACQUIRE);
        if (k == FH_EMPTY)
            return 0;
    }
    return 0;
}

static void fh_drop(uintptr_t fh)
{
    if (fh <= FH_GONE)
        return;
    uint32_t i = fh_slot(fh);
    for (uint32_t n = 0; n < FH_SLOTS; n++, i = (i + 1) & (FH_SLOTS - 1)) {
        uintptr_t k = __atomic_load_n(&fh_map[i].fh, __ATOMIC_ACQUIRE);
        if (k == fh) {
            __atomic_store_n(&fh_map[i].fh, FH_GONE, __ATOMIC_RELEASE);
            return;
        }
        if (k == FH_EMPTY)
            return;
    }
}

/* ---- hints ------------------------------------------------------------------------- */

#define HINTS_CAP 65536u    /* all hints of a process (entries beyond it are dropped) */
#define HINTS_PER_FILE 4096 /* text of one open's hints */

static char hints_buf[HINTS_CAP];
static uint32_t hints_used;  /* published with release: the output reads only whole entries */
static int hints_pid;        /* the process that recorded them (a fork child has none) */
static pthread_mutex_t hints_lock = PTHREAD_MUTEX_INITIALIZER;

int iol_mpi_info_is_null(mpi_h info)
{
    static uintptr_t ompi_null;
    static int looked;
    if (!info)
        return 1;
    if (!looked) {
        /* Open MPI's MPI_INFO_NULL is &ompi_mpi_info_null. RTLD_DEFAULT, not RTLD_NEXT: a
           PIE program gets a copy of the variable (copy relocation), and that copy's
           address, first in the global scope, is the handle the program passes. */
        int saved = iol_guard;
        iol_guard = 1;
        ompi_null = (uintptr_t)dlsym(RTLD_DEFAULT, "ompi_mpi_info_null");
        iol_guard = saved;
        looked = 1;
    }
    if (ompi_null)
        return info == ompi_null;
    return (uint32_t)info == MPICH_INFO_NULL; /* MPICH and its derivatives */
}

static size_t put(char *dst, size_t at, size_t cap, const char *s)
{
    while (*s && at < cap)
        dst[at++] = *s++;
    return at;
}

/* Record, for `file`, each key of `keys` with its value in `values` (keys without a value
   there are left out). Called after a successful open: keys = values = the application's
   info, or keys = the info the hint plug-in opened with, values = the file's effective
   hints (PMPI_File_get_info), so that a hint the library refused does not appear. */
static void save_hints(uint32_t file, mpi_h keys, mpi_h values)
{
    HELPER(int, nkeys_of, "PMPI_Info_get_nkeys", (mpi_h, int *));
    HELPER(int, nthkey, "PMPI_Info_get_nthkey", (mpi_h, int, char *));
    HELPER(int, get, "PMPI_Info_get", (mpi_h, const char *, int, char *, int *));
    int nkeys = 0;
    if (iol_mpi_info_is_null(keys) || !nkeys_of || !nthkey || !get)
        return;
    if (nkeys_of(keys, &nkeys) != MPI_OK || nkeys <= 0)
        return;
    char text[HINTS_PER_FILE];
    size_t n = 0;
    for (int i = 0; i < nkeys; i++) {
        char key[256] = "", value[1025] = "";
        int flag = 0;
        if (nthkey(keys, i, key) != MPI_OK)
            continue;
        key[sizeof key - 1] = '\0';
        if (get(values, key, (int)sizeof value - 1, value, &flag) != MPI_OK || !flag)
            continue;
        value[sizeof value - 1] = '\0';
        n = put(text, n, sizeof text, key);
        n = put(text, n, sizeof text, "=");
        n = put(text, n, sizeof text, value);
        n = put(text, n, sizeof text, "\n");
    }
    if (!n)
        return;
    pthread_mutex_lock(&hints_lock);
    int pid = g.pid;
    if (hints_pid != pid) { /* first hints of this process (or of a fork child) */
        __atomic_store_n(&hints_used, 0, __ATOMIC_RELEASE);
        hints_pid = pid;
    }
    uint32_t used = hints_used;
    size_t padded = (n + 7u) & ~(size_t)7u;
    if (used + sizeof(struct iol_hints_entry) + padded <= HINTS_CAP) {
        struct iol_hints_entry e = {file, (uint32_t)n};
        memcpy(hints_buf + used, &e, sizeof e);
        memcpy(hints_buf + used + sizeof e, text, n);
        memset(hints_buf + used + sizeof e + n, 0, padded - n);
        __atomic_store_n(&hints_used, used + (uint32_t)(sizeof e + padded), __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&hints_lock);
}

/* The hints an open with injected hints ended up with: the file's effective values. */
static void save_used_hints(uint32_t file, mpi_h fh, mpi_h asked)
{
    HELPER(int, get_info, "PMPI_File_get_info", (mpi_h, mpi_h *));
    HELPER(int, info_free, "PMPI_Info_free", (mpi_h *));
    mpi_h used = 0;
    if (!get_info || !info_free || get_info(fh, &used) != MPI_OK)
        return;
    save_hints(file, asked, used);
    info_free(&used);
}

const void *iol_mpiio_hints(uint64_t *len)
{
    uint32_t used = __atomic_load_n(&hints_used, __ATOMIC_ACQUIRE);
    *len = hints_pid == g.pid ? used : 0;
    return *len ? hints_buf : NULL;
}

/* ---- recording --------------------------------------------------------------------- */

/* "ufs:/path" -> "/path": ROMIO's file-system prefixes, also accepted by Open MPI. */
static const char *strip_prefix(const char *name)
{
    static const char *const prefixes[] = {"ufs:",  "nfs:",  "lustre:", "gpfs:", "pvfs2:",
                                           "panfs:", "xfs:", "daos:",   "ime:",  "beegfs:",
                                           "testfs:", NULL};
    for (const char *const *p = prefixes; *p; p++) {
        size_t n = strlen(*p);
        if (strncmp(name, *p, n) == 0)
            return name + n;
    }
    return name;
}

static void data(int op, mpi_h fh, int64_t off, int count, mpi_h type, uint64_t t0,
                 uint64_t t1)
{
    uint32_t file = fh_file(fh);
    if (file)
        iol_record(op, IOL_LAYER_MPIIO, file, off, type_bytes(type, count), t0, t1);
}

static void meta(int op, mpi_h fh, int64_t off, uint64_t t0, uint64_t t1)
{
    uint32_t file = fh_file(fh);
    if (file)
        iol_record(op, IOL_LAYER_MPIIO, file, off, 0, t0, t1);
}

/* ---- open, close, sync, view, delete ----------------------------------------------- */

IOL_REAL(int, MPI_File_open, (mpi_h, const char *, int, mpi_h, mpi_h *));
IOL_EXPORT int MPI_File_open(mpi_h comm, const char *name, int amode, mpi_h info, mpi_h *fh)
{
    BEGIN(MPI_File_open);
    if (SKIP())
        return real_MPI_File_open(comm, name, amode, info, fh);
    mpi_h made = 0, use = info;
    if (UNLIKELY(iol_mh_on)) {
        int saved = iol_guard;
        iol_guard = 1;
        use = iol_mh_info(name ? strip_prefix(name) : NULL, info, &made);
        iol_guard = saved;
    }
    CALL(rc, real_MPI_File_open(comm, name, amode, use, fh));
    if (rc == MPI_OK && fh && name) {
        uint32_t file = iol_file_of_path(strip_prefix(name));
        fh_put(*fh, file);
        if (file) {
            iol_record(IOL_OP_OPEN, IOL_LAYER_MPIIO, file, -1, 0, t0, t1);
            if (made)
                save_used_hints(file, *fh, made);
            else
                save_hints(file, info, info);
        }
    }
    iol_mh_free(&made);
    RETURN(rc);
}

IOL_REAL(int, MPI_File_close, (mpi_h *));
IOL_EXPORT int MPI_File_close(mpi_h *fh)
{
    BEGIN(MPI_File_close);
    if (SKIP() || !fh)
        return real_MPI_File_close(fh);
    mpi_h h = *fh;
    CALL(rc, real_MPI_File_close(fh));
    if (rc == MPI_OK) {
        meta(IOL_OP_CLOSE, h, -1, t0, t1);
        fh_drop(h);
    }
    RETURN(rc);
}

IOL_REAL(int, MPI_File_sync, (mpi_h));
IOL_EXPORT int MPI_File_sync(mpi_h fh)
{
    BEGIN(MPI_File_sync);
    if (SKIP())
        return real_MPI_File_sync(fh);
    CALL(rc, real_MPI_File_sync(fh));
    if (rc == MPI_OK)
        meta(IOL_OP_FSYNC, fh, -1, t0, t1);
    RETURN(rc);
}

/* A view is a positioning op: recorded as a seek to its displacement. */
IOL_REAL(int, MPI_File_set_view, (mpi_h, mpi_off, mpi_h, mpi_h, const char *, mpi_h));
IOL_EXPORT int MPI_File_set_view(mpi_h fh, mpi_off disp, mpi_h etype, mpi_h ftype,
                                 const char *datarep, mpi_h info)
{
    BEGIN(MPI_File_set_view);
    if (SKIP())
        return real_MPI_File_set_view(fh, disp, etype, ftype, datarep, info);
    CALL(rc, real_MPI_File_set_view(fh, disp, etype, ftype, datarep, info));
    if (rc == MPI_OK)
        meta(IOL_OP_SEEK, fh, disp < 0 ? 0 : disp, t0, t1);
    RETURN(rc);
}

IOL_REAL(int, MPI_File_delete, (const char *, mpi_h));
IOL_EXPORT int MPI_File_delete(const char *name, mpi_h info)
{
    BEGIN(MPI_File_delete);
    if (SKIP())
        return real_MPI_File_delete(name, info);
    CALL(rc, real_MPI_File_delete(name, info));
    if (rc == MPI_OK && name) {
        uint32_t file = iol_file_of_path(strip_prefix(name));
        if (file)
            iol_record(IOL_OP_UNLINK, IOL_LAYER_MPIIO, file, -1, 0, t0, t1);
    }
    RETURN(rc);
}

/* ---- data: blocking and nonblocking ------------------------------------------------ */

/* Explicit offset: (fh, offset, buf, count, datatype, status-or-request) */
#define AT_WRAPPER(name, op, cq, last_t)                                                \
    IOL_REAL(int, name, (mpi_h, mpi_off, cq void *, int, mpi_h, last_t));               \
    IOL_EXPORT int name(mpi_h fh, mpi_off off, cq void *buf, int count, mpi_h type,     \
                        last_t last)                                                    \
    {                                                                                   \
        BEGIN(name);                                                                    \
        if (SKIP())                                                                     \
            return real_##name(fh, off, buf, count, type, last);                        \
        CALL(rc, real_##name(fh, off, buf, count, type, last));                         \
        if (rc == MPI_OK)                                                               \
            data(op, fh, byte_offset(fh, off), count, type, t0, t1);                    \
        RETURN(rc);                                                                     \
    }

/* Individual file pointer: (fh, buf, count, datatype, status-or-request) */
#define IND_WRAPPER(name, op, cq, last_t)                                               \
    IOL_REAL(int, name, (mpi_h, cq void *, int, mpi_h, last_t));                        \
    IOL_EXPORT int name(mpi_h fh, cq void *buf, int count, mpi_h type, last_t last)     \
    {                                                                                   \
        BEGIN(name);                                                                    \
        if (SKIP())                                                                     \
            return real_##name(fh, buf, count, type, last);                             \
        mpi_off pos = fh_file(fh) ? position(fh) : -1;                                  \
        CALL(rc, real_##name(fh, buf, count, type, last));                              \
        if (rc == MPI_OK)                                                               \
            data(op, fh, byte_offset(fh, pos), count, type, t0, t1);                    \
        RETURN(rc);                                                                     \
    }

/* Shared file pointer: same arguments, offset not queried */
#define SHARED_WRAPPER(name, op, cq, last_t)                                            \
    IOL_REAL(int, name, (mpi_h, cq void *, int, mpi_h, last_t));                        \
    IOL_EXPORT int name(mpi_h fh, cq void *buf, int count, mpi_h type, last_t last)     \
    {                                                                                   \
        BEGIN(name);                                                                    \
        if (SKIP())                                                                     \
            return real_##name(fh, buf, count, type, last);                             \
        CALL(rc, real_##name(fh, buf, count, type, last));                              \
        if (rc == MPI_OK)                                                               \
            data(op, fh, -1, count, type, t0, t1);                                      \
        RETURN(rc);                                                                     \
    }

#define W IOL_OP_WRITE
#define R IOL_OP_READ
#define CONST const

AT_WRAPPER(MPI_File_write_at, W, CONST, mpi_status *)
AT_WRAPPER(MPI_File_write_at_all, W, CONST, mpi_status *)
AT_WRAPPER(MPI_File_read_at, R, , mpi_status *)
AT_WRAPPER(MPI_File_read_at_all, R, , mpi_status *)
AT_WRAPPER(MPI_File_iwrite_at, W, CONST, mpi_h *)
AT_WRAPPER(MPI_File_iwrite_at_all, W, CONST, mpi_h *)
AT_WRAPPER(MPI_File_iread_at, R, , mpi_h *)
AT_WRAPPER(MPI_File_iread_at_all, R, , mpi_h *)

IND_WRAPPER(MPI_File_write, W, CONST, mpi_status *)
IND_WRAPPER(MPI_File_write_all, W, CONST, mpi_status *)
IND_WRAPPER(MPI_File_read, R, , mpi_status *)
IND_WRAPPER(MPI_File_read_all, R, , mpi_status *)
IND_WRAPPER(MPI_File_iwrite, W, CONST, mpi_h *)
IND_WRAPPER(MPI_File_iwrite_all, W, CONST, mpi_h *)
IND_WRAPPER(MPI_File_iread, R, , mpi_h *)
IND_WRAPPER(MPI_File_iread_all, R, , mpi_h *)

SHARED_WRAPPER(MPI_File_write_shared, W, CONST, mpi_status *)
SHARED_WRAPPER(MPI_File_write_ordered, W, CONST, mpi_status *)
SHARED_WRAPPER(MPI_File_read_shared, R, , mpi_status *)
SHARED_WRAPPER(MPI_File_read_ordered, R, , mpi_status *)
SHARED_WRAPPER(MPI_File_iwrite_shared, W, CONST, mpi_h *)
SHARED_WRAPPER(MPI_File_iread_shared, R, , mpi_h *)

/* ---- split collectives: one record from _begin's start to _end's end ---------------- */

#define SPLIT_SLOTS 4 /* split collectives in flight per thread (one per file handle) */

struct split {
    mpi_h fh;
    int op;
    int64_t off;
    int64_t bytes;
    uint64_t t0;
};

static IOL_TLS struct split splits[SPLIT_SLOTS];

static void split_begin(int op, mpi_h fh, int64_t off, int count, mpi_h type, uint64_t t0)
{
    if (!fh_file(fh))
        return;
    for (int i = 0; i < SPLIT_SLOTS; i++)
        if (!splits[i].fh || splits[i].fh == fh) {
            splits[i] = (struct split){fh, op, off, type_bytes(type, count), t0};
            return;
        }
}

static void split_end(mpi_h fh, uint64_t t1)
{
    for (int i = 0; i < SPLIT_SLOTS; i++)
        if (splits[i].fh == fh) {
            struct split s = splits[i];
            splits[i].fh = 0;
            uint32_t file = fh_file(fh);
            if (file)
                iol_record(s.op, IOL_LAYER_MPIIO, file, s.off, s.bytes, s.t0, t1);
            return;
        }
}

#define BEGIN_AT_WRAPPER(name, op, cq)                                                  \
    IOL_REAL(int, name, (mpi_h, mpi_off, cq void *, int, mpi_h));                       \
    IOL_EXPORT int name(mpi_h fh, mpi_off off, cq void *buf, int count, mpi_h type)     \
    {                                                                                   \
        BEGIN(name);                                                                    \
        if (SKIP())                                                                     \
            return real_##name(fh, off, buf, count, type);                              \
        CALL(rc, real_##name(fh, off, buf, count, type));                               \
        (void)t1;                                                                       \
        if (rc == MPI_OK)                                                               \
            split_begin(op, fh, byte_offset(fh, off), count, type, t0);                 \
        RETURN(rc);                                                                     \
    }

#define BEGIN_IND_WRAPPER(name, op, cq, shared)                                         \
    IOL_REAL(int, name, (mpi_h, cq void *, int, mpi_h));                                \
    IOL_EXPORT int name(mpi_h fh, cq void *buf, int count, mpi_h type)                  \
    {                                                                                   \
        BEGIN(name);                                                                    \
        if (SKIP())                                                                     \
            return real_##name(fh, buf, count, type);                                   \
        mpi_off pos = (!(shared) && fh_file(fh)) ? position(fh) : -1;                   \
        CALL(rc, real_##name(fh, buf, count, type));                                    \
        (void)t1;                                                                       \
        if (rc == MPI_OK)                                                               \
            split_begin(op, fh, byte_offset(fh, pos), count, type, t0);                 \
        RETURN(rc);                                                                     \
    }

#define END_WRAPPER(name, cq)                                                           \
    IOL_REAL(int, name, (mpi_h, cq void *, mpi_status *));                              \
    IOL_EXPORT int name(mpi_h fh, cq void *buf, mpi_status *st)                         \
    {                                                                                   \
        BEGIN(name);                                                                    \
        if (SKIP())                                                                     \
            return real_##name(fh, buf, st);                                            \
        CALL(rc, real_##name(fh, buf, st));                                             \
        (void)t0;                                                                       \
        if (rc == MPI_OK)                                                               \
            split_end(fh, t1);                                                          \
        RETURN(rc);                                                                     \
    }

BEGIN_AT_WRAPPER(MPI_File_write_at_all_begin, W, CONST)
BEGIN_AT_WRAPPER(MPI_File_read_at_all_begin, R, )
BEGIN_IND_WRAPPER(MPI_File_write_all_begin, W, CONST, 0)
BEGIN_IND_WRAPPER(MPI_File_read_all_begin, R, , 0)
BEGIN_IND_WRAPPER(MPI_File_write_ordered_begin, W, CONST, 1)
BEGIN_IND_WRAPPER(MPI_File_read_ordered_begin, R, , 1)
END_WRAPPER(MPI_File_write_at_all_end, CONST)
END_WRAPPER(MPI_File_read_at_all_end, )
END_WRAPPER(MPI_File_write_all_end, CONST)
END_WRAPPER(MPI_File_read_all_end, )
END_WRAPPER(MPI_File_write_ordered_end, CONST)
END_WRAPPER(MPI_File_read_ordered_end, )
