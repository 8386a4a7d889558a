/*
 * fsmeta.c - probe for the metadata calls of trace format 6 (tests/tracer/test_fsmeta.py).
 *
 *   fsmeta MODE BASE [N]     (MODE and N are ignored: the conftest run() convention)
 *
 * Calls truncate/fallocate, posix_fadvise, access, link/symlink and readdir on files under
 * BASE, each a known number of times, plus failing calls the tracer must not record.
 * stdout: "<call> <rc> <errno>" per call (the same traced and untraced: the tracer must
 * not change results). stderr: {"ev": [op, path, offset]} per successful call, the
 * record the tracer must hold (offset -1 for none).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char base[4096];

static const char *at(const char *rel)
{
    static char buf[4][4200];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", base, rel);
    return buf[k];
}

/* Print the result; on success claim the event (op on rel at off). */
static void done(const char *call, int rc, int err, int ok, const char *op, const char *rel,
                 long long off)
{
    printf("%s %d %d\n", call, rc, err);
    if (ok && op)
        fprintf(stderr, "{\"ev\": [\"%s\", \"%s\", %lld]}\n", op, at(rel), off);
}

/* posix_fadvise/posix_fallocate return an error number and leave errno: 0 is success
   for every call here. errno is printed always: the tracer must leave it as it finds it. */
#define CALL(expr, op, rel, off)                                                        \
    do {                                                                                \
        errno = 0;                                                                      \
        int rc_ = (expr);                                                               \
        done(#expr, rc_, errno, rc_ == 0, op, rel, off);                                \
    } while (0)

static int entries(DIR *d, int wide)
{
    int n = 0;
    if (wide)
        while (readdir64(d))
            n++;
    else
        while (readdir(d))
            n++;
    return n;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: fsmeta MODE BASE [N]\n");
        return 2;
    }
    snprintf(base, sizeof base, "%s", argv[2]);
    mkdir(at("d"), 0755);
    mkdir(at("l1"), 0755);
    mkdir(at("l2"), 0755);
    for (int i = 0; i < 3; i++) {
        char rel[32];
        snprintf(rel, sizeof rel, "d/e%d", i);
        close(open(at(rel), O_CREAT | O_WRONLY, 0644));
    }
    int fd = open(at("f"), O_CREAT | O_RDWR, 0644);

    /* TRUNCATE: offsets are the lengths set or ensured */
    CALL(truncate(at("f"), 100), "truncate", "f", 100);
    CALL(truncate64(at("f"), 200), "truncate", "f", 200);
    CALL(ftruncate(fd, 300), "truncate", "f", 300);
    CALL(ftruncate64(fd, 50), "truncate", "f", 50);
    CALL(fallocate(fd, 0, 0, 4096), "truncate", "f", 4096);
    CALL(fallocate64(fd, 0, 4096, 4096), "truncate", "f", 8192);
    CALL(posix_fallocate(fd, 0, 12288), "truncate", "f", 12288);
    CALL(posix_fallocate64(fd, 100, 16284), "truncate", "f", 16384);
    CALL(truncate(at("missing"), 1), "truncate", "missing", 1);
    CALL(ftruncate(-1, 1), "truncate", "f", 1);
    CALL(fallocate(-1, 0, 0, 1), "truncate", "f", 1);
    CALL(posix_fallocate(-1, 0, 1), "truncate", "f", 1);

    /* FADVISE */
    CALL(posix_fadvise(fd, 0, 4096, POSIX_FADV_WILLNEED), "fadvise", "f", -1);
    CALL(posix_fadvise64(fd, 0, 0, POSIX_FADV_SEQUENTIAL), "fadvise", "f", -1);
    CALL(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), "fadvise", "f", -1);
    CALL(posix_fadvise(fd, 0, 0, 999), "fadvise", "f", -1);
    CALL(posix_fadvise(-1, 0, 0, POSIX_FADV_NORMAL), "fadvise", "f", -1);

    /* ACCESS */
    CALL(access(at("f"), R_OK | W_OK), "access", "f", -1);
    CALL(faccessat(AT_FDCWD, at("f"), F_OK, 0), "access", "f", -1);
    CALL(euidaccess(at("f"), R_OK), "access", "f", -1);
    CALL(eaccess(at("f"), F_OK), "access", "f", -1);
    CALL(access(at("f"), X_OK), "access", "f", -1);
    CALL(access(at("missing"), F_OK), "access", "missing", -1);

    /* LINK: against the new name; links in l1, symlinks in l2 */
    for (int i = 0; i < 2; i++) {
        CALL(link(at("f"), at("l1/h")), "link", "l1/h", -1);
        unlink(at("l1/h"));
    }
    CALL(linkat(AT_FDCWD, at("f"), AT_FDCWD, at("l1/h"), 0), "link", "l1/h", -1);
    CALL(link(at("f"), at("l1/h")), "link", "l1/h", -1); /* EEXIST */
    unlink(at("l1/h"));
    for (int i = 0; i < 2; i++) {
        CALL(symlink("../f", at("l2/s")), "link", "l2/s", -1);
        unlink(at("l2/s"));
    }
    CALL(symlinkat("../f", AT_FDCWD, at("l2/s")), "link", "l2/s", -1);
    CALL(symlink("../f", at("l2/s")), "link", "l2/s", -1); /* EEXIST */

    /* READDIR: one event per entry returned (".", ".." and three files) */
    for (int wide = 0; wide < 2; wide++) {
        DIR *d;
        if (wide) {
            int dfd = open(at("d"), O_RDONLY | O_DIRECTORY);
            d = fdopendir(dfd);
        } else {
            d = opendir(at("d"));
        }
        int n = d ? entries(d, wide) : -1;
        printf("readdir%s entries %d\n", wide ? "64" : "", n);
        for (int i = 0; i < n; i++)
            fprintf(stderr, "{\"ev\": [\"readdir\", \"%s\", -1]}\n", at("d"));
        if (d)
            printf("closedir %d\n", closedir(d));
    }
    errno = 0;
    DIR *none = opendir(at("missing"));
    printf("opendir-missing %d %d\n", none != NULL, errno);
    close(fd);
    return 0;
}
