/*
 * buffer.c - per-thread record chunks inside a fixed memory budget.
 *
 * Each thread appends to its own chunk without locking. Only when a chunk is full (every
 * 1,024 records) does the thread take the global lock to hand it over: the chunk's records
 * are folded into the per-file summaries, and the chunk is kept in memory while the
 * budget (IOLENS_BUFFER_MB / 2 for chunks) allows, else every kept chunk is written to the
 * spool file. If the spool cannot be written, the records are dropped and counted - the
 * summaries already hold them, and the output says `partial`.
 */
#include "iolens.h"

#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

IOL_HIDDEN void *iol_map(uint64_t bytes);
IOL_HIDDEN void iol_spill_chunk(struct iol_chunk *c);

static pthread_key_t thread_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static IOL_TLS struct iol_tstate *tls_state;

#define CHUNK_BYTES(cap) (sizeof(struct iol_chunk) + (uint64_t)(cap) * sizeof(struct iol_record))

/* ---- summaries --------------------------------------------------------------------- */

static int hist_bin(int64_t size)
{
    static const int64_t edges[IOL_HIST_BINS - 1] = {
        100, 1024, 10240, 102400, 1048576, 4194304, 10485760, 104857600, 1073741824};
    int b = 0;
    while (b < IOL_HIST_BINS - 1 && size >= edges[b])
        b++;
    return b;
}

static struct iol_summary *summary_of(uint32_t file, int layer)
{
    struct iol_fentry *e = (file < g.nfiles) ? &g.files[file] : NULL;
    if (e && e->sum[layer] >= 0)
        return &g.sums[e->sum[layer]];
    if (!e || g.nsums >= g.sums_cap) {
        /* out of summary slots: count under "<other>" (slots 0 and 1 are reserved) */
        return &g.sums[layer];
    }
    int32_t s = (int32_t)g.nsums++;
    struct iol_summary *sum = &g.sums[s];
    memset(sum, 0, sizeof *sum);
    sum->file = file;
    sum->layer = (uint32_t)layer;
    sum->max_byte_read = sum->max_byte_written = -1;
    sum->last_end_read = sum->last_end_write = -1;
    e->sum[layer] = s;
    return sum;
}

IOL_HIDDEN void iol_summaries_reset(void)
{
    for (uint32_t i = 0; i < g.nfiles; i++)
        iol_fentry_clear(&g.files[i]);
    for (int l = 0; l < IOL_NLAYERS; l++) {
        struct iol_summary *s = &g.sums[l];
        memset(s, 0, sizeof *s);
        s->file = IOL_FILE_OTHER;
        s->layer = (uint32_t)l;
        s->max_byte_read = s->max_byte_written = -1;
        s->last_end_read = s->last_end_write = -1;
    }
    g.nsums = IOL_NLAYERS;
    for (int l = 0; l < IOL_NLAYERS; l++)
        g.files[IOL_FILE_OTHER].sum[l] = l;
}

/* Fold a chunk's records into the summaries; caller holds g.lock. */
void iol_fold(struct iol_chunk *c)
{
    uint32_t n = __atomic_load_n(&c->n, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; i < n; i++) {
        const struct iol_record *r = &c->recs[i];
        if (r->op >= IOL_NOPS || r->layer >= IOL_NLAYERS)
            continue;
        struct iol_summary *s = summary_of(r->file, r->layer);
        s->ops[r->op] += r->count;
        g.calls += r->count;
        if (!s->t_first || r->t_start < s->t_first)
            s->t_first = r->t_start;
        if (r->t_end > s->t_last)
            s->t_last = r->t_end;
        if (r->op != IOL_OP_READ && r->op != IOL_OP_WRITE) {
            s->time_meta += r->dur;
            continue;
        }
        int rd = r->op == IOL_OP_READ;
        uint64_t bytes = (uint64_t)r->size * r->count;
        int64_t last_off = r->offset + (int64_t)(r->count - 1) * r->stride;
        int64_t first = r->stride >= 0 ? r->offset : last_off;
        int64_t top = (r->stride >= 0 ? last_off : r->offset) + r->size - 1;
        int64_t *prev_end = rd ? &s->last_end_read : &s->last_end_write;
        uint64_t seq = 0, consec = 0;
        if (*prev_end >= 0 && r->offset >= *prev_end) {
            seq++;
            consec += r->offset == *prev_end;
        }
        if (r->count > 1 && r->stride >= r->size) {
            seq += r->count - 1;
            if (r->stride == r->size)
                consec += r->count - 1;
        }
        (void)first;
        *prev_end = last_off + r->size;
        if (rd) {
            s->bytes_read += bytes;
            s->time_read += r->dur;
            s->seq_reads += seq;
            s->consec_reads += consec;
            s->hist_read[hist_bin(r->size)] += r->count;
            if (r->size > 0 && r->offset >= 0 && top > s->max_byte_read)
                s->max_byte_read = top;
        } else {
            s->bytes_written += bytes;
            s->time_write += r->dur;
            s->seq_writes += seq;
            s->consec_writes += consec;
            s->hist_write[hist_bin(r->size)] += r->count;
            if (r->size > 0 && r->offset >= 0 && top > s->max_byte_written)
                s->max_byte_written = top;
        }
    }
}

