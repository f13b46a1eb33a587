/* plugins/replay: storage/memmap, a durable on-disk storage (preallocated mmap'd columns, per-slot commit records). */
#include "config.h"
#include "replay.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* On disk, in DIR:
 *   header        "CRLMMAP\0", u32 format version, u32 header bytes,
 *                 u64 capacity, u32 layout bytes, the layout (layout.c),
 *                 u32 CRC-32 of everything before it.  Written once, by the
 *                 first set, atomically (temp file, fsync, rename, fsync DIR).
 *   leaf-NNN.bin  leaf NNN of every slot: [capacity, per-item shape...]
 *   slots.bin     per slot a 16-byte commit record: u64 sequence number,
 *                 u32 CRC-32 of the slot's bytes (every leaf's row in layout
 *                 order), u32 CRC-32 of (u64 slot, u64 seq, u32 crc).
 *   lock          flock'd while a process has the storage open.
 * A set zeroes the sequence numbers of the slots it writes, then writes the
 * rows, then the new records, each with its sequence number stored last in
 * one aligned 8-byte store (with sync = commit, each step is fdatasync'd
 * before the next).  So a slot whose sequence number is 0 is empty, and a
 * write cut short by kill -9 leaves exactly that; a record with a non-zero
 * sequence number was written whole, and one that fails its check, or
 * whose CRC (verify = full) differs from the slot's bytes, is damage: open
 * refuses it naming the file and slot, and `crl replay check|repair`
 * (mm_check) lists or drops such slots.  The highest sequence number is the
 * write count a reopen resumes at.  Without a header no slot can be read,
 * so a missing header over committed records is refused too.  Files are
 * sized with ftruncate and backed with posix_fallocate before a row is
 * touched, so a full disk is an error, never SIGBUS. */

#define WHO "storage/memmap"
#define HDR_MAGIC "CRLMMAP"
#define HDR_VERSION 1u
#define HDR_FIXED 28u /* bytes before the layout */
#define REC_BYTES 16u
#define CHUNK_BYTES ((uint64_t)64 << 20) /* growth step when a full preallocation failed */

const crl_option rp_memmap_options[] = {
    { "dir", CRL_OPT_STRING, CRL_OPT_REQUIRED, NULL, 0, 0, NULL,
      "directory holding the storage (created if missing; an existing storage there is resumed)" },
    { "sync", CRL_OPT_ENUM, 0, "none", 0, 0, "none|commit",
      "commit: fdatasync before set returns (survives power loss); none: survives kill -9 only" },
    { "verify", CRL_OPT_ENUM, 0, "full", 0, 0, "full|records",
      "on open, full: check every slot's CRC (reads all data, also finds bit rot); records: trust the commit "
      "records (fast open of large storages)" },
    CRL_OPTIONS_END
};

typedef struct mm_store {
    char *dir;
    bool commit;
    int64_t capacity;
    int lock_fd;
    rp_layout *layout; /* NULL until the first set */
    bool resumed;      /* layout read from DIR, no set accepted since */
    int *fds;
    char **paths;
    uint8_t **base;    /* mmap of each leaf file; NULL for 0 bytes */
    size_t *map_bytes;
    crl_tensor **cols; /* views of base, [capacity, ...] */
    int slots_fd;
    uint8_t *slots;
    char *slots_path;
    int64_t alloc_slots; /* [0, alloc_slots) is backed in every leaf file */
    uint8_t *filled;
    uint8_t *mark; /* scratch for set, all zero between calls */
    bool verify_full;
    int64_t len;
    uint64_t write_count;
} mm_store;

static char *join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static int io_error(crl_error *err, const char *path, const char *what, int errnum)
{
    if (errnum == ENOSPC || errnum == EDQUOT)
        return crl_error_set(err, CRL_E_IO,
                             WHO ": %s: %s: no space left on device; free disk space, or use a smaller capacity or "
                             "another dir",
                             path, what);
    return crl_error_set(err, CRL_E_IO, WHO ": %s: %s: %s", path, what, strerror(errnum));
}

static int mkdir_p(const char *dir, crl_error *err)
{
    char *p = strdup(dir);
    if (!p)
        return crl_error_set(err, CRL_E_NOMEM, WHO ": out of memory");
    for (char *s = p + 1;; s++) {
        if (*s == '/' || *s == '\0') {
            char c = *s;
            *s = '\0';
            if (mkdir(p, 0755) != 0 && errno != EEXIST) {
                int e = errno;
                int rc = io_error(err, p, "cannot create directory", e);
                free(p);
                return rc;
            }
            *s = c;
            if (!c)
                break;
        }
    }
    free(p);
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return crl_error_set(err, CRL_E_IO, WHO ": %s is not a directory; set dir to a directory", dir);
    return CRL_OK;
}

static int fsync_dir(const char *dir, crl_error *err)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return io_error(err, dir, "cannot open directory", errno);
    int rc = fsync(fd) != 0 && errno != EINVAL ? io_error(err, dir, "fsync", errno) : CRL_OK;
    close(fd);
    return rc;
}

