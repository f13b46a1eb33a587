/* Checkpoint files: CRC-32, the streaming writer and the validating reader (layout in checkpoint-private.h). */
#include "checkpoint-private.h"
#include "file-private.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

uint32_t crl_crc32(uint32_t crc, const void *data, size_t len)
{
    if (!data || len == 0)
        return crc;
    return (uint32_t)crc32_z((uLong)crc, data, (z_size_t)len);
}

/* The largest header: the fixed part and a kind of CRL_CKPT_NAME_MAX bytes, 8-aligned. */
#define HEADER_MAX ((CRL__CKPT_HEADER_FIXED + CRL_CKPT_NAME_MAX + 7) & ~7)

static inline uint64_t align8(uint64_t x)
{
    return (x + 7) & ~(uint64_t)7;
}

/* ---- writer ------------------------------------------------------------ */

typedef struct wentry {
    char *name;
    uint64_t offset, size;
    uint32_t crc;
} wentry;

struct crl_ckpt_writer {
    int fd;
    bool regular;  /* only a regular file we created is removed on failure */
    char *path;
    char *kind;
    uint32_t kind_version;
    uint64_t pos;
    GArray *entries; /* wentry */
    GHashTable *names;
    int fail_code;  /* first failure; later calls repeat it */
    char *fail_msg;
};

static const uint8_t zeros[64];

static int wfail(crl_ckpt_writer *w, crl_error *err, int code, const char *fmt, ...) CRL_PRINTF(4, 5);
static int wfail(crl_ckpt_writer *w, crl_error *err, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    if (!w->fail_code) {
        w->fail_code = code;
        w->fail_msg = g_strdup(msg);
    }
    crl_error_set(err, code, "%s", msg);
    g_free(msg);
    return code;
}

static int wfailed(const crl_ckpt_writer *w, crl_error *err)
{
    return crl_error_set(err, w->fail_code, "%s (an earlier write to this checkpoint failed)", w->fail_msg);
}