/* ---- chunks ------------------------------------------------------------------------ */

/* Write (or drop) every retained chunk and put it on the free list; caller holds g.lock. */
static void spill_retained(void)
{
    struct iol_chunk *c = g.retained;
    g.retained = NULL;
    while (c) {
        struct iol_chunk *next = c->next;
        iol_spill_chunk(c);
        c->n = 0;
        c->next = g.free_chunks;
        g.free_chunks = c;
        c = next;
    }
    iol_out_close();
}

static struct iol_chunk *new_chunk(uint32_t cap, int small)
{
    struct iol_chunk *c = iol_map(CHUNK_BYTES(cap));
    if (!c)
        return NULL;
    c->cap = cap;
    c->small = (uint32_t)small;
    g.chunk_bytes += CHUNK_BYTES(cap);
    return c;
}

/* A fresh chunk for a thread; caller holds g.lock. */
static struct iol_chunk *get_chunk(uint32_t tid)
{
    struct iol_chunk *c = NULL;
    if (!g.free_chunks && g.chunk_bytes + CHUNK_BYTES(IOL_CHUNK_RECS) <= g.chunk_budget)
        c = new_chunk(IOL_CHUNK_RECS, 0);
    if (!c && !g.free_chunks)
        spill_retained();
    if (!c && g.free_chunks) {
        c = g.free_chunks;
        g.free_chunks = c->next;
    }
    if (!c) /* every chunk is live in some thread: a small one beyond the budget */
        c = new_chunk(IOL_SMALL_RECS, 1);
    if (c) {
        c->next = NULL;
        c->n = 0;
        c->tid = tid;
    }
    return c;
}

/* Hand a chunk over: fold it, keep it, and return an empty one (caller holds g.lock). */
static struct iol_chunk *hand_over(struct iol_chunk *c)
{
    iol_fold(c);
    if (c->n) {
        c->next = g.retained;
        g.retained = c;
    } else {
        c->next = g.free_chunks;
        g.free_chunks = c;
    }
    return NULL;
}

/* Hand this thread's non-empty chunk over for a fresh one; caller holds g.lock. */
static void hand_over_own(void)
{
    struct iol_tstate *ts = tls_state;
    if (!ts || !ts->live || !ts->chunk || ts->chunk != iol_chunk_tls || !ts->chunk->n)
        return;
    hand_over(ts->chunk);
    struct iol_chunk *nc = get_chunk(ts->tid);
    ts->chunk = nc;
    iol_chunk_tls = nc;
}

/* ---- periodic flush (IOLENS_FLUSH_S) ------------------------------------------------ */

/* Set the next deadline: `now` ticks and `mono` ns are the same instant. The tick
   deadline is only a cheap trigger for the call path, converted at the rate measured so
   far; the monotonic deadline decides. */
void iol_flush_schedule(uint64_t now, uint64_t mono)
{
    if (!g.flush_ns) {
        __atomic_store_n(&g.next_flush, UINT64_MAX, __ATOMIC_RELAXED);
        return;
    }
    if (mono >= g.flush_due_ns)
        g.flush_due_ns = mono + g.flush_ns;
    double rate = 1.0; /* ticks per ns: exact for the monotonic clock; for the TSC a guess
                          of >= 1 GHz until some time has passed, so the first check comes
                          early, never late */
    if (g.use_tsc && mono > g.base_mono_ns + 10000000 && now > g.base_ticks)
        rate = (double)(now - g.base_ticks) / (double)(mono - g.base_mono_ns);
    __atomic_store_n(&g.next_flush, now + (uint64_t)((double)(g.flush_due_ns - mono) * rate),
                     __ATOMIC_RELAXED);
}

/* Close the interval: this thread's chunk and every retained one go to the .partial file,
   which becomes interim file k; other threads follow when they see the new generation.
   Caller holds g.lock and tracing is on. */
static void flush_interval(uint64_t now, uint64_t mono)
{
    hand_over_own();
    g.flushing = 1;
    spill_retained();
    iol_close_interval();
    g.flushing = 0;
    uint32_t gen = __atomic_add_fetch(&g.flush_gen, 1, __ATOMIC_RELAXED);
    iol_gen_tls = gen;
    g.flush_due_ns = mono + g.flush_ns;
    iol_flush_schedule(now, mono);
}

/* Called on the call path (guard up) when the tick deadline passed or the generation
   moved. Never blocks: if another thread holds the lock, a later call tries again. */