static int write_all(int fd, const void *data, size_t len)
{
    const uint8_t *p = data;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* ---- the header ----------------------------------------------------------- */

static uint8_t *header_encode(int64_t capacity, const rp_layout *l, size_t *len)
{
    size_t llen;
    uint8_t *lb = rp_layout_encode(l, &llen);
    if (!lb)
        return NULL;
    size_t n = HDR_FIXED + llen + 4;
    uint8_t *h = malloc(n);
    if (h) {
        memcpy(h, HDR_MAGIC, 8);
        rp_put_u32(h + 8, HDR_VERSION);
        rp_put_u32(h + 12, (uint32_t)n);
        rp_put_u64(h + 16, (uint64_t)capacity);
        rp_put_u32(h + 24, (uint32_t)llen);
        memcpy(h + HDR_FIXED, lb, llen);
        rp_put_u32(h + HDR_FIXED + llen, (uint32_t)crc32(0L, h, (uInt)(HDR_FIXED + llen)));
        *len = n;
    }
    free(lb);
    return h;
}

static int header_write(const mm_store *s, const rp_layout *l, crl_error *err)
{
    size_t n;
    uint8_t *h = header_encode(s->capacity, l, &n);
    char *tmp = join(s->dir, "header.tmp"), *path = join(s->dir, "header");
    int rc = CRL_OK;
    if (!h || !tmp || !path) {
        rc = crl_error_set(err, CRL_E_NOMEM, WHO ": out of memory");
        goto out;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        rc = io_error(err, tmp, "cannot create", errno);
        goto out;
    }
    int e = write_all(fd, h, n);
    if (!e && fsync(fd) != 0)
        e = errno;
    close(fd);
    if (!e && rename(tmp, path) != 0)
        e = errno;
    if (e) {
        unlink(tmp);
        rc = io_error(err, path, "cannot write the header", e);
        goto out;
    }
    rc = fsync_dir(s->dir, err);
out:
    free(h);
    free(tmp);
    free(path);
    return rc;
}

/* Read and validate DIR/header: *layout (NULL when there is none yet). */
static int header_read(const mm_store *s, int64_t *capacity, rp_layout **layout, crl_error *err)
{
    *layout = NULL;
    char *path = join(s->dir, "header");
    if (!path)
        return crl_error_set(err, CRL_E_NOMEM, WHO ": out of memory");
    int rc = CRL_OK;
    uint8_t *h = NULL;
    crl_error oe;
    crl_error_clear(&oe);
    int fd = crl_file_open(path, "memmap storage header", CRL_FILE_NOFOLLOW, 0, NULL, &oe);
    if (fd < 0) {
        if (oe.code != CRL_E_NOT_FOUND)
            rc = crl_error_set(err, CRL_E_IO, WHO ": %s; the storage in %s is damaged: delete the directory to start "
                               "over", oe.message, s->dir);
        goto out;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        rc = io_error(err, path, "cannot stat", errno);
        goto out;
    }
    if (sb.st_size < (off_t)(HDR_FIXED + 4) || sb.st_size > (off_t)(64u << 20)) {
        rc = crl_error_set(err, CRL_E_CORRUPT,
                           WHO ": %s: offset 0: size %lld is not a valid header size; the storage in %s is damaged: "
                           "delete the directory to start over",
                           path, (long long)sb.st_size, s->dir);
        goto out;
    }
    size_t n = (size_t)sb.st_size;
    if (!(h = malloc(n))) {
        rc = crl_error_set(err, CRL_E_NOMEM, WHO ": out of memory");
        goto out;
    }
    for (size_t got = 0; got < n;) {
        ssize_t r = read(fd, h + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            rc = r < 0 ? io_error(err, path, "cannot read", errno)
                       : crl_error_set(err, CRL_E_CORRUPT, WHO ": %s: offset %zu: file shrank while reading", path, got);
            goto out;
        }
        got += (size_t)r;
    }
    const char *bad = NULL;
    size_t at = 0;
    if (memcmp(h, HDR_MAGIC, 8) != 0)
        bad = "bad magic (not a crl memmap storage header)";
    else if (rp_get_u32(h + 8) > HDR_VERSION)
        at = 8, bad = "format version is newer than this crl supports; upgrade crl";
    else if (rp_get_u32(h + 8) == 0)
        at = 8, bad = "format version 0 is invalid";
    else if (rp_get_u32(h + 12) != n)
        at = 12, bad = "recorded header size differs from the file size";
    else if ((uint64_t)rp_get_u32(h + 24) != n - HDR_FIXED - 4)
        at = 24, bad = "layout size does not fit the file";
    else if (rp_get_u32(h + n - 4) != (uint32_t)crc32(0L, h, (uInt)(n - 4)))
        at = n - 4, bad = "checksum mismatch";
    else if (rp_get_u64(h + 16) == 0 || rp_get_u64(h + 16) > INT64_MAX)
        at = 16, bad = "capacity out of range";
    if (bad) {
        rc = crl_error_set(err, CRL_E_CORRUPT,
                           WHO ": %s: offset %zu: %s; the storage in %s is damaged: delete the directory to start over",
                           path, at, bad, s->dir);
        goto out;
    }
    *capacity = (int64_t)rp_get_u64(h + 16);
    char what[1024];
    snprintf(what, sizeof what, WHO ": %s", path);
    crl_error e;
    crl_error_clear(&e);
    if (!(*layout = rp_layout_decode(what, h + HDR_FIXED, n - HDR_FIXED - 4, HDR_FIXED, false, &e)))
        rc = crl_error_pass(err, &e, CRL_E_CORRUPT);
out:
    if (fd >= 0)
        close(fd);
    free(h);
    free(path);
    return rc;
}

/* ---- files ------------------------------------------------------------------ */

static void unmap_all(mm_store *s)
{
    size_t nl = s->layout ? s->layout->nleaves : 0;
    for (size_t i = 0; i < nl; i++) {
        if (s->cols)
            crl_tensor_unref(s->cols[i]);
        if (s->base && s->base[i])
            munmap(s->base[i], s->map_bytes[i]);
        if (s->fds && s->fds[i] >= 0)
            close(s->fds[i]);
        if (s->paths)
            free(s->paths[i]);
    }
    free(s->cols);
    free(s->base);
    free(s->map_bytes);
    free(s->fds);
    free(s->paths);
    s->cols = NULL;
    s->base = NULL;
    s->map_bytes = NULL;
    s->fds = NULL;
    s->paths = NULL;
    if (s->slots)
        munmap(s->slots, (size_t)s->capacity * REC_BYTES);
    if (s->slots_fd >= 0)
        close(s->slots_fd);
    s->slots = NULL;
    s->slots_fd = -1;
    free(s->slots_path);
    s->slots_path = NULL;
    rp_layout_free(s->layout);
    s->layout = NULL;
    s->alloc_slots = 0;
}

/* How files_open opens the files: make them, open them for use, or open
 * them read-only (mm_check). */
enum { MM_CREATE, MM_OPEN, MM_READ };

/* Open (MM_CREATE: create and size) one file and map `bytes` of it. */
static int map_file(const char *path, int mode, size_t bytes, int *fd_out, uint8_t **map_out, crl_error *err)
{
    bool create = mode == MM_CREATE;
    crl_error oe;
    crl_error_clear(&oe);
    int fd = create ? open(path, O_RDWR | O_CLOEXEC | O_CREAT | O_TRUNC, 0644)
                    : crl_file_open(path, "memmap storage file",
                                    (mode == MM_READ ? 0 : CRL_FILE_RDWR) | CRL_FILE_NOFOLLOW, 0, NULL, &oe);
    if (fd < 0 && create)
        return io_error(err, path, "cannot create", errno);
    if (fd < 0)
        return crl_error_set(err, CRL_E_IO, WHO ": %s; the storage is damaged: delete its directory to start over",
                             oe.message);
    *fd_out = fd;
    if (create) {
        if (ftruncate(fd, (off_t)bytes) != 0)
            return io_error(err, path, "cannot size the file", errno);
    } else {
        struct stat sb;
        if (fstat(fd, &sb) != 0)
            return io_error(err, path, "cannot stat", errno);
        if ((uint64_t)sb.st_size != (uint64_t)bytes)
            return crl_error_set(err, CRL_E_CORRUPT,
                                 WHO ": %s: offset %lld: the file holds %lld bytes but the header says %zu; the "
                                 "storage is damaged: delete its directory to start over",
                                 path, (long long)sb.st_size, (long long)sb.st_size, bytes);
    }
    if (bytes == 0) {
        *map_out = NULL;
        return CRL_OK;
    }
    void *m = mmap(NULL, bytes, mode == MM_READ ? PROT_READ : PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED)
        return io_error(err, path, "cannot mmap", errno);
    *map_out = m;
    return CRL_OK;
}

/* Back slots [alloc_slots, target) in every leaf file.  On failure nothing
 * changes in alloc_slots; *fail_path names the file. */
static int back_slots(mm_store *s, int64_t target, crl_error *err)
{
    for (size_t i = 0; i < s->layout->nleaves; i++) {
        size_t row = s->layout->leaves[i].row_bytes;
        if (!row)
            continue;
        int e = posix_fallocate(s->fds[i], (off_t)((uint64_t)s->alloc_slots * row),
                                (off_t)((uint64_t)(target - s->alloc_slots) * row));
        if (e)
            return io_error(err, s->paths[i], "cannot preallocate", e);
    }
    s->alloc_slots = target;
    return CRL_OK;
}

/* Make sure slot `slot` is backed by disk blocks in every leaf file. */
static int ensure_slot(mm_store *s, int64_t slot, crl_error *err)
{
    if (slot < s->alloc_slots)
        return CRL_OK;
    uint64_t chunk = s->layout->item_bytes ? CHUNK_BYTES / s->layout->item_bytes : (uint64_t)s->capacity;
    int64_t target = s->alloc_slots + (int64_t)(chunk < 1 ? 1 : chunk > (uint64_t)s->capacity ? (uint64_t)s->capacity
                                                                                               : chunk);
    if (target < slot + 1)
        target = slot + 1;
    if (target > s->capacity)
        target = s->capacity;
    if (target > slot + 1 && back_slots(s, target, NULL) == CRL_OK)
        return CRL_OK;
    return back_slots(s, slot + 1, err);
}

/* Open the files of layout l (MM_CREATE: make them, else they must exist
 * with the right sizes).  Takes l; on error everything is undone. */
static int files_open(mm_store *s, rp_layout *l, int mode, crl_error *err)
{
    size_t nl = l->nleaves;
    s->layout = l;
    s->fds = malloc(nl * sizeof *s->fds);
    s->paths = calloc(nl, sizeof *s->paths);
    s->base = calloc(nl, sizeof *s->base);
    s->map_bytes = calloc(nl, sizeof *s->map_bytes);
    s->cols = calloc(nl, sizeof *s->cols);
    int rc = CRL_OK;
    if (!s->fds || !s->paths || !s->base || !s->map_bytes || !s->cols) {
        free(s->fds);
        s->fds = NULL;
        rc = crl_error_set(err, CRL_E_NOMEM, WHO ": out of memory");
        goto fail;
    }
    for (size_t i = 0; i < nl; i++)
        s->fds[i] = -1;
    for (size_t i = 0; i < nl; i++) {
        const rp_leaf *f = &l->leaves[i];
        char name[32];
        uint64_t bytes;
        snprintf(name, sizeof name, "leaf-%03zu.bin", i);
        if (!(s->paths[i] = join(s->dir, name))) {
            rc = crl_error_set(err, CRL_E_NOMEM, WHO ": out of memory");
            goto fail;
        }
        if (__builtin_mul_overflow((uint64_t)s->capacity, (uint64_t)f->row_bytes, &bytes) || bytes > (uint64_t)INT64_MAX / 2 ||
            bytes > SIZE_MAX / 2) {
            rc = crl_error_set(err, CRL_E_INVALID, WHO ": key '%s': %" PRId64 " rows of %zu bytes are too large for a file",
                               f->key, s->capacity, f->row_bytes);
            goto fail;
        }
        s->map_bytes[i] = (size_t)bytes;
        if ((rc = map_file(s->paths[i], mode, (size_t)bytes, &s->fds[i], &s->base[i], err)))
            goto fail;
        int64_t shape[CRL_MAX_DIMS];
        shape[0] = s->capacity;
        memcpy(shape + 1, f->shape, sizeof(int64_t) * (size_t)f->ndim);
        crl_error e;
        crl_error_clear(&e);
        if (!(s->cols[i] = crl_tensor_wrap(s->base[i], f->dtype, f->ndim + 1, shape, NULL, NULL, NULL, &e))) {
            rc = crl_error_pass(err, &e, CRL_E_NOMEM);
            goto fail;
        }
    }
    if (!(s->slots_path = join(s->dir, "slots.bin"))) {
        rc = crl_error_set(err, CRL_E_NOMEM, WHO ": out of memory");
        goto fail;
    }
    if ((rc = map_file(s->slots_path, mode, (size_t)s->capacity * REC_BYTES, &s->slots_fd, &s->slots, err)))
        goto fail;
    if (mode == MM_READ)
        return CRL_OK;
    /* The records are small: back them whole, always. */
    int e = posix_fallocate(s->slots_fd, 0, (off_t)((uint64_t)s->capacity * REC_BYTES));
    if (e) {
        rc = io_error(err, s->slots_path, "cannot preallocate", e);
        goto fail;
    }
    /* Back every row now if the disk allows; otherwise grow as slots are
     * written (ensure_slot) so what fits stays usable. */
    s->alloc_slots = 0;
    if (back_slots(s, s->capacity, NULL) != CRL_OK)
        s->alloc_slots = 0;
    return CRL_OK;
fail:
    unmap_all(s);
    return rc;
}

static void unlink_files(mm_store *s, size_t nleaves)
{
    for (size_t i = 0; i < nleaves; i++) {
        char name[32];
        snprintf(name, sizeof name, "leaf-%03zu.bin", i);
        char *p = join(s->dir, name);
        if (p)
            unlink(p);
        free(p);
    }
    char *p = join(s->dir, "slots.bin");
    if (p)
        unlink(p);
    free(p);
}

/* The first set: make the files for layout l (taken), then the header. */
static int files_create(mm_store *s, rp_layout *l, crl_error *err)
{
    size_t nl = l->nleaves;
    int rc = files_open(s, l, MM_CREATE, err);
    if (rc) {
        unlink_files(s, nl);
        return rc;
    }
    for (size_t i = 0; i < nl && !rc; i++) {
        if (fsync(s->fds[i]) != 0)
            rc = io_error(err, s->paths[i], "fsync", errno);
    }
    if (!rc && fsync(s->slots_fd) != 0)
        rc = io_error(err, s->slots_path, "fsync", errno);
    if (!rc)
        rc = header_write(s, s->layout, err);
    if (rc) {
        unmap_all(s);
        unlink_files(s, nl);
    }
    return rc;
}

/* ---- commit records ------------------------------------------------------------ */

static uint32_t slot_crc(const mm_store *s, int64_t slot)
{
    uLong c = crc32(0L, Z_NULL, 0);
    for (size_t i = 0; i < s->layout->nleaves; i++) {
        size_t row = s->layout->leaves[i].row_bytes;
        if (row)
            c = crc32_z(c, s->base[i] + (size_t)slot * row, row);
    }
    return (uint32_t)c;
}

static uint32_t record_check(int64_t slot, uint64_t seq, uint32_t crc)
{
    uint8_t b[20];
    rp_put_u64(b, (uint64_t)slot);
    rp_put_u64(b + 8, seq);
    rp_put_u32(b + 16, crc);
    return (uint32_t)crc32(0L, b, sizeof b);
}

/* A record's sequence number goes in one aligned 8-byte store (records are
 * 16-byte aligned in a page-aligned map): a kill leaves it whole, old or new. */
static void seq_store(mm_store *s, int64_t slot, uint64_t seq)
{
    uint8_t b[8];
    uint64_t v;
    rp_put_u64(b, seq);
    memcpy(&v, b, sizeof v);
    __atomic_store_n((uint64_t *)(void *)(s->slots + (size_t)slot * REC_BYTES), v, __ATOMIC_RELEASE);
}

/* Empty a slot: sequence number 0 first, which alone makes it empty. */
static void record_clear(mm_store *s, int64_t slot)
{
    seq_store(s, slot, 0);
    memset(s->slots + (size_t)slot * REC_BYTES + 8, 0, REC_BYTES - 8);
}

/* The slot's sequence number must be 0 (record_clear) when this starts. */
static void record_write(mm_store *s, int64_t slot, uint64_t seq, uint32_t crc)
{
    uint8_t tail[8];
    rp_put_u32(tail, crc);
    rp_put_u32(tail + 4, record_check(slot, seq, crc));
    /* The rows must be in the page cache before the record is, and the
     * record's checksums before its sequence number. */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    memcpy(s->slots + (size_t)slot * REC_BYTES + 8, tail, sizeof tail);
    seq_store(s, slot, seq);
}

/* zlib's CRC-32 table (reflected 0xEDB88320) and, since the top bytes of
 * its entries are all different, the entry index of each top byte. */
static void crc_tables(uint32_t t[256], uint8_t top[256])
{
    for (uint32_t v = 0; v < 256; v++) {
        uint32_t c = v;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        t[v] = c;
        top[c >> 24] = (uint8_t)v;
    }
}

/* CRC of slot j's bytes (layout order) with byte `pos` xor'ed by x. */
static uint32_t slot_crc_with(const mm_store *s, int64_t j, size_t pos, uint8_t x)
{
    uLong c = crc32(0L, Z_NULL, 0);
    size_t at = 0;
    for (size_t i = 0; i < s->layout->nleaves; i++) {
        size_t row = s->layout->leaves[i].row_bytes;
        const uint8_t *p = s->base[i] + (size_t)j * row;
        if (row && pos >= at && pos < at + row) {
            size_t o = pos - at;
            uint8_t b = p[o] ^ x;
            c = crc32_z(c, p, o);
            c = crc32_z(c, &b, 1);
            c = crc32_z(c, p + o + 1, row - o - 1);
        } else if (row) {
            c = crc32_z(c, p, row);
        }
        at += row;
    }
    return (uint32_t)c;
}

/* The one byte of slot j whose change turned CRC `want` into `have`, if
 * one byte explains it (checked by recomputing).  For equal lengths the two
 * CRCs differ by the raw CRC of the difference: a byte v at position p gives
 * t[v] followed by (len - 1 - p) zero-byte steps, which are undone one at a
 * time here until t[v] shows. */
static bool crc_locate(const mm_store *s, int64_t j, uint32_t want, uint32_t have, size_t *pos)
{
    uint32_t t[256];
    uint8_t top[256];
    crc_tables(t, top);
    size_t len = s->layout->item_bytes;
    uint32_t r = want ^ have;
    for (size_t k = 0; k < len && r; k++) {
        uint8_t v = top[r >> 24];
        if (t[v] == r && slot_crc_with(s, j, len - 1 - k, v) == want) {
            *pos = len - 1 - k;
            return true;
        }
        r = ((r ^ t[v]) << 8) | v; /* one zero-byte step back */
    }
    return false;
}

/* Where and why a committed slot is damaged. */
typedef struct mm_damage {
    const char *file; /* one of the store's paths, or its dir */
    int64_t offset;   /* in file, -1 for none */
    char reason[600];
} mm_damage;

/* Whether committed slot j (sequence number not 0) is damaged: its record
 * fails its check, or (crcs) its bytes fail the record's CRC. */
static bool slot_damaged(const mm_store *s, int64_t j, bool crcs, mm_damage *d)
{
    const uint8_t *rec = s->slots + (size_t)j * REC_BYTES;
    uint64_t seq = rp_get_u64(rec);
    uint32_t crc = rp_get_u32(rec + 8), check = rp_get_u32(rec + 12);
    if (check != record_check(j, seq, crc)) {
        d->file = s->slots_path;
        d->offset = j * (int64_t)REC_BYTES;
        snprintf(d->reason, sizeof d->reason, "its commit record (16 bytes at offset %" PRId64 ") fails its own "
                 "checksum", d->offset);
        return true;
    }
    uint32_t have;
    if (!crcs || (have = slot_crc(s, j)) == crc)
        return false;
    size_t pos;
    if (crc_locate(s, j, crc, have, &pos)) {
        size_t at = 0, i = 0;
        while (pos >= at + s->layout->leaves[i].row_bytes)
            at += s->layout->leaves[i++].row_bytes;
        d->file = s->paths[i];
        d->offset = j * (int64_t)s->layout->leaves[i].row_bytes + (int64_t)(pos - at);
        snprintf(d->reason, sizeof d->reason, "byte %" PRId64 " (key '%s') differs from what was committed (the "
                 "slot's CRC in slots.bin)", d->offset, s->layout->leaves[i].key);
    } else {
        d->file = s->dir;
        d->offset = -1;
        snprintf(d->reason, sizeof d->reason, "its rows in leaf-000.bin..leaf-%03zu.bin (one file per key) differ "
                 "from what was committed in more than one byte (the slot's CRC in slots.bin)",
                 s->layout->nleaves - 1);
    }
    return true;
}

typedef void (*mm_damage_fn)(void *user, int64_t slot, const mm_damage *d);

/* Which slots hold an item (filled), the length and the write count; a
 * damaged slot goes to fn and stays empty.  Returns how many are damaged. */
static int64_t records_scan(mm_store *s, bool crcs, mm_damage_fn fn, void *user)
{
    s->len = 0;
    s->write_count = 0;
    memset(s->filled, 0, (size_t)s->capacity);
    if (!s->layout)
        return 0;
    int64_t bad = 0;
    mm_damage d;
    for (int64_t j = 0; j < s->capacity; j++) {
        uint64_t seq = rp_get_u64(s->slots + (size_t)j * REC_BYTES);
        if (seq == 0)
            continue;
        if (slot_damaged(s, j, crcs, &d)) {
            bad++;
            if (fn)
                fn(user, j, &d);
            continue;
        }
        s->filled[j] = 1;
        s->len = j + 1;
        if (seq > s->write_count)
            s->write_count = seq;
    }
    return bad;
}

static int sync_leaves(mm_store *s, crl_error *err)
{
    for (size_t i = 0; s->layout && i < s->layout->nleaves; i++) {
        if (fdatasync(s->fds[i]) != 0)
            return io_error(err, s->paths[i], "fdatasync", errno);
    }
    return CRL_OK;
}

static int sync_records(mm_store *s, crl_error *err)
{
    if (s->slots_fd >= 0 && fdatasync(s->slots_fd) != 0)
        return io_error(err, s->slots_path, "fdatasync", errno);
    return CRL_OK;
}

/* ---- damage found on open -------------------------------------------------------- */

/* The first damaged slot records_scan met, and how many there were. */
typedef struct mm_first {
    int64_t count, slot;
    mm_damage d;
} mm_first;

static void note_first(void *user, int64_t slot, const mm_damage *d)
{
    mm_first *f = user;
    if (f->count++ == 0) {
        f->slot = slot;
        f->d = *d;
    }
}

static int damaged_error(const mm_store *s, const mm_first *f, crl_error *err)
{
    return crl_error_set(err, CRL_E_CORRUPT,
                         WHO ": %s: slot %" PRId64 " is damaged: %s: %s; %" PRId64 " damaged slot%s in all (this is "
                         "the first), nothing was dropped. List them with 'crl replay check %s'; 'crl replay repair "
                         "%s' empties them (their items are lost); or delete %s to start over",
                         s->dir, f->slot, f->d.file, f->d.reason, f->count, f->count == 1 ? "" : "s", s->dir, s->dir,
                         s->dir);
}

/* Committed records (sequence number not 0) in DIR/slots.bin, read without
 * the header: how many, the first one's slot, and the slots the file has
 * room for (*slots -1 when there is no slots.bin). */
static int count_committed(const char *dir, int64_t *n, int64_t *first, int64_t *slots, crl_error *err)
{
    *n = 0;
    *first = -1;
    *slots = -1;
    char *path = join(dir, "slots.bin");
    if (!path)
        return crl_error_set(err, CRL_E_NOMEM, WHO ": out of memory");
    int rc = CRL_OK;
    crl_error oe;
    crl_error_clear(&oe);
    int fd = crl_file_open(path, "memmap storage records", CRL_FILE_NOFOLLOW, 0, NULL, &oe);
    if (fd < 0) {
        rc = oe.code == CRL_E_NOT_FOUND ? CRL_OK : crl_error_pass(err, &oe, CRL_E_IO);
        free(path);
        return rc;
    }
    struct stat sb;
    uint8_t *buf = NULL;
    const size_t chunk = REC_BYTES * 4096;
    if (fstat(fd, &sb) != 0) {
        rc = io_error(err, path, "cannot stat", errno);
        goto out;
    }
    if (!S_ISREG(sb.st_mode)) {
        rc = crl_error_set(err, CRL_E_CORRUPT, WHO ": %s is not a regular file; the storage is damaged", path);
        goto out;
    }
    if (!(buf = malloc(chunk))) {
        rc = crl_error_set(err, CRL_E_NOMEM, WHO ": out of memory");
        goto out;
    }
    *slots = (int64_t)(sb.st_size / REC_BYTES);
    for (int64_t j = 0; j < *slots;) {
        ssize_t r = pread(fd, buf, chunk, (off_t)j * REC_BYTES);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < (ssize_t)REC_BYTES) {
            rc = r < 0 ? io_error(err, path, "cannot read", errno) : CRL_OK; /* shrank: what is left is counted */
            break;
        }
        for (size_t k = 0; k + REC_BYTES <= (size_t)r; k += REC_BYTES, j++) {
            if (rp_get_u64(buf + k) == 0)
                continue;
            if ((*n)++ == 0)
                *first = j;
        }
    }
out:
    free(buf);
    close(fd);
    free(path);
    return rc;
}

