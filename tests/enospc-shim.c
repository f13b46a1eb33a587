/* LD_PRELOAD shim for the replay tests: posix_fallocate fails with ENOSPC past CRL_ENOSPC_LIMIT bytes, as on a full disk. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* CRL_ENOSPC_LIMIT=N: an allocation reaching past byte N of a file fails;
 * CRL_ENOSPC_MATCH=S: only files whose path contains S (all when unset).
 * Without CRL_ENOSPC_LIMIT every call goes to libc.  Read at each call, so a
 * test can "free disk space" by unsetting it. */

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
