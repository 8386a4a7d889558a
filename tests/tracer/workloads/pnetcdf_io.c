/* pnetcdf_io.c - a PnetCDF workload for tests/tracer/test_pnetcdf.py (mpirun -np P).
 *
 * usage: pnetcdf_io FILE N
 * Each rank writes its row of an nprocs x N double variable collectively and its row of an
 * int variable independently, syncs and closes; reopens, reads its double row back
 * collectively and as floats independently. Each rank prints its own byte counts (the
 * in-memory sizes it asked PnetCDF to move) as JSON. */
#include <mpi.h>
#include <pnetcdf.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(x)                                                                        \
    do {                                                                                \
        int e_ = (x);                                                                   \
        if (e_ != NC_NOERR) {                                                           \
            fprintf(stderr, "%s: %s\n", #x, ncmpi_strerror(e_));                        \
            MPI_Abort(MPI_COMM_WORLD, 1);                                               \
        }                                                                               \
    } while (0)

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    if (argc != 3)
        MPI_Abort(MPI_COMM_WORLD, 2);
    int rank, nprocs;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    MPI_Offset n = atoll(argv[2]);
    double *d = malloc(n * sizeof *d);
    int *iv = malloc(n * sizeof *iv);
    float *f = malloc(n * sizeof *f);
    for (MPI_Offset k = 0; k < n; k++) {
        d[k] = rank * 1e6 + k;
        iv[k] = (int)k;
    }
    long long written = 0, read_bytes = 0;
    int nc, dims[2], vd, vi;
    CHECK(ncmpi_create(MPI_COMM_WORLD, argv[1], NC_CLOBBER | NC_64BIT_DATA, MPI_INFO_NULL, &nc));
    CHECK(ncmpi_def_dim(nc, "p", nprocs, &dims[0]));
    CHECK(ncmpi_def_dim(nc, "n", n, &dims[1]));
    CHECK(ncmpi_def_var(nc, "d", NC_DOUBLE, 2, dims, &vd));
    CHECK(ncmpi_def_var(nc, "i", NC_INT, 2, dims, &vi));
    CHECK(ncmpi_enddef(nc));
    MPI_Offset start[2] = {rank, 0}, count[2] = {1, n};
    CHECK(ncmpi_put_vara_double_all(nc, vd, start, count, d));
    written += n * (long long)sizeof(double);
    CHECK(ncmpi_begin_indep_data(nc));
    CHECK(ncmpi_put_vara_int(nc, vi, start, count, iv));
    written += n * (long long)sizeof(int);
    CHECK(ncmpi_end_indep_data(nc));
    CHECK(ncmpi_sync(nc));
    CHECK(ncmpi_close(nc));

    CHECK(ncmpi_open(MPI_COMM_WORLD, argv[1], NC_NOWRITE, MPI_INFO_NULL, &nc));
    CHECK(ncmpi_inq_varid(nc, "d", &vd));
    CHECK(ncmpi_get_vara_double_all(nc, vd, start, count, d));
    read_bytes += n * (long long)sizeof(double);
    CHECK(ncmpi_begin_indep_data(nc));
    CHECK(ncmpi_get_vara_float(nc, vd, start, count, f));
    read_bytes += n * (long long)sizeof(float);
    CHECK(ncmpi_end_indep_data(nc));
    CHECK(ncmpi_close(nc));
    for (MPI_Offset k = 0; k < n; k++)
        if (d[k] != rank * 1e6 + k || f[k] != (float)(rank * 1e6 + k))
            MPI_Abort(MPI_COMM_WORLD, 3);
    printf("{\"rank\": %d, \"written\": %lld, \"read\": %lld}\n", rank, written, read_bytes);
    free(d);
    free(iv);
    free(f);
    MPI_Finalize();
    return 0;
}