/* What the header holds (keys, dtypes, shapes) no other file records. */
#define HEADER_FIX \
    "Restore %s/header: a storage made with the same [replay] settings and capacity has the same header, copy it " \
    "from one (then run 'crl replay check %s'); or delete %s to start over"

/* DIR has no header.  Committed records mean items it was needed to read
 * (the header was deleted or lost): a first set cut short never leaves one,
 * since the header is written before any record. */
static int headless_check(const mm_store *s, crl_error *err)
{
    int64_t n, first, slots;
    int rc = count_committed(s->dir, &n, &first, &slots, err);
    if (rc || n == 0)
        return rc;
    return crl_error_set(err, CRL_E_CORRUPT,
                         WHO ": %s/header is missing but %s/slots.bin holds %" PRId64 " committed item%s (the first "
                         "in slot %" PRId64 "), which cannot be read without it; opening would start the storage "
                         "over and lose them, so nothing was opened. " HEADER_FIX,
                         s->dir, s->dir, n, n == 1 ? "" : "s", first, s->dir, s->dir, s->dir);
}

/* ---- ops ----------------------------------------------------------------------- */

static void mm_close(void *st);

static int mm_open(const crl_opts *opts, int64_t capacity, void **out, crl_error *err)
{
    const char *dir, *sync, *verify;
    int rc;
    if (!out)
        return crl_error_set(err, CRL_E_INVALID, WHO ": open: out pointer is NULL");
    if ((rc = crl_opts_string(opts, "dir", &dir, err)) || (rc = crl_opts_string(opts, "sync", &sync, err)) ||
        (rc = crl_opts_string(opts, "verify", &verify, err)))
        return rc;
    if (!dir || !*dir)
        return crl_error_set(err, CRL_E_CONFIG, WHO ": option 'dir' is empty; set dir = a directory for the storage");
    if (capacity < 1)
        return crl_error_set(err, CRL_E_INVALID, WHO ": capacity %" PRId64 " must be at least 1", capacity);
    if ((uint64_t)capacity > SIZE_MAX / (REC_BYTES * 2))
        return crl_error_set(err, CRL_E_INVALID, WHO ": capacity %" PRId64 " is too large", capacity);
    mm_store *s = calloc(1, sizeof *s);
    if (!s)
        return crl_error_set(err, CRL_E_NOMEM, WHO ": out of memory");
    s->lock_fd = -1;
    s->slots_fd = -1;
    s->capacity = capacity;
    s->commit = strcmp(sync, "commit") == 0;
    s->verify_full = strcmp(verify, "full") == 0;
    rc = CRL_OK;
    if (!(s->dir = strdup(dir)) || !(s->filled = calloc((size_t)capacity, 1)) ||
        !(s->mark = calloc((size_t)capacity, 1))) {
        rc = crl_error_set(err, CRL_E_NOMEM, WHO ": out of memory");
        goto fail;
    }
    if ((rc = mkdir_p(dir, err)))
        goto fail;
    char *lock = join(dir, "lock");
    if (!lock) {
        rc = crl_error_set(err, CRL_E_NOMEM, WHO ": out of memory");
        goto fail;
    }
    s->lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (s->lock_fd < 0) {
        rc = io_error(err, lock, "cannot create the lock file", errno);
        free(lock);
        goto fail;
    }
    if (flock(s->lock_fd, LOCK_EX | LOCK_NB) != 0) {
        rc = errno == EWOULDBLOCK
                 ? crl_error_set(err, CRL_E_IO,
                                 WHO ": %s is in use by another open memmap storage (%s is locked); close that one "
                                 "first or use another dir",
                                 dir, lock)
                 : io_error(err, lock, "cannot lock", errno);
        free(lock);
        goto fail;
    }
    free(lock);
    char *tmp = join(dir, "header.tmp");
    if (tmp)
        unlink(tmp); /* a first set cut short */
    free(tmp);
    int64_t hcap = 0;
    rp_layout *l = NULL;
    if ((rc = header_read(s, &hcap, &l, err)))
        goto fail;
    if (l) {
        if (hcap != capacity) {
            char *ls = rp_layout_str(l);
            rc = crl_error_set(err, CRL_E_CONFIG,
                               WHO ": %s holds a storage of capacity %" PRId64 " (layout %s) but capacity %" PRId64
                               " was asked; set capacity = %" PRId64 " to resume it, or use a new dir (or delete %s) "
                               "to start over",
                               dir, hcap, ls ? ls : "?", capacity, hcap, dir);
            free(ls);
            rp_layout_free(l);
            goto fail;
        }
        if ((rc = files_open(s, l, MM_OPEN, err)))
            goto fail;
        s->resumed = true;
        mm_first first = { 0, -1, { NULL, -1, "" } };
        if (records_scan(s, s->verify_full, note_first, &first) > 0) {
            rc = damaged_error(s, &first, err);
            goto fail;
        }
    } else if ((rc = headless_check(s, err))) {
        goto fail;
    }
    *out = s;
    return CRL_OK;
fail:
    mm_close(s);
    return rc;
}

