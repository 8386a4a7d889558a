/*
 * mpiio_calls.c - every MPI-IO form the tracer wraps, with known sizes (tests/tracer/
 * test_mpiio.py). Each rank moves 4 KiB blocks in its own region of one shared file:
 *
 *   open (hints: cb_buffer_size=1048576, striping_factor=4)
 *   set_view(disp = rank * 64 KiB, MPI_BYTE)           -> seek at 65536 * rank
 *   write_at, write_at_all, write, write_all           4 blocks, offsets 0..3 x 4 KiB
 *   iwrite_at + wait, iwrite + wait                    2 blocks, both at offset 4
 *   write_at_all_begin/end, write_all_begin/end        2 blocks, offsets 6, 7
 *   write_shared (1 block, 100 bytes), sync
 *   read_at, read_at_all, read, read_all, iread_at, read_at_all_begin/end   6 blocks
 *   close, then MPI_File_delete of a second file
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#define B 4096

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc < 2)
        MPI_Abort(MPI_COMM_WORLD, 2);
    char path[4096], other[4096];
    snprintf(path, sizeof path, "%s/shared.dat", argv[1]);
    snprintf(other, sizeof other, "%s/scratch.dat", argv[1]);
    static char buf[B];
    memset(buf, 'a' + rank, sizeof buf);
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "cb_buffer_size", "1048576");
    MPI_Info_set(info, "striping_factor", "4");
    MPI_File fh;
    MPI_Request rq;
    MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, info, &fh);
    MPI_File_set_view(fh, (MPI_Offset)rank * 65536, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL);
    MPI_File_write_at(fh, 0, buf, B, MPI_BYTE, MPI_STATUS_IGNORE);
    MPI_File_write_at_all(fh, B, buf, B, MPI_BYTE, MPI_STATUS_IGNORE);
    MPI_File_seek(fh, 2 * B, MPI_SEEK_SET);
    MPI_File_write(fh, buf, B, MPI_BYTE, MPI_STATUS_IGNORE);
    MPI_File_write_all(fh, buf, B, MPI_BYTE, MPI_STATUS_IGNORE);
    MPI_File_iwrite_at(fh, 4 * B, buf, B, MPI_BYTE, &rq);
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
    MPI_File_iwrite(fh, buf, B, MPI_BYTE, &rq); /* individual pointer: still at 4 x B */
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
    MPI_File_write_at_all_begin(fh, 6 * B, buf, B, MPI_BYTE);
    MPI_File_write_at_all_end(fh, buf, MPI_STATUS_IGNORE);
    MPI_File_seek(fh, 7 * B, MPI_SEEK_SET);
    MPI_File_write_all_begin(fh, buf, B, MPI_BYTE);
    MPI_File_write_all_end(fh, buf, MPI_STATUS_IGNORE);
    MPI_File_write_shared(fh, buf, 100, MPI_BYTE, MPI_STATUS_IGNORE);
    MPI_File_sync(fh);
    MPI_File_read_at(fh, 0, buf, B, MPI_BYTE, MPI_STATUS_IGNORE);
    MPI_File_read_at_all(fh, B, buf, B, MPI_BYTE, MPI_STATUS_IGNORE);
    MPI_File_seek(fh, 2 * B, MPI_SEEK_SET);
    MPI_File_read(fh, buf, B, MPI_BYTE, MPI_STATUS_IGNORE);
    MPI_File_read_all(fh, buf, B, MPI_BYTE, MPI_STATUS_IGNORE);
    MPI_File_iread_at(fh, 4 * B, buf, B, MPI_BYTE, &rq);
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
    MPI_File_read_at_all_begin(fh, 5 * B, buf, B, MPI_BYTE);
    MPI_File_read_at_all_end(fh, buf, MPI_STATUS_IGNORE);
    MPI_File_close(&fh);
    MPI_File_open(MPI_COMM_WORLD, other, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh);
    MPI_File_close(&fh);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        MPI_File_delete(other, MPI_INFO_NULL);
    MPI_Info_free(&info);
    MPI_Finalize();
    return 0;
}
