/*
 * mpi_hints.c - the MPI-IO hint injection plug-in (SIOX optimizer), opt-in.
 *
 * IOLENS_MPI_HINTS="key=value;key=value" turns it on: every MPI_File_open of a traced
 * process opens with these hints added to the application's MPI_Info (a new info made
 * with PMPI_Info_create when the application passed MPI_INFO_NULL, else PMPI_Info_dup of
 * its own, so the application's object is never changed); the info is freed right after
 * the open. IOLENS_MPI_HINTS_MATCH=glob (fnmatch(3), no flags) limits it to files whose
 * path (as passed, without a "ufs:"-style prefix) matches.
 *
 * The application's own value for a key wins: a hint it set explicitly is never
 * overridden, as SIOX's optimizer supplies its best hint set only where none was set.
 *
 * A malformed entry (no '=', empty key, key over 255 or value over 1023 bytes) is ignored
 * with one line on stderr at start-up; the rest still apply. Errors from the MPI library
 * while building the info make the open go ahead with the application's info unchanged:
 * the plug-in can cost a hint, never the open. mpiio.c records, for an open that got
 * hints, the file's effective hints (PMPI_File_get_info) for the requested keys, so the
 * trace shows what the library accepted.
 */
#include "mpi_hints.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MH_MAX 32      /* hints injected at most */
#define MH_KEY 256     /* MPI_MAX_INFO_KEY in Open MPI and MPICH (with the NUL) */
#define MH_VAL 1024    /* values longer than this are refused */
#define MPI_OK 0

IOL_HIDDEN int iol_mh_on;

static char mh_key[MH_MAX][MH_KEY];
static char mh_val[MH_MAX][MH_VAL];
static int mh_n;
static char mh_glob[1024];

static void say(const char *what, const char *entry, size_t n)
{
    char msg[512];
    int len = snprintf(msg, sizeof msg, "iolens: IOLENS_MPI_HINTS: ignoring '%.*s': %s\n",
                       (int)(n > 200 ? 200 : n), entry, what);
    if (len > 0 && g.stderr_file && iol_fd_file(2) == g.stderr_file)
        syscall(SYS_write, 2, msg, (size_t)(len < (int)sizeof msg ? len : (int)sizeof msg - 1));
}

/* Parse one "key=value" (n bytes at s, not NUL-terminated). */
static void parse_one(const char *s, size_t n)
{
    while (n && (*s == ' ' || *s == '\t'))
        s++, n--;
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n'))
        n--;
    if (!n)
        return; /* "a=1;;b=2" or a trailing ';' */
    const char *eq = memchr(s, '=', n);
    if (!eq)
        return say("no '=' (want key=value)", s, n);
    size_t kn = (size_t)(eq - s), vn = n - kn - 1;
    if (!kn)
        return say("empty key", s, n);
    if (kn >= MH_KEY)
        return say("key longer than 255 bytes", s, n);
    if (vn >= MH_VAL)
        return say("value longer than 1023 bytes", s, n);
    if (mh_n == MH_MAX)
        return say("more than 32 hints", s, n);
    memcpy(mh_key[mh_n], s, kn);
    mh_key[mh_n][kn] = '\0';
    memcpy(mh_val[mh_n], eq + 1, vn);
    mh_val[mh_n][vn] = '\0';
    for (int i = 0; i < mh_n; i++)
        if (strcmp(mh_key[i], mh_key[mh_n]) == 0) { /* a repeated key: the last one wins */
            memcpy(mh_val[i], mh_val[mh_n], vn + 1);
            return;
        }
    mh_n++;
}

void iol_mh_init(void)
{
    const char *spec = getenv("IOLENS_MPI_HINTS");
    if (!spec || !*spec)
        return;
    for (const char *p = spec;;) {
        const char *end = strchr(p, ';');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        parse_one(p, n);
        if (!end)
            break;
        p = end + 1;
    }
    const char *glob = getenv("IOLENS_MPI_HINTS_MATCH");
    if (glob && *glob) {
        if (strlen(glob) >= sizeof mh_glob) {
            say("IOLENS_MPI_HINTS_MATCH longer than 1023 bytes: no file matches", glob, 40);
            return;
        }
        strcpy(mh_glob, glob);
    }
    if (mh_n)
        __atomic_store_n(&iol_mh_on, 1, __ATOMIC_RELEASE);
}

static void *pmpi(const char *name)
{
    void *p = iol_dlsym(name);
    return p ? p : iol_dlsym(name + 1); /* "PMPI_x" -> "MPI_x" */
}

uintptr_t iol_mh_info(const char *path, uintptr_t info, uintptr_t *made)
{
    static int (*create)(uintptr_t *), (*dup)(uintptr_t, uintptr_t *),
        (*set)(uintptr_t, const char *, const char *),
        (*valuelen)(uintptr_t, const char *, int *, int *);
    *made = 0;
    if (mh_glob[0] && (!path || fnmatch(mh_glob, path, 0) != 0))
        return info;
    if (!create) {
        set = (int (*)(uintptr_t, const char *, const char *))pmpi("PMPI_Info_set");
        dup = (int (*)(uintptr_t, uintptr_t *))pmpi("PMPI_Info_dup");
        valuelen = (int (*)(uintptr_t, const char *, int *, int *))pmpi("PMPI_Info_get_valuelen");
        create = (int (*)(uintptr_t *))pmpi("PMPI_Info_create");
    }
    if (!create || !dup || !set || !valuelen)
        return info;
    int null = iol_mpi_info_is_null(info);
    uintptr_t h = 0; /* zeroed: MPICH writes a 4-byte int into it */
    if ((null ? create(&h) : dup(info, &h)) != MPI_OK)
        return info;
    *made = h;
    for (int i = 0; i < mh_n; i++) {
        int len = 0, flag = 0;
        if (!null && valuelen(info, mh_key[i], &len, &flag) == MPI_OK && flag)
            continue; /* the application set this key: its value wins */
        set(h, mh_key[i], mh_val[i]);
    }
    return h;
}

void iol_mh_free(uintptr_t *made)
{
    static int (*info_free)(uintptr_t *);
    if (!*made)
        return;
    if (!info_free)
        info_free = (int (*)(uintptr_t *))pmpi("PMPI_Info_free");
    if (info_free)
        info_free(made);
    *made = 0;
}
