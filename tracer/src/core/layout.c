/*
 * layout.c - the Lustre layout (stripe size, stripe count, OST indices) of every file the
 * process opens on Lustre, read from the `lustre.lov` extended attribute: no liblustreapi,
 * no ioctl, no RPC (the client answers from the layout it holds for the open file).
 *
 * Cost, and how it stays near zero off Lustre: the xattr call itself tells whether a file
 * is on Lustre - any other file system answers EOPNOTSUPP (no handler for the "lustre."
 * namespace) - and that answer is remembered on the file's directory entry, so after the
 * first file of a directory, opens there cost one load and one branch. On Lustre, a file
 * is read once per process; a layout with components not instantiated yet (a PFL file
 * still growing) is read again at its next open, and at close when it was written.
 * (statfs would also tell Lustre apart, but on Lustre it is an RPC to the servers.)
 *
 * The fs name that turns an OST index into a target name (`<fsname>-OST0004`) comes from
 * the Lustre line of /proc/self/mountinfo whose mount point holds the file (the fd's path
 * from /proc/self/fd), read when the first Lustre file is seen, at most MOUNT_READS times.
 *
 * Never harming the application: the wrappers save errno before and restore it after;
 * buffers are on the stack (4 KiB) or preallocated (64 KiB for wider layouts, taken with
 * a try-lock); storage comes from tables mapped at start-up, and a layout that finds no
 * room or does not decode is counted in the header (`layouts_lost`) and left unknown.
 */
#include "iolens.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

IOL_HIDDEN void *iol_map(uint64_t bytes);

#define LOV_XATTR "lustre.lov"
#define LOV_STACK 4096          /* v1: up to 169 stripes; typical PFL layouts fit */
#define LOV_BIG (64u << 10)     /* LOV_MAX_STRIPE_COUNT (2000) stripes: 48 KiB */
#define OSTS_PER_FILE 32        /* average room per file in the OST index table */
#define MOUNT_READS 4           /* mountinfo re-reads per process (mounts made later) */

typedef ssize_t (*fgetxattr_fn)(int, const char *, void *, size_t);
typedef int (*open_fn)(const char *, int, ...);

/* Resolved at start-up (dlsym is not async-signal-safe): the next definitions, so another
   interposer after us - or a test standing in for Lustre - sees these calls. */
static fgetxattr_fn real_fgetxattr;
static open_fn real_open;

void iol_layout_init(void)
{
    const char *v = getenv("IOLENS_LAYOUT");
    if (v && strcmp(v, "0") == 0)
        return;
    real_fgetxattr = (fgetxattr_fn)iol_dlsym("fgetxattr");
    real_open = (open_fn)iol_dlsym("open");
    if (!real_fgetxattr)
        return;
    uint32_t recs = g.files_cap + g.files_cap / 4 + 16;
    uint64_t osts = (uint64_t)g.files_cap * OSTS_PER_FILE;
    g.lay_recs = iol_map((uint64_t)recs * sizeof(struct iol_layout_rec));
    g.lay_osts = iol_map(osts * sizeof(uint32_t));
    g.lov_big = iol_map(LOV_BIG);
    if (!g.lay_recs || !g.lay_osts)
        return;
    g.lay_recs_cap = recs;
    g.lay_osts_cap = (uint32_t)osts;
    g.layouts_on = 1;
}

/* ---- mounts ---------------------------------------------------------------------- */

/* Append the Lustre mount of one mountinfo line unless known; holds g.mounts_lock. The
   table only grows, so readers never see an entry change under them. */
static void add_mount(const char *line, size_t n)
{
    uint32_t k = g.nmounts;
    if (k >= IOL_MAX_MOUNTS)
        return;
    struct iol_mount *m = &g.mounts[k];
    int len = iol_mountinfo_lustre(line, n, m->point, sizeof m->point, m->fsname);
    if (len < 0)
        return;
    for (uint32_t i = 0; i < k; i++)
        if (g.mounts[i].len == (uint32_t)len && memcmp(g.mounts[i].point, m->point, len) == 0)
            return;
    m->len = (uint32_t)len;
    __atomic_store_n(&g.nmounts, k + 1, __ATOMIC_RELEASE);
}

static void read_mounts(void)
{
    if (!real_open || g.mount_reads >= MOUNT_READS)
        return;
    g.mount_reads++;
    int fd = real_open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    char buf[2048];
    size_t have = 0;
    int skipping = 0; /* inside a line longer than buf: never a Lustre mount we can match */
    for (;;) {
        long r = syscall(SYS_read, fd, buf + have, sizeof buf - have);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        have += (size_t)r;
        size_t start = 0;
        for (size_t i = 0; i < have; i++) {
            if (buf[i] != '\n')
                continue;
            if (!skipping)
                add_mount(buf + start, i - start);
            skipping = 0;
            start = i + 1;
        }
        memmove(buf, buf + start, have - start);
        have -= start;
        if (have == sizeof buf) {
            skipping = 1;
            have = 0;
        }
    }
    if (have && !skipping)
        add_mount(buf, have);
    syscall(SYS_close, fd);
}

/* 1 + the longest Lustre mount point holding `path`, 0 if none. */
static uint32_t match(const char *path, size_t n)
{
    uint32_t best = 0, best_len = 0, k = __atomic_load_n(&g.nmounts, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; i < k; i++) {
        const struct iol_mount *m = &g.mounts[i];
        uint32_t len = m->len;
        if (len == 1 && m->point[0] == '/')
            len = 0; /* "/" holds everything */
        if (len > n || memcmp(path, m->point, len) != 0 || (len < n && path[len] != '/'))
            continue;
        if (!best || len > best_len) {
            best = i + 1;
            best_len = len;
        }
    }
    return best;
}