/* write(2) until done; errno on failure (a zero-length write counts as EIO). */
static int write_all(int fd, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    while (len > 0) {
        size_t chunk = len > (1u << 30) ? (1u << 30) : len;
        ssize_t n = write(fd, p, chunk);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        if (n == 0)
            return EIO;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int pwrite_all(int fd, const void *buf, size_t len, off_t off)
{
    const uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = pwrite(fd, p, len, off);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        if (n == 0)
            return EIO;
        p += n;
        len -= (size_t)n;
        off += n;
    }
    return 0;
}

static int wbytes(crl_ckpt_writer *w, const void *data, size_t len, crl_error *err)
{
    int e = write_all(w->fd, data, len);
    if (e)
        return wfail(w, err, CRL_E_IO, "%s: cannot write checkpoint at offset %" PRIu64 ": %s%s", w->path, w->pos,
                     g_strerror(e), e == ENOSPC ? " (free disk space or write elsewhere)" : "");
    w->pos += len;
    return CRL_OK;
}

static int wpad(crl_ckpt_writer *w, crl_error *err)
{
    size_t pad = (size_t)(align8(w->pos) - w->pos);
    return pad ? wbytes(w, zeros, pad, err) : CRL_OK;
}

static void wentry_clear(void *p)
{
    g_free(((wentry *)p)->name);
}

static void writer_free(crl_ckpt_writer *w)
{
    if (w->fd >= 0)
        close(w->fd);
    g_array_free(w->entries, TRUE);
    g_hash_table_destroy(w->names);
    g_free(w->path);
    g_free(w->kind);
    g_free(w->fail_msg);
    g_free(w);
}

crl_ckpt_writer *crl_ckpt_writer_new(const char *path, const char *kind, uint32_t kind_version, crl_error *err)
{
    if (!path || !*path || !kind) {
        crl_error_set(err, CRL_E_INVALID, "crl_ckpt_writer_new: %s is %s", !kind ? "kind" : "path",
                      (path && !*path) ? "empty" : "NULL");
        return NULL;
    }
    size_t klen = strlen(kind);
    if (klen == 0 || klen > CRL_CKPT_NAME_MAX) {
        crl_error_set(err, CRL_E_INVALID, "crl_ckpt_writer_new: %s: kind '%.64s' is %zu bytes (1..%d)", path, kind,
                      klen, CRL_CKPT_NAME_MAX);
        return NULL;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        crl_error_set(err, CRL_E_IO, "%s: cannot create checkpoint file: %s", path, g_strerror(errno));
        return NULL;
    }
    struct stat st;
    crl_ckpt_writer *w = g_new0(crl_ckpt_writer, 1);
    w->fd = fd;
    w->regular = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
    w->path = g_strdup(path);
    w->kind = g_strdup(kind);
    w->kind_version = kind_version;
    w->entries = g_array_new(FALSE, FALSE, sizeof(wentry));
    g_array_set_clear_func(w->entries, wentry_clear);
    w->names = g_hash_table_new(g_str_hash, g_str_equal);
    /* The header stays zero until close: a file cut short never looks valid. */
    size_t hsize = (size_t)align8(CRL__CKPT_HEADER_FIXED + klen);
    uint8_t hdr[HEADER_MAX];
    memset(hdr, 0, sizeof hdr);
    if (wbytes(w, hdr, hsize, err)) {
        crl_ckpt_writer_abort(w);
        return NULL;
    }
    return w;
}

int crl_ckpt_write(crl_ckpt_writer *w, const char *name, const void *data, size_t len, crl_error *err)
{
    if (!w || !name)
        return crl_error_set(err, CRL_E_INVALID, "crl_ckpt_write: %s is NULL", !w ? "writer" : "section name");
    if (w->fail_code)
        return wfailed(w, err);
    size_t nlen = strlen(name);
    if (nlen == 0 || nlen > CRL_CKPT_NAME_MAX)
        return crl_error_set(err, CRL_E_INVALID, "%s: section name '%.64s' is %zu bytes (1..%d)", w->path, name, nlen,
                             CRL_CKPT_NAME_MAX);
    if (len > 0 && !data)
        return crl_error_set(err, CRL_E_INVALID, "%s: section '%s': data is NULL but length is %zu", w->path, name,
                             len);
    if (g_hash_table_contains(w->names, name))
        return crl_error_set(err, CRL_E_EXISTS, "%s: section '%s' is already in this checkpoint; names are unique",
                             w->path, name);
    if (w->entries->len >= CRL_CKPT_MAX_SECTIONS)
        return crl_error_set(err, CRL_E_RANGE, "%s: section '%s' would be section %u; a checkpoint holds at most %d",
                             w->path, name, w->entries->len + 1, CRL_CKPT_MAX_SECTIONS);
    int rc = wpad(w, err);
    if (rc)
        return rc;
    wentry e = {g_strdup(name), w->pos, len, 0};
    /* Checksum and write in slices so the data is read from cache once. */
    const uint8_t *p = data;
    size_t left = len;
    while (left > 0) {
        size_t n = left > (8u << 20) ? (8u << 20) : left;
        e.crc = crl_crc32(e.crc, p, n);
        if (wbytes(w, p, n, err)) {
            g_free(e.name);
            return CRL_E_IO;
        }
        p += n;
        left -= n;
    }
    g_array_append_val(w->entries, e);
    g_hash_table_add(w->names, g_array_index(w->entries, wentry, w->entries->len - 1).name);
    return CRL_OK;
}

static int wsync(crl_ckpt_writer *w, crl_error *err)
{
    if (fsync(w->fd) == 0)
        return CRL_OK;
    /* Devices and pipes cannot be synced; that is not a write failure. */
    if (!w->regular && (errno == EINVAL || errno == EROFS))
        return CRL_OK;
    return wfail(w, err, CRL_E_IO, "%s: cannot fsync checkpoint: %s", w->path, g_strerror(errno));
}

int crl_ckpt_writer_close(crl_ckpt_writer *w, crl_error *err)
{
    if (!w)
        return crl_error_set(err, CRL_E_INVALID, "crl_ckpt_writer_close: writer is NULL");
    if (w->fail_code) {
        wfailed(w, err);
        int code = w->fail_code;
        crl_ckpt_writer_abort(w);
        return code;
    }
    int rc = wpad(w, err);
    uint64_t table_off = w->pos;
    GByteArray *tab = g_byte_array_new();
    for (guint i = 0; i < w->entries->len; i++) {
        const wentry *e = &g_array_index(w->entries, wentry, i);
        uint8_t fixed[CRL__CKPT_ENTRY_FIXED];
        size_t nlen = strlen(e->name);
        crl__put_le64(fixed, e->offset);
        crl__put_le64(fixed + 8, e->size);
        crl__put_le32(fixed + 16, e->crc);
        fixed[20] = (uint8_t)nlen;
        fixed[21] = (uint8_t)(nlen >> 8);
        fixed[22] = fixed[23] = 0;
        g_byte_array_append(tab, fixed, sizeof fixed);
        g_byte_array_append(tab, (const guint8 *)e->name, (guint)nlen);
    }
    if (!rc)
        rc = wbytes(w, tab->data, tab->len, err);
    if (!rc)
        rc = wsync(w, err);
    if (!rc) {
        size_t klen = strlen(w->kind);
        size_t hsize = (size_t)align8(CRL__CKPT_HEADER_FIXED + klen);
        uint8_t hdr[HEADER_MAX];
        memset(hdr, 0, sizeof hdr);
        memcpy(hdr, CRL__CKPT_MAGIC, 8);
        crl__put_le32(hdr + 8, CRL_CKPT_FORMAT_VERSION);
        crl__put_le32(hdr + 12, w->kind_version);
        crl__put_le32(hdr + 16, w->entries->len);
        crl__put_le32(hdr + 20, (uint32_t)klen);
        crl__put_le64(hdr + 24, table_off);
        crl__put_le64(hdr + 32, tab->len);
        crl__put_le32(hdr + 40, crl_crc32(0, tab->data, tab->len));
        memcpy(hdr + CRL__CKPT_HEADER_FIXED, w->kind, klen);
        uint32_t hcrc = crl_crc32(crl_crc32(0, hdr, 44), hdr + 48, hsize - 48);
        crl__put_le32(hdr + 44, hcrc);
        int e = pwrite_all(w->fd, hdr, hsize, 0);
        if (e)
            rc = wfail(w, err, CRL_E_IO, "%s: cannot write checkpoint header: %s", w->path, g_strerror(e));
    }
    g_byte_array_free(tab, TRUE);
    if (!rc)
        rc = wsync(w, err);
    if (!rc) {
        int fd = w->fd;
        w->fd = -1;
        if (close(fd) != 0)
            rc = wfail(w, err, CRL_E_IO, "%s: cannot close checkpoint: %s", w->path, g_strerror(errno));
    }
    if (rc) {
        crl_ckpt_writer_abort(w);
        return rc;
    }
    writer_free(w);
    return CRL_OK;
}

void crl_ckpt_writer_abort(crl_ckpt_writer *w)
{
    if (!w)
        return;
    if (w->fd >= 0) {
        close(w->fd);
        w->fd = -1;
    }
    if (w->regular)
        unlink(w->path);
    writer_free(w);
}

/* ---- reader ------------------------------------------------------------ */

typedef struct rsection {
    const char *name; /* into names */
    uint64_t offset, size;
    uint32_t crc;
} rsection;

struct crl_ckpt_reader {
    char *path;
    uint8_t *data;
    size_t len;
    uint32_t kind_version;
    size_t n;
    rsection *secs;
    char *names; /* every name, NUL-terminated, back to back */
    GHashTable *by_name; /* name -> rsection * */
};

static int corrupt(crl_error *err, const char *path, uint64_t off, const char *fmt, ...) CRL_PRINTF(4, 5);
static int corrupt(crl_error *err, const char *path, uint64_t off, const char *fmt, ...)
{
    char msg[CRL_ERROR_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return crl_error_set(err, CRL_E_CORRUPT, "%s: offset %" PRIu64 ": %s", path, off, msg);
}

void crl_ckpt_reader_free(crl_ckpt_reader *r)
{
    if (!r)
        return;
    if (r->by_name)
        g_hash_table_destroy(r->by_name);
    g_free(r->secs);
    g_free(r->names);
    g_free(r->data);
    g_free(r->path);
    g_free(r);
}

static bool all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return false;
    return true;
}

/* What a checked header says. */
typedef struct rheader {
    uint32_t kind_version, count, table_crc;
    uint64_t hend, table_off, table_size, table_end;
} rheader;

/* Check the header against the file's size `len`: `d` holds the file's first min(len, HEADER_MAX) bytes.
 * Where the table lies and how big it is are checked here, so a file whose size disagrees with its header
 * (cut short, or padded with gigabytes) is refused before the rest is read or any memory is allocated. */
static int check_header(const char *path, const uint8_t *d, uint64_t len, const char *kind,
                        uint32_t max_kind_version, rheader *h, crl_error *err)
{
    if (len < CRL__CKPT_HEADER_FIXED)
        return corrupt(err, path, 0,
                       "file is %" PRIu64 " bytes, shorter than the %d-byte checkpoint header (truncated, or not "
                       "a crl checkpoint)",
                       len, CRL__CKPT_HEADER_FIXED);
    if (memcmp(d, CRL__CKPT_MAGIC, 8) != 0) {
        if (all_zero(d, CRL__CKPT_HEADER_FIXED))
            return corrupt(err, path, 0,
                           "the header is all zeros: the writer never finished this checkpoint (crash or "
                           "abort); use an older checkpoint");
        return corrupt(err, path, 0, "bad magic (expected \"CRLCKPT\\0\"): not a crl checkpoint file");
    }
    uint32_t fmt = crl__le32(d + 8);
    if (fmt == 0 || fmt > CRL_CKPT_FORMAT_VERSION)
        return corrupt(err, path, 8, "checkpoint format version %" PRIu32 " %s (this crl reads version %d)", fmt,
                       fmt == 0 ? "is invalid" : "is newer than this crl supports; upgrade crl", CRL_CKPT_FORMAT_VERSION);
    uint32_t kind_version = crl__le32(d + 12);
    uint32_t count = crl__le32(d + 16);
    uint32_t klen = crl__le32(d + 20);
    uint64_t table_off = crl__le64(d + 24);
    uint64_t table_size = crl__le64(d + 32);
    uint32_t table_crc = crl__le32(d + 40);
    if (klen == 0 || klen > CRL_CKPT_NAME_MAX)
        return corrupt(err, path, 20, "kind length %" PRIu32 " is out of range (1..%d)", klen, CRL_CKPT_NAME_MAX);
    uint64_t hend = align8(CRL__CKPT_HEADER_FIXED + (uint64_t)klen);
    if (hend > len)
        return corrupt(err, path, len, "file ends inside the header (%" PRIu64 " bytes with the kind string)", hend);
    uint32_t hcrc = crl_crc32(crl_crc32(0, d, 44), d + 48, (size_t)(hend - 48));
    if (hcrc != crl__le32(d + 44))
        return corrupt(err, path, 44, "header CRC-32 mismatch (stored %08" PRIx32 ", computed %08" PRIx32 ")",
                       crl__le32(d + 44), hcrc);
    const char *fkind = (const char *)d + CRL__CKPT_HEADER_FIXED;
    if (memchr(fkind, 0, klen) || !all_zero(d + 48 + klen, (size_t)(hend - 48 - klen)))
        return corrupt(err, path, 48, "kind string holds a NUL byte or its padding is not zero");
    if (kind && (strlen(kind) != klen || memcmp(kind, fkind, klen) != 0))
        return corrupt(err, path, 48, "file holds a '%.*s' checkpoint, expected '%s'", (int)klen, fkind, kind);
    if (kind_version > max_kind_version)
        return corrupt(err, path, 12,
                       "'%.*s' version %" PRIu32 " is newer than this crl reads (up to %" PRIu32 "); upgrade crl",
                       (int)klen, fkind, kind_version, max_kind_version);
    if (count > CRL_CKPT_MAX_SECTIONS)
        return corrupt(err, path, 16, "section count %" PRIu32 " exceeds the limit %d", count, CRL_CKPT_MAX_SECTIONS);
    uint64_t table_end;
    if (__builtin_add_overflow(table_off, table_size, &table_end))
        return corrupt(err, path, 24, "table offset %" PRIu64 " + size %" PRIu64 " overflows", table_off, table_size);
    if (table_off < hend || table_off % 8 != 0)
        return corrupt(err, path, 24, "table offset %" PRIu64 " is inside the header or not 8-aligned", table_off);
    if (table_end > len)
        return corrupt(err, path, len,
                       "file is truncated: the section table ends at %" PRIu64 " but the file has %" PRIu64 " bytes",
                       table_end, len);
    if (table_end < len)
        return corrupt(err, path, table_end,
                       "%" PRIu64 " unexpected bytes after the section table, where the checkpoint ends (something "
                       "was appended: cut the file back to %" PRIu64 " bytes, or use another checkpoint)",
                       len - table_end, table_end);
    if (table_size < (uint64_t)count * CRL__CKPT_ENTRY_FIXED ||
        table_size > (uint64_t)count * (CRL__CKPT_ENTRY_FIXED + CRL_CKPT_NAME_MAX))
        return corrupt(err, path, 32, "table size %" PRIu64 " does not fit %" PRIu32 " sections", table_size, count);
    *h = (rheader){ kind_version, count, table_crc, hend, table_off, table_size, table_end };
    return CRL_OK;
}

/* Check the section table (`tab`: its h->table_size bytes) and build r's index.  The sections' own bytes are
 * not needed: the table alone must account for every byte between the header and itself. */
static int check_table(crl_ckpt_reader *r, const uint8_t *tab, const rheader *h, crl_error *err)
{
    const char *path = r->path;
    uint32_t tcrc = crl_crc32(0, tab, (size_t)h->table_size);
    if (tcrc != h->table_crc)
        return corrupt(err, path, 40, "section table CRC-32 mismatch (stored %08" PRIx32 ", computed %08" PRIx32 ")",
                       h->table_crc, tcrc);
    const uint64_t table_off = h->table_off, table_end = h->table_end;
    r->kind_version = h->kind_version;
    r->n = h->count;
    r->secs = g_new0(rsection, h->count ? h->count : 1);
    r->names = g_malloc((size_t)h->table_size + 1);
    r->by_name = g_hash_table_new(g_str_hash, g_str_equal);
    char *names = r->names;
    uint64_t p = table_off;
    uint64_t prev_end = h->hend;
    const char *prev_name = NULL;
    for (uint32_t i = 0; i < h->count; i++) {
        if (table_end - p < CRL__CKPT_ENTRY_FIXED)
            return corrupt(err, path, p, "section table ends inside entry %" PRIu32, i);
        const uint8_t *ent = tab + (p - table_off); /* p is a file offset, for the messages */
        uint64_t off = crl__le64(ent), size = crl__le64(ent + 8);
        uint32_t nlen = (uint32_t)ent[20] | (uint32_t)ent[21] << 8;
        if (nlen == 0 || nlen > CRL_CKPT_NAME_MAX)
            return corrupt(err, path, p + 20, "section %" PRIu32 " name length %" PRIu32 " is out of range (1..%d)", i,
                           nlen, CRL_CKPT_NAME_MAX);
        if (ent[22] || ent[23])
            return corrupt(err, path, p + 22, "reserved bytes of section %" PRIu32 " are not zero", i);
        if (table_end - p - CRL__CKPT_ENTRY_FIXED < nlen)
            return corrupt(err, path, p + 24, "section table ends inside the name of section %" PRIu32, i);
        const char *nm = (const char *)ent + CRL__CKPT_ENTRY_FIXED;
        if (memchr(nm, 0, nlen))
            return corrupt(err, path, p + 24, "section %" PRIu32 " name holds a NUL byte", i);
        memcpy(names, nm, nlen);
        names[nlen] = '\0';
        uint64_t end;
        if (__builtin_add_overflow(off, size, &end))
            return corrupt(err, path, p, "section '%s': offset %" PRIu64 " + size %" PRIu64 " overflows", names, off,
                           size);
        uint64_t want = align8(prev_end);
        if (off < want && off < prev_end)
            return corrupt(err, path, p,
                           "section '%s' at offset %" PRIu64 " overlaps %s%s%s (which ends at %" PRIu64 ")", names, off,
                           prev_name ? "section '" : "the header", prev_name ? prev_name : "", prev_name ? "'" : "",
                           prev_end);
        if (off != want)
            return corrupt(err, path, p, "section '%s' starts at %" PRIu64 ", expected %" PRIu64 " (sections are packed in order)",
                           names, off, want);
        if (end > table_off)
            return corrupt(err, path, p,
                           "section '%s' (offset %" PRIu64 ", size %" PRIu64 ") runs past the section area, which "
                           "ends at the table (offset %" PRIu64 ")",
                           names, off, size, table_off);
        if (g_hash_table_contains(r->by_name, names))
            return corrupt(err, path, p + 24, "duplicate section name '%s'", names);
        rsection *s = &r->secs[i];
        s->name = names;
        s->offset = off;
        s->size = size;
        s->crc = crl__le32(ent + 16);
        g_hash_table_insert(r->by_name, (gpointer)s->name, s);
        prev_name = names;
        names += nlen + 1;
        prev_end = end;
        p += CRL__CKPT_ENTRY_FIXED + nlen;
    }
    if (p != table_end)
        return corrupt(err, path, p, "%" PRIu64 " unused bytes at the end of the section table", table_end - p);
    if (table_off != align8(prev_end))
        return corrupt(err, path, 24, "table offset %" PRIu64 ", expected %" PRIu64 " (right after the last section)",
                       table_off, align8(prev_end));
    return CRL_OK;
}

/* Section i's bytes (or, for i == r->n, none) and the zero padding before them, at file offsets
 * [from, its end) of r->data. */
static int check_section(const crl_ckpt_reader *r, size_t i, uint64_t from, uint64_t table_off, crl_error *err)
{
    const uint8_t *d = r->data;
    uint64_t to = i < r->n ? r->secs[i].offset : table_off;
    if (!all_zero(d + from, (size_t)(to - from))) {
        if (i < r->n)
            return corrupt(err, r->path, from, "padding before section '%s' is not zero", r->secs[i].name);
        return corrupt(err, r->path, from, "padding before the section table is not zero");
    }
    if (i == r->n)
        return CRL_OK;
    const rsection *s = &r->secs[i];
    uint32_t c = crl_crc32(0, d + s->offset, (size_t)s->size);
    if (c != s->crc)
        return corrupt(err, r->path, s->offset,
                       "section '%s' (%" PRIu64 " bytes) fails its CRC-32 check (stored %08" PRIx32
                       ", computed %08" PRIx32 ")",
                       s->name, s->size, s->crc, c);
    return CRL_OK;
}

/* Where section i's check starts: right after the previous section (or the header). */
static uint64_t section_from(const crl_ckpt_reader *r, size_t i, uint64_t hend)
{
    return i == 0 ? hend : r->secs[i - 1].offset + r->secs[i - 1].size;
}

static crl_ckpt_reader *reader_new(const char *path)
{
    crl_ckpt_reader *r = g_new0(crl_ckpt_reader, 1);
    r->path = g_strdup(path);
    return r;
}

static crl_ckpt_reader *fail_open(crl_ckpt_reader *r)
{
    crl_ckpt_reader_free(r);
    return NULL;
}

/* The file's size is what its header and table say before anything else is read or allocated; then each
 * section is read and checked in turn, so a bad one stops the read there. */
crl_ckpt_reader *crl_ckpt_reader_open(const char *path, const char *kind, uint32_t max_kind_version, crl_error *err)
{
    if (!path || !kind) {
        crl_error_set(err, CRL_E_INVALID, "crl_ckpt_reader_open: %s is NULL", !path ? "path" : "kind");
        return NULL;
    }
    crl_error e;
    crl_error_clear(&e);
    struct stat st;
    int fd = crl__file_open(path, 0, 0, &st, &e);
    if (fd < 0) {
        if (e.code == CRL_E_NOT_FOUND)
            e.code = CRL_E_IO;
        crl_error_pass(err, &e, CRL_E_IO);
        crl_error_prefix(err, "%s: cannot open checkpoint: ", path);
        return NULL;
    }
    crl_ckpt_reader *r = reader_new(path);
    const uint64_t len = (uint64_t)st.st_size;
    uint8_t hdr[HEADER_MAX];
    size_t hlen = len < sizeof hdr ? (size_t)len : sizeof hdr;
    rheader h;
    uint8_t *tab = NULL;
    int rc = CRL_OK, rerr = 0;
    uint64_t at = 0;
    if ((rerr = crl__file_pread(fd, hdr, hlen, 0)) == 0)
        rc = check_header(path, hdr, len, kind, max_kind_version, &h, err);
    if (!rerr && !rc && !(tab = g_try_malloc(h.table_size ? (size_t)h.table_size : 1)))
        rc = crl_error_set(err, CRL_E_NOMEM, "%s: cannot allocate %" PRIu64 " bytes for the section table", path,
                           h.table_size);
    if (!rerr && !rc && (rerr = crl__file_pread(fd, tab, (size_t)h.table_size, h.table_off)) != 0)
        at = h.table_off;
    if (!rerr && !rc)
        rc = check_table(r, tab, &h, err);
    if (!rerr && !rc && !(r->data = g_try_malloc((size_t)len))) {
        rc = crl_error_set(err, CRL_E_NOMEM, "%s: cannot allocate %" PRIu64 " bytes to read the checkpoint (its "
                           "section table says it holds that much)", path, len);
    }
    if (!rerr && !rc) {
        r->len = (size_t)len;
        memcpy(r->data, hdr, (size_t)h.hend);
        memcpy(r->data + h.table_off, tab, (size_t)h.table_size);
        for (size_t i = 0; i <= r->n && !rerr && !rc; i++) {
            uint64_t from = section_from(r, i, h.hend), to = i < r->n ? r->secs[i].offset + r->secs[i].size
                                                                       : h.table_off;
            if ((rerr = crl__file_pread(fd, r->data + from, (size_t)(to - from), from)) != 0)
                at = from;
            else
                rc = check_section(r, i, from, h.table_off, err);
        }
    }
    g_free(tab);
    close(fd);
    if (rerr)
        rc = crl_error_set(err, CRL_E_IO, "%s: cannot read checkpoint at offset %" PRIu64 ": %s", path, at,
                           rerr == ENODATA ? "the file shrank while being read" : g_strerror(rerr));
    return rc ? fail_open(r) : r;
}

crl_ckpt_reader *crl_ckpt_reader_open_buffer(const char *name, const void *data, size_t len, const char *kind,
                                             uint32_t max_kind_version, crl_error *err)
{
    if (!kind || (len && !data)) {
        crl_error_set(err, CRL_E_INVALID, "crl_ckpt_reader_open_buffer: %s is NULL", !kind ? "kind" : "data");
        return NULL;
    }
    crl_ckpt_reader *r = reader_new(name ? name : "(buffer)");
    rheader h;
    if (check_header(r->path, data, len, kind, max_kind_version, &h, err) ||
        check_table(r, (const uint8_t *)data + h.table_off, &h, err))
        return fail_open(r);
    if (!(r->data = g_try_malloc(len))) {
        crl_error_set(err, CRL_E_NOMEM, "%s: cannot allocate %zu bytes for the checkpoint", r->path, len);
        return fail_open(r);
    }
    memcpy(r->data, data, len);
    r->len = len;
    for (size_t i = 0; i <= r->n; i++)
        if (check_section(r, i, section_from(r, i, h.hend), h.table_off, err))
            return fail_open(r);
    return r;
}

uint32_t crl_ckpt_kind_version(const crl_ckpt_reader *r)
{
    return r ? r->kind_version : 0;
}

const char *crl_ckpt_path(const crl_ckpt_reader *r)
{
    return r ? r->path : NULL;
}

size_t crl_ckpt_section_count(const crl_ckpt_reader *r)
{
    return r ? r->n : 0;
}

const char *crl_ckpt_section_name(const crl_ckpt_reader *r, size_t i)
{
    return r && i < r->n ? r->secs[i].name : NULL;
}

bool crl_ckpt_has(const crl_ckpt_reader *r, const char *name)
{
    return r && name && g_hash_table_contains(r->by_name, name);
}

uint64_t crl__ckpt_section_offset(const crl_ckpt_reader *r, const char *name)
{
    const rsection *s = r && name ? g_hash_table_lookup(r->by_name, name) : NULL;
    return s ? s->offset : 0;
}

const void *crl_ckpt_section(const crl_ckpt_reader *r, const char *name, size_t *len, crl_error *err)
{
    if (!r || !name) {
        crl_error_set(err, CRL_E_INVALID, "crl_ckpt_section: %s is NULL", !r ? "reader" : "section name");
        return NULL;
    }
    const rsection *s = g_hash_table_lookup(r->by_name, name);
    if (!s) {
        GString *have = g_string_new(NULL);
        for (size_t i = 0; i < r->n && have->len < 200; i++)
            g_string_append_printf(have, "%s'%s'", i ? ", " : "", r->secs[i].name);
        if (r->n == 0)
            g_string_append(have, "none");
        else if (have->len >= 200)
            g_string_append(have, ", ...");
        crl_error_set(err, CRL_E_CORRUPT, "%s: no section '%s' in this checkpoint (sections: %s)", r->path, name,
                      have->str);
        g_string_free(have, TRUE);
        return NULL;
    }
    if (len)
        *len = (size_t)s->size;
    /* A valid pointer also for an empty section. */
    return r->data + s->offset;
}

int crl_ckpt_read(const crl_ckpt_reader *r, const char *name, void *out, size_t len, crl_error *err)
{
    size_t have;
    crl_error e;
    crl_error_clear(&e);
    const void *p = crl_ckpt_section(r, name, &have, &e);
    if (!p)
        return crl_error_pass(err, &e, CRL_E_CORRUPT);
    if (have != len)
        return crl_error_set(err, CRL_E_CORRUPT,
                             "%s: offset %" PRIu64 ": section '%s' holds %zu bytes; expected %zu", r->path,
                             crl__ckpt_section_offset(r, name), name, have, len);
    if (len)
        memcpy(out, p, len);
    return CRL_OK;
}
