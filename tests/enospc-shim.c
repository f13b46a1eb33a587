/* LD_PRELOAD shim for the replay and crl run tests: posix_fallocate fails with ENOSPC past CRL_ENOSPC_LIMIT bytes, as
 * on a full disk; write(2) to chosen files fails with ENOSPC, or waits. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* CRL_ENOSPC_LIMIT=N: an allocation reaching past byte N of a file fails;
 * CRL_ENOSPC_MATCH=S: only files whose path contains S (all when unset).
 * Without CRL_ENOSPC_LIMIT every call goes to libc.  Read at each call, so a
 * test can "free disk space" by unsetting it.
 * CRL_ENOSPC_WRITE_MATCH=S: write, pwrite and pwrite64 to a file whose path
 * contains S fail with ENOSPC (a disk that is full for those files).
 * CRL_STALL_WRITE_MATCH=S with CRL_STALL_UNTIL=FILE: those writes wait until
 * FILE exists (a test holds a process in the middle of writing a checkpoint,
 * then signals or kills it; a FILE never made holds it for good). */

int crl_enospc_shim_active(void);
int crl_enospc_shim_active(void)
{
    return 1;
}

static int refuse(int fd, long long offset, long long len)
{
    const char *limit = getenv("CRL_ENOSPC_LIMIT");
    if (!limit || !*limit)
        return 0;
    const char *match = getenv("CRL_ENOSPC_MATCH");
    if (match && *match) {
        char link[64], path[4096];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, path, sizeof path - 1);
        if (n < 0)
            return 0;
        path[n] = '\0';
        if (!strstr(path, match))
            return 0;
    }
    return offset + len > strtoll(limit, NULL, 10);
}

typedef int (*pf_fn)(int, off_t, off_t);

int posix_fallocate(int fd, off_t offset, off_t len)
{
    if (refuse(fd, (long long)offset, (long long)len))
        return ENOSPC;
    pf_fn real = (pf_fn)dlsym(RTLD_NEXT, "posix_fallocate");
    return real ? real(fd, offset, len) : ENOSYS;
}

int posix_fallocate64(int fd, off_t offset, off_t len)
{
    if (refuse(fd, (long long)offset, (long long)len))
        return ENOSPC;
    pf_fn real = (pf_fn)dlsym(RTLD_NEXT, "posix_fallocate64");
    return real ? real(fd, offset, len) : ENOSYS;
}

int fallocate(int fd, int mode, off_t offset, off_t len)
{
    if (refuse(fd, (long long)offset, (long long)len)) {
        errno = ENOSPC;
        return -1;
    }
    int (*real)(int, int, off_t, off_t) = (int (*)(int, int, off_t, off_t))dlsym(RTLD_NEXT, "fallocate");
    if (!real) {
        errno = ENOSYS;
        return -1;
    }
    return real(fd, mode, offset, len);
}

/* Whether fd's path contains the value of the environment variable var (set and not empty). */
static int fd_matches(int fd, const char *var)
{
    const char *match = getenv(var);
    if (!match || !*match)
        return 0;
    char link[64], path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n < 0)
        return 0;
    path[n] = '\0';
    return strstr(path, match) != NULL;
}

/* -1 with errno = ENOSPC for a write the test makes fail; after waiting out a stalled one, 0. */
static int before_write(int fd)
{
    if (fd_matches(fd, "CRL_ENOSPC_WRITE_MATCH")) {
        errno = ENOSPC;
        return -1;
    }
    const char *until = getenv("CRL_STALL_UNTIL");
    if (until && *until && fd_matches(fd, "CRL_STALL_WRITE_MATCH")) {
        struct stat st;
        const struct timespec tick = { 0, 10 * 1000 * 1000 };
        while (stat(until, &st) != 0)
            nanosleep(&tick, NULL);
    }
    return 0;
}

ssize_t write(int fd, const void *buf, size_t n)
{
    if (before_write(fd))
        return -1;
    ssize_t (*real)(int, const void *, size_t) = (ssize_t (*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    if (!real) {
        errno = ENOSYS;
        return -1;
    }
    return real(fd, buf, n);
}

typedef ssize_t (*pwrite_fn)(int, const void *, size_t, off_t);

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    if (before_write(fd))
        return -1;
    pwrite_fn real = (pwrite_fn)dlsym(RTLD_NEXT, "pwrite");
    if (!real) {
        errno = ENOSYS;
        return -1;
    }
    return real(fd, buf, n, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off)
{
    if (before_write(fd))
        return -1;
    pwrite_fn real = (pwrite_fn)dlsym(RTLD_NEXT, "pwrite64");
    if (!real) {
        errno = ENOSYS;
        return -1;
    }
    return real(fd, buf, n, off);
}
