/*
 * local_sym.h - find a library function that dlsym(RTLD_NEXT) cannot see.
 *
 * A library loaded with RTLD_LOCAL (Python's dlopen of an extension module pulls in, say,
 * h5py's bundled libhdf5 that way) is not in the global scope: the application's calls
 * still bind to the tracer's wrapper (the preloaded library comes first in every lookup),
 * but RTLD_NEXT from the wrapper never reaches the real definition. iol_local_sym() then
 * walks the loaded objects (dl_iterate_phdr) for one whose path contains `lib_part`, takes
 * a handle to it without loading anything (RTLD_NOLOAD) and looks the name up in it.
 */
#ifndef IOL_LOCAL_SYM_H
#define IOL_LOCAL_SYM_H

#include <stddef.h>

/* The next definition of `name`: RTLD_NEXT first, then any loaded object whose path
   contains `lib_part` (looked up in that object's own scope, where the tracer, preloaded
   but no dependency of it, never is); NULL if none is loaded. */
__attribute__((visibility("hidden"))) void *iol_local_sym(const char *name,
                                                          const char *lib_part);

#endif
