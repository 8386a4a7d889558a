/*
 * mpi_strided.c - a collective write of small interleaved blocks, for bench/mpi_hints.py.
 *
 *   mpi_strided FILE BLOCK NBLOCKS
 * Rank r of P writes NBLOCKS blocks of BLOCK bytes ('a' + r % 26) at r*BLOCK + k*P*BLOCK
 * with one MPI_File_write_all through a vector file view, opened with MPI_INFO_NULL (the
 * hints, if any, come from the tracer's IOLENS_MPI_HINTS). Rank 0 prints the slowest
 * rank's open-to-close seconds, then checks every byte of the file ("ok" or "bad N").
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 4) {
        if (rank == 0)
            fprintf(stderr, "usage: mpi_strided FILE BLOCK NBLOCKS\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int block = atoi(argv[2]), nblocks = atoi(argv[3]);
    MPI_Datatype ft;
    MPI_Type_vector(nblocks, block, block * size, MPI_BYTE, &ft);
    MPI_Type_commit(&ft);
    char *buf = malloc((size_t)block * nblocks);
    memset(buf, 'a' + rank % 26, (size_t)block * nblocks);
    MPI_File fh;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    if (MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL,
                      &fh) != MPI_SUCCESS)
        MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_File_set_view(fh, (MPI_Offset)rank * block, MPI_BYTE, ft, "native", MPI_INFO_NULL);
    MPI_File_write_all(fh, buf, block * nblocks, MPI_BYTE, MPI_STATUS_IGNORE);
    MPI_File_close(&fh);
    double t = MPI_Wtime() - t0, slowest = 0;
    MPI_Reduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("%.6f\n", slowest);
        FILE *f = fopen(argv[1], "rb");
        long bad = f ? 0 : -1;
        for (long i = 0; f && i < (long)block * nblocks * size; i++) {
            int c = fgetc(f);
            if (c != 'a' + (int)((i / block) % size) % 26)
                bad++;
        }
        if (f)
            fclose(f);
        printf(bad ? "bad %ld\n" : "ok\n", bad);
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
