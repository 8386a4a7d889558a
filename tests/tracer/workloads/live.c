/*
 * A long-running writer for the periodic-flush tests: writes 4 KiB blocks to BASE/data,
 * one every millisecond, for SECONDS (or until SIGTERM when MODE is "handler", which
 * installs its own SIGTERM handler). Progress goes to stdout as it happens, one line
 * per 50 ms, with raw write(2) so nothing waits in a stdio buffer:
 *   progress <wall ns before the line> <writes> <bytes>
 * and at a normal end: {"writes": W, "bytes": B} (after "handler ran" in handler mode).
 * Usage: live MODE BASE SECONDS   (MODE: plain | handler | selfkill: SIGKILL at the end)
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop;
static void on_term(int sig) { (void)sig; stop = 1; }

static long long now_ns(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static void say(const char *s)
{
    ssize_t w = write(1, s, strlen(s));
    (void)w;
}

int main(int argc, char **argv)
{
    if (argc < 4)
        return 2;
    if (strcmp(argv[1], "handler") == 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_term;
        sigaction(SIGTERM, &sa, NULL);
    }
    char path[4096], line[256];
    snprintf(path, sizeof path, "%s/data", argv[2]);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return 3;
    static char blk[4096];
    memset(blk, 'x', sizeof blk);
    long long end = now_ns(CLOCK_MONOTONIC) + (long long)(atof(argv[3]) * 1e9);
    long long next_say = 0;
    long writes = 0, bytes = 0;
    struct timespec ms = {0, 1000000};
    while (!stop && now_ns(CLOCK_MONOTONIC) < end) {
        ssize_t n = write(fd, blk, sizeof blk);
        if (n > 0) {
            writes++;
            bytes += n;
        }
        if (now_ns(CLOCK_MONOTONIC) >= next_say) {
            snprintf(line, sizeof line, "progress %lld %ld %ld\n", now_ns(CLOCK_REALTIME), writes,
                     bytes);
            say(line);
            next_say = now_ns(CLOCK_MONOTONIC) + 50000000;
        }
        nanosleep(&ms, NULL);
    }
    if (strcmp(argv[1], "selfkill") == 0)
        kill(getpid(), SIGKILL);
    close(fd);
    if (stop)
        say("handler ran\n");
    snprintf(line, sizeof line, "{\"writes\": %ld, \"bytes\": %ld}\n", writes, bytes);
    say(line);
    return 0;
}
