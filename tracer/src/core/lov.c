/*
 * lov.c - Lustre layouts and mount lines, decoded from bytes (see lov.h).
 *
 * Every length and offset in the blob is checked against the bytes actually returned
 * before it is used: the xattr comes from the file system, but a decoder inside an
 * application must not trust anything it did not bound itself.
 */
#include "lov.h"

#include <string.h>

#define V1_HEADER 32u
#define V3_HEADER 48u
#define OST_DATA 24u
#define OST_IDX_AT 20u /* l_ost_idx inside lov_user_ost_data_v1 */
#define COMP_HEADER 32u
#define COMP_ENTRY 48u

#define PATTERN_MDT 0x100u
#define PATTERN_F_RELEASED 0x80000000u
#define LCME_FL_INIT 0x10u
#define LCME_FL_EXTENSION 0x40u
#define ALL_STRIPES 0xffffu

static uint32_t u32_at(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v); /* little-endian on disk and on x86-64 */
    return v;
}

static uint16_t u16_at(const unsigned char *p)
{
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* One plain (v1/v3) layout: a whole file's, or one component's. */
struct plain {
    uint32_t stripe_size;
    uint16_t stripe_count;
    uint32_t flags;         /* IOL_LOV_DOM, IOL_LOV_RELEASED, IOL_LOV_INCOMPLETE */
    const unsigned char *objects;
    uint32_t nobjects;      /* objects present (the rest are not instantiated) */
};

static int plain_of(const unsigned char *p, size_t len, struct plain *out)
{
    if (len < 4)
        return -1;
    uint32_t magic = u32_at(p);
    size_t header = magic == IOL_LOV_MAGIC_V1 ? V1_HEADER
                    : magic == IOL_LOV_MAGIC_V3 ? V3_HEADER
                                                : 0;
    if (!header || len < header)
        return -1;
    uint32_t pattern = u32_at(p + 4);
    out->stripe_size = u32_at(p + 24);
    out->stripe_count = u16_at(p + 28);
    out->flags = 0;
    out->objects = p + header;
    out->nobjects = 0;
    if (pattern & PATTERN_F_RELEASED) {
        out->flags |= IOL_LOV_RELEASED;
        return 0;
    }
    if ((pattern & 0xffffu) & PATTERN_MDT) {
        out->flags |= IOL_LOV_DOM;
        return 0;
    }
    size_t room = (len - header) / OST_DATA;
    size_t want = out->stripe_count == ALL_STRIPES ? room : out->stripe_count;
    out->nobjects = (uint32_t)(want < room ? want : room);
    if (out->nobjects < want)
        out->flags |= IOL_LOV_INCOMPLETE; /* created with delayed objects, or cut short */
    return 0;
}

static void add_osts(struct iol_lov *out, const struct plain *c, uint32_t *osts, uint32_t max)
{
    for (uint32_t i = 0; i < c->nobjects; i++) {
        if (out->nosts >= max) {
            out->flags |= IOL_LOV_TRUNCATED;
            return;
        }
        osts[out->nosts++] = u32_at(c->objects + (size_t)i * OST_DATA + OST_IDX_AT);
    }
}

int iol_lov_decode(const void *buf, size_t len, struct iol_lov *out, uint32_t *osts,
                   uint32_t max)
{
    const unsigned char *p = buf;
    memset(out, 0, sizeof *out);
    if (!p || len < 4)
        return -1;
    out->magic = u32_at(p);
    if (out->magic != IOL_LOV_MAGIC_COMP_V1) {
        struct plain c;
        if (plain_of(p, len, &c) < 0)
            return -1;
        out->components = 1;
        out->flags = c.flags;
        out->stripe_size = c.stripe_size;
        out->stripe_count = c.stripe_count;
        add_osts(out, &c, osts, max);
        return 0;
    }
    if (len < COMP_HEADER)
        return -1;
    uint32_t total = u32_at(p + 4);
    if (total >= COMP_HEADER && total < len)
        len = total; /* bytes past the layout's own size are not part of it */
    uint16_t n = u16_at(p + 14);
    if ((size_t)COMP_HEADER + (size_t)n * COMP_ENTRY > len)
        return -1;
    out->components = n;
    int have_size = 0, fallback = 0;
    for (uint16_t i = 0; i < n; i++) {
        const unsigned char *e = p + COMP_HEADER + (size_t)i * COMP_ENTRY;
        uint32_t flags = u32_at(e + 4), at = u32_at(e + 24), size = u32_at(e + 28);
        if ((size_t)at + size > len || at < COMP_HEADER)
            return -1;
        struct plain c;
        if (plain_of(p + at, size, &c) < 0)
            return -1;
        out->flags |= c.flags & (IOL_LOV_DOM | IOL_LOV_RELEASED);
        int instantiated = (flags & LCME_FL_INIT) && !(flags & LCME_FL_EXTENSION);
        if (!instantiated) {
            /* what a PFL file grows into as it is written: no objects yet */
            out->flags |= IOL_LOV_INCOMPLETE;
            if (!(c.flags & IOL_LOV_DOM) && !have_size && !fallback) {
                out->stripe_size = c.stripe_size;
                out->stripe_count = c.stripe_count;
                fallback = 1;
            }
            continue;
        }
        out->flags |= c.flags & IOL_LOV_INCOMPLETE;
        if (!have_size && c.nobjects) {
            out->stripe_size = c.stripe_size;
            out->stripe_count = c.stripe_count;
            have_size = 1;
        }
        add_osts(out, &c, osts, max);
    }
    return 0;
}

/* The next space-separated field of [*p, end); advances *p past it. */
static const char *field(const char **p, const char *end, size_t *n)
{
    const char *s = *p;
    while (s < end && *s == ' ')
        s++;
    const char *f = s;
    while (s < end && *s != ' ')
        s++;
    *n = (size_t)(s - f);
    *p = s;
    return f;
}

static int is_octal(char c) { return c >= '0' && c <= '7'; }

int iol_mountinfo_lustre(const char *line, size_t n, char *point, size_t cap,
                         char fsname[IOL_FSNAME_MAX])
{
    const char *p = line, *end = line + n;
    size_t len = 0;
    const char *mnt = NULL;
    size_t mnt_len = 0;
    /* id, parent, major:minor, root, mount point */
    for (int i = 0; i < 5; i++) {
        mnt = field(&p, end, &mnt_len);
        if (!mnt_len)
            return -1;
    }
    /* options, optional fields, then "-" */
    const char *f;
    do {
        f = field(&p, end, &len);
        if (!len)
            return -1;
    } while (!(len == 1 && f[0] == '-'));
    f = field(&p, end, &len);
    if (len != 6 || memcmp(f, "lustre", 6) != 0)
        return -1;
    const char *src = field(&p, end, &len);
    const char *name = NULL;
    for (size_t i = 0; i + 1 < len; i++)
        if (src[i] == ':' && src[i + 1] == '/') {
            name = src + i + 2;
            break;
        }
    if (!name)
        return -1;
    size_t k = 0;
    while (name + k < src + len && name[k] != '/' && k + 1 < IOL_FSNAME_MAX) {
        fsname[k] = name[k];
        k++;
    }
    if (k == 0)
        return -1;
    fsname[k] = '\0';
    /* mount points escape space, tab, newline and backslash as \ooo */
    size_t out = 0;
    for (size_t i = 0; i < mnt_len; i++) {
        char c = mnt[i];
        if (c == '\\' && i + 3 < mnt_len && is_octal(mnt[i + 1]) && is_octal(mnt[i + 2]) &&
            is_octal(mnt[i + 3])) {
            c = (char)(((mnt[i + 1] - '0') << 6) | ((mnt[i + 2] - '0') << 3) | (mnt[i + 3] - '0'));
            i += 3;
        }
        if (out + 1 >= cap)
            return -1; /* a mount point we cannot hold is one we cannot match */
        point[out++] = c;
    }
    point[out] = '\0';
    return (int)out;
}
