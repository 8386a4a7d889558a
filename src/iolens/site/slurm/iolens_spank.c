/*
 * iolens_spank.c - Slurm SPANK plug-in: preload the iolens tracer into every task.
 *
 * Sites enable I/O tracing for all jobs without users doing anything, the way Darshan is
 * deployed: in the remote context, just before each task exec()s, as the job's user,
 * the plug-in prepends the tracer to LD_PRELOAD and points IOLENS_SPOOL at the node's
 * spool (where `iolens agent` picks the trace files up). Users opt out per job or step:
 *
 *     srun --no-iolens ...      sbatch --no-iolens ...      salloc --no-iolens ...
 *
 * which also strips an inherited tracer from LD_PRELOAD and sets IOLENS_DISABLE=1, so a
 * step launched with --no-iolens inside a traced batch job is not traced either.
 *
 * plugstack.conf (written by `iolens site slurm-files DIR`):
 *     optional /path/iolens_spank.so lib=/path/libiolens.so spool=/var/spool/iolens/traces
 * Arguments: lib= (required) the tracer; spool= the trace directory (default
 * /var/spool/iolens/traces; a job that set IOLENS_SPOOL itself keeps its own);
 * off (tracing only for jobs that ask with --iolens).
 *
 * Build: cc -shared -fPIC -O2 -Wall -Wextra -o iolens_spank.so iolens_spank.c
 * (needs <slurm/spank.h>: Debian/Ubuntu libslurm-dev, RHEL slurm-devel).
 */
#include <slurm/spank.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

SPANK_PLUGIN(iolens, 1);

#define OPT_NO 1
#define OPT_YES 2

static int enabled = 1;       /* site default; "off" in plugstack.conf flips it */
static int chosen = 0;        /* the user's --no-iolens / --iolens, 0 if neither */
static char lib[4096] = "";
static char spool[4096] = "/var/spool/iolens/traces";

static int opt_cb(int val, const char *optarg, int remote)
{
    (void)optarg;
    (void)remote;
    chosen = val;
    return ESPANK_SUCCESS;
}

/* Registered from slurm_spank_init, not as the static `spank_options` table: Slurm does
   not read that table in the allocator context, so sbatch and salloc would not know them. */
static struct spank_option options[] = {
    {"no-iolens", NULL, "Do not trace this job's I/O with iolens", 0, OPT_NO, opt_cb},
    {"iolens", NULL, "Trace this job's I/O with iolens (when the site default is off)", 0,
     OPT_YES, opt_cb},
};

static void copy(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src);
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
    for (size_t i = 0; i < sizeof options / sizeof options[0]; i++)
        if (spank_option_register(sp, &options[i]) != ESPANK_SUCCESS)
            slurm_error("iolens: cannot register --%s", options[i].name);
    for (int i = 0; i < ac; i++) {
        if (!strncmp(av[i], "lib=", 4))
            copy(lib, sizeof lib, av[i] + 4);
        else if (!strncmp(av[i], "spool=", 6))
            copy(spool, sizeof spool, av[i] + 6);
        else if (!strcmp(av[i], "off"))
            enabled = 0;
        else
            slurm_error("iolens: unknown plugstack.conf argument %s", av[i]);
    }
    return ESPANK_SUCCESS;
}

/* LD_PRELOAD without `lib` (entries are separated by ':' or ' '). */
static void without(const char *cur, char *out, size_t cap)
{
    size_t n = 0, len = strlen(lib);
    out[0] = '\0';
    for (const char *p = cur; *p;) {
        while (*p == ':' || *p == ' ')
            p++;
        const char *e = p;
        while (*e && *e != ':' && *e != ' ')
            e++;
        if (e > p && !((size_t)(e - p) == len && !strncmp(p, lib, len))) {
            int w = snprintf(out + n, cap - n, "%s%.*s", n ? ":" : "", (int)(e - p), p);
            if (w < 0 || (size_t)w >= cap - n)
                break;
            n += (size_t)w;
        }
        p = e;
    }
}

/* Remote context: in the task, as the job's user, just before exec(). */
int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    char cur[8192] = "", rest[8192], val[12288];
    int on = chosen ? chosen == OPT_YES : enabled;
    if (!lib[0])
        return ESPANK_SUCCESS;
    if (spank_getenv(sp, "LD_PRELOAD", cur, sizeof cur) != ESPANK_SUCCESS)
        cur[0] = '\0';
    without(cur, rest, sizeof rest);
    if (!on) {
        if (strcmp(rest, cur)) {
            if (rest[0])
                spank_setenv(sp, "LD_PRELOAD", rest, 1);
            else
                spank_unsetenv(sp, "LD_PRELOAD");
        }
        spank_setenv(sp, "IOLENS_DISABLE", "1", 1);
        return ESPANK_SUCCESS;
    }
    snprintf(val, sizeof val, "%s%s%s", lib, rest[0] ? ":" : "", rest);
    spank_setenv(sp, "LD_PRELOAD", val, 1);
    spank_setenv(sp, "IOLENS_SPOOL", spool, 0); /* the job's own choice wins */
    return ESPANK_SUCCESS;
}
