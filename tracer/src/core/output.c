/*
 * output.c - the per-process spool file (format in include/iolens_trace.h).
 *
 * The file is written as <spool>/<host>-<pid>-<start ns>-<segment>.iolens.partial, with
 * raw system calls (never through our own wrappers, nor another interposer's), and
 * renamed to *.iolens once complete, so a reader never sees half a file under the final
 * name. Any failure (unwritable directory, full disk) only counts spool_errors and loses
 * trace data: the application never sees an error, a signal, or a changed errno; the loss
 * is said once on stderr and marked by an empty <name>.iolens.lost file when possible.
 *
 * The spool may be shared (mode 1777): files are created 0600 with O_EXCL|O_NOFOLLOW,
 * every call is relative to a descriptor of the spool directory checked first (owned by
 * this user or root; writable by others only with the sticky bit), so a planted symlink
 * or a directory swapped under us cannot redirect the trace.
 */
#include "iolens.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static char *put_str(char *p, char *end, const char *s)
{
    while (*s && p < end)
        *p++ = *s++;
    return p;
}

static char *put_u64(char *p, char *end, uint64_t v)
{
    char tmp[24];
    int i = 0;
    do {
        tmp[i++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (i && p < end)
        *p++ = tmp[--i];
    return p;
}

int iol_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len) {
        long n = syscall(SYS_write, fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static void mkdirs(const char *dir)
{
    char buf[IOL_PATH_MAX];
    size_t n = strlen(dir);
    if (n >= sizeof buf)
        return;
    memcpy(buf, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] == '/' || buf[i] == '\0') {
            char c = buf[i];
            buf[i] = '\0';
            syscall(SYS_mkdir, buf, 0700);
            buf[i] = c;
        }
    }
}

#define IOL_EUNSAFE (-1) /* not an errno: the spool directory failed the check */

static const char *why(int err)
{
    switch (err) {
    case ENOSPC: return "no space left on device";
    case EDQUOT: return "disk quota exceeded";
    case EACCES: case EPERM: return "permission denied";
    case EROFS: return "read-only file system";
    case ENOENT: return "no such directory";
    case EEXIST: return "a file of that name exists";
    case ELOOP: return "a symlink where the file should be";
    case EIO: return "I/O error";
    case IOL_EUNSAFE:
        return "the directory is another user's, or writable by others without the sticky bit";
    default: return "write error";
    }
}

/* The spool directory, opened and checked; -1 with *err set. Never keeps it open. */
static int spool_dir(int *err)
{
    int flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC;
    long fd = syscall(SYS_openat, AT_FDCWD, g.spool, flags);
    if (fd < 0 && errno == ENOENT) {
        mkdirs(g.spool);
        fd = syscall(SYS_openat, AT_FDCWD, g.spool, flags);
    }
    if (fd < 0) {
        *err = errno;
        return -1;
    }
    struct stat st;
    unsigned euid = (unsigned)syscall(SYS_geteuid);
    if (syscall(SYS_fstat, (int)fd, &st) != 0 || (st.st_uid != euid && st.st_uid != 0) ||
        ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))) {
        syscall(SYS_close, (int)fd);
        *err = IOL_EUNSAFE;
        return -1;
    }
    return (int)fd;
}

/*
 * The trace is lost: say it once on stderr (raw write(2): no stdio, async-signal-safe) and
 * leave an empty <name>.lost mark for `iolens trace` and the agent, if the directory takes
 * it. errno is the caller's to restore (everything here is a raw system call).
 */
static void say_lost(int err)
{
    if (g.lost_said)
        return;
    g.lost_said = 1;
    char msg[IOL_PATH_MAX + 256], *p = msg, *end = msg + sizeof msg - 2;
    p = put_str(p, end, "iolens: cannot write the I/O trace of process ");
    p = put_u64(p, end, (uint64_t)g.pid);
    p = put_str(p, end, " to ");
    p = put_str(p, end, g.spool);
    p = put_str(p, end, " (");
    p = put_str(p, end, why(err));
    p = put_str(p, end, "): its trace is lost; the program is not affected\n");
    /* only to the stderr the process inherited: once the application closed it or put
       one of its own files there, the line would land in its data */
    if (g.stderr_file && iol_fd_file(2) == g.stderr_file)
        syscall(SYS_write, 2, msg, (size_t)(p - msg));
    if (err == IOL_EUNSAFE || !g.out_name)
        return;
    int e;
    int dfd = spool_dir(&e);
    if (dfd < 0)
        return;
    char lost[IOL_PATH_MAX];
    size_t n = strlen(g.out_path + g.out_name) - (sizeof ".partial" - 1);
    if (n + sizeof ".lost" <= sizeof lost) {
        memcpy(lost, g.out_path + g.out_name, n);
        memcpy(lost + n, ".lost", sizeof ".lost");
        long fd = syscall(SYS_openat, dfd, lost,
                          O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0)
            syscall(SYS_close, (int)fd);
    }
    syscall(SYS_close, dfd);
}

