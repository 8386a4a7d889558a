/*
 * local_sym.c - look a symbol up in a library loaded RTLD_LOCAL (see local_sym.h).
 */
#define _GNU_SOURCE
#include "local_sym.h"

#include "../core/iolens.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <string.h>

#define MAX_CANDIDATES 8
#define PATH_CAP 1024

struct candidates {
    const char *part;
    int n;
    char path[MAX_CANDIDATES][PATH_CAP];
};

/* Only copies paths: dlopen() must not run while dl_iterate_phdr holds the loader lock. */
static int collect(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct candidates *c = arg;
    const char *name = info->dlpi_name;
    if (!name || !*name || !strstr(name, c->part) || c->n >= MAX_CANDIDATES)
        return 0;
    size_t len = strlen(name);
    if (len >= PATH_CAP)
        return 0;
    memcpy(c->path[c->n++], name, len + 1);
    return 0;
}

void *iol_local_sym(const char *name, const char *lib_part)
{
    void *p = iol_dlsym(name);
    if (p)
        return p;
    int saved = iol_guard;
    iol_guard = 1; /* the loader's own file accesses are not the application's I/O */
    static struct candidates c; /* 8 KiB: off the stack, so one lookup at a time */
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&lock);
    c.part = lib_part;
    c.n = 0;
    dl_iterate_phdr(collect, &c);
    p = NULL;
    for (int i = 0; i < c.n && !p; i++) {
        void *h = dlopen(c.path[i], RTLD_NOLOAD | RTLD_LAZY);
        if (!h)
            continue;
        void *q = dlsym(h, name);
        if (q)
            p = q;
        dlclose(h); /* RTLD_NOLOAD took a reference: give it back */
    }
    pthread_mutex_unlock(&lock);
    iol_guard = saved;
    return p;
}
