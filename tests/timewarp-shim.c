/* LD_PRELOAD shim for tests/cli-inputs.sh and tests/cli-run.sh: long waits pass at once, or a fake clock.  A poll(2) asked to wait at least
 * CRL_TIMEWARP_MIN_MS milliseconds waits 20 ms instead and, when nothing happened, moves CLOCK_MONOTONIC on by
 * the whole timeout, so code that polls until a deadline (the processes executor's step_timeout) sees it pass
 * as it would after minutes.  Shorter waits (plugin scans, start-up handshakes) are left alone.  Without
 * CRL_TIMEWARP_MIN_MS every call goes to libc.
 * CRL_TIMEWARP_CLOCK_STEP_MS=N: CLOCK_MONOTONIC stands still at its first reading and moves on by N ms
 * at each call (0: frozen), so whatever is paced by it (crl run's progress lines) is paced by calls, not
 * by how fast the machine is. */
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

static _Atomic int64_t fake_base_ns, fake_calls;

/* CRL_TIMEWARP_CLOCK_STEP_MS in ns, -1 when unset */
static int64_t fake_step_ns(void)
{
    const char *v = getenv("CRL_TIMEWARP_CLOCK_STEP_MS");
    return v && *v ? atoll(v) * 1000000 : -1;
}

int clock_gettime(clockid_t id, struct timespec *ts)
{
    static int (*real)(clockid_t, struct timespec *);
    if (!real)
        real = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
    int rc = real(id, ts);
    int64_t step = fake_step_ns();
    if (rc == 0 && step >= 0 && id == CLOCK_MONOTONIC) {
        int64_t zero = 0, now = (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
        atomic_compare_exchange_strong(&fake_base_ns, &zero, now);
        int64_t t = atomic_load(&fake_base_ns) + step * atomic_fetch_add(&fake_calls, 1);
        ts->tv_sec = (time_t)(t / 1000000000);
        ts->tv_nsec = (long)(t % 1000000000);
        return rc;
    }
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
