/*
 * iolens_trace.h - the on-disk format of a tracer output file.
 *
 * Shared by the C tracer (writer) and src/iolens/tracefile (decoder): any change here
 * bumps IOL_FORMAT_VERSION and the decoder's struct layouts in tracefile/format.py.
 * All integers are little-endian, structs are packed as declared (no implicit padding:
 * every struct below is a multiple of 8 bytes with naturally aligned members).
 *
 * File layout:
 *
 *   struct iol_preamble                      magic + version, 16 bytes
 *   { struct iol_section, payload }*         sections in any order, except:
 *   struct iol_section {IOL_SEC_END}         last, length 0: a file without it is truncated
 *
 * Sections:
 *   IOL_SEC_RECORDS  aux = thread id; payload = n x struct iol_record (one flushed block)
 *   IOL_SEC_FILES    payload = n x { struct iol_file_entry, path bytes, pad to 8,
 *                    [struct iol_layout_entry, nosts x u32 OST index, pad to 8] } - the
 *                    layout part only when the entry has IOL_FE_LAYOUT
 *   IOL_SEC_SUMMARY  payload = n x struct iol_summary (one per file and layer touched)
 *   IOL_SEC_HEADER   payload = struct iol_header, then the strings it announces
 *   IOL_SEC_HINTS    payload = n x { struct iol_hints_entry, text bytes, pad to 8 }: the
 *                    MPI_Info hints passed to MPI_File_open, "key=value\n" per hint
 *   IOL_SEC_ZSTD     another section compressed (version 5): aux = the inner section's aux;
 *                    payload = struct iol_zsection, then `frame_len` bytes of one zstd frame
 *                    whose content is the inner payload (`raw_len` bytes), pad to 8. The
 *                    tracer compresses RECORDS sections with it (unless IOLENS_COMPRESS=0,
 *                    libzstd.so.1 is missing, or the frame would not be smaller); a reader
 *                    decompresses and handles the result as a section of type `type`.
 *                    A new section type rather than a flag in `aux`, which holds a full
 *                    thread id: older readers reject the file cleanly (unknown section).
 *
 * Version 2 added the MPI-IO layer and the HINTS section; a version-1 file is a valid
 * version-2 file without them, so readers accept both. Version 3 added Lustre layouts
 * to FILES entries (IOL_FE_LAYOUT) and two counters at the end of the header; earlier
 * files have neither (their entry flags are 0, their header 8 bytes shorter).
 * Version 4 added periodic interim files (IOL_F_INTERIM) and the header's `interval`
 * (8 more bytes); a process's files hold disjoint records, each file's summaries and
 * counters are cumulative (the last file's cover the whole process).
 * Version 5 added compressed sections (IOL_SEC_ZSTD) and the HDF5 and PnetCDF layers
 * (enum iol_layer 3 and 4); a version-4 file is a version-5 file without them.
 * Version 6 added five op codes (TRUNCATE, FADVISE, ACCESS, LINK, READDIR): the summary's
 * `ops` array grew from 14 to 19 counters (struct iol_summary 400 -> 440 bytes), so a
 * reader decodes older summaries with the old op count.
 */
#ifndef IOLENS_TRACE_H
#define IOLENS_TRACE_H

#include <stdint.h>

#define IOL_MAGIC "IOLTRACE"
#define IOL_FORMAT_VERSION 6u

/* Operation codes; names and order match iolens.model.schema.OPS. */
enum iol_op {
    IOL_OP_READ = 0,
    IOL_OP_WRITE,
    IOL_OP_OPEN,
    IOL_OP_CLOSE,
    IOL_OP_STAT,
    IOL_OP_UNLINK,
    IOL_OP_RENAME,
    IOL_OP_MKDIR,
    IOL_OP_RMDIR,
    IOL_OP_FSYNC,
    IOL_OP_SEEK,
    IOL_OP_MMAP,
    IOL_OP_DUP,
    IOL_OP_FLUSH,
    IOL_OP_TRUNCATE,    /* version 6: truncate, ftruncate, fallocate, posix_fallocate;
                           offset = the length set (truncate) or ensured (off + len) */
    IOL_OP_FADVISE,     /* version 6: posix_fadvise */
    IOL_OP_ACCESS,      /* version 6: access, faccessat, euidaccess */
    IOL_OP_LINK,        /* version 6: link, linkat, symlink, symlinkat (the new name) */
    IOL_OP_READDIR,     /* version 6: entries readdir() returned, on the directory */
    IOL_NOPS
};

