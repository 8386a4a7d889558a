/* hdf5_io.c - an HDF5 workload for tests/tracer/test_hdf5.py.
 *
 * usage: hdf5_io FILE N
 * Creates FILE with a dataset "d" of N doubles, writes it whole, writes its first half
 * again through a hyperslab selection, flushes, closes; reopens it, reads it whole and
 * reads a quarter of it through a selection. Prints its own byte counts as JSON so the
 * test compares the trace with the program's ground truth. */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    hsize_t n = (hsize_t)atoll(argv[2]);
    double *buf = calloc(n, sizeof *buf);
    for (hsize_t i = 0; i < n; i++)
        buf[i] = (double)i;
    long long written = 0, read_bytes = 0;

    hid_t f = H5Fcreate(argv[1], H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t space = H5Screate_simple(1, &n, NULL);
    hid_t d = H5Dcreate2(f, "d", H5T_NATIVE_DOUBLE, space, H5P_DEFAULT, H5P_DEFAULT,
                         H5P_DEFAULT);
    if (f < 0 || d < 0 || H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0)
        return 1;
    written += (long long)(n * sizeof(double));

    hsize_t start = 0, half = n / 2;
    hid_t fsel = H5Scopy(space);
    H5Sselect_hyperslab(fsel, H5S_SELECT_SET, &start, NULL, &half, NULL);
    hid_t msel = H5Screate_simple(1, &half, NULL);
    if (H5Dwrite(d, H5T_NATIVE_DOUBLE, msel, fsel, H5P_DEFAULT, buf) < 0)
        return 1;
    written += (long long)(half * sizeof(double));
    H5Fflush(f, H5F_SCOPE_GLOBAL);
    H5Sclose(msel);
    H5Sclose(fsel);
    H5Dclose(d);
    H5Sclose(space);
    H5Fclose(f);

    f = H5Fopen(argv[1], H5F_ACC_RDONLY, H5P_DEFAULT);
    d = H5Dopen2(f, "d", H5P_DEFAULT);
    if (f < 0 || d < 0 || H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0)
        return 1;
    read_bytes += (long long)(n * sizeof(double));
    space = H5Dget_space(d);
    hsize_t quarter = n / 4;
    H5Sselect_hyperslab(space, H5S_SELECT_SET, &start, NULL, &quarter, NULL);
    msel = H5Screate_simple(1, &quarter, NULL);
    if (H5Dread(d, H5T_NATIVE_DOUBLE, msel, space, H5P_DEFAULT, buf) < 0)
        return 1;
    read_bytes += (long long)(quarter * sizeof(double));
    for (hsize_t i = 0; i < quarter; i++)
        if (buf[i] != (double)i)
            return 3;
    H5Sclose(msel);
    H5Sclose(space);
    H5Dclose(d);
    H5Fclose(f);
    printf("{\"written\": %lld, \"read\": %lld}\n", written, read_bytes);
    free(buf);
    return 0;
}
