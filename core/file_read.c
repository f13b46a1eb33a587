/* Reading files that may be hostile: regular files only, never a blocking open, sizes checked before reading
 * (crl/file.h).  Every file crl reads opens here. */
#include "file-private.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <unistd.h>

const char *crl__file_kind(mode_t m)
{
    if (S_ISDIR(m))
        return "a directory";
    if (S_ISFIFO(m))
        return "a FIFO";
    if (S_ISSOCK(m))
        return "a socket";
    if (S_ISCHR(m))
        return "a character device";
    if (S_ISBLK(m))
        return "a block device";
    if (S_ISLNK(m))
        return "a symbolic link";
    return "not a regular file";
}

static int not_regular(crl_error *err, mode_t m)
{
    if (S_ISLNK(m))
        return crl_error_set(err, CRL_E_IO, "it is a symbolic link, which is refused here; put a regular file in "
                             "its place");
    return crl_error_set(err, CRL_E_IO, "it is %s, not a regular file; crl reads only regular files", crl__file_kind(m));
}

static void fmt_limit(char *buf, size_t n, uint64_t b)
{
    if (b >= (1u << 20) && b % (1u << 20) == 0)
        g_snprintf(buf, n, "%" PRIu64 " MiB", b >> 20);
    else if (b >= 1024 && b % 1024 == 0)
        g_snprintf(buf, n, "%" PRIu64 " KiB", b >> 10);
    else
        g_snprintf(buf, n, "%" PRIu64 " bytes", b);
}

static int too_big(crl_error *err, uint64_t size, uint64_t max, bool grew)
{
    char lim[64];
    fmt_limit(lim, sizeof lim, max);
    if (grew)
        return crl_error_set(err, CRL_E_IO, "it holds more than the %s limit; is it the right file?", lim);
    return crl_error_set(err, CRL_E_IO, "it is %" PRIu64 " bytes, more than the %s limit; is it the right file?",
                         size, lim);
}

static int os_error(crl_error *err, int e)
{
    return crl_error_set(err, e == ENOENT ? CRL_E_NOT_FOUND : CRL_E_IO, "%s", g_strerror(e));
}

int crl__file_open(const char *path, unsigned flags, uint64_t max_bytes, struct stat *st, crl_error *err)
{
    if (!path || !*path || (flags & ~(CRL_FILE_NOFOLLOW | CRL_FILE_RDWR))) {
        crl_error_set(err, CRL_E_INVALID, "crl_file_open: %s", !path ? "path is NULL" : !*path ? "path is empty"
                                                                                              : "unknown flags");
        return -1;
    }
    bool nofollow = (flags & CRL_FILE_NOFOLLOW) != 0;
    /* Look first, so a device or FIFO is never opened at all (opening some devices does things). */
    struct stat pre;
    if ((nofollow ? lstat(path, &pre) : stat(path, &pre)) != 0) {
        os_error(err, errno);
        return -1;
    }
    if (!S_ISREG(pre.st_mode)) {
        not_regular(err, pre.st_mode);
        return -1;
    }
    /* O_NONBLOCK: should the path become a FIFO between the look and the open, the open still returns. */
    int oflags = ((flags & CRL_FILE_RDWR) ? O_RDWR : O_RDONLY) | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
    if (nofollow)
        oflags |= O_NOFOLLOW;
    int fd = open(path, oflags);
    if (fd < 0) {
        int e = errno;
        struct stat now;
        if (nofollow && e == ELOOP && lstat(path, &now) == 0 && S_ISLNK(now.st_mode))
            not_regular(err, now.st_mode);
        else
            os_error(err, e);
        return -1;
    }
    struct stat s;
    int rc = CRL_OK;
    if (fstat(fd, &s) != 0)
        rc = crl_error_set(err, CRL_E_IO, "cannot stat: %s", g_strerror(errno));
    else if (!S_ISREG(s.st_mode))
        rc = not_regular(err, s.st_mode);
    else if (max_bytes && (uint64_t)s.st_size > max_bytes)
        rc = too_big(err, (uint64_t)s.st_size, max_bytes, false);
    else {
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0)
            rc = crl_error_set(err, CRL_E_IO, "cannot set blocking mode: %s", g_strerror(errno));
    }
    if (rc) {
        close(fd);
        return -1;
    }
    if (st)
        *st = s;
    return fd;
}