/* A mismatch on the first set after resuming DIR: the dir's layout differs. */
static int resumed_mismatch(mm_store *s, rp_layout *item, int code, crl_error *err)
{
    if (!item)
        return code;
    char where[1200];
    snprintf(where, sizeof where, "%s", s->dir);
    char *diff = rp_layout_diff(s->layout, item, where);
    char *ls = rp_layout_str(s->layout);
    crl_error_set(err, CRL_E_CONFIG,
                  WHO ": %s holds a storage with another layout (%s): %s; nothing was written. Use a new dir, or "
                  "delete %s to start over (its items are lost)",
                  s->dir, ls ? ls : "?", diff ? diff : "?", s->dir);
    free(diff);
    free(ls);
    return CRL_E_CONFIG;
}

static int mm_set(void *st, const int64_t *idx, size_t n, const crl_td *items, crl_error *err)
{
    mm_store *s = st;
    int rc;
    if ((rc = rp_check_items(WHO, items, n, err)) || (rc = rp_check_indices(WHO ": set", idx, n, s->capacity, err)))
        return rc;
    if (n == 0)
        return CRL_OK;
    if (!s->layout) {
        crl_error e;
        crl_error_clear(&e);
        rp_layout *l = rp_layout_from_items(WHO, items, &e);
        if (!l)
            return crl_error_pass(err, &e, CRL_E_INVALID);
        rc = files_create(s, l, err);
        if (rc)
            return rc;
        s->resumed = false;
    }
    const rp_layout *l = s->layout;
    size_t nl = l->nleaves;
    crl_tensor *stackcols[16];
    crl_tensor **src = nl <= 16 ? stackcols : calloc(nl, sizeof *src);
    if (!src)
        return crl_error_set(err, CRL_E_NOMEM, WHO ": out of memory");
    rp_layout *item = NULL;
    rc = rp_layout_match(WHO ": set", l, items, src, s->resumed ? &item : NULL, err);
    if (rc) {
        if (s->resumed)
            rc = resumed_mismatch(s, item, rc, err);
        rp_layout_free(item);
        if (src != stackcols)
            free(src);
        return rc;
    }
    /* Which items fit on the disk (ensure_slot backs their rows). */
    size_t done = 0;
    while (done < n && rc == CRL_OK) {
        size_t r = rp_run_length(idx, n, done);
        if (ensure_slot(s, idx[done] + (int64_t)r - 1, NULL) != CRL_OK) {
            /* Write what fits of the run, then report the first that does not. */
            size_t fit = 0;
            while (fit < r && (rc = ensure_slot(s, idx[done] + (int64_t)fit, err)) == CRL_OK)
                fit++;
            r = fit;
        }
        done += r;
    }
    int src_rc = rc;
    crl_error serr;
    /* 1. Invalidate the records of the slots about to change: from here a
     * kill leaves them empty, never an old record over new rows.  With sync =
     * commit that is on disk before a row changes, so a power cut cannot leave
     * an old record over new rows either (open would call that damage). */
    for (size_t k = 0; k < done; k++)
        record_clear(s, idx[k]);
    for (size_t k = 0; k < done; k++)
        s->filled[idx[k]] = 0;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (s->commit && done > 0 && sync_records(s, &serr))
        goto sync_failed;
    /* 2. The rows, one memcpy per leaf per run of consecutive slots. */
    for (size_t k = 0; k < done;) {
        size_t r = rp_run_length(idx, done, k);
        for (size_t i = 0; i < nl; i++) {
            size_t row = l->leaves[i].row_bytes;
            if (row)
                memcpy(s->base[i] + (size_t)idx[k] * row, (const uint8_t *)crl_tensor_data(src[i]) + k * row, r * row);
        }
        k += r;
    }
    if (s->commit && done > 0 && sync_leaves(s, &serr))
        goto sync_failed;
    /* 3. The records, which make the rows count, in item order: a kill
     * here leaves a valid prefix, so the write count a reopen finds has no
     * holes below it.  A slot given twice gets only its last item's record
     * (mark finds the last occurrences, walking backwards). */
    for (size_t k = done; k-- > 0;)
        s->mark[idx[k]] = s->mark[idx[k]] ? 2 : 1;
    bool dups = false;
    for (size_t k = 0; k < done && !dups; k++)
        dups = s->mark[idx[k]] == 2;
    for (size_t k = 0; k < done; k++)
        s->mark[idx[k]] = 0;
    for (size_t k = 0; k < done; k++) {
        if (dups) {
            bool later = false;
            for (size_t q = k + 1; q < done && !later; q++)
                later = idx[q] == idx[k];
            if (later)
                continue;
        }
        uLong c = crc32(0L, Z_NULL, 0);
        for (size_t i = 0; i < nl; i++) {
            size_t row = l->leaves[i].row_bytes;
            if (row)
                c = crc32_z(c, (const uint8_t *)crl_tensor_data(src[i]) + k * row, row);
        }
        record_write(s, idx[k], s->write_count + 1 + k, (uint32_t)c);
    }
    if (s->commit && done > 0 && sync_records(s, &serr))
        goto sync_failed;
    rp_cols_release(src, nl);
    if (src != stackcols)
        free(src);
    for (size_t k = 0; k < done; k++) {
        s->filled[idx[k]] = 1;
        if (idx[k] + 1 > s->len)
            s->len = idx[k] + 1;
    }
    s->write_count += done;
    if (done > 0)
        s->resumed = false;
    if (src_rc && n > 1)
        crl_error_prefix(err, "%zu of %zu items written: ", done, n);
    return src_rc;

sync_failed:
    /* Not durable: acknowledge nothing; the slots touched are empty now. */
    for (size_t k = 0; k < done; k++) {
        record_clear(s, idx[k]);
        s->mark[idx[k]] = 0;
    }
    rp_cols_release(src, nl);
    if (src != stackcols)
        free(src);
    return crl_error_pass(err, &serr, CRL_E_IO);
}