/* Remove the .partial file (relative to a checked spool descriptor). */
static void unlink_out(void)
{
    int e;
    int dfd = spool_dir(&e);
    if (dfd < 0)
        return;
    syscall(SYS_unlinkat, dfd, g.out_path + g.out_name, 0);
    syscall(SYS_close, dfd);
}

/* Open the .partial file and write the preamble; caller holds g.lock. */
static int open_out(void)
{
    if (g.out_fd >= 0)
        return 0;
    if (g.out_failed)
        return -1;
    int err = 0;
    int dfd = spool_dir(&err);
    if (dfd < 0)
        goto fail;
    if (g.out_created) {
        /* the file stays closed between spills, so no application close()/dup2() can
           ever make us write into one of its own files */
        long fd = syscall(SYS_openat, dfd, g.out_path + g.out_name,
                          O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
            err = errno;
            goto fail;
        }
        g.out_fd = (int)fd;
        syscall(SYS_close, dfd);
        return 0;
    }
    char *p = g.out_path, *end = g.out_path + sizeof g.out_path - 32;
    p = put_str(p, end, g.spool);
    p = put_str(p, end, "/");
    g.out_name = (uint32_t)(p - g.out_path);
    p = put_str(p, end, g.host[0] ? g.host : "host");
    p = put_str(p, end, "-");
    p = put_u64(p, end, (uint64_t)g.pid);
    p = put_str(p, end, "-");
    p = put_u64(p, end, g.start_wall_ns);
    p = put_str(p, end, "-");
    p = put_u64(p, end, g.segment);
    p = put_str(p, end, ".iolens.partial");
    *p = '\0';
    int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
    long fd = syscall(SYS_openat, dfd, g.out_path + g.out_name, flags, 0600);
    if (fd < 0) {
        err = errno;
        goto fail;
    }
    /* keep the spool fd clear of the low numbers an application may dup2() over */
    if (fd < 100) {
        long hi = syscall(SYS_fcntl, (int)fd, F_DUPFD_CLOEXEC, 100);
        if (hi >= 0) {
            syscall(SYS_close, (int)fd);
            fd = hi;
        }
    }
    g.out_fd = (int)fd;
    g.out_created = 1;
    struct iol_preamble pre;
    memcpy(pre.magic, IOL_MAGIC, 8);
    pre.version = IOL_FORMAT_VERSION;
    pre.endian = 0x01020304u;
    if (iol_write_all(g.out_fd, &pre, sizeof pre) == 0) {
        syscall(SYS_close, dfd);
        return 0;
    }
    err = errno;
fail:
    g.spool_errors++;
    g.out_failed = 1;
    if (g.out_fd >= 0)
        syscall(SYS_close, g.out_fd);
    if (dfd >= 0) {
        if (g.out_created)
            syscall(SYS_unlinkat, dfd, g.out_path + g.out_name, 0);
        syscall(SYS_close, dfd);
    }
    g.out_fd = -1;
    say_lost(err);
    return -1;
}

IOL_HIDDEN void iol_out_close(void)
{
    if (g.out_fd >= 0)
        syscall(SYS_close, g.out_fd);
    g.out_fd = -1;
}

static int write_section(uint32_t type, uint32_t aux, const void *payload, uint64_t len)
{
    struct iol_section s = {type, aux, len};
    if (open_out() < 0)
        return -1;
    if (iol_write_all(g.out_fd, &s, sizeof s) < 0 ||
        (len && iol_write_all(g.out_fd, payload, len) < 0)) {
        int err = errno;
        g.spool_errors++;
        g.out_failed = 1;
        syscall(SYS_close, g.out_fd);
        unlink_out();
        g.out_fd = -1;
        say_lost(err);
        return -1;
    }
    return 0;
}

