/*
 * iolens.h - internals shared by the core and the I/O-layer modules.
 *
 * Hot-path rules (every wrapper follows them):
 *   1. resolve the real symbol (once, lazily), then if the tracer is off or this thread is
 *      already inside the tracer, just call through;
 *   2. call the real function first and keep its result and errno;
 *   3. record only what happened into this thread's own chunk (no lock, no allocation);
 *   4. restore errno and return the real result.
 */
#ifndef IOLENS_INTERNAL_H
#define IOLENS_INTERNAL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <x86intrin.h>

#include "iolens_trace.h"
#include "lov.h"

#define IOL_EXPORT __attribute__((visibility("default")))
#define IOL_HIDDEN __attribute__((visibility("hidden")))
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)
#define IOL_TLS __attribute__((tls_model("initial-exec"))) __thread

#define IOL_LOOKBACK 4          /* records searched for a merge partner */
#define IOL_CHUNK_RECS 1024     /* records per chunk: 64 KiB */
#define IOL_SMALL_RECS 64       /* chunk used when the budget is spent: 4 KiB */
#define IOL_PATH_MAX 4096

/* ---- process-wide state ---------------------------------------------------------- */

enum { IOL_OFF = 0, IOL_ON = 1 };

struct iol_chunk {
    struct iol_chunk *next;     /* retained/free lists */
    uint32_t cap;
    volatile uint32_t n;        /* published record count */
    uint32_t tid;
    uint32_t small;             /* allocated beyond the budget */
    struct iol_record recs[];
};

#define IOL_FDF_WRITE 0x1u     /* opened for writing: a growing PFL layout is re-read at close */

struct iol_fd {
    uint32_t file;              /* file index, 0 = not traced */
    uint32_t flags;             /* IOL_FDF_* */
    int64_t pos;                /* POSIX offset as tracked by the wrappers */
    int64_t spos;               /* STDIO offset */
};

enum { IOL_FS_UNKNOWN = 0, IOL_FS_OTHER = 1, IOL_FS_LUSTRE = 2 };

struct iol_fentry {
    uint32_t parent;
    uint32_t path_len;
    uint64_t path_off;          /* into g.arena */
    int32_t sum[IOL_NLAYERS];   /* summary slot, -1 none */
    volatile uint32_t layout;   /* files: 1 + index into g.lay_recs, 0 = no layout known */
    volatile uint8_t fs;        /* IOL_FS_*: of a directory's files; of a file, once known */
    uint8_t mnt;                /* directories on Lustre: 1 + index into g.mounts, 0 unknown */
};

/* A file's decoded layout; written once, then published by storing its index. */
struct iol_layout_rec {
    struct iol_lov lov;
    uint32_t off;               /* first OST index in g.lay_osts */
    uint32_t mnt;               /* 1 + index into g.mounts, 0 = fs name unknown */
};

#define IOL_MAX_MOUNTS 16
#define IOL_MOUNT_POINT_MAX 256

struct iol_mount {              /* a Lustre client mount, from /proc/self/mountinfo */
    char point[IOL_MOUNT_POINT_MAX];
    uint32_t len;
    char fsname[IOL_FSNAME_MAX];
};

struct iol_global {
    volatile int state;         /* IOL_ON while tracing */
    int initialised;
    int use_tsc;
    pthread_mutex_t lock;       /* chunk hand-over, output; never on the per-call path */

    /* identity */
    int pid, ppid, rank;
    unsigned uid;
    uint32_t flags, segment;
    char job_id[256], host[256], exe[IOL_PATH_MAX], user[128], spool[IOL_PATH_MAX];
    uint64_t start_wall_ns, base_ticks, base_wall_ns, base_mono_ns;

    /* memory budget */
    uint64_t budget, chunk_budget, chunk_bytes;
    struct iol_chunk *retained, *free_chunks;
    struct iol_tstate *threads;

    /* files */
    uint32_t files_cap, hash_mask;
    volatile uint32_t nfiles;
    uint64_t *hash_keys;        /* 0 = empty */
    volatile uint32_t *hash_vals; /* file index, 0 = being published */
    struct iol_fentry *files;
    char *arena;
    uint64_t arena_cap;
    volatile uint64_t arena_used;
    uint32_t dropped_files;
    int fd_cap;
    struct iol_fd *fds;
    char cwd[IOL_PATH_MAX];
    uint32_t cwd_len;