/* The Lustre mount holding the file open as `fd` (by its path, symlinks resolved). */
static uint32_t mount_of(int fd)
{
    char link[32] = "/proc/self/fd/", path[512];
    char digits[12];
    int nd = 0;
    unsigned v = (unsigned)fd;
    do {
        digits[nd++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    size_t at = strlen(link);
    while (nd)
        link[at++] = digits[--nd];
    link[at] = '\0';
    long n = syscall(SYS_readlink, link, path, sizeof path);
    if (n <= 0)
        return 0;
    uint32_t m = match(path, (size_t)n);
    if (m)
        return m;
    if (__atomic_exchange_n(&g.mounts_lock, 1, __ATOMIC_ACQUIRE))
        return 0; /* another thread is reading the table; this file stays unnamed */
    read_mounts();
    __atomic_store_n(&g.mounts_lock, 0, __ATOMIC_RELEASE);
    return match(path, (size_t)n);
}

/* ---- layouts --------------------------------------------------------------------- */

static void lost(void) { __atomic_fetch_add(&g.layouts_lost, 1, __ATOMIC_RELAXED); }

/* Decode `n` bytes into fresh storage and publish them as the file's layout. */
static void publish(int fd, struct iol_fentry *e, struct iol_fentry *dir,
                    const unsigned char *buf, size_t n)
{
    uint32_t room = (uint32_t)(n / 24) + 1; /* every OST index takes 24 bytes of xattr */
    uint32_t off = __atomic_fetch_add(&g.lay_osts_used, room, __ATOMIC_RELAXED);
    if (off > g.lay_osts_cap || room > g.lay_osts_cap - off) {
        lost();
        return;
    }
    uint32_t r = __atomic_fetch_add(&g.lay_nrecs, 1, __ATOMIC_RELAXED);
    if (r >= g.lay_recs_cap) {
        lost();
        return;
    }
    struct iol_layout_rec *rec = &g.lay_recs[r];
    if (iol_lov_decode(buf, n, &rec->lov, g.lay_osts + off, room) < 0) {
        lost();
        return;
    }
    uint32_t mnt = dir ? dir->mnt : 0;
    if (!mnt) {
        mnt = mount_of(fd);
        if (dir && mnt)
            dir->mnt = (uint8_t)mnt;
    }
    rec->off = off;
    rec->mnt = mnt;
    __atomic_store_n(&e->layout, r + 1, __ATOMIC_RELEASE);
}

static void read_layout(int fd, struct iol_fentry *e, struct iol_fentry *dir)
{
    unsigned char stack[LOV_STACK];
    unsigned char *buf = stack;
    int big = 0;
    ssize_t n = real_fgetxattr(fd, LOV_XATTR, buf, sizeof stack);
    if (n < 0 && errno == ERANGE && g.lov_big &&
        !__atomic_exchange_n(&g.lov_big_busy, 1, __ATOMIC_ACQUIRE)) {
        big = 1;
        buf = g.lov_big;
        n = real_fgetxattr(fd, LOV_XATTR, buf, LOV_BIG);
    }
    if (n < 0) {
        if (errno == EOPNOTSUPP) { /* not Lustre: remember it on the file and its directory */
            __atomic_store_n(&e->fs, IOL_FS_OTHER, __ATOMIC_RELAXED);
            if (dir)
                __atomic_store_n(&dir->fs, IOL_FS_OTHER, __ATOMIC_RELAXED);
        }
        else if (errno == ERANGE)
            lost();
        /* ENODATA: a Lustre file without a layout yet; anything else: unknown */
    } else {
        if (dir)
            __atomic_store_n(&dir->fs, IOL_FS_LUSTRE, __ATOMIC_RELAXED);
        publish(fd, e, dir, buf, (size_t)n);
    }
    if (big)
        __atomic_store_n(&g.lov_big_busy, 0, __ATOMIC_RELEASE);
}

static struct iol_fentry *dir_of(const struct iol_fentry *e)
{
    uint32_t p = e->parent;
    return p > IOL_FILE_OTHER && p < g.nfiles ? &g.files[p] : NULL;
}

static int complete(uint32_t have)
{
    return have && !(g.lay_recs[have - 1].lov.flags & IOL_LOV_INCOMPLETE);
}

void iol_layout_open(int fd, uint32_t file, int oflags)
{
    if (oflags & (O_DIRECTORY | O_PATH))
        return;
    struct iol_fentry *e = &g.files[file];
    if (complete(__atomic_load_n(&e->layout, __ATOMIC_ACQUIRE)))
        return;
    struct iol_fentry *dir = dir_of(e);
    if (dir && __atomic_load_n(&dir->fs, __ATOMIC_RELAXED) == IOL_FS_OTHER) {
        __atomic_store_n(&e->fs, IOL_FS_OTHER, __ATOMIC_RELAXED); /* next open: one load */
        return;
    }
    read_layout(fd, e, dir);
}

void iol_layout_close(int fd)
{
    struct iol_fd *f = iol_fd(fd);
    uint32_t file = __atomic_load_n(&f->file, __ATOMIC_RELAXED);
    if (file <= IOL_FILE_OTHER || file >= g.nfiles)
        return;
    struct iol_fentry *e = &g.files[file];
    uint32_t have = __atomic_load_n(&e->layout, __ATOMIC_ACQUIRE);
    if (!have || complete(have))
        return; /* not on Lustre, or nothing left to instantiate */
    int saved_errno = errno, saved_guard = iol_guard;
    iol_guard = 1;
    read_layout(fd, e, dir_of(e));
    iol_guard = saved_guard;
    errno = saved_errno;
}