/* A RECORDS payload as an IOL_SEC_ZSTD section if zstd makes it smaller (compress.c);
   -1 if the write failed, 1 if it was not compressed (the caller writes it plain). */
static int write_compressed(uint32_t aux, const void *payload, uint64_t len)
{
    const void *frame;
    size_t flen = iol_zstd(payload, (size_t)len, &frame);
    if (!flen)
        return 1;
    static const char zeros[8];
    size_t pad = (8 - (flen & 7)) & 7;
    struct iol_zsection zh = {IOL_SEC_RECORDS, (uint32_t)flen, len};
    struct iol_section s = {IOL_SEC_ZSTD, aux, sizeof zh + flen + pad};
    if (open_out() < 0)
        return -1;
    if (iol_write_all(g.out_fd, &s, sizeof s) < 0 || iol_write_all(g.out_fd, &zh, sizeof zh) < 0 ||
        iol_write_all(g.out_fd, frame, flen) < 0 || (pad && iol_write_all(g.out_fd, zeros, pad) < 0)) {
        int err = errno;
        g.spool_errors++;
        g.out_failed = 1;
        syscall(SYS_close, g.out_fd);
        unlink_out();
        g.out_fd = -1;
        say_lost(err);
        return -1;
    }
    return 0;
}

static void drop(const struct iol_chunk *c)
{
    g.dropped_records += c->n;
    for (uint32_t i = 0; i < c->n; i++)
        g.dropped_calls += c->recs[i].count;
}

/* Write one (already folded) chunk to the spool, or count it as dropped; holds g.lock. */
IOL_HIDDEN void iol_spill_chunk(struct iol_chunk *c)
{
    uint32_t n = c->n;
    if (!n)
        return;
    if (g.no_spill && g.state == IOL_ON && !g.flushing) {
        drop(c); /* mid-run and told not to write: keep only the summaries */
        return;
    }
    uint64_t len = (uint64_t)n * sizeof(struct iol_record);
    int r = write_compressed(c->tid, c->recs, len);
    if (r > 0)
        r = write_section(IOL_SEC_RECORDS, c->tid, c->recs, len);
    if (r)
        drop(c);
    else
        g.records += n;
}

/* Every record's file has a summary (records are folded before they are written), so
   paths that only ever appeared inside a directory record are left out - unless summary
   slots ran out, when every path is written. */
static int wanted(uint32_t i)
{
    const struct iol_fentry *e = &g.files[i];
    return i == IOL_FILE_OTHER || iol_fentry_summarised(e) || g.nsums >= g.sums_cap;
}

/* Output through a small buffer: parts larger than it are written straight through. */
struct outbuf {
    char buf[8192];
    size_t used;
};

static int emit(struct outbuf *o, const void *p, size_t n)
{
    if (o->used + n > sizeof o->buf) {
        if (o->used && iol_write_all(g.out_fd, o->buf, o->used) < 0)
            return -1;
        o->used = 0;
        if (n > sizeof o->buf)
            return iol_write_all(g.out_fd, p, n);
    }
    memcpy(o->buf + o->used, p, n);
    o->used += n;
    return 0;
}

static int emit_pad(struct outbuf *o, size_t n)
{
    static const char zeros[8];
    return emit(o, zeros, (8 - (n & 7)) & 7);
}

/* A wanted file's published layout, or NULL. */
static const struct iol_layout_rec *layout_of(uint32_t i)
{
    uint32_t r = g.layouts_on ? __atomic_load_n(&g.files[i].layout, __ATOMIC_ACQUIRE) : 0;
    return r && r <= g.lay_recs_cap ? &g.lay_recs[r - 1] : NULL;
}

static uint64_t layout_bytes(const struct iol_layout_rec *l)
{
    if (!l)
        return 0;
    return sizeof(struct iol_layout_entry) + (((uint64_t)l->lov.nosts * 4 + 7) & ~7ull);
}