    /* Lustre layouts (layout.c) */
    int layouts_on;             /* IOLENS_LAYOUT != 0 and the xattr call resolved */
    struct iol_layout_rec *lay_recs;
    uint32_t lay_recs_cap;
    volatile uint32_t lay_nrecs;
    uint32_t *lay_osts;
    uint32_t lay_osts_cap;
    volatile uint32_t lay_osts_used;
    uint32_t layouts_lost;      /* undecodable, or no room left */
    struct iol_mount mounts[IOL_MAX_MOUNTS];
    volatile uint32_t nmounts;
    volatile int mounts_lock;
    uint32_t mount_reads;       /* times /proc/self/mountinfo was read (bounded) */
    unsigned char *lov_big;     /* 64 KiB for layouts that overflow the stack buffer */
    volatile int lov_big_busy;

    /* summaries */
    struct iol_summary *sums;
    uint32_t sums_cap, nsums;

    /* accounting */
    uint64_t calls, records, dropped_records, dropped_calls, missed_calls;
    uint32_t spool_errors;
    int out_fd;                 /* spool file while running, -1 if not opened */
    int out_failed;
    int out_created;
    int no_spill;               /* IOLENS_SPILL=0: drop instead of writing mid-run */
    int lost_said;              /* the "trace lost" line went to stderr (once per process) */
    uint32_t stderr_file;       /* file index of the inherited fd 2, "<STDERR>" */
    char out_path[IOL_PATH_MAX];
    uint32_t out_name;          /* offset of the file's name in out_path */

    /* periodic flush (IOLENS_FLUSH_S; flush.c in buffer.c) */
    uint64_t flush_ns;          /* interval, 0 = off */
    volatile uint64_t next_flush; /* ticks: the call path checks against this (a hint) */
    uint64_t flush_due_ns;      /* monotonic ns: the real deadline */
    volatile uint32_t flush_gen; /* +1 per elapsed interval: threads then hand their chunk over */
    uint32_t interval;          /* interim files written in this segment */
    int flushing;               /* inside a periodic flush: write even with IOLENS_SPILL=0 */
};

struct iol_tstate {
    struct iol_tstate *next;
    struct iol_chunk *chunk;
    uint32_t tid;
    int live;
};

IOL_HIDDEN extern struct iol_global g;
extern IOL_TLS int iol_guard;
extern IOL_TLS struct iol_chunk *iol_chunk_tls;
extern IOL_TLS uint32_t iol_gen_tls; /* the flush generation this thread has caught up with */

/* ---- core API -------------------------------------------------------------------- */

IOL_HIDDEN void iol_init(void);
IOL_HIDDEN void *iol_dlsym(const char *name);
IOL_HIDDEN struct iol_chunk *iol_chunk_full(struct iol_chunk *c);
IOL_HIDDEN struct iol_chunk *iol_thread_start(void);
IOL_HIDDEN void iol_fold(struct iol_chunk *c);
IOL_HIDDEN void iol_finalize(uint32_t flags, int trylock);
IOL_HIDDEN void iol_restart(int forked);
IOL_HIDDEN uint64_t iol_mono_ns(void);
IOL_HIDDEN uint64_t iol_wall_ns(void);
IOL_HIDDEN int iol_write_all(int fd, const void *buf, size_t len);
IOL_HIDDEN void iol_out_close(void);
IOL_HIDDEN void iol_flush_check(uint64_t now);
IOL_HIDDEN void iol_flush_schedule(uint64_t now, uint64_t mono);
IOL_HIDDEN int iol_close_interval(void);
IOL_HIDDEN void iol_signals_init(void);

/* files.c */
IOL_HIDDEN void iol_files_init(void);
IOL_HIDDEN uint32_t iol_file_of_path(const char *path);
IOL_HIDDEN uint32_t iol_file_at(int dirfd, const char *path);
IOL_HIDDEN uint32_t iol_file_named(const char *name);
IOL_HIDDEN void iol_cwd_refresh(void);

/* layout.c: Lustre layouts of opened files (lustre.lov xattr), see docs/tracer.md */
IOL_HIDDEN void iol_layout_init(void);