int crl__file_pread(int fd, void *buf, size_t len, uint64_t off)
{
    uint8_t *p = buf;
    while (len > 0) {
        size_t chunk = len > (1u << 30) ? (1u << 30) : len;
        ssize_t n = pread(fd, p, chunk, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno;
        if (n == 0)
            return ENODATA;
        p += n;
        len -= (size_t)n;
        off += (uint64_t)n;
    }
    return 0;
}

int crl_file_open(const char *path, const char *what, unsigned flags, uint64_t max_bytes, uint64_t *size,
                  crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    struct stat st;
    int fd = crl__file_open(path, flags, max_bytes, &st, &e);
    if (fd < 0) {
        crl_error_pass(err, &e, CRL_E_IO);
        if (path && *path)
            crl_error_prefix(err, "cannot read %s '%s': ", what ? what : "file", path);
        return -1;
    }
    if (size)
        *size = (uint64_t)st.st_size;
    return fd;
}

int crl_file_read(const char *path, const char *what, unsigned flags, uint64_t max_bytes, char **data,
                  size_t *len, crl_error *err)
{
    if (data)
        *data = NULL;
    if (len)
        *len = 0;
    if (!data || !len || max_bytes == 0)
        return crl_error_set(err, CRL_E_INVALID, "crl_file_read: %s", max_bytes == 0 ? "max_bytes is 0"
                                                                                      : "data or len is NULL");
    if (max_bytes >= SIZE_MAX)
        max_bytes = SIZE_MAX - 1;
    if (!what)
        what = "file";
    crl_error e;
    crl_error_clear(&e);
    struct stat st;
    int fd = crl__file_open(path, flags, max_bytes, &st, &e);
    if (fd < 0) {
        int rc = crl_error_pass(err, &e, CRL_E_IO);
        if (path && *path)
            crl_error_prefix(err, "cannot read %s '%s': ", what, path);
        return rc;
    }
    /* The size fstat gave, but files in /proc say 0 and a file may grow meanwhile: read to the end, never
     * past max_bytes + 1 (which tells "too big" from "exactly the limit"). */
    size_t cap = (size_t)st.st_size + 1, got = 0;
    if (cap < 4096)
        cap = 4096;
    if (cap > max_bytes + 1)
        cap = (size_t)max_bytes + 1;
    char *buf = g_try_malloc(cap + 1);
    int rc = CRL_OK;
    if (!buf)
        rc = crl_error_set(err, CRL_E_NOMEM, "cannot read %s '%s': cannot allocate %zu bytes for it", what, path,
                           cap);
    while (!rc) {
        if (got == cap) {
            if (cap > max_bytes) {
                too_big(&e, 0, max_bytes, true);
                rc = crl_error_set(err, CRL_E_IO, "cannot read %s '%s': %s", what, path, e.message);
                break;
            }
            size_t ncap = cap > (max_bytes + 1) / 2 ? (size_t)max_bytes + 1 : cap * 2;
            char *nb = g_try_realloc(buf, ncap + 1);
            if (!nb) {
                rc = crl_error_set(err, CRL_E_NOMEM, "cannot read %s '%s': cannot allocate %zu bytes for it", what,
                                   path, ncap);
                break;
            }
            buf = nb;
            cap = ncap;
        }
        ssize_t n = read(fd, buf + got, cap - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = crl_error_set(err, CRL_E_IO, "cannot read %s '%s': %s", what, path, g_strerror(errno));
            break;
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    if (rc) {
        g_free(buf);
        return rc;
    }
    buf[got] = '\0';
    *data = buf;
    *len = got;
    return CRL_OK;
}
