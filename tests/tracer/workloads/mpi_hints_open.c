/*
 * mpi_hints_open.c - opens files the two ways an application passes hints, for
 * tests/tracer/test_mpi_hints.py.
 *
 *   mpi_hints_open DIR KEY...
 * DIR/null.dat is opened with MPI_INFO_NULL, DIR/own.dat with an info setting
 * cb_buffer_size=1048576 (the application's own hint). Each rank writes 4096 bytes at
 * rank * 4096 collectively to both (to null.dat a second time at 8192 + rank * 4096, so
 * that file carries most of the bytes) and closes them. Rank 0 prints, for each file and each
 * KEY, what MPI_File_get_info reports: "null KEY VALUE" (or "null KEY -" when unset).
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

static void show(const char *tag, MPI_File fh, int nkeys, char **keys, int rank)
{
    MPI_Info used;
    MPI_File_get_info(fh, &used);
    for (int i = 0; i < nkeys && rank == 0; i++) {
        char value[1025];
        int flag = 0;
        MPI_Info_get(used, keys[i], 1024, value, &flag);
        printf("%s %s %s\n", tag, keys[i], flag ? value : "-");
    }
    MPI_Info_free(&used);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char buf[4096], path[4096];
    memset(buf, 'a' + rank, sizeof buf);
    MPI_Info own;
    MPI_Info_create(&own);
    MPI_Info_set(own, "cb_buffer_size", "1048576");
    const char *names[2] = {"null", "own"};
    MPI_Info infos[2] = {MPI_INFO_NULL, own};
    for (int f = 0; f < 2; f++) {
        MPI_File fh;
        snprintf(path, sizeof path, "%s/%s.dat", argv[1], names[f]);
        if (MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_WRONLY, infos[f],
                          &fh) != MPI_SUCCESS) {
            fprintf(stderr, "open %s failed\n", path);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        for (int k = 0; k < (f == 0 ? 2 : 1); k++)
            MPI_File_write_at_all(fh, (MPI_Offset)(k * 8192 + rank * 4096), buf, 4096,
                                  MPI_BYTE, MPI_STATUS_IGNORE);
        show(names[f], fh, argc - 2, argv + 2, rank);
        MPI_File_close(&fh);
    }
    MPI_Info_free(&own);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
