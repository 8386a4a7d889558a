/*
 * readahead.c - the read-ahead plug-in (SIOX FadviseReadAhead), opt-in.
 *
 * IOLENS_READAHEAD=1 turns it on. For every descriptor of a traced file it watches the
 * offsets of successful reads (read, pread, readv, preadv and their variants): the
 * difference between the last two is the predicted stride, and a read landing exactly at
 * `previous offset + stride` is a correct prediction. Once the last
 * IOLENS_READAHEAD_AFTER predictions (default 2) were right, every further read issues
 * posix_fadvise(fd, next, len, POSIX_FADV_WILLNEED) for the next predicted access (and
 * keeps IOLENS_READAHEAD_DEPTH accesses advised ahead, default 1), `len` being the size
 * of the read just done. A miss resets the count, so a random stream never gets hints.
 *
 * Contiguous streams (stride == size) and re-reads (stride 0) get no hints: the kernel's
 * own read-ahead already serves them, and a system call per read would only cost time.
 *
 * The hint is advisory: it only starts reading pages into the page cache. The data and
 * return value of every application call are those of the real call; errno is restored
 * by the wrapper (and posix_fadvise reports errors by return value, not errno).
 * The per-descriptor state is plain integers in a table allocated once at start-up; two
 * threads reading one descriptor at once can at worst mispredict a hint, never fault.
 */
#include "readahead.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

IOL_HIDDEN int iol_ra_on;

struct ra_state {
    uint32_t file;      /* file index the state belongs to; another file resets it */
    uint32_t hits;      /* consecutive correct predictions */
    int64_t last;       /* offset of the previous read, -1 none */
    int64_t stride;     /* predicted offset step; valid when have_stride */
    int64_t advised;    /* furthest access offset already advised, when have_advised */
    int64_t adv_lo;     /* page-aligned byte range of the last hint ([0, 0): none) */
    int64_t adv_hi;
    uint32_t have_stride;
    uint32_t have_advised;
};

static struct ra_state *ra_tab;
static int ra_cap;
static uint32_t ra_after = 2;
static uint32_t ra_depth = 1;
static int64_t ra_page = 4096;
static uint64_t ra_hints; /* posix_fadvise calls issued (for debugging with a debugger) */

static long env_long(const char *name, long dflt, long lo, long hi)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return dflt;
    long x = strtol(v, NULL, 10);
    return x < lo ? lo : x > hi ? hi : x;
}

void iol_ra_init(void)
{
    const char *on = getenv("IOLENS_READAHEAD");
    if (!on || !*on || strcmp(on, "0") == 0)
        return;
    ra_after = (uint32_t)env_long("IOLENS_READAHEAD_AFTER", 2, 1, 64);
    ra_depth = (uint32_t)env_long("IOLENS_READAHEAD_DEPTH", 1, 1, 64);
    long page = sysconf(_SC_PAGESIZE);
    if (page > 0)
        ra_page = page;
    uint64_t bytes = (uint64_t)g.fd_cap * sizeof(struct ra_state);
    void *p = (void *)syscall(SYS_mmap, NULL, (size_t)bytes, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return;
    ra_tab = p; /* zero pages: file 0 = no state yet */
    ra_cap = g.fd_cap;
    __atomic_store_n(&iol_ra_on, 1, __ATOMIC_RELEASE);
}

static void advise(int fd, struct ra_state *s, int64_t at, int64_t n)
{
    int64_t lo = at & ~(ra_page - 1);
    int64_t hi = (at + n + ra_page - 1) & ~(ra_page - 1);
    s->advised = at;
    s->have_advised = 1;
    if (lo >= s->adv_lo && hi <= s->adv_hi)
        return; /* the same pages as the previous hint (strides under a page) */
    s->adv_lo = lo;
    s->adv_hi = hi;
    /* by system call: the exported posix_fadvise wrapper (fsmeta.c) must not see it */
    syscall(SYS_fadvise64, fd, (long)lo, (long)(hi - lo), POSIX_FADV_WILLNEED);
    __atomic_fetch_add(&ra_hints, 1, __ATOMIC_RELAXED);
}

void iol_ra_read(int fd, uint32_t file, int64_t off, int64_t n)
{
    if (n <= 0 || off < 0 || fd < 0 || fd >= ra_cap)
        return;
    struct ra_state *s = &ra_tab[fd];
    if (s->file != file) {
        memset(s, 0, sizeof *s);
        s->file = file;
        s->last = -1;
    }
    if (s->last >= 0) {
        int64_t d = off - s->last;
        if (s->have_stride && d == s->stride) {
            if (s->hits < UINT32_MAX)
                s->hits++;
        } else {
            s->stride = d;
            s->have_stride = 1;
            s->hits = 0;
            s->have_advised = 0;
            s->adv_lo = s->adv_hi = 0;
        }
    }
    s->last = off;
    int64_t st = s->stride;
    if (s->hits < ra_after || st == 0 || st == n)
        return;
    for (uint32_t k = 1; k <= ra_depth; k++) {
        int64_t at = off + (int64_t)k * st;
        if (at < 0)
            break;
        if (s->have_advised && (st > 0 ? at <= s->advised : at >= s->advised))
            continue; /* advised by an earlier read of this stream */
        advise(fd, s, at, n);
    }
}