void iol_flush_check(uint64_t now)
{
    int saved_errno = errno;
    if (now >= __atomic_load_n(&g.next_flush, __ATOMIC_RELAXED)) {
        uint64_t mono = iol_mono_ns();
        if (mono < g.flush_due_ns) {
            iol_flush_schedule(now, mono); /* early: the TSC rate guess was high */
        } else if (pthread_mutex_trylock(&g.lock) == 0) {
            /* a vfork() child shares our memory but must not write our files */
            if (g.state == IOL_ON && mono >= g.flush_due_ns &&
                (int)syscall(SYS_getpid) == g.pid)
                flush_interval(now, mono);
            pthread_mutex_unlock(&g.lock);
        }
    }
    uint32_t gen = __atomic_load_n(&g.flush_gen, __ATOMIC_RELAXED);
    if (iol_gen_tls != gen) {
        struct iol_chunk *c = iol_chunk_tls;
        if (!c || !c->n) {
            iol_gen_tls = gen;
        } else if (pthread_mutex_trylock(&g.lock) == 0) {
            if (g.state == IOL_ON)
                hand_over_own();
            iol_gen_tls = gen;
            pthread_mutex_unlock(&g.lock);
        }
    }
    errno = saved_errno;
}

struct iol_chunk *iol_chunk_full(struct iol_chunk *c)
{
    struct iol_tstate *ts = tls_state;
    pthread_mutex_lock(&g.lock);
    struct iol_chunk *nc = NULL;
    if (g.state == IOL_ON && ts && ts->chunk == c) {
        hand_over(c);
        nc = get_chunk(c->tid);
        ts->chunk = nc;
    }
    pthread_mutex_unlock(&g.lock);
    iol_chunk_tls = nc;
    return nc;
}

static void thread_exit(void *arg)
{
    struct iol_tstate *ts = arg;
    int saved = iol_guard;
    iol_guard = 1;
    pthread_mutex_lock(&g.lock);
    if (ts->live && ts->chunk) {
        hand_over(ts->chunk);
        ts->chunk = NULL;
    }
    ts->live = 0;
    pthread_mutex_unlock(&g.lock);
    tls_state = NULL;
    iol_chunk_tls = NULL;
    iol_guard = saved;
}

static void make_key(void) { pthread_key_create(&thread_key, thread_exit); }

struct iol_chunk *iol_thread_start(void)
{
    if (g.state != IOL_ON)
        return NULL;
    pthread_once(&key_once, make_key);
    uint32_t tid = (uint32_t)syscall(SYS_gettid);
    pthread_mutex_lock(&g.lock);
    struct iol_tstate *ts = NULL;
    for (struct iol_tstate *t = g.threads; t; t = t->next)
        if (!t->live) {
            ts = t;
            break;
        }
    if (!ts) {
        ts = iol_map(sizeof *ts);
        if (ts) {
            ts->next = g.threads;
            g.threads = ts;
        }
    }
    struct iol_chunk *c = NULL;
    if (ts && g.state == IOL_ON) {
        c = get_chunk(tid);
        ts->chunk = c;
        ts->tid = tid;
        ts->live = c != NULL;
    }
    pthread_mutex_unlock(&g.lock);
    if (c) {
        tls_state = ts;
        iol_chunk_tls = c;
        iol_gen_tls = __atomic_load_n(&g.flush_gen, __ATOMIC_RELAXED);
        pthread_setspecific(thread_key, ts);
    }
    return c;
}

/*
 * Start a new trace segment in this process: after fork() in the child (the parent's
 * records and summaries are the parent's to write), or after an exec() that failed.
 */
void iol_restart(int forked)
{
    struct iol_tstate *self = tls_state;
    /* every chunk goes back to the free list, empty */
    struct iol_chunk *c = g.retained;
    g.retained = NULL;
    while (c) {
        struct iol_chunk *next = c->next;
        c->n = 0;
        c->next = g.free_chunks;
        g.free_chunks = c;
        c = next;
    }
    for (struct iol_tstate *t = g.threads; t; t = t->next) {
        if (t == self && t->chunk) {
            t->chunk->n = 0;
            continue;
        }
        if (t->live && t->chunk && !forked) {
            t->chunk->n = 0; /* that thread keeps its chunk after a failed exec */
            continue;
        }
        if (t->live && t->chunk) {
            t->chunk->n = 0;
            t->chunk->next = g.free_chunks;
            g.free_chunks = t->chunk;
        }
        t->chunk = NULL;
        t->live = 0;
    }
    if (!self || !self->live)
        iol_chunk_tls = NULL;
    iol_summaries_reset();
    if (g.out_fd >= 0)
        syscall(SYS_close, g.out_fd);
    g.out_fd = -1;
    g.out_failed = 0;
    g.out_created = 0;
    g.out_name = 0;
    g.calls = g.records = g.dropped_records = g.dropped_calls = g.missed_calls = 0;
    g.spool_errors = 0;
    g.dropped_files = 0;
    g.interval = 0;
    g.flush_due_ns = 0;
    iol_flush_schedule(iol_now(), iol_mono_ns()); /* the new segment's first interval */
    g.start_wall_ns = iol_wall_ns();
    if (forked) {
        g.pid = (int)syscall(SYS_getpid);
        g.ppid = (int)syscall(SYS_getppid);
        g.flags = IOL_F_FORKED;
        g.segment = 0;
        /* try-locks another thread of the parent held at fork() stay held forever here */
        g.mounts_lock = 0;
        g.lov_big_busy = 0;
        g.layouts_lost = 0;
    } else {
        g.flags &= IOL_F_FORKED;
        g.segment++;
    }
    __atomic_store_n(&g.state, IOL_ON, __ATOMIC_RELEASE);
}
