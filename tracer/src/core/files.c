/*
 * files.c - path -> file index table (lock-free) and the working directory cache.
 *
 * Paths are made absolute against the cached cwd (or the directory fd's path for *at()
 * calls) but are otherwise kept as the application spelled them ("..", symlinks are not
 * resolved: that would cost system calls on every open). Lookups are plain loads; a new
 * path claims a hash slot with one compare-and-swap. When the table is full, further
 * paths count as "<other>" (index 1) and the header says how many were folded.
 */
#include "iolens.h"

#include <fcntl.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

IOL_HIDDEN void *iol_map(uint64_t bytes);
IOL_HIDDEN void iol_summaries_reset(void);

static uint64_t hash_path(const char *p, size_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (n * 0xff51afd7ed558ccdull);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0x87c37b91114253d5ull;
        h = (h << 31) | (h >> 33);
        p += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, p, n);
    h ^= w;
    /* murmur3's fmix64: every input bit reaches every output bit */
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h | 1; /* 0 marks an empty slot; the slot index uses the high half */
}

static uint32_t insert(const char *path, size_t len, int with_parent);

/* The directory part of `path` ("/a/b" for "/a/b/c", "/" for "/a"); none for "/" itself
   or a bare name. Never the path itself: insert() holds its slot while asking. */
static uint32_t parent_of(const char *path, size_t len)
{
    size_t end = len;
    while (end > 1 && path[end - 1] == '/')
        end--; /* "/a/b/" is "/a/b" */
    size_t i = end;
    while (i > 0 && path[i - 1] != '/')
        i--;
    if (i == 0 || end <= 1)
        return IOL_FILE_NONE;
    if (i > 1)
        i--; /* drop the separator, keep "/" for the root */
    if (i >= len)
        return IOL_FILE_NONE;
    return insert(path, i, 0);
}

static uint32_t insert(const char *path, size_t len, int with_parent)
{
    uint64_t h = hash_path(path, len);
    uint32_t mask = g.hash_mask;
    uint32_t i = (uint32_t)(h >> 32) & mask;
    for (uint32_t probes = 0; probes <= mask; probes++, i = (i + 1) & mask) {
        uint64_t k = __atomic_load_n(&g.hash_keys[i], __ATOMIC_ACQUIRE);
        if (k == 0) {
            uint64_t zero = 0;
            if (!__atomic_compare_exchange_n(&g.hash_keys[i], &zero, h, 0, __ATOMIC_ACQ_REL,
                                             __ATOMIC_ACQUIRE)) {
                k = zero;
                goto occupied;
            }
            /* we own slot i: create the entry, then publish its index */
            uint32_t parent = with_parent ? parent_of(path, len) : IOL_FILE_NONE;
            uint32_t idx = __atomic_fetch_add(&g.nfiles, 1, __ATOMIC_ACQ_REL);
            uint64_t off = __atomic_fetch_add(&g.arena_used, len, __ATOMIC_ACQ_REL);
            if (idx >= g.files_cap || off + len > g.arena_cap) {
                if (idx >= g.files_cap)
                    __atomic_store_n(&g.nfiles, g.files_cap, __ATOMIC_RELEASE);
                __atomic_fetch_add(&g.dropped_files, 1, __ATOMIC_RELAXED);
                __atomic_store_n(&g.hash_vals[i], IOL_FILE_OTHER, __ATOMIC_RELEASE);
                return IOL_FILE_OTHER;
            }
            memcpy(g.arena + off, path, len);
            struct iol_fentry *e = &g.files[idx];
            e->parent = parent;
            e->path_off = off;
            e->path_len = (uint32_t)len;
            e->layout = 0;
            e->fs = IOL_FS_UNKNOWN;
            e->mnt = 0;
            iol_fentry_clear(e);
            __atomic_store_n(&g.hash_vals[i], idx, __ATOMIC_RELEASE);
            return idx;
        }
    occupied:
        if (k == h) {
            uint32_t v;
            /* another thread is publishing this path: wait (a few instructions), but
               never forever - a thread interrupted mid-publish by a signal handler that
               opens the same path would otherwise wait on itself */
            for (uint32_t spin = 0; (v = __atomic_load_n(&g.hash_vals[i], __ATOMIC_ACQUIRE)) == 0;
                 spin++) {
                if (spin > (1u << 16))
                    return IOL_FILE_OTHER;
                __builtin_ia32_pause();
            }
            return v;
        }
    }
    return IOL_FILE_OTHER;
}