/* I/O layers; names match tracefile/format.py LAYER_NAMES. MPI-IO records sit above the
   POSIX records the MPI library issues for them (both are kept, as Darshan does). */
enum iol_layer {
    IOL_LAYER_POSIX = 0,
    IOL_LAYER_STDIO = 1,
    IOL_LAYER_MPIIO = 2,
    IOL_LAYER_HDF5 = 3,    /* above MPI-IO and POSIX, like MPI-IO above POSIX */
    IOL_LAYER_PNETCDF = 4, /* above MPI-IO */
    IOL_NLAYERS
};

enum iol_section_type {
    IOL_SEC_RECORDS = 1,
    IOL_SEC_FILES = 2,
    IOL_SEC_SUMMARY = 3,
    IOL_SEC_HEADER = 4,
    IOL_SEC_HINTS = 5,
    IOL_SEC_ZSTD = 6,
    IOL_SEC_END = 0x454e44 /* "END" */
};

/* Header flags. */
#define IOL_F_PARTIAL 0x1u   /* records were dropped: the detailed trace is incomplete */
#define IOL_F_EXEC 0x2u      /* written just before exec() replaced the process image */
#define IOL_F_FORKED 0x4u    /* this process is a fork() child of a traced process */
#define IOL_F_UEXIT 0x8u     /* written from _exit()/_Exit() rather than exit() */
#define IOL_F_FILES_CAPPED 0x10u /* the file table filled: later files count as "<other>" */
#define IOL_F_INTERIM 0x20u  /* a periodic flush (IOLENS_FLUSH_S), not the process's last
                                file: <host>-<pid>-<start ns>-<segment>.<interval>.iolens */

/* Record flags. */
#define IOL_R_DIR 0x1u  /* metadata op on `count` entries of the directory `file` */

/* Reserved file indexes. */
#define IOL_FILE_NONE 0u
#define IOL_FILE_OTHER 1u  /* files beyond the table capacity */

/* Clock kinds: how record ticks convert to nanoseconds (see iol_header). */
#define IOL_CLOCK_TSC 0u
#define IOL_CLOCK_MONO 1u

struct iol_preamble {
    char magic[8];      /* IOL_MAGIC, no NUL */
    uint32_t version;   /* IOL_FORMAT_VERSION */
    uint32_t endian;    /* 0x01020304 as written by the host */
};

struct iol_section {
    uint32_t type;      /* enum iol_section_type */
    uint32_t aux;       /* thread id for RECORDS, else 0 */
    uint64_t length;    /* payload bytes following this struct */
};

/*
 * One compressed record (Beacon first pass): `count` successful calls of `op` on `file`,
 * the k-th (0-based) moving `size` bytes at offset + k*stride. Metadata ops have
 * offset = -1, size = 0, stride = 0. Times are raw clock ticks (see iol_header).
 */
struct iol_record {
    uint8_t op;         /* enum iol_op */
    uint8_t layer;      /* enum iol_layer */
    uint16_t flags;     /* IOL_R_* */
    uint32_t file;      /* index into the FILES table */
    int64_t offset;
    int64_t size;
    int64_t stride;
    uint64_t count;
    uint64_t t_start;   /* ticks at the start of the first call */
    uint64_t t_end;     /* ticks at the end of the last call */
    uint64_t dur;       /* ticks spent inside the merged calls, summed */
};

struct iol_file_entry {
    uint32_t index;
    uint32_t parent;    /* index of the parent directory entry, IOL_FILE_NONE if unknown */
    uint32_t path_len;  /* bytes of path following this struct, then zero padding to 8 */
    uint32_t flags;     /* IOL_FE_* (0 before version 3) */
};

#define IOL_FE_LAYOUT 0x1u /* a struct iol_layout_entry follows the padded path */

/*
 * A file's Lustre layout, read from its `lustre.lov` extended attribute (tracer/src/core
 * lov.h has the decoding). `nosts` OST indices follow, zero-padded to 8 bytes: every
 * instantiated component's stripes in order (a PFL file lists each component's).
 */
