/* LD_PRELOAD shim for tests/cli-inputs.sh: long waits pass at once.  A poll(2) asked to wait at least
 * CRL_TIMEWARP_MIN_MS milliseconds waits 20 ms instead and, when nothing happened, moves CLOCK_MONOTONIC on by
 * the whole timeout, so code that polls until a deadline (the processes executor's step_timeout) sees it pass
 * as it would after minutes.  Shorter waits (plugin scans, start-up handshakes) are left alone.  Without
 * CRL_TIMEWARP_MIN_MS every call goes to libc. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

static _Atomic int64_t offset_ns;  /* how far CLOCK_MONOTONIC has been moved on */

int crl_timewarp_shim_active(void);
int crl_timewarp_shim_active(void)
{
    return 1;
}

static long long min_ms(void)
{
    const char *v = getenv("CRL_TIMEWARP_MIN_MS");
    return v && *v ? atoll(v) : 0;
}

int clock_gettime(clockid_t id, struct timespec *ts)
{
    static int (*real)(clockid_t, struct timespec *);
    if (!real)
        real = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
    int rc = real(id, ts);
    int64_t off = atomic_load(&offset_ns);
    if (rc == 0 && off && (id == CLOCK_MONOTONIC || id == CLOCK_MONOTONIC_RAW || id == CLOCK_BOOTTIME)) {
        int64_t ns = (int64_t)ts->tv_nsec + off % 1000000000;
        ts->tv_sec += (time_t)(off / 1000000000 + ns / 1000000000);
        ts->tv_nsec = (long)(ns % 1000000000);
    }
    return rc;
}

int poll(struct pollfd *fds, nfds_t n, int timeout)
{
    static int (*real)(struct pollfd *, nfds_t, int);
    if (!real)
        real = (int (*)(struct pollfd *, nfds_t, int))dlsym(RTLD_NEXT, "poll");
    long long min = min_ms();
    if (min <= 0 || timeout < min)
        return real(fds, n, timeout);
    int rc = real(fds, n, 20);
    if (rc == 0)
        atomic_fetch_add(&offset_ns, ((int64_t)timeout - 20) * 1000000);
    return rc;
}
