/*
 * init.c - process set-up: identity from the environment, clock choice, memory budget,
 * fork handling and symbol resolution.
 *
 * Initialisation happens in the library constructor, or earlier if another library's
 * constructor does I/O first (the wrappers call iol_init() lazily). It allocates all
 * tables once, with mmap, so the per-call path never allocates.
 */
#include "iolens.h"

#include <cpuid.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

IOL_HIDDEN struct iol_global g = {.out_fd = -1, .lock = PTHREAD_MUTEX_INITIALIZER};
IOL_TLS int iol_guard;
IOL_TLS struct iol_chunk *iol_chunk_tls;
IOL_TLS uint32_t iol_gen_tls;

static int init_once;
/* Per thread: a process can fork from several threads at once (Open MPI 4.1's mpirun
 * forks its ranks from four), and a shared flag let one thread's prepare clear another's,
 * whose parent handler then left g.lock held: every later fork hung in prepare. */
static IOL_TLS int fork_locked;

uint64_t iol_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t iol_wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void *iol_dlsym(const char *name)
{
    int saved = iol_guard;
    iol_guard = 1; /* anything dlsym does itself is not the application's I/O */
    void *p = dlsym(RTLD_NEXT, name);
    iol_guard = saved;
    return p;
}

static void copy_env(char *dst, size_t cap, const char *const *names)
{
    dst[0] = '\0';
    for (; *names; names++) {
        const char *v = getenv(*names);
        if (v && *v) {
            size_t n = strlen(v);
            if (n >= cap)
                n = cap - 1;
            memcpy(dst, v, n);
            dst[n] = '\0';
            return;
        }
    }
}

static int invariant_tsc(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u)
        return 0;
    __get_cpuid(0x80000007u, &a, &b, &c, &d);
    return (d >> 8) & 1u;
}