/* The FILES section; returns the number of entries with a layout, or -1. */
static int write_files(void)
{
    uint64_t total = 0;
    uint32_t n = g.nfiles < g.files_cap ? g.nfiles : g.files_cap;
    for (uint32_t i = 1; i < n; i++)
        if (wanted(i))
            total += sizeof(struct iol_file_entry) + ((g.files[i].path_len + 7u) & ~7u) +
                     layout_bytes(layout_of(i));
    struct iol_section s = {IOL_SEC_FILES, 0, total};
    if (open_out() < 0 || iol_write_all(g.out_fd, &s, sizeof s) < 0)
        return -1;
    static struct outbuf o; /* under g.lock; too big for a signal handler's stack */
    o.used = 0;
    int layouts = 0;
    for (uint32_t i = 1; i < n; i++) {
        struct iol_fentry *e = &g.files[i];
        if (!wanted(i))
            continue;
        const struct iol_layout_rec *l = layout_of(i);
        struct iol_file_entry fe = {i, e->parent, e->path_len, l ? IOL_FE_LAYOUT : 0};
        if (emit(&o, &fe, sizeof fe) < 0 || emit(&o, g.arena + e->path_off, e->path_len) < 0 ||
            emit_pad(&o, e->path_len) < 0)
            return -1;
        if (!l)
            continue;
        struct iol_layout_entry le;
        memset(&le, 0, sizeof le);
        le.magic = l->lov.magic;
        le.flags = l->lov.flags;
        le.stripe_size = l->lov.stripe_size;
        le.stripe_count = l->lov.stripe_count;
        le.components = l->lov.components;
        le.nosts = l->lov.nosts;
        if (l->mnt && l->mnt <= IOL_MAX_MOUNTS)
            memcpy(le.fsname, g.mounts[l->mnt - 1].fsname, sizeof le.fsname);
        size_t ob = (size_t)le.nosts * 4;
        if (emit(&o, &le, sizeof le) < 0 || emit(&o, g.lay_osts + l->off, ob) < 0 ||
            emit_pad(&o, ob) < 0)
            return -1;
        layouts++;
    }
    if (o.used && iol_write_all(g.out_fd, o.buf, o.used) < 0)
        return -1;
    return layouts;
}

static double calibrate(void)
{
    if (!g.use_tsc)
        return 1.0;
    uint64_t m0 = g.base_mono_ns, t0 = g.base_ticks;
    uint64_t m1 = iol_mono_ns(), t1 = iol_now();
    /* at least 200 us of history so the ratio is good to ~1e-4 */
    while (m1 - m0 < 200000) {
        __builtin_ia32_pause();
        m1 = iol_mono_ns();
        t1 = iol_now();
    }
    return t1 > t0 ? (double)(m1 - m0) / (double)(t1 - t0) : 1.0;
}

/*
 * Write the tables after the records (FILES, SUMMARY, HINTS, HEADER, END), close the
 * .partial file and rename it into place: <base>.iolens, or <base>.<k>.iolens for interim
 * file k. Summaries and counters are cumulative, so the last file covers the process.
 * Caller holds g.lock; returns 1 if the file is in place.
 */
