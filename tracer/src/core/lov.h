/*
 * lov.h - decoding a Lustre file layout (the `lustre.lov` extended attribute) and the
 * Lustre lines of /proc/self/mountinfo. Pure functions: no globals, no allocation, no
 * system calls, so a test program links lov.c alone and feeds it byte blobs.
 *
 * The xattr holds what the MDT stores (lov_mds_md, little-endian, the same layout as
 * lov_user_md in Lustre's uapi lustre_user.h):
 *
 *   lov_user_md_v1 (magic 0x0BD10BD0), 32 bytes:
 *     u32 magic, u32 pattern, u64 oi_id, u64 oi_seq, u32 stripe_size,
 *     u16 stripe_count, u16 layout_gen, then stripe_count x lov_user_ost_data_v1
 *   lov_user_md_v3 (magic 0x0BD30BD0), 48 bytes: v1's header + char pool_name[16]
 *   lov_user_ost_data_v1, 24 bytes: u64 oi_id, u64 oi_seq, u32 ost_gen, u32 ost_idx
 *   lov_comp_md_v1 (magic 0x0BD60BD0, PFL/FLR), 32 bytes:
 *     u32 magic, u32 size, u32 layout_gen, u16 flags, u16 entry_count,
 *     u16 mirror_count, u16 pad[3], u64 pad, then entry_count x lov_comp_md_entry_v1
 *   lov_comp_md_entry_v1, 48 bytes: u32 id, u32 flags, u64 extent_start, u64 extent_end,
 *     u32 offset (of the component's v1/v3 blob, from the start of lov_comp_md_v1),
 *     u32 size, u32 layout_gen, u64 timestamp, u32 pad
 */
#ifndef IOLENS_LOV_H
#define IOLENS_LOV_H

#include <stddef.h>
#include <stdint.h>

#define IOL_LL_SUPER_MAGIC 0x0BD00BD0u /* statfs f_type of a Lustre client mount */
#define IOL_LOV_MAGIC_V1 0x0BD10BD0u
#define IOL_LOV_MAGIC_V3 0x0BD30BD0u
#define IOL_LOV_MAGIC_COMP_V1 0x0BD60BD0u

/* What the layout says beyond its stripes (struct iol_lov.flags). */
#define IOL_LOV_INCOMPLETE 0x1u /* components (or objects) not instantiated yet: a PFL file
                                   grows into them as it is written; read again later */
#define IOL_LOV_DOM 0x2u        /* a component keeps its data on the MDT (Data-on-MDT) */
#define IOL_LOV_TRUNCATED 0x4u  /* more OST indices than the caller had room for */
#define IOL_LOV_RELEASED 0x8u   /* HSM-released file: no objects */

struct iol_lov {
    uint32_t magic;         /* the xattr's magic: V1, V3 or COMP_V1 */
    uint32_t flags;         /* IOL_LOV_* */
    uint64_t stripe_size;   /* of the first instantiated component with OST objects */
    uint16_t stripe_count;  /* that component's stripe count */
    uint16_t components;    /* 1 for a plain layout */
    uint32_t nosts;         /* OST indices written to the caller's array */
};

/*
 * Decode `len` bytes of a `lustre.lov` value. The OST indices of every instantiated
 * component are written to `osts` in component and stripe order (at most `max`; the
 * rest set IOL_LOV_TRUNCATED). Returns 0, or -1 when the bytes are not a layout this
 * decoder knows (foreign layouts, truncated or inconsistent blobs).
 */
int iol_lov_decode(const void *buf, size_t len, struct iol_lov *out, uint32_t *osts,
                   uint32_t max);

#define IOL_FSNAME_MAX 16 /* Lustre allows 8 characters; room to spare, NUL included */

/*
 * One line of /proc/self/mountinfo (without its newline). If it is a Lustre client
 * mount ("... - lustre <mgsnid>[:<mgsnid>]:/<fsname>[/<subdir>] ..."), copy the mount
 * point (unescaped, NUL-terminated, at most `cap` bytes with the NUL) and the fs name,
 * and return the mount point's length; else return -1.
 */
int iol_mountinfo_lustre(const char *line, size_t n, char *point, size_t cap,
                         char fsname[IOL_FSNAME_MAX]);

#endif /* IOLENS_LOV_H */
