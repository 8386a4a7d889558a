/*
 * compress.c - zstd compression of RECORDS sections (IOL_SEC_ZSTD in iolens_trace.h).
 *
 * Random-offset records barely fold (32+ bytes per call); zstd level 1 shrinks them
 * several-fold at a cost of well under a microsecond per record. libzstd is loaded at run
 * time (dlopen "libzstd.so.1", the runtime package every Debian system has) with the few
 * prototypes declared here (ZSTD_compress2 with a checksum per frame), so building the tracer needs no zstd headers. It is loaded in
 * iol_init() under iol_guard (dlopen's own open() calls are not the application's), never
 * from a wrapper. The context is a static one in a workspace mapped once: compressing
 * never allocates, so it is safe from the exit and signal paths that write the last file.
 * Anything missing or failing leaves the section uncompressed. IOLENS_COMPRESS=0 turns it
 * off; 1-3 choose the level (default 1).
 */
#include "iolens.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

typedef size_t (*bound_fn)(size_t);
typedef size_t (*estimate_fn)(int);
typedef void *(*static_fn)(void *, size_t);
typedef size_t (*compress_fn)(void *, void *, size_t, const void *, size_t);
typedef size_t (*param_fn)(void *, int, int);
typedef unsigned (*error_fn)(size_t);

static struct {
    compress_fn compress;
    error_fn is_error;
    void *cctx;
    void *out;      /* output buffer: compressBound of a full chunk */
    size_t out_cap;
    int level;
} z;

/* zstd.h's ZSTD_cParameter values (stable API) */
#define IOL_ZSTD_C_LEVEL 100
#define IOL_ZSTD_C_CHECKSUM 201

#define IOL_ZSTD_MAX_WORKSPACE (8u << 20) /* refuse a libzstd that wants more */

IOL_HIDDEN void iol_zstd_init(void)
{
    const char *env = getenv("IOLENS_COMPRESS");
    long level = env && *env ? strtol(env, NULL, 10) : 1;
    if (level <= 0)
        return;
    z.level = level > 3 ? 3 : (int)level;
    void *h = dlopen("libzstd.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return;
    bound_fn bound = (bound_fn)dlsym(h, "ZSTD_compressBound");
    estimate_fn estimate = (estimate_fn)dlsym(h, "ZSTD_estimateCCtxSize");
    static_fn init_static = (static_fn)dlsym(h, "ZSTD_initStaticCCtx");
    compress_fn compress = (compress_fn)dlsym(h, "ZSTD_compress2");
    param_fn param = (param_fn)dlsym(h, "ZSTD_CCtx_setParameter");
    error_fn is_error = (error_fn)dlsym(h, "ZSTD_isError");
    if (!bound || !estimate || !init_static || !compress || !param || !is_error)
        return; /* the handle stays open: harmless, and closing it could run destructors */
    size_t ws = estimate(z.level);
    size_t cap = bound((size_t)IOL_CHUNK_RECS * sizeof(struct iol_record));
    if (!ws || ws > IOL_ZSTD_MAX_WORKSPACE || !cap)
        return;
    void *mem = iol_map((uint64_t)ws + cap);
    if (!mem)
        return;
    void *cctx = init_static(mem, ws);
    /* a checksum in every frame: a damaged trace is then an error, never wrong records */
    if (!cctx || is_error(param(cctx, IOL_ZSTD_C_LEVEL, z.level)) ||
        is_error(param(cctx, IOL_ZSTD_C_CHECKSUM, 1)))
        return;
    z.out = (char *)mem + ws;
    z.out_cap = cap;
    z.is_error = is_error;
    z.cctx = cctx;
    z.compress = compress;
}

/* Compress `n` bytes; the frame's length (and *out) if it is smaller, else 0. Caller holds
   g.lock (one context per process). */
IOL_HIDDEN size_t iol_zstd(const void *src, size_t n, const void **out)
{
    if (!z.compress || n > (size_t)IOL_CHUNK_RECS * sizeof(struct iol_record))
        return 0;
    size_t r = z.compress(z.cctx, z.out, z.out_cap, src, n);
    if (z.is_error(r) || r == 0 || r + sizeof(struct iol_zsection) + 8 >= n)
        return 0;
    *out = z.out;
    return r;
}