static crl_td *mm_get(void *st, const int64_t *idx, size_t n, crl_error *err)
{
    mm_store *s = st;
    return rp_dense_get(WHO ": get", s->layout, s->base, s->filled, s->capacity, idx, n, err);
}

static int64_t mm_len(void *st)
{
    return ((mm_store *)st)->len;
}

static bool mm_has(void *st, int64_t i)
{
    mm_store *s = st;
    return i >= 0 && i < s->capacity && s->filled[i];
}

static uint64_t mm_write_count(void *st)
{
    return ((mm_store *)st)->write_count;
}

static int mm_sync(void *st, crl_error *err)
{
    mm_store *s = st;
    int rc;
    if ((rc = sync_leaves(s, err)) || (rc = sync_records(s, err)))
        return rc;
    return CRL_OK;
}

static int mm_clear(void *st, crl_error *err)
{
    mm_store *s = st;
    int rc;
    if (s->slots) {
        for (int64_t j = 0; j < s->capacity; j++)
            record_clear(s, j);
        if (s->commit && (rc = sync_records(s, err)))
            return rc;
    }
    memset(s->filled, 0, (size_t)s->capacity);
    s->len = 0;
    s->write_count = 0;
    return CRL_OK;
}

static void mm_close(void *st)
{
    mm_store *s = st;
    if (!s)
        return;
    unmap_all(s);
    if (s->lock_fd >= 0)
        close(s->lock_fd);
    free(s->filled);
    free(s->mark);
    free(s->dir);
    free(s);
}