/* compress.c: zstd for RECORDS sections (loaded at init; 0 = write uncompressed) */
IOL_HIDDEN void *iol_map(uint64_t bytes);
IOL_HIDDEN void iol_zstd_init(void);
IOL_HIDDEN size_t iol_zstd(const void *src, size_t n, const void **out);
IOL_HIDDEN void iol_layout_open(int fd, uint32_t file, int oflags);
IOL_HIDDEN void iol_layout_close(int fd);

/* modules/mpiio.c: this process's MPI-IO hints as a HINTS section payload (NULL if none) */
IOL_HIDDEN const void *iol_mpiio_hints(uint64_t *len);

/* modules/readahead.c: read IOLENS_READAHEAD* and set the plug-in up (after the fd table) */
IOL_HIDDEN void iol_ra_init(void);
IOL_HIDDEN void iol_mh_init(void); /* modules/mpi_hints.c */

/* ---- clock ----------------------------------------------------------------------- */

static inline uint64_t iol_now(void)
{
    if (LIKELY(g.use_tsc))
        return __rdtsc();
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- fd table -------------------------------------------------------------------- */

static inline struct iol_fd *iol_fd(int fd)
{
    if (LIKELY(fd >= 0 && fd < g.fd_cap))
        return &g.fds[fd];
    return NULL;
}

static inline uint32_t iol_fd_file(int fd)
{
    struct iol_fd *f = iol_fd(fd);
    return f ? __atomic_load_n(&f->file, __ATOMIC_RELAXED) : 0;
}

static inline void iol_fd_set(int fd, uint32_t file, int64_t pos)
{
    struct iol_fd *f = iol_fd(fd);
    if (f) {
        f->pos = pos;
        f->spos = 0;
        f->flags = 0;
        __atomic_store_n(&f->file, file, __ATOMIC_RELAXED);
    }
}

/* No summary slot yet in any layer. */
static inline void iol_fentry_clear(struct iol_fentry *e)
{
    for (int l = 0; l < IOL_NLAYERS; l++)
        e->sum[l] = -1;
}

static inline int iol_fentry_summarised(const struct iol_fentry *e)
{
    for (int l = 0; l < IOL_NLAYERS; l++)
        if (e->sum[l] >= 0)
            return 1;
    return 0;
}

static inline uint32_t iol_parent(uint32_t file)
{
    return file < g.nfiles ? g.files[file].parent : 0;
}

/* ---- the per-call record path ---------------------------------------------------- */

static inline int iol_is_meta(int op) { return op >= IOL_OP_OPEN && op != IOL_OP_SEEK; }

/*
 * Merge the call into one of the last IOL_LOOKBACK records of this thread when it has the
 * same op, layer, file and size and continues that record's fixed-stride run (contiguous
 * when stride == size); metadata ops on siblings merge into a directory record.
 * Otherwise append. Only the first record with the same op and layer is considered, so
 * every run stays in time order.
 */
static inline void iol_record_one(int op, int layer, uint32_t file, int64_t off, int64_t size,
                                  uint64_t t0, uint64_t t1)
{
    struct iol_chunk *c = iol_chunk_tls;
    if (UNLIKELY(!c)) {
        c = iol_thread_start();
        if (!c)
            return;
    }
    uint32_t n = c->n;
    uint32_t lim = n < IOL_LOOKBACK ? n : IOL_LOOKBACK;
    for (uint32_t i = 1; i <= lim; i++) {
        struct iol_record *r = &c->recs[n - i];
        if (r->op != op || r->layer != layer)
            continue;
        if (r->file == file && r->size == size) {
            if (off < 0) {
                if (!(r->flags & IOL_R_DIR))
                    goto merge;
            } else if (r->count == 1) {
                r->stride = off - r->offset;
                goto merge;
            } else if (off == r->offset + (int64_t)r->count * r->stride) {
                goto merge;
            }
        } else if (off < 0 && size == 0 && file > IOL_FILE_OTHER) {
            uint32_t pd = iol_parent(file);
            if (pd > IOL_FILE_OTHER) {
                if (r->flags & IOL_R_DIR) {
                    if (r->file == pd)
                        goto merge;
                } else if (iol_parent(r->file) == pd) {
                    r->file = pd;
                    r->flags |= IOL_R_DIR;
                    goto merge;
                }
            }
        }
        break;
    merge:
        r->count++;
        r->t_end = t1;
        r->dur += t1 - t0;
        return;
    }
    if (UNLIKELY(n == c->cap)) {
        c = iol_chunk_full(c);
        if (!c)
            return;
        n = c->n;
    }
    struct iol_record *r = &c->recs[n];
    r->op = (uint8_t)op;
    r->layer = (uint8_t)layer;
    r->flags = 0;
    r->file = file;
    r->offset = off;
    r->size = size;
    r->stride = off < 0 ? 0 : size;
    r->count = 1;
    r->t_start = t0;
    r->t_end = t1;
    r->dur = t1 - t0;
    __atomic_store_n(&c->n, n + 1, __ATOMIC_RELEASE);
}

/* Record, then see whether a periodic flush is due: two loads and a compare per call
   (next_flush is UINT64_MAX when flushing is off, and the generation then never moves). */
static inline void iol_record(int op, int layer, uint32_t file, int64_t off, int64_t size,
                              uint64_t t0, uint64_t t1)
{
    iol_record_one(op, layer, file, off, size, t0, t1);
    if (UNLIKELY(t1 >= __atomic_load_n(&g.next_flush, __ATOMIC_RELAXED) ||
                 iol_gen_tls != __atomic_load_n(&g.flush_gen, __ATOMIC_RELAXED)))
        iol_flush_check(t1);
}

/* ---- wrapper helpers ------------------------------------------------------------- */

/* Declare the pointer to the next definition of `name` (libc, or another interposer). */
#define IOL_REAL(ret, name, params) static ret(*real_##name) params

/* Resolve lazily; a race only writes the same value twice. */
#define IOL_RESOLVE(name)                                                               \
    do {                                                                                \
        if (UNLIKELY(!__atomic_load_n(&real_##name, __ATOMIC_RELAXED)))                 \
            __atomic_store_n(&real_##name, (__typeof__(real_##name))iol_dlsym(#name),   \
                             __ATOMIC_RELAXED);                                         \
    } while (0)

/* Around the real call in a wrapper: PRE() takes the start time, POST() the end time and
   errno, then raises the guard; RETURN(rc) lowers it and restores errno. The guard covers
   only our bookkeeping, not the real call: a signal handler that does I/O while the real
   call blocks is recorded like any other call. */
#define PRE() uint64_t t0 = iol_now()

#define POST()                                                                          \
    uint64_t t1 = iol_now();                                                            \
    int saved_errno = errno;                                                            \
    iol_guard = 1

#define RETURN(rc)                                                                      \
    do {                                                                                \
        iol_guard = 0;                                                                  \
        errno = saved_errno;                                                            \
        return rc;                                                                      \
    } while (0)

/* True when this call must pass straight through (tracer off, or we are re-entered). */
static inline int iol_skip(void)
{
    if (UNLIKELY(g.state != IOL_ON)) {
        if (!g.initialised && !iol_guard)
            iol_init();
        if (g.state != IOL_ON)
            return 1;
    }
    if (UNLIKELY(iol_guard)) {
        /* a signal handler interrupted our bookkeeping: the call is not recorded, but
           counted, so the loss is never silent */
        __atomic_fetch_add(&g.missed_calls, 1, __ATOMIC_RELAXED);
        return 1;
    }
    return 0;
}

/* ---- Lustre layouts: the per-open and per-close checks, inline ---------------------- */

/* After an open of `file` as `fd`: read its layout unless it is known not to be on Lustre
   (one load and a branch for every file after its directory's first). */
static inline void iol_layout_opened(int fd, uint32_t file, int oflags)
{
    if (g.layouts_on && file > IOL_FILE_OTHER && file < g.nfiles &&
        __atomic_load_n(&g.files[file].fs, __ATOMIC_RELAXED) != IOL_FS_OTHER)
        iol_layout_open(fd, file, oflags);
}

/* Before a close of `fd`: a written file may have grown into more PFL components. */
static inline void iol_layout_closing(int fd)
{
    struct iol_fd *f = iol_fd(fd);
    if (g.layouts_on && f && (f->flags & IOL_FDF_WRITE))
        iol_layout_close(fd);
}

#endif /* IOLENS_INTERNAL_H */