static void *map(uint64_t bytes)
{
    void *p = (void *)syscall(SYS_mmap, NULL, (size_t)bytes, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

IOL_HIDDEN void *iol_map(uint64_t bytes) { return map(bytes); }

static void identity(void)
{
    static const char *const job_vars[] = {"IOLENS_JOB_ID", "SLURM_JOB_ID", "PBS_JOBID",
                                           "LSB_JOBID",     "FLUX_JOB_ID",  NULL};
    static const char *const rank_vars[] = {"PMIX_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
                                            "SLURM_PROCID", NULL};
    static const char *const user_vars[] = {"USER", "LOGNAME", NULL};
    char rank[32];
    copy_env(g.job_id, sizeof g.job_id, job_vars);
    copy_env(rank, sizeof rank, rank_vars);
    g.rank = rank[0] ? atoi(rank) : -1;
    copy_env(g.user, sizeof g.user, user_vars);
    g.uid = (unsigned)syscall(SYS_getuid);
    g.pid = (int)syscall(SYS_getpid);
    g.ppid = (int)syscall(SYS_getppid);

    struct utsname u;
    if (syscall(SYS_uname, &u) == 0) {
        strncpy(g.host, u.nodename, sizeof g.host - 1);
    }
    long n = syscall(SYS_readlink, "/proc/self/exe", g.exe, sizeof g.exe - 1);
    g.exe[n > 0 ? n : 0] = '\0';

    const char *spool = getenv("IOLENS_SPOOL");
    if (spool && *spool) {
        strncpy(g.spool, spool, sizeof g.spool - 1);
    } else {
        const char *base = "/tmp/iolens-spool-";
        size_t b = strlen(base);
        memcpy(g.spool, base, b);
        if (g.user[0]) {
            size_t u = strnlen(g.user, sizeof g.user - 1);
            memcpy(g.spool + b, g.user, u);
            g.spool[b + u] = '\0';
        } else {
            /* no $USER: use the uid */
            char tmp[16];
            int i = 0;
            unsigned v = g.uid;
            do {
                tmp[i++] = (char)('0' + v % 10);
                v /= 10;
            } while (v);
            while (i)
                g.spool[b++] = tmp[--i];
            g.spool[b] = '\0';
        }
    }
}

static void atfork_prepare(void)
{
    fork_locked = 0;
    if (g.state == IOL_ON && !iol_guard) {
        pthread_mutex_lock(&g.lock);
        fork_locked = 1;
    }
}

static void atfork_parent(void)
{
    if (fork_locked)
        pthread_mutex_unlock(&g.lock);
}

static void atfork_child(void)
{
    pthread_mutex_init(&g.lock, NULL);
    if (g.state == IOL_ON)
        iol_restart(1);
}

void iol_init(void)
{
    if (__atomic_exchange_n(&init_once, 1, __ATOMIC_ACQ_REL))
        return;
    iol_guard = 1;
    const char *off = getenv("IOLENS_DISABLE");
    if (off && *off && *off != '0')
        goto out;

    const char *clk = getenv("IOLENS_CLOCK");
    g.use_tsc = invariant_tsc();
    if (clk && strcmp(clk, "mono") == 0)
        g.use_tsc = 0;

    const char *mb = getenv("IOLENS_BUFFER_MB");
    long m = mb ? strtol(mb, NULL, 10) : 8;
    if (m < 1)
        m = 1;
    if (m > 4096)
        m = 4096;
    g.budget = (uint64_t)m << 20;
    g.chunk_budget = g.budget / 2;
    const char *spill = getenv("IOLENS_SPILL");
    g.no_spill = spill && strcmp(spill, "0") == 0;
    /* seconds between interim files; 0 = only at exit. At least 0.1 s: each is a file. */
    const char *fl = getenv("IOLENS_FLUSH_S");
    double fs = fl && *fl ? strtod(fl, NULL) : 30.0;
    if (!(fs > 0)) /* also NaN */
        fs = 0;
    else if (fs < 0.1)
        fs = 0.1;
    else if (fs > 1e7)
        fs = 1e7;
    g.flush_ns = (uint64_t)(fs * 1e9);

    identity();

    struct rlimit rl;
    g.fd_cap = 1024;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        g.fd_cap = rl.rlim_cur > (1u << 20) ? (1 << 20) : (int)rl.rlim_cur;
    if (g.fd_cap < 1024)
        g.fd_cap = 1024;
    g.fds = map((uint64_t)g.fd_cap * sizeof(struct iol_fd));
    if (!g.fds)
        goto out;
    iol_files_init();
    if (!g.files)
        goto out;
    iol_layout_init();
    iol_ra_init();
    iol_zstd_init();
    iol_mh_init();

    g.base_ticks = iol_now();
    g.base_mono_ns = iol_mono_ns();
    g.base_wall_ns = iol_wall_ns();
    g.start_wall_ns = g.base_wall_ns;
    iol_flush_schedule(g.base_ticks, g.base_mono_ns);
    const char *sig = getenv("IOLENS_SIGNALS");
    if (!sig || strcmp(sig, "0") != 0)
        iol_signals_init();
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
    __atomic_store_n(&g.state, IOL_ON, __ATOMIC_RELEASE);
out:
    g.initialised = 1;
    iol_guard = 0;
}

/* ---- termination signals ------------------------------------------------------------ */

/* What schedulers and users send to stop a job; their default action kills without
   running exit handlers, so the last interval would be lost. */
static const int term_signals[] = {SIGTERM, SIGINT, SIGHUP, SIGXCPU};

/* Write the final file, then die of the signal as the default action would (the exit
   status still says "killed by signal"). trylock: we may have interrupted the tracer. */
static void on_term(int sig)
{
    int e = errno;
    if (g.state == IOL_ON && (int)syscall(SYS_getpid) == g.pid)
        iol_finalize(0, 1);
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    syscall(SYS_tgkill, (int)syscall(SYS_getpid), (int)syscall(SYS_gettid), sig);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL); /* the pending signal is delivered here */
    errno = e;                                /* not reached for the default action */
}

/* Only where the disposition is the default: an ignored or handled signal is the
   application's business, and one that installs its handler later replaces ours. */
void iol_signals_init(void)
{
    for (size_t i = 0; i < sizeof term_signals / sizeof term_signals[0]; i++) {
        struct sigaction old, sa;
        if (sigaction(term_signals[i], NULL, &old) != 0 || (old.sa_flags & SA_SIGINFO) ||
            old.sa_handler != SIG_DFL)
            continue;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_term;
        sigfillset(&sa.sa_mask); /* no other caught signal runs inside the final write */
        sa.sa_flags = SA_RESTART;
        sigaction(term_signals[i], &sa, NULL);
    }
}

__attribute__((constructor)) static void iol_ctor(void) { iol_init(); }

/* exit() from a signal handler that interrupted this thread inside the tracer (which may
   hold g.lock) must not wait for itself: then only try the lock. */
__attribute__((destructor)) static void iol_dtor(void)
{
    if (g.state == IOL_ON && (int)syscall(SYS_getpid) == g.pid)
        iol_finalize(0, iol_guard);
}