static int mm_dump(void *st, const char *dir, crl_error *err)
{
    mm_store *s = st;
    rp_dense d = { s->capacity, s->len, s->write_count, s->layout, s->filled, NULL };
    crl_error e;
    crl_error_clear(&e);
    if (s->layout && s->len > 0 && !(d.data = rp_layout_view_td(s->layout, s->len, s->cols, &e)))
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    int rc = rp_dense_dump(WHO, dir, &d, err);
    crl_td_unref(d.data);
    return rc;
}

static int mm_load(void *st, const char *dir, crl_error *err)
{
    mm_store *s = st;
    rp_dense d;
    int rc = rp_dense_load(WHO, dir, s->capacity, &d, err);
    if (rc)
        return rc;
    if (d.layout && s->layout && !rp_layout_equal(d.layout, s->layout)) {
        char *diff = rp_layout_diff(s->layout, d.layout, s->dir);
        rc = crl_error_set(err, CRL_E_CONFIG,
                           WHO ": %s/storage.ckpt was dumped with another layout than %s holds (%s); load it into a "
                           "memmap storage on a new dir, or delete %s first",
                           dir, s->dir, diff ? diff : "?", s->dir);
        free(diff);
        rp_dense_clear(&d);
        return rc;
    }
    if (d.layout && !s->layout) {
        crl_error e;
        crl_error_clear(&e);
        rp_layout *l = rp_layout_dup(d.layout, &e);
        if (!l || (rc = files_create(s, l, err))) {
            rp_dense_clear(&d);
            return l ? rc : crl_error_pass(err, &e, CRL_E_NOMEM);
        }
    }
    /* Back every row to be written before touching anything. */
    if (d.len > 0 && (rc = ensure_slot(s, d.len - 1, err))) {
        rp_dense_clear(&d);
        return rc;
    }
    crl_tensor *stackcols[16];
    size_t nl = d.layout ? d.layout->nleaves : 0;
    crl_tensor **src = nl <= 16 ? stackcols : calloc(nl, sizeof *src);
    if (!src) {
        rp_dense_clear(&d);
        return crl_error_set(err, CRL_E_NOMEM, WHO ": out of memory");
    }
    for (size_t i = 0; d.len > 0 && i < nl; i++) {
        crl_error e;
        crl_error_clear(&e);
        src[i] = crl_tensor_contiguous(crl_td_get_k(d.data, d.layout->leaves[i].handle), &e);
        if (!src[i]) {
            rp_cols_release(src, i);
            if (src != stackcols)
                free(src);
            rp_dense_clear(&d);
            return crl_error_pass(err, &e, CRL_E_NOMEM);
        }
    }
    /* Validated and backed: replace the contents. */
    for (int64_t j = 0; s->slots && j < s->capacity; j++)
        record_clear(s, j);
    uint64_t count = 0;
    for (int64_t j = 0; j < d.len; j++)
        count += d.filled[j];
    uint64_t seq = d.write_count - count;
    for (int64_t j = 0; j < d.len; j++) {
        if (!d.filled[j])
            continue;
        for (size_t i = 0; i < nl; i++) {
            size_t row = d.layout->leaves[i].row_bytes;
            if (row)
                memcpy(s->base[i] + (size_t)j * row, (const uint8_t *)crl_tensor_data(src[i]) + (size_t)j * row, row);
        }
        record_write(s, j, ++seq, slot_crc(s, j));
    }
    rp_cols_release(src, d.len > 0 ? nl : 0);
    if (src != stackcols)
        free(src);
    memcpy(s->filled, d.filled, (size_t)s->capacity);
    s->len = d.len;
    s->write_count = d.layout ? d.write_count : 0;
    s->resumed = false;
    rp_dense_clear(&d);
    if ((rc = sync_leaves(s, err)) || (rc = sync_records(s, err)))
        return rc;
    return CRL_OK;
}