static int close_out(int interim)
{
    int ok = !g.out_failed;
    int layouts = ok ? write_files() : -1;
    int files_err = errno;
    if (ok && layouts < 0) {
        g.spool_errors++;
        say_lost(files_err);
    }
    ok = ok && layouts >= 0;
    ok = ok && write_section(IOL_SEC_SUMMARY, 0, g.sums,
                             (uint64_t)g.nsums * sizeof(struct iol_summary)) == 0;
    uint64_t hints_len = 0;
    const void *hints = iol_mpiio_hints(&hints_len);
    if (hints && hints_len)
        ok = ok && write_section(IOL_SEC_HINTS, 0, hints, hints_len) == 0;

    struct {
        struct iol_header h;
        char strings[256 + 256 + IOL_PATH_MAX + 128];
    } hb;
    memset(&hb, 0, sizeof hb);
    struct iol_header *h = &hb.h;
    if (g.dropped_records || g.dropped_files || g.missed_calls)
        g.flags |= IOL_F_PARTIAL;
    if (g.dropped_files)
        g.flags |= IOL_F_FILES_CAPPED;
    h->flags = g.flags | (interim ? IOL_F_INTERIM : 0);
    h->clock = g.use_tsc ? IOL_CLOCK_TSC : IOL_CLOCK_MONO;
    h->pid = g.pid;
    h->ppid = g.ppid;
    h->rank = g.rank;
    h->uid = g.uid;
    h->start_wall_ns = g.start_wall_ns;
    h->end_wall_ns = iol_wall_ns();
    h->base_ticks = g.base_ticks;
    h->base_wall_ns = g.base_wall_ns;
    h->ns_per_tick = calibrate();
    h->calls = g.calls;
    h->records = g.records;
    h->dropped_records = g.dropped_records;
    h->dropped_calls = g.dropped_calls;
    h->missed_calls = g.missed_calls;
    h->files = g.nfiles < g.files_cap ? g.nfiles : g.files_cap;
    h->dropped_files = g.dropped_files;
    h->spool_errors = g.spool_errors;
    h->segment = g.segment;
    h->budget_mb = (uint32_t)(g.budget >> 20);
    h->layouts = layouts > 0 ? (uint32_t)layouts : 0;
    h->layouts_lost = g.layouts_lost;
    h->interval = interim ? g.interval + 1 : g.interval;
    char *p = hb.strings;
    const char *strs[4] = {g.job_id, g.host, g.exe, g.user};
    uint16_t *lens[4] = {&h->len_job_id, &h->len_host, &h->len_exe, &h->len_user};
    for (int i = 0; i < 4; i++) {
        size_t n = strlen(strs[i]);
        memcpy(p, strs[i], n);
        *lens[i] = (uint16_t)n;
        p += n;
    }
    ok = ok && write_section(IOL_SEC_HEADER, 0, &hb, sizeof *h + (uint64_t)(p - hb.strings)) == 0;
    ok = ok && write_section(IOL_SEC_END, 0, NULL, 0) == 0;
    if (g.out_fd >= 0) {
        syscall(SYS_close, g.out_fd);
        g.out_fd = -1;
    }
    if (g.out_created) {
        int e;
        int dfd = spool_dir(&e);
        if (dfd >= 0) {
            const char *name = g.out_path + g.out_name;
            char final[IOL_PATH_MAX];
            size_t n = strlen(name) - (sizeof ".partial" - 1);
            memcpy(final, name, n);
            final[n] = '\0';
            if (interim) { /* <base>.iolens -> <base>.<k>.iolens */
                char *p = final + n - (sizeof ".iolens" - 1), *end = final + sizeof final - 8;
                p = put_str(p, end, ".");
                p = put_u64(p, end, (uint64_t)g.interval + 1);
                p = put_str(p, end, ".iolens");
                *p = '\0';
            }
            if (!ok || syscall(SYS_renameat, dfd, name, dfd, final) != 0) {
                if (ok)
                    say_lost(errno);
                syscall(SYS_unlinkat, dfd, name, 0);
                ok = 0;
            }
            syscall(SYS_close, dfd);
        } else {
            say_lost(e);
            ok = 0;
        }
    }
    return ok;
}

/* End the current interval as an interim file if records went to it (else no file: an
   interval without I/O leaves nothing); the next interval starts a new .partial file.
   Caller holds g.lock, with every retained chunk written. */
int iol_close_interval(void)
{
    if (!g.out_created || g.out_failed)
        return 0;
    int ok = close_out(1);
    if (ok) {
        g.interval++;
        g.out_created = 0;
    }
    return ok;
}

/*
 * Write everything still in memory and the tables, then rename the file into place.
 * `trylock` is for _exit(), which may be called from a signal handler that interrupted a
 * thread holding the lock: then we give up rather than deadlock.
 */
void iol_finalize(uint32_t flags, int trylock)
{
    int saved_errno = errno;
    int saved_guard = iol_guard;
    iol_guard = 1;
    if (trylock) {
        if (pthread_mutex_trylock(&g.lock) != 0)
            goto out;
    } else {
        pthread_mutex_lock(&g.lock);
    }
    if (g.state != IOL_ON) {
        pthread_mutex_unlock(&g.lock);
        goto out;
    }
    __atomic_store_n(&g.state, IOL_OFF, __ATOMIC_RELEASE);
    g.flags |= flags;

    /* live threads' chunks: fold, then write after the retained ones */
    for (struct iol_tstate *t = g.threads; t; t = t->next)
        if (t->live && t->chunk)
            iol_fold(t->chunk);
    for (struct iol_chunk *c = g.retained; c; c = c->next)
        iol_spill_chunk(c);
    for (struct iol_tstate *t = g.threads; t; t = t->next)
        if (t->live && t->chunk)
            iol_spill_chunk(t->chunk);

    if (!g.calls && !g.dropped_records && !g.missed_calls && !g.out_created) {
        /* no I/O at all (e.g. a fork child that went straight to exec): no file */
        pthread_mutex_unlock(&g.lock);
        goto out;
    }
    close_out(0);
    pthread_mutex_unlock(&g.lock);
out:
    iol_guard = saved_guard;
    errno = saved_errno;
}
