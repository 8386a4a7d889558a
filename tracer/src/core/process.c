/*
 * process.c - process life-cycle events: exec() and _exit().
 *
 * exec() replaces the image without running destructors, so the trace is written first;
 * if exec() fails, tracing continues in a new segment (a second file). _exit()/_Exit()
 * skip atexit handlers and destructors, so they write the trace themselves - with a
 * trylock, because they may run in a signal handler that interrupted the tracer.
 * A vfork() child shares our memory but has its own pid: it never writes (getpid()
 * differs from g.pid), so the parent's file is not touched by the child's exec or _exit.
 * fork() is handled with pthread_atfork in init.c.
 */
#include "iolens.h"

#include <stdarg.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

static int mine(void)
{
    return g.state == IOL_ON && !iol_guard && (int)syscall(SYS_getpid) == g.pid;
}

static void before_exec(int *wrote)
{
    *wrote = 0;
    if (mine()) {
        iol_finalize(IOL_F_EXEC, 0);
        *wrote = 1;
    }
}

static void after_failed_exec(int wrote)
{
    if (!wrote)
        return;
    int e = errno;
    pthread_mutex_lock(&g.lock);
    iol_restart(0);
    pthread_mutex_unlock(&g.lock);
    errno = e;
}

#define RESOLVE_OR_FAIL(name)                                                           \
    IOL_RESOLVE(name);                                                                  \
    if (UNLIKELY(!real_##name)) {                                                       \
        errno = ENOSYS;                                                                 \
        return -1;                                                                      \
    }

IOL_REAL(int, execve, (const char *, char *const[], char *const[]));
IOL_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
    int wrote;
    RESOLVE_OR_FAIL(execve);
    before_exec(&wrote);
    int rc = real_execve(path, argv, envp);
    after_failed_exec(wrote);
    return rc;
}

IOL_REAL(int, execv, (const char *, char *const[]));
IOL_EXPORT int execv(const char *path, char *const argv[])
{
    int wrote;
    RESOLVE_OR_FAIL(execv);
    before_exec(&wrote);
    int rc = real_execv(path, argv);
    after_failed_exec(wrote);
    return rc;
}

IOL_REAL(int, execvp, (const char *, char *const[]));
IOL_EXPORT int execvp(const char *file, char *const argv[])
{
    int wrote;
    RESOLVE_OR_FAIL(execvp);
    before_exec(&wrote);
    int rc = real_execvp(file, argv);
    after_failed_exec(wrote);
    return rc;
}

IOL_REAL(int, execvpe, (const char *, char *const[], char *const[]));
IOL_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
    int wrote;
    RESOLVE_OR_FAIL(execvpe);
    before_exec(&wrote);
    int rc = real_execvpe(file, argv, envp);
    after_failed_exec(wrote);
    return rc;
}

IOL_REAL(int, fexecve, (int, char *const[], char *const[]));
IOL_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
    int wrote;
    RESOLVE_OR_FAIL(fexecve);
    before_exec(&wrote);
    int rc = real_fexecve(fd, argv, envp);
    after_failed_exec(wrote);
    return rc;
}

/* execl*: collect the arguments, then go through the v-forms above */
#define MAX_ARGS 4096
#define COLLECT(arg0, envp_out)                                                         \
    char *argv[MAX_ARGS];                                                               \
    int argc = 0;                                                                       \
    va_list ap;                                                                         \
    va_start(ap, arg0);                                                                 \
    argv[argc++] = (char *)(arg0);                                                      \
    while (argv[argc - 1] && argc < MAX_ARGS)                                           \
        argv[argc++] = va_arg(ap, char *);                                              \
    if (argc == MAX_ARGS) {                                                             \
        va_end(ap);                                                                     \
        errno = E2BIG;                                                                  \
        return -1;                                                                      \
    }                                                                                   \
    envp_out;                                                                           \
    va_end(ap)

IOL_EXPORT int execl(const char *path, const char *arg, ...)
{
    COLLECT(arg, (void)0);
    return execv(path, argv);
}

IOL_EXPORT int execlp(const char *file, const char *arg, ...)
{
    COLLECT(arg, (void)0);
    return execvp(file, argv);
}

IOL_EXPORT int execle(const char *path, const char *arg, ...)
{
    char *const *envp;
    COLLECT(arg, envp = va_arg(ap, char *const *));
    return execve(path, argv, envp);
}

IOL_REAL(void, _exit, (int));
IOL_EXPORT void _exit(int status)
{
    IOL_RESOLVE(_exit);
    if (mine())
        iol_finalize(IOL_F_UEXIT, 1);
    if (real__exit)
        real__exit(status);
    syscall(SYS_exit_group, status);
    __builtin_unreachable();
}

IOL_REAL(void, _Exit, (int));
IOL_EXPORT void _Exit(int status)
{
    IOL_RESOLVE(_Exit);
    if (mine())
        iol_finalize(IOL_F_UEXIT, 1);
    if (real__Exit)
        real__Exit(status);
    syscall(SYS_exit_group, status);
    __builtin_unreachable();
}