/* ---- check and repair (crl replay check|repair) ------------------------------------ */

typedef struct mm_checking {
    crl_storage_report *rep;
    int64_t *bad;        /* the damaged slots, for a repair */
    size_t nbad, cap_bad;
    bool nomem;
} mm_checking;

static void finding(crl_storage_report *rep, const char *file, int64_t slot, int64_t offset, const char *reason)
{
    crl_storage_finding f = { file, slot, offset, reason };
    if (rep->finding)
        rep->finding(rep->user, &f);
}

static void check_damage(void *user, int64_t slot, const mm_damage *d)
{
    mm_checking *c = user;
    c->rep->bad_slots++;
    finding(c->rep, d->file, slot, d->offset, d->reason);
    if (c->nbad == c->cap_bad) {
        size_t n = c->cap_bad ? c->cap_bad * 2 : 64;
        int64_t *b = realloc(c->bad, n * sizeof *b);
        if (!b) {
            c->nomem = true;
            return;
        }
        c->bad = b;
        c->cap_bad = n;
    }
    c->bad[c->nbad++] = slot;
}

/* A file of the header's layout that is missing or of the wrong size: one
 * finding each; returns how many. */
static int64_t check_files(const mm_store *s, const rp_layout *l, crl_storage_report *rep)
{
    int64_t bad = 0;
    char reason[300];
    for (size_t i = 0; i <= l->nleaves; i++) {
        char name[32];
        uint64_t row = i < l->nleaves ? l->leaves[i].row_bytes : REC_BYTES;
        if (i < l->nleaves)
            snprintf(name, sizeof name, "leaf-%03zu.bin", i);
        else
            snprintf(name, sizeof name, "slots.bin");
        char *path = join(s->dir, name);
        struct stat sb;
        if (!path)
            continue;
        if (stat(path, &sb) != 0) {
            snprintf(reason, sizeof reason, "%s (the header names %zu data files and slots.bin)",
                     errno == ENOENT ? "missing" : strerror(errno), l->nleaves);
            finding(rep, path, -1, -1, reason);
            bad++;
        } else if (!S_ISREG(sb.st_mode) || (uint64_t)sb.st_size != (uint64_t)s->capacity * row) {
            snprintf(reason, sizeof reason, "holds %lld bytes, but the header says %" PRIu64 " (%" PRId64
                     " slots of %" PRIu64 ")%s",
                     (long long)sb.st_size, (uint64_t)s->capacity * row, s->capacity, row,
                     S_ISREG(sb.st_mode) ? "" : "; not a regular file");
            finding(rep, path, -1, -1, reason);
            bad++;
        }
        free(path);
    }
    return bad;
}

