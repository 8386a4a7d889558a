/*
 * mpi_hints.h - the MPI-IO hint injection plug-in (SIOX optimizer), see mpi_hints.c.
 *
 * MPI_File_open (mpiio.c) asks iol_mh_info() for the info to open with. When
 * IOLENS_MPI_HINTS is not set this is one predictable branch on a global flag.
 */
#ifndef IOLENS_MPI_HINTS_H
#define IOLENS_MPI_HINTS_H

#include "../core/iolens.h"

/* 1 when IOLENS_MPI_HINTS held at least one well-formed hint (set once, in iol_init). */
IOL_HIDDEN extern int iol_mh_on;

IOL_HIDDEN void iol_mh_init(void);

/* The info to open `path` with: a new info (the application's `info` plus the injected
   hints, stored in *made, to be freed with iol_mh_free after the open) or `info` itself
   when nothing applies (*made = 0). */
IOL_HIDDEN uintptr_t iol_mh_info(const char *path, uintptr_t info, uintptr_t *made);
IOL_HIDDEN void iol_mh_free(uintptr_t *made);

/* 1 if `info` is MPI_INFO_NULL of the loaded MPI library (mpiio.c). */
IOL_HIDDEN int iol_mpi_info_is_null(uintptr_t info);

#endif /* IOLENS_MPI_HINTS_H */
