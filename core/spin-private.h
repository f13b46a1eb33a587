/* Spinning and futex waits shared by the executors (exec_threads.c, exec_async.c, exec_procs.c).
 *
 * DESIGN.md's figures for the 2-core machines: a futex wake-up round trip
 * costs ~100 us, a spin hand-off ~0.1-0.2 us, so waits spin briefly (with
 * the CPU's pause hint) before they sleep on a futex word. */
#ifndef CRL_SPIN_PRIVATE_H
#define CRL_SPIN_PRIVATE_H

#include <limits.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>
#include <linux/futex.h>
#include <sys/syscall.h>

static inline void crl__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static inline int64_t crl__now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* The spinning half of a spin-then-sleep wait: zero it, then call
 * crl__spin_on once per failed check; it relaxes the CPU and returns true
 * while budget_ns last (reading the clock every 64 rounds), and false when
 * the caller should sleep now (and after every later round). */
typedef struct crl__spin {
    unsigned n;
    int64_t until;
} crl__spin;

static inline bool crl__spin_on(crl__spin *s, int64_t budget_ns)
{
    if ((++s->n & 63) != 0) {
        crl__cpu_relax();
        return true;
    }
    int64_t t = crl__now_ns();
    if (!s->until)
        s->until = t + budget_ns;
    return t < s->until;
}

/* Sleep while *addr == val (private: threads of one process). */
static inline void crl__futex_wait(_Atomic uint32_t *addr, uint32_t val)
{
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

/* Wake up to n sleepers on addr (private). */
static inline void crl__futex_wake(_Atomic uint32_t *addr, int n)
{
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

/* The same across processes (a word in MAP_SHARED memory). */
static inline void crl__futex_wait_shared(_Atomic uint32_t *addr, uint32_t val)
{
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT, val, NULL, NULL, 0);
}

static inline void crl__futex_wake_shared(_Atomic uint32_t *addr, int n)
{
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE, n, NULL, NULL, 0);
}

/* Wait until *word == turn or *abort is set (the executors' turn order, exec.c and transform.c). */
static inline void crl__turn_wait(_Atomic uint32_t *word, _Atomic uint32_t *abort, uint32_t turn)
{
    crl__spin s = { 0, 0 };
    for (;;) {
        uint32_t w = atomic_load_explicit(word, memory_order_acquire);
        if (w == turn || atomic_load_explicit(abort, memory_order_acquire))
            return;
        if (!crl__spin_on(&s, 20000))
            crl__futex_wait_shared(word, w);
    }
}

#endif