/* Empty the slots of c->bad in DIR/slots.bin, durably; the data files are untouched. */
static int drop_slots(const mm_store *s, const mm_checking *c, crl_error *err)
{
    int fd = open(s->slots_path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return io_error(err, s->slots_path, "cannot open for writing", errno);
    static const uint8_t zero[REC_BYTES];
    int e = 0;
    for (size_t k = 0; k < c->nbad && !e; k++) {
        ssize_t w;
        do
            w = pwrite(fd, zero, REC_BYTES, (off_t)c->bad[k] * REC_BYTES);
        while (w < 0 && errno == EINTR);
        if (w != (ssize_t)REC_BYTES)
            e = w < 0 ? errno : EIO;
    }
    if (!e && fdatasync(fd) != 0)
        e = errno;
    close(fd);
    return e ? io_error(err, s->slots_path, "cannot empty the damaged slots", e) : CRL_OK;
}

static int mm_check(const char *dir, unsigned flags, crl_storage_report *report, crl_error *err)
{
    if (!dir || !*dir || !report)
        return crl_error_set(err, CRL_E_INVALID, WHO ": check: %s is NULL or empty", !report ? "report" : "dir");
    /* Work on a whole report; the caller's gets what its struct_size holds. */
    crl_storage_report rep;
    memset(&rep, 0, sizeof rep);
    size_t rsize = report->struct_size < sizeof rep ? report->struct_size : sizeof rep;
    memcpy(&rep, report, rsize);
    rep.capacity = -1;
    rep.items = rep.bad_slots = rep.bad_files = rep.dropped = 0;
    bool repair = flags & CRL_STORAGE_REPAIR;
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return errno == ENOENT ? crl_error_set(err, CRL_E_NOT_FOUND, WHO ": %s does not exist", dir)
                               : io_error(err, dir, "cannot stat", errno);
    if (!S_ISDIR(sb.st_mode))
        return crl_error_set(err, CRL_E_NOT_FOUND, WHO ": %s is not a directory (a memmap storage is one)", dir);
    mm_store *s = calloc(1, sizeof *s);
    mm_checking c = { &rep, NULL, 0, 0, false };
    int rc = CRL_OK;
    if (!s || !(s->dir = strdup(dir))) {
        free(s);
        return crl_error_set(err, CRL_E_NOMEM, WHO ": out of memory");
    }
    s->lock_fd = -1;
    s->slots_fd = -1;
    /* A storage leaves at least one of these (files_create makes the leaf
     * files first); without any, nothing is touched, not even a lock file. */
    bool any = false;
    static const char *const marks[] = { "header", "slots.bin", "leaf-000.bin" };
    for (size_t i = 0; i < 3 && !any; i++) {
        char *p = join(dir, marks[i]);
        any = p && access(p, F_OK) == 0;
        free(p);
    }
    if (!any) {
        rc = crl_error_set(err, CRL_E_NOT_FOUND, WHO ": %s holds no memmap storage (no header, slots.bin or "
                           "leaf-000.bin)", dir);
        goto out;
    }
    /* Never under a writer: its lock, shared for a check (checks may run
     * together), exclusive for a repair. */
    char *lock = join(dir, "lock");
    if (!lock) {
        rc = crl_error_set(err, CRL_E_NOMEM, WHO ": out of memory");
        goto out;
    }
    s->lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (s->lock_fd < 0 && !repair)
        s->lock_fd = open(lock, O_RDONLY | O_CLOEXEC); /* a read-only dir */
    if (s->lock_fd < 0 && (repair || errno != ENOENT)) {
        rc = io_error(err, lock, "cannot open the lock file", errno);
        free(lock);
        goto out;
    }
    if (s->lock_fd >= 0 && flock(s->lock_fd, (repair ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0) {
        rc = errno == EWOULDBLOCK ? crl_error_set(err, CRL_E_IO,
                                                  WHO ": %s is open in another process (%s is locked); stop it "
                                                  "first, a storage is never checked under a writer",
                                                  dir, lock)
                                  : io_error(err, lock, "cannot lock", errno);
        free(lock);
        goto out;
    }
    free(lock);
    int64_t hcap = 0;
    rp_layout *l = NULL;
    crl_error e;
    crl_error_clear(&e);
    char *hpath = join(dir, "header");
    if (!hpath) {
        rc = crl_error_set(err, CRL_E_NOMEM, WHO ": out of memory");
        goto out;
    }
    int hrc = header_read(s, &hcap, &l, &e);
    if (hrc && hrc != CRL_E_CORRUPT) {
        free(hpath);
        rc = crl_error_pass(err, &e, hrc);
        goto out;
    }
    if (!l) {
        int64_t n, first, slots;
        if ((rc = count_committed(dir, &n, &first, &slots, err))) {
            free(hpath);
            goto out;
        }
        if (hrc || n > 0) {
            char reason[1500];
            /* header_read's message less its "storage/memmap: PATH: " */
            const char *why = e.message;
            size_t wl = strlen(WHO ": "), hl = strlen(hpath);
            if (!strncmp(why, WHO ": ", wl) && !strncmp(why + wl, hpath, hl) && !strncmp(why + wl + hl, ": ", 2))
                why += wl + hl + 2;
            if (hrc)
                snprintf(reason, sizeof reason, "%s; slots.bin holds %" PRId64 " committed item%s", why, n,
                         n == 1 ? "" : "s");
            else
                snprintf(reason, sizeof reason, "missing, and slots.bin holds %" PRId64 " committed item%s (the "
                         "first in slot %" PRId64 ") that cannot be read without it: the header is the only record "
                         "of the items' keys, dtypes and shapes",
                         n, n == 1 ? "" : "s", first);
            finding(&rep, hpath, -1, -1, reason);
            rep.bad_files++;
            if (repair)
                rc = crl_error_set(err, CRL_E_CORRUPT,
                                   WHO ": refusing to repair %s: its header is %s, and it cannot be rebuilt from the "
                                   "data files (they hold rows of bytes, not the keys, dtypes and shapes); nothing "
                                   "was changed. " HEADER_FIX,
                                   dir, hrc ? "damaged" : "missing", dir, dir, dir);
        }
        /* else a first set cut short: no item was ever acknowledged, the storage is empty */
        free(hpath);
        goto out;
    }
    free(hpath);
    s->capacity = hcap;
    rep.capacity = hcap;
    if ((rep.bad_files = check_files(s, l, &rep)) > 0) {
        rp_layout_free(l);
        if (repair)
            rc = crl_error_set(err, CRL_E_CORRUPT,
                               WHO ": refusing to repair %s: %" PRId64 " of its files %s missing or of the wrong size, "
                               "so no slot can be trusted; nothing was changed. Restore %s from a backup, or delete "
                               "it to start over",
                               dir, rep.bad_files, rep.bad_files == 1 ? "is" : "are", rep.bad_files == 1 ? "it" : "them");
        goto out;
    }
    if (!(s->filled = calloc((size_t)hcap, 1))) {
        rp_layout_free(l);
        rc = crl_error_set(err, CRL_E_NOMEM, WHO ": out of memory");
        goto out;
    }
    if ((rc = files_open(s, l, MM_READ, err)))
        goto out;
    records_scan(s, true, check_damage, &c);
    for (int64_t j = 0; j < hcap; j++)
        rep.items += s->filled[j];
    if (c.nomem) {
        rc = crl_error_set(err, CRL_E_NOMEM, WHO ": out of memory listing the damaged slots");
        goto out;
    }
    if (repair && c.nbad > 0) {
        if ((rc = drop_slots(s, &c, err)))
            goto out;
        rep.dropped = (int64_t)c.nbad;
    }
out:
    memcpy(report, &rep, rsize);
    free(c.bad);
    mm_close(s);
    return rc;
}

const crl_storage_ops rp_memmap_ops = {
    .struct_size = sizeof(crl_storage_ops),
    .open = mm_open,
    .set = mm_set,
    .get = mm_get,
    .len = mm_len,
    .has = mm_has,
    .write_count = mm_write_count,
    .sync = mm_sync,
    .clear = mm_clear,
    .dump = mm_dump,
    .load = mm_load,
    .close = mm_close,
    .check = mm_check,
};