struct iol_layout_entry {
    uint32_t magic;         /* the xattr's LOV magic: 0x0BD10BD0, 0x0BD30BD0, 0x0BD60BD0 */
    uint32_t flags;         /* IOL_LOV_* of lov.h: 1 incomplete, 2 DoM, 4 truncated, 8 released */
    uint64_t stripe_size;   /* bytes, of the first instantiated component with objects */
    uint16_t stripe_count;  /* that component's stripe count */
    uint16_t components;    /* 1 for a plain layout */
    uint32_t nosts;         /* OST indices that follow */
    char fsname[16];        /* the mount's Lustre fs name (NUL-padded), "" if unknown */
};

/* The head of an IOL_SEC_ZSTD payload (version 5). */
struct iol_zsection {
    uint32_t type;      /* the inner section's enum iol_section_type (RECORDS today) */
    uint32_t frame_len; /* bytes of the zstd frame that follows */
    uint64_t raw_len;   /* the inner payload's length: the frame must decompress to it */
};

/* One file's MPI-IO hints (HINTS section); `len` text bytes follow, then zero padding to 8. */
struct iol_hints_entry {
    uint32_t file;      /* index into the FILES table */
    uint32_t len;
};

#define IOL_HIST_BINS 10 /* Darshan's access-size bins: 0-100, 100-1K, ... , 1G+ */

/* Per-file, per-layer counters (Darshan-like), kept even when records are dropped. */
struct iol_summary {
    uint32_t file;
    uint32_t layer;
    uint64_t ops[IOL_NOPS];          /* successful calls per op */
    uint64_t bytes_read;
    uint64_t bytes_written;
    int64_t max_byte_read;           /* highest offset read, -1 if none */
    int64_t max_byte_written;
    uint64_t seq_reads;              /* started at or after the end of the previous read */
    uint64_t seq_writes;
    uint64_t consec_reads;           /* started exactly at the end of the previous read */
    uint64_t consec_writes;
    uint64_t hist_read[IOL_HIST_BINS];
    uint64_t hist_write[IOL_HIST_BINS];
    uint64_t t_first;                /* ticks */
    uint64_t t_last;
    uint64_t time_read;              /* ticks summed over calls */
    uint64_t time_write;
    uint64_t time_meta;
    int64_t last_end_read;           /* internal: offset after the last read folded */
    int64_t last_end_write;
};

struct iol_header {
    uint32_t flags;             /* IOL_F_* */
    uint32_t clock;             /* IOL_CLOCK_* */
    int32_t pid;
    int32_t ppid;
    int32_t rank;               /* -1 if unknown */
    uint32_t uid;
    uint64_t start_wall_ns;     /* UTC ns since the epoch when this trace began */
    uint64_t end_wall_ns;       /* UTC ns since the epoch when it was written */
    uint64_t base_ticks;        /* clock ticks at wall time base_wall_ns */
    uint64_t base_wall_ns;
    double ns_per_tick;         /* calibrated over the process lifetime */
    uint64_t calls;             /* calls recorded (sum of record counts, incl. dropped) */
    uint64_t records;           /* records written */
    uint64_t dropped_records;   /* records lost to the memory budget / spool errors */
    uint64_t dropped_calls;     /* calls those records stood for */
    uint32_t files;             /* entries in the FILES table */
    uint32_t dropped_files;     /* distinct paths folded into "<other>" */
    uint32_t spool_errors;      /* failed writes to the spool while running */
    uint32_t segment;           /* 0, then +1 after each failed exec() */
    uint32_t budget_mb;
    uint16_t len_job_id;        /* the strings follow the struct in this order, no NULs */
    uint16_t len_host;
    uint16_t len_exe;
    uint16_t len_user;
    uint16_t pad[2];
    uint64_t missed_calls;      /* calls made by signal handlers that interrupted the
                                   tracer's own bookkeeping: counted, not recorded */
    uint32_t layouts;           /* files whose Lustre layout was recorded (version 3) */
    uint32_t layouts_lost;      /* layouts read but not kept: undecodable, or no room */
    uint32_t interval;          /* version 4: k for interim file k (1, 2, ...); in the final
                                   file, the number of interim files before it */
    uint32_t pad2;
};

#endif /* IOLENS_TRACE_H */