uint32_t iol_file_named(const char *name) { return insert(name, strlen(name), 0); }

/* Build "<base>/<path>" in buf; returns the length (0 if it does not fit). */
static size_t join(char *buf, const char *base, size_t blen, const char *path)
{
    while (path[0] == '.' && path[1] == '/')
        path += 2;
    size_t plen = strlen(path);
    if (plen == 1 && path[0] == '.')
        plen = 0;
    if (blen + 1 + plen >= IOL_PATH_MAX)
        return 0;
    memcpy(buf, base, blen);
    size_t n = blen;
    if (plen) {
        if (n == 0 || buf[n - 1] != '/')
            buf[n++] = '/';
        memcpy(buf + n, path, plen);
        n += plen;
    }
    return n;
}

uint32_t iol_file_at(int dirfd, const char *path)
{
    if (!path)
        return IOL_FILE_NONE;
    if (path[0] == '/')
        return insert(path, strlen(path), 1);
    char buf[IOL_PATH_MAX];
    size_t n = 0;
    if (dirfd == AT_FDCWD) {
        if (g.cwd_len)
            n = join(buf, g.cwd, g.cwd_len, path);
    } else {
        uint32_t d = iol_fd_file(dirfd);
        if (d > IOL_FILE_OTHER && d < g.nfiles)
            n = join(buf, g.arena + g.files[d].path_off, g.files[d].path_len, path);
    }
    if (n == 0)
        return insert(path, strlen(path), 1);
    return insert(buf, n, 1);
}

uint32_t iol_file_of_path(const char *path) { return iol_file_at(AT_FDCWD, path); }

void iol_cwd_refresh(void)
{
    long n = syscall(SYS_getcwd, g.cwd, sizeof g.cwd);
    g.cwd_len = n > 1 ? (uint32_t)(n - 1) : 0; /* the syscall counts the NUL */
}

void iol_files_init(void)
{
    uint64_t cap = g.budget / 1536;
    if (cap < 256)
        cap = 256;
    uint32_t slots = 1;
    while (slots < cap * 2)
        slots <<= 1;
    g.files_cap = (uint32_t)cap;
    g.hash_mask = slots - 1;
    g.hash_keys = iol_map((uint64_t)slots * sizeof(uint64_t));
    g.hash_vals = iol_map((uint64_t)slots * sizeof(uint32_t));
    g.arena_cap = cap * 128;
    g.arena = iol_map(g.arena_cap);
    g.sums_cap = (uint32_t)cap;
    g.sums = iol_map((uint64_t)g.sums_cap * sizeof(struct iol_summary));
    struct iol_fentry *files = iol_map(cap * sizeof(struct iol_fentry));
    if (!g.hash_keys || !g.hash_vals || !g.arena || !g.sums || !files)
        return;
    g.files = files;
    g.nfiles = 2; /* 0 = none, 1 = "<other>" */
    static const char other[] = "<other>";
    memcpy(g.arena, other, sizeof other - 1);
    g.arena_used = sizeof other - 1;
    g.files[IOL_FILE_OTHER].path_len = sizeof other - 1;
    iol_fentry_clear(&g.files[0]);
    iol_fentry_clear(&g.files[1]);
    iol_summaries_reset();
    iol_cwd_refresh();
    /* the standard streams, Darshan-style names */
    iol_fd_set(0, iol_file_named("<STDIN>"), 0);
    iol_fd_set(1, iol_file_named("<STDOUT>"), 0);
    g.stderr_file = iol_file_named("<STDERR>");
    iol_fd_set(2, g.stderr_file, 0);
}
