/*
 * mpiio_bench.c - an MPI-IO Test-like program that reports its own bytes and bandwidth
 * (the reference the end-to-end tests hold iolens to, as Beacon section 5.1 does with
 * MPI-IO Test).
 *
 *   mpiio_bench MODE DIR [BLOCK_KIB] [BLOCKS] [GROUPS] [PAUSE_MS]
 *
 * MODE: n1  every rank writes its blocks into one shared file, collectively
 *           (MPI_File_write_at_all, rank-interleaved blocks), then reads them back
 *           (MPI_File_read_at_all);
 *       nn  every rank opens its own file (MPI_COMM_SELF) and writes/reads it
 *           independently (MPI_File_write_at / MPI_File_read_at);
 *       nm  the ranks split into GROUPS communicators, each writing one shared file
 *           collectively: N processes aggregate into M = GROUPS files;
 *       n1i as n1, but every rank writes and reads its blocks independently
 *           (MPI_File_write_at / MPI_File_read_at: no collective buffering).
 * Each rank writes BLOCKS blocks of BLOCK_KIB KiB (defaults 1024 KiB x 32), pausing
 * PAUSE_MS (default 0) between blocks, as an application computing between writes does:
 * a phase then lasts long enough for its timing to be measured to 1 % on a busy machine,
 * where a rank can be descheduled for milliseconds between a call and its clock read.
 *
 * Bandwidth is measured the way MPI-IO Test does: barrier, then each rank notes
 * MPI_Wtime() just before its first data call and just after its last one; the job's
 * figure is total bytes / (latest end - earliest start) over all ranks. Rank 0 prints
 * one JSON line: {"mode", "ranks", "files", "write_bytes", "write_s", "write_bw",
 * "read_bytes", "read_s", "read_bw"} (bytes, seconds, bytes/s).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void pause_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    if (ms > 0)
        nanosleep(&ts, NULL);
}

static void phase(MPI_Comm world, double t0, double t1, long long bytes, long long *total,
                  double *span)
{
    double first, last;
    MPI_Allreduce(&t0, &first, 1, MPI_DOUBLE, MPI_MIN, world);
    MPI_Allreduce(&t1, &last, 1, MPI_DOUBLE, MPI_MAX, world);
    MPI_Allreduce(&bytes, total, 1, MPI_LONG_LONG, MPI_SUM, world);
    *span = last - first;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 3) {
        if (rank == 0)
            fprintf(stderr, "usage: %s n1|n1i|nn|nm DIR [BLOCK_KIB] [BLOCKS] [GROUPS] [PAUSE_MS]\n",
                    argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char *mode = argv[1], *dir = argv[2];
    long block = (argc > 3 ? atol(argv[3]) : 1024) * 1024;
    int blocks = argc > 4 ? atoi(argv[4]) : 32;
    int groups = argc > 5 ? atoi(argv[5]) : 2;
    int pause = argc > 6 ? atoi(argv[6]) : 0;
    if (strcmp(mode, "n1") && strcmp(mode, "n1i") && strcmp(mode, "nn") && strcmp(mode, "nm")) {
        if (rank == 0)
            fprintf(stderr, "unknown mode %s\n", mode);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }

    /* who shares a file: everyone (n1), nobody (nn), a group of ranks (nm) */
    MPI_Comm comm;
    int files = 1;
    if (!strcmp(mode, "nn")) {
        comm = MPI_COMM_SELF;
        files = size;
    } else if (!strcmp(mode, "nm")) {
        if (groups < 1 || groups > size)
            groups = size;
        files = groups;
        MPI_Comm_split(MPI_COMM_WORLD, rank % groups, rank, &comm);
    } else {
        comm = MPI_COMM_WORLD;
    }
    int crank, csize;
    MPI_Comm_rank(comm, &crank);
    MPI_Comm_size(comm, &csize);
    char path[4096];
    const char *job = getenv("SLURM_JOB_ID");
    if (!strcmp(mode, "nn"))
        snprintf(path, sizeof path, "%s/%s.%s.%d.dat", dir, mode, job ? job : "0", rank);
    else if (!strcmp(mode, "nm"))
        snprintf(path, sizeof path, "%s/%s.%s.g%d.dat", dir, mode, job ? job : "0",
                 rank % groups);
    else
        snprintf(path, sizeof path, "%s/%s.%s.dat", dir, mode, job ? job : "0");

    char *buf = malloc((size_t)block);
    for (long i = 0; i < block; i++)
        buf[i] = (char)('a' + (rank + i) % 26);
    int shared = strcmp(mode, "nn") != 0;
    int collective = shared && strcmp(mode, "n1i") != 0;
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "cb_buffer_size", "4194304"); /* hints iolens should record */
    MPI_Info_set(info, "romio_cb_write", "enable");

    /* ---- write ---- */
    MPI_File fh;
    int rc = MPI_File_open(comm, path, MPI_MODE_CREATE | MPI_MODE_WRONLY, info, &fh);
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "rank %d: cannot open %s\n", rank, path);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    long long mine = 0;
    for (int b = 0; b < blocks; b++) {
        MPI_Offset off = shared ? ((MPI_Offset)b * csize + crank) * block : (MPI_Offset)b * block;
        if (collective)
            rc = MPI_File_write_at_all(fh, off, buf, (int)block, MPI_BYTE, MPI_STATUS_IGNORE);
        else
            rc = MPI_File_write_at(fh, off, buf, (int)block, MPI_BYTE, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS)
            MPI_Abort(MPI_COMM_WORLD, 1);
        mine += block;
        if (b + 1 < blocks)
            pause_ms(pause);
    }
    double t1 = MPI_Wtime();
    MPI_File_close(&fh);
    long long wbytes;
    double wspan;
    phase(MPI_COMM_WORLD, t0, t1, mine, &wbytes, &wspan);

    /* ---- read back ---- */
    rc = MPI_File_open(comm, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
    if (rc != MPI_SUCCESS)
        MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    mine = 0;
    for (int b = 0; b < blocks; b++) {
        MPI_Offset off = shared ? ((MPI_Offset)b * csize + crank) * block : (MPI_Offset)b * block;
        if (collective)
            rc = MPI_File_read_at_all(fh, off, buf, (int)block, MPI_BYTE, MPI_STATUS_IGNORE);
        else
            rc = MPI_File_read_at(fh, off, buf, (int)block, MPI_BYTE, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS)
            MPI_Abort(MPI_COMM_WORLD, 1);
        mine += block;
        if (b + 1 < blocks)
            pause_ms(pause);
    }
    t1 = MPI_Wtime();
    MPI_File_close(&fh);
    long long rbytes;
    double rspan;
    phase(MPI_COMM_WORLD, t0, t1, mine, &rbytes, &rspan);

    if (rank == 0)
        printf("{\"mode\": \"%s\", \"ranks\": %d, \"files\": %d, \"write_bytes\": %lld, "
               "\"write_s\": %.9f, \"write_bw\": %.3f, \"read_bytes\": %lld, \"read_s\": %.9f, "
               "\"read_bw\": %.3f}\n",
               mode, size, files, wbytes, wspan, wbytes / wspan, rbytes, rspan, rbytes / rspan);
    fflush(stdout);
    MPI_Info_free(&info);
    if (comm != MPI_COMM_WORLD && comm != MPI_COMM_SELF)
        MPI_Comm_free(&comm);
    free(buf);
    MPI_Finalize();
    return 0;
}
