/* A small MPI program that reports its own bandwidth the way MPI-IO Test does: every rank
 * times each of its MPI-IO data calls with MPI_Wtime, and rank 0 prints total bytes over
 * the slowest rank's summed call time, per direction (tests/analyze/test_bandwidth.py).
 *
 * usage: bandwidth_prog FILE BLOCK_BYTES BLOCKS
 * prints: write_bytes write_seconds read_bytes read_seconds
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, nprocs;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (argc != 4) {
        if (rank == 0) fprintf(stderr, "usage: %s FILE BLOCK_BYTES BLOCKS\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    long block = atol(argv[2]);
    int blocks = atoi(argv[3]);
    char *buf = malloc(block);
    memset(buf, 'a' + rank, block);
    MPI_File fh;
    MPI_Status st;
    MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
    double w = 0.0, r = 0.0, t;
    for (int i = 0; i < blocks; i++) {
        MPI_Offset off = ((MPI_Offset)i * nprocs + rank) * block;
        MPI_Barrier(MPI_COMM_WORLD);
        t = MPI_Wtime();
        MPI_File_write_at_all(fh, off, buf, (int)block, MPI_BYTE, &st);
        w += MPI_Wtime() - t;
    }
    for (int i = 0; i < blocks; i++) {
        MPI_Offset off = ((MPI_Offset)i * nprocs + rank) * block;
        MPI_Barrier(MPI_COMM_WORLD);
        t = MPI_Wtime();
        MPI_File_read_at_all(fh, off, buf, (int)block, MPI_BYTE, &st);
        r += MPI_Wtime() - t;
    }
    MPI_File_close(&fh);
    double wmax, rmax;
    MPI_Reduce(&w, &wmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&r, &rmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        long total = block * (long)blocks * nprocs;
        printf("%ld %.9f %ld %.9f\n", total, wmax, total, rmax);
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
