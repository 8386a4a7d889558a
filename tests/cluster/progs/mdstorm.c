/*
 * mdstorm.c - a metadata-heavy task (the e2e tests' "high-MDOPS" job): in its own
 * directory DIR/md.JOB.RANK it creates N empty files (open O_CREAT + close), stats each,
 * unlinks each, then removes the directory. Prints one JSON line with what it did and the
 * seconds it took (CLOCK_MONOTONIC around all of it).
 *
 *   mdstorm DIR N        (rank from SLURM_PROCID, else Open MPI's OMPI_COMM_WORLD_RANK:
 *                         the MooseFS lab starts it with mpirun, bench/lab_savings.py)
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s DIR N\n", argv[0]);
        return 2;
    }
    const char *job = getenv("SLURM_JOB_ID"), *rank = getenv("SLURM_PROCID");
    if (!rank)
        rank = getenv("OMPI_COMM_WORLD_RANK");
    int n = atoi(argv[2]);
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s/md.%s.%s", argv[1], job ? job : "0", rank ? rank : "0");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long mkdirs = 0, opens = 0, closes = 0, stats = 0, unlinks = 0, rmdirs = 0;
    if (mkdir(dir, 0755) == 0)
        mkdirs++;
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/f%06d", dir, i);
        int fd = open(path, O_CREAT | O_WRONLY, 0644);
        if (fd < 0)
            return 1;
        opens++;
        if (close(fd) == 0)
            closes++;
    }
    struct stat st;
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/f%06d", dir, i);
        if (stat(path, &st) == 0)
            stats++;
    }
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/f%06d", dir, i);
        if (unlink(path) == 0)
            unlinks++;
    }
    if (rmdir(dir) == 0)
        rmdirs++;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("{\"rank\": %s, \"mkdir\": %ld, \"open\": %ld, \"close\": %ld, \"stat\": %ld, "
           "\"unlink\": %ld, \"rmdir\": %ld, \"seconds\": %.6f}\n",
           rank ? rank : "0", mkdirs, opens, closes, stats, unlinks, rmdirs, secs);
    return 0;
}
