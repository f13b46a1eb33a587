/* The processes executor: forked workers over shared buffers, a futex control page, crash/hang/exit detection, restarts. */
#define _GNU_SOURCE /* dladdr1, struct link_map, pidfd syscall numbers */
#include "exec-private.h"
#include "env-private.h"
#include "spin-private.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <limits.h>
#include <link.h>
#include <linux/futex.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sched.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <glib.h>

/* How it works.  One MAP_SHARED anonymous control page holds a job
 * generation counter (the futex word workers wait on), the job (kind,
 * from_state, reset mask and seeds), a countdown of workers still busy and
 * one result slot per worker.  The parent publishes a job and bumps the
 * generation; workers spin briefly, then FUTEX_WAIT (shared, not private: the
 * word is in another process's memory too).  The last worker to finish
 * writes an eventfd when the parent sleeps; the parent polls that eventfd
 * together with a pidfd per worker, so a worker that dies wakes it at once.
 * Workers are forked from the parent, whose backend instances are made and
 * bound but never stepped: that is what a restart forks again.
 *
 * Backends whose plugin embeds CPython cannot be forked that way: the
 * parent's interpreter (its GIL, its threads, numpy's thread pools) does not
 * survive a fork.  Their workers fork and at once exec crl-env-worker
 * (exec_reexec.c), which starts a fresh interpreter, loads the plugin and
 * makes its block's instances again from a description the parent wrote
 * into a memfd, maps the control page and the env buffers from their memfds
 * and then serves jobs exactly as a forked worker does (procs_serve). */

#define PROCS_EXIT_ORPHAN 121 /* a worker whose parent died before it started */
#define PROCS_JOB_RENDER 0x100 /* a job of this kind only: env render_env into the shared frame */
/* A re-exec'd worker starts an interpreter and imports the env's modules before its first answer. */
#define PROCS_START_S 60.0
/* A re-exec'd worker whose envs' close failed: the slot's message says how. */
#define PROCS_EXIT_CLOSE 122
/* stop_workers: a worker that had not exited 2 s after quit (then killed). */
#define PROCS_QUIT_HUNG (-1)

typedef struct procs_slot {
    _Atomic uint32_t done; /* the generation this worker finished last */
    int32_t code;          /* its crl_status for that job */
    char msg[CRL_ERROR_MESSAGE_MAX];
} __attribute__((aligned(64))) procs_slot;

typedef struct procs_ctl {
    _Atomic uint32_t gen;      /* job generation; workers futex-wait on it */
    _Atomic uint32_t sleepers; /* workers inside FUTEX_WAIT (the parent wakes only then) */
    uint32_t job;              /* crl__exec_job */
    uint32_t quit;             /* set with the generation bump that ends the workers */
    uint32_t from_state, has_mask, has_seeds;
    int64_t render_env;        /* PROCS_JOB_RENDER: the env to draw */
    _Atomic uint32_t left __attribute__((aligned(64)));  /* workers yet to finish the job */
    _Atomic uint32_t parent_waits;                      /* the parent sleeps in poll */
} __attribute__((aligned(64))) procs_ctl;

typedef struct procs {
    void *map;           /* the control region: ctl, slots, mask, seeds */
    size_t map_len;
    procs_ctl *ctl;
    procs_slot *slots;   /* one per worker (= per block) */
    bool *mask;          /* num */
    uint64_t *seeds;     /* num */
    uint8_t *frame;      /* render_height * render_width * 3, or NULL */
    size_t frame_bytes;
    size_t nw;
    pid_t *pid;          /* 0: no live worker */
    int *pidfd;          /* -1: none (no pidfd_open: the parent polls waitpid) */
    int evfd;
    pid_t parent;
    unsigned spin;       /* spin iterations before sleeping */
    bool crowded;        /* more workers + parent than cores: spinners yield the core now and then */
    int64_t restarts;
    bool failed;         /* on_worker_failure = fail tripped: every later call errors */
    crl__exec_turns *turns; /* the executor's turn page, or NULL */
    crl_error fail;      /* why */
    int ctl_fd;          /* re-exec: the memfd behind map, else -1 */
    crl__exec_reexec *re; /* re-exec: what crl-env-worker needs, else NULL */
    int *quit_status;    /* stop_workers: each worker's wait status at quit, or PROCS_QUIT_HUNG */
} procs;

/* Where the control region's parts lie (the parent and a re-exec'd worker compute the same). */
typedef struct procs_layout {
    size_t slots, mask, seeds, frame, len;
} procs_layout;

static procs_layout layout(size_t nw, int64_t num, size_t frame_bytes)
{
    procs_layout l;
    l.slots = sizeof(procs_ctl);
    l.mask = l.slots + sizeof(procs_slot) * nw;
    l.seeds = (l.mask + (size_t)num + 7) & ~(size_t)7;
    l.frame = (l.seeds + sizeof(uint64_t) * (size_t)num + 63) & ~(size_t)63;
    l.len = l.frame + frame_bytes;
    return l;
}

static void place(procs *p, const procs_layout *l)
{
    p->ctl = p->map;
    p->slots = (procs_slot *)((char *)p->map + l->slots);
    p->mask = (bool *)((char *)p->map + l->mask);
    p->seeds = (uint64_t *)((char *)p->map + l->seeds);
    p->frame = p->frame_bytes ? (uint8_t *)p->map + l->frame : NULL;
}

/* What happened to a worker that did not finish its job. */
typedef enum { WF_OK = 0, WF_DIED, WF_HUNG } wfate;

static inline void spin_pause(const struct procs *p, unsigned i)
{
    if (p->crowded && (i & 31) == 31)
        sched_yield();
    else
        crl__cpu_relax();
}

static long futex(_Atomic uint32_t *addr, int op, uint32_t val, const struct timespec *timeout)
{
    return syscall(SYS_futex, (uint32_t *)addr, op, val, timeout, NULL, 0);
}

static int pidfd_open_(pid_t pid)
{
#ifdef SYS_pidfd_open
    /* Once ENOSYS (old kernels; valgrind 3.19 does not know the call and
     * warns each time), never again: waitpid polling does the job. */
    static _Atomic int missing;
    if (atomic_load_explicit(&missing, memory_order_relaxed)) {
        errno = ENOSYS;
        return -1;
    }
    int fd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (fd < 0 && errno == ENOSYS)
        atomic_store_explicit(&missing, 1, memory_order_relaxed);
    return fd;
#else
    (void)pid;
    errno = ENOSYS;
    return -1;
#endif
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const char *job_name(uint32_t job)
{
    return job == CRL__JOB_STEP ? "step" : job == CRL__JOB_RESET ? "reset" : job == PROCS_JOB_RENDER ? "render"
                                                                                                     : "start-up";
}

/* "env 3" or "envs 2-5". */
static void env_range(const crl__exec *x, size_t b, char *buf, size_t n)
{
    const crl__exec_block *bl = &x->blocks[b];
    if (bl->count == 1)
        snprintf(buf, n, "env %lld", (long long)bl->start);
    else
        snprintf(buf, n, "envs %lld-%lld", (long long)bl->start, (long long)(bl->start + bl->count - 1));
}

static const char *env_label(const crl__exec *x, char *buf, size_t n)
{
    const char *be = x->env ? crl_env_backend_name(x->env) : NULL, *id = x->env ? crl_env_id(x->env) : NULL;
    snprintf(buf, n, "%s/%s", be ? be : "?", id ? id : "?");
    return buf;
}

/* ---- the worker ----------------------------------------------------------------------------- */

/* Publish worker b's result for generation g and wake the parent if it
 * sleeps and this was the last worker. */
static void post(procs *p, size_t b, uint32_t g, int rc, const crl_error *e)
{
    procs_slot *s = &p->slots[b];
    s->code = rc;
    if (rc)
        memcpy(s->msg, e->message, sizeof s->msg);
    atomic_store_explicit(&s->done, g, memory_order_release);
    if (atomic_fetch_sub(&p->ctl->left, 1) == 1 && atomic_load(&p->ctl->parent_waits)) {
        uint64_t one = 1;
        ssize_t w = write(p->evfd, &one, sizeof one);
        (void)w;
    }
}

/* x->job as the control page says, on block b. */
static void worker_run(crl__exec *x, procs *p, size_t b, uint32_t g)
{
    procs_ctl *c = p->ctl;
    if (c->job == PROCS_JOB_RENDER) {
        /* Only the worker whose instance holds the env draws it. */
        crl_error e = { 0 };
        int rc = CRL_OK;
        const crl__exec_block *bl = &x->blocks[b];
        for (size_t k = bl->first; k < bl->first + bl->ninst; k++) {
            const crl__exec_inst *in = &x->inst[k];
            if (c->render_env >= in->start && c->render_env < in->start + in->count)
                rc = x->real.render(in->benv, c->render_env - in->start, p->frame, &e);
        }
        post(p, b, g, rc, &e);
        return;
    }
    x->job = (crl__exec_job)c->job;
    x->from_state = c->from_state != 0;
    x->mask = c->has_mask ? p->mask : NULL;
    x->seeds = c->has_seeds ? p->seeds : NULL;
    crl_error e = { 0 };
    int rc = crl__exec_run_block(x, b, &e);
    post(p, b, g, rc, &e);
}

static void serve(crl__exec *x, procs *p, size_t b, uint32_t seen, bool restart, const crl_error *made);

/* Never returns into the caller's code.  No PR_SET_PDEATHSIG: it fires when
 * the forking *thread* ends, and envs may be made in short-lived threads;
 * a sleeping worker looks at its parent once a second instead. */
static void __attribute__((noreturn)) worker_main(crl__exec *x, procs *p, size_t b, uint32_t seen, bool restart)
{
    if (getppid() != p->parent)
        _exit(PROCS_EXIT_ORPHAN);
    /* The parent's signal handlers are not ours to run (a test runner's or
     * an application's SIGTERM handler would signal the parent's process
     * group); Ctrl-C is for the parent to handle, which then stops us. */
    for (int sig = 1; sig < NSIG; sig++) {
        struct sigaction sa;
        if (sig == SIGKILL || sig == SIGSTOP || sigaction(sig, NULL, &sa) != 0)
            continue;
        if (sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN) {
            sa.sa_handler = SIG_DFL;
            sa.sa_flags = 0;
            sigaction(sig, &sa, NULL);
        }
    }
    signal(SIGINT, SIG_IGN);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    /* The other workers' pidfds are of no use here. */
    for (size_t j = 0; j < p->nw; j++)
        if (p->pidfd[j] >= 0)
            close(p->pidfd[j]);
    serve(x, p, b, seen, restart, NULL);
    _exit(0);
}

/* The worker's life after start-up: answer the handshake (with `made`'s error when its instances could not be
 * made), then run jobs until the parent says quit (return) or disappears (exit). */
static void serve(crl__exec *x, procs *p, size_t b, uint32_t seen, bool restart, const crl_error *made)
{
    procs_ctl *c = p->ctl;
    crl_error e = { 0 };
    int rc = CRL_OK;
    if (made) {
        e = *made;
        rc = made->code ? made->code : CRL_E_RUNTIME;
    } else if (restart) {
        /* A replacement starts its envs afresh before it reports ready. */
        x->job = CRL__JOB_RESET;
        x->from_state = false;
        x->mask = NULL;
        x->seeds = NULL;
        rc = crl__exec_run_block(x, b, &e);
    }
    post(p, b, seen, rc, &e);  /* ready */
    const struct timespec orphan_check = { 1, 0 };
    for (;;) {
        uint32_t g;
        for (;;) {
            unsigned i = 0;
            while ((g = atomic_load_explicit(&c->gen, memory_order_acquire)) == seen && i++ < p->spin)
                spin_pause(p, i);
            if (g != seen)
                break;
            atomic_fetch_add(&c->sleepers, 1);
            if (atomic_load(&c->gen) == seen)
                futex(&c->gen, FUTEX_WAIT, seen, &orphan_check);
            atomic_fetch_sub(&c->sleepers, 1);
            if (getppid() != p->parent)
                _exit(PROCS_EXIT_ORPHAN);
        }
        seen = g;
        if (c->quit)
            return;
        if (made)
            post(p, b, g, rc, &e);
        else
            worker_run(x, p, b, g);
    }
}

/* Fork and exec crl-env-worker for block b.  Everything the child does
 * before exec is async-signal-safe: the parent may run threads (and an
 * interpreter) that hold locks the child must not touch. */
static pid_t spawn_reexec(procs *p, size_t b, uint32_t seen, bool restart)
{
    const crl__exec_reexec *re = p->re;
    char sb[32], sseen[32], sdesc[32];
    snprintf(sb, sizeof sb, "%zu", b);
    snprintf(sseen, sizeof sseen, "%u", seen);
    snprintf(sdesc, sizeof sdesc, "%d", re->desc_fd);
    char *argv[] = { re->program, (char *)"--desc-fd", sdesc, (char *)"--block", sb, (char *)"--seen", sseen,
                     restart ? (char *)"--restart" : NULL, NULL };
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    /* The child: keep the fds the worker maps, default signal state but Ctrl-C (the parent's to handle). */
    for (size_t i = 0; i < re->nfds; i++)
        fcntl(re->fds[i], F_SETFD, 0);
    fcntl(re->desc_fd, F_SETFD, 0);
    fcntl(p->ctl_fd, F_SETFD, 0);
    fcntl(p->evfd, F_SETFD, 0);
    signal(SIGINT, SIG_IGN);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execv(re->program, argv);
    static const char msg[] = "crl: executor = processes: cannot run the env worker program\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(127);
}

int crl__exec_procs_serve(crl__exec *x, const crl__exec_reexec_args *a, size_t b, uint32_t seen, bool restart,
                          const crl_error *made, int (*close_all)(void *user, crl_error *e), void *user,
                          crl_error *err)
{
    procs w = { 0 };
    procs *p = &w;
    p->nw = a->nw;
    p->frame_bytes = a->frame_bytes;
    p->map_len = a->map_len;
    p->parent = a->parent;
    p->spin = a->spin;
    p->crowded = a->crowded;
    p->evfd = a->evfd;
    p->ctl_fd = -1;
    procs_layout lay = layout(p->nw, x->num, p->frame_bytes);
    if (b >= p->nw || lay.len != p->map_len)
        return crl_error_set(err, CRL_E_INVALID, "the control region of %zu bytes does not fit %zu workers of %lld "
                             "envs (worker %zu)", p->map_len, p->nw, (long long)x->num, b), -1;
    p->map = mmap(NULL, p->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, a->ctl_fd, 0);
    if (p->map == MAP_FAILED)
        return crl_error_set(err, CRL_E_IO, "cannot map the control region (fd %d): %s", a->ctl_fd,
                             g_strerror(errno)), -1;
    close(a->ctl_fd);
    place(p, &lay);
    if (getppid() != p->parent)
        return PROCS_EXIT_ORPHAN;
    serve(x, p, b, seen, restart, made);
    crl_error e = { 0 };
    int rc = close_all ? close_all(user, &e) : CRL_OK;
    if (rc) {
        p->slots[b].code = rc;
        memcpy(p->slots[b].msg, e.message, sizeof p->slots[b].msg);
        return PROCS_EXIT_CLOSE;
    }
    return 0;
}

/* Fork the worker of block b.  0 or -1 with errno. */
static int spawn(crl__exec *x, procs *p, size_t b, uint32_t seen, bool restart)
{
    pid_t pid = p->re ? spawn_reexec(p, b, seen, restart) : fork();
    if (pid < 0)
        return -1;
    if (pid == 0)
        worker_main(x, p, b, seen, restart);
    p->pid[b] = pid;
    p->pidfd[b] = pidfd_open_(pid);
    return 0;
}

/* Reap worker b (already dead, or SIGKILLed by the caller).  *status gets
 * its wait status.  Blocking: only for workers known dead or killed. */
static void reap(procs *p, size_t b, int *status)
{
    int st = 0;
    if (p->pid[b] > 0) {
        while (waitpid(p->pid[b], &st, 0) < 0 && errno == EINTR)
            ;
    }
    if (p->pidfd[b] >= 0)
        close(p->pidfd[b]);
    p->pidfd[b] = -1;
    p->pid[b] = 0;
    if (status)
        *status = st;
}

/* Is worker b dead?  Reaps it (and fills *status) if so. */
static bool dead(procs *p, size_t b, int *status)
{
    if (p->pid[b] <= 0)
        return true;
    int st = 0;
    pid_t r = waitpid(p->pid[b], &st, WNOHANG);
    if (r == 0)
        return false;
    if (r < 0 && errno != ECHILD)
        return false;
    if (p->pidfd[b] >= 0)
        close(p->pidfd[b]);
    p->pidfd[b] = -1;
    p->pid[b] = 0;
    *status = r < 0 ? 0 : st;
    return true;
}

/* Longer than any wait for the CPU on a loaded machine: a gap this long between two looks at the clock means
 * this process was stopped (Ctrl-Z, SIGSTOP, a debugger) and its workers most likely with it. */
#define PAUSE_S 1.0

/* Wait until every participant (part[b]) finished generation g, died, or
 * `timeout` seconds (0: none) passed.  Time this process spends stopped does
 * not count: after a pause the workers get a whole timeout again, so a run
 * resumed with fg is not killed as hung.  fate[b] and status[b] say what
 * happened to those that did not finish. */
static void wait_job(procs *p, const bool *part, uint32_t g, double timeout, wfate *fate, int *status)
{
    procs_ctl *c = p->ctl;
    for (size_t b = 0; b < p->nw; b++)
        fate[b] = WF_OK;
    for (unsigned i = 0; i < p->spin; i++) {
        if (!atomic_load_explicit(&c->left, memory_order_acquire))
            return;
        spin_pause(p, i);
    }
    /* The clock starts after the spin (microseconds), which keeps it off the fast path. */
    double seen = now_s();
    double deadline = timeout > 0 ? seen + timeout : 0;
    struct pollfd *fds = g_alloca(sizeof(struct pollfd) * (p->nw + 1));
    for (;;) {
        atomic_store(&c->parent_waits, 1);
        if (!atomic_load(&c->left)) {
            atomic_store(&c->parent_waits, 0);
            break;
        }
        nfds_t n = 0;
        bool blind = false;  /* a worker without pidfd: look at waitpid now and then */
        fds[n].fd = p->evfd;
        fds[n++].events = POLLIN;
        for (size_t b = 0; b < p->nw; b++) {
            if (!part[b] || p->pid[b] <= 0 || fate[b] != WF_OK)
                continue;
            if (p->pidfd[b] < 0) {
                blind = true;
                continue;
            }
            fds[n].fd = p->pidfd[b];
            fds[n++].events = POLLIN;
        }
        int ms = -1;
        double t0 = now_s();
        if (deadline > 0) {
            if (t0 - seen > PAUSE_S)
                deadline = t0 + timeout;
            double rem = deadline - t0;
            ms = rem <= 0 ? 0 : (int)(rem * 1000.0) + 1;
        }
        if (blind && (ms < 0 || ms > 20))
            ms = 20;
        int r = poll(fds, n, ms);
        seen = now_s();
        if (deadline > 0 && seen - t0 > ms / 1000.0 + PAUSE_S)
            deadline = seen + timeout;
        atomic_store(&c->parent_waits, 0);
        uint64_t drain;
        while (read(p->evfd, &drain, sizeof drain) > 0)
            ;
        if (r < 0 && errno != EINTR)
            break;  /* cannot wait: the scan below reports the unfinished as hung */
        if (!atomic_load(&c->left))
            break;
        /* Deaths: a dead participant that had not finished will never count down. */
        uint32_t gone = 0;
        for (size_t b = 0; b < p->nw; b++) {
            if (!part[b] || fate[b] != WF_OK)
                continue;
            if (atomic_load_explicit(&p->slots[b].done, memory_order_acquire) == g)
                continue;
            if (dead(p, b, &status[b])) {
                fate[b] = WF_DIED;
                gone++;
            }
        }
        /* The workers after a dead one would wait for its turn forever. */
        if (gone)
            crl__exec_turns_abort(p->turns);
        if (gone && atomic_fetch_sub(&c->left, gone) == gone)
            break;
        if (deadline > 0 && now_s() >= deadline)
            break;
    }
    /* Whatever is still running past the deadline is hung: kill it. */
    bool released = false;
    for (size_t b = 0; b < p->nw; b++) {
        if (!part[b] || fate[b] != WF_OK || atomic_load_explicit(&p->slots[b].done, memory_order_acquire) == g)
            continue;
        if (dead(p, b, &status[b])) {
            fate[b] = WF_DIED;
            continue;
        }
        /* Workers after a hung one may only wait for its turn: once released, they get a second to finish. */
        for (double until = now_s() + 1.0; released && now_s() < until;) {
            if (atomic_load_explicit(&p->slots[b].done, memory_order_acquire) == g)
                break;
            struct timespec ts = { 0, 1000000 };
            nanosleep(&ts, NULL);
        }
        if (released && atomic_load_explicit(&p->slots[b].done, memory_order_acquire) == g)
            continue;
        released = p->turns != NULL;
        kill(p->pid[b], SIGKILL);
        reap(p, b, &status[b]);
        fate[b] = WF_HUNG;
        crl__exec_turns_abort(p->turns);
    }
}

/* Tell every worker to exit, wait a little, SIGKILL the rest, reap all.
 * p->quit_status gets how each live one ended. */
static void stop_workers(procs *p)
{
    procs_ctl *c = p->ctl;
    c->quit = 1;
    atomic_fetch_add(&c->gen, 1);
    futex(&c->gen, FUTEX_WAKE, INT_MAX, NULL);
    if (!p->quit_status)
        p->quit_status = g_new0(int, p->nw);
    bool *live = g_alloca(sizeof(bool) * p->nw);
    for (size_t b = 0; b < p->nw; b++) {
        live[b] = p->pid[b] > 0;
        p->quit_status[b] = 0;
    }
    double deadline = now_s() + 2.0;
    for (;;) {
        bool any = false;
        for (size_t b = 0; b < p->nw; b++)
            if (p->pid[b] > 0 && !dead(p, b, &p->quit_status[b]))
                any = true;
        if (!any || now_s() >= deadline)
            break;
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
    }
    for (size_t b = 0; b < p->nw; b++)
        if (p->pid[b] > 0) {
            kill(p->pid[b], SIGKILL);
            reap(p, b, NULL);
            p->quit_status[b] = PROCS_QUIT_HUNG;
        } else if (!live[b]) {
            p->quit_status[b] = 0;
        }
}

static void procs_free(procs *p)
{
    if (!p)
        return;
    if (p->evfd >= 0)
        close(p->evfd);
    if (p->ctl_fd >= 0)
        close(p->ctl_fd);
    if (p->re) {
        if (p->re->desc_fd >= 0)
            close(p->re->desc_fd);
        g_free(p->re->program);
        g_free(p->re->fds);
        g_free(p->re);
    }
    if (p->map && p->map != MAP_FAILED)
        munmap(p->map, p->map_len);
    g_free(p->pid);
    g_free(p->pidfd);
    g_free(p->quit_status);
    g_free(p);
}

/* What became of worker b, for an error message. */
static void describe(wfate f, int status, double timeout, char *buf, size_t n)
{
    if (f == WF_HUNG)
        snprintf(buf, n, "did not finish within step_timeout = %g s and was killed", timeout);
    else if (WIFSIGNALED(status))
        snprintf(buf, n, "was killed by signal %d (%s)%s", WTERMSIG(status), strsignal(WTERMSIG(status)),
                 WCOREDUMP(status) ? ", core dumped" : "");
    else if (WIFEXITED(status))
        snprintf(buf, n, "exited with status %d", WEXITSTATUS(status));
    else
        snprintf(buf, n, "disappeared");
}

/* Policy fail, or restarts used up: every worker goes, and every later
 * call returns this error. */
static int fail_all(procs *p, crl_error *err, const crl_error *why)
{
    stop_workers(p);
    p->failed = true;
    p->fail = *why;
    return crl_error_pass(err, why, CRL_E_RUNTIME);
}

/* ---- the kind ------------------------------------------------------------------------------- */

/* Does the backend's plugin link libpython?  Then its code needs CPython's
 * after-fork handling, which a forked worker cannot give it. */
static bool embeds_python(const crl__exec *x, char *lib, size_t n)
{
    Dl_info info;
    struct link_map *lm = NULL;
    void *fn = x->backend_step ? (void *)x->backend_step : x->real.step ? (void *)x->real.step : (void *)x->real.make;
    if (!fn || !dladdr1(fn, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm || !lm->l_ld)
        return false;
    const char *strtab = NULL;
    for (const ElfW(Dyn) *d = lm->l_ld; d->d_tag != DT_NULL; d++)
        if (d->d_tag == DT_STRTAB) {
            uintptr_t a = (uintptr_t)d->d_un.d_ptr;
            /* glibc relocates these in place on most targets, not on all. */
            strtab = (const char *)(a < (uintptr_t)lm->l_addr ? a + (uintptr_t)lm->l_addr : a);
        }
    if (!strtab)
        return false;
    for (const ElfW(Dyn) *d = lm->l_ld; d->d_tag != DT_NULL; d++)
        if (d->d_tag == DT_NEEDED && g_str_has_prefix(strtab + d->d_un.d_val, "libpython")) {
            snprintf(lib, n, "%s", strtab + d->d_un.d_val);
            return true;
        }
    return false;
}

static int procs_start(crl__exec *x, crl_error *err)
{
    char lb[300];
    char py[256];
    bool reexec = embeds_python(x, py, sizeof py);
    if (reexec && !x->reexec_prepare)
        return crl_error_set(err, CRL_E_UNSUPPORTED,
                             "executor = processes: backend %s embeds CPython (its plugin links %s), which cannot run "
                             "in forked workers and this build has no worker program for it; use executor = threads "
                             "or serial for it", env_label(x, lb, sizeof lb), py);
    if (reexec && x->real.step != x->backend_step)
        return crl_error_set(err, CRL_E_UNSUPPORTED,
                             "executor = processes: backend %s embeds CPython (its plugin links %s), whose workers "
                             "start a program of their own, which does not run worker_transforms; use [env] "
                             "transforms instead, or executor = threads", env_label(x, lb, sizeof lb), py);
    if (x->nblocks == 0 || x->nblocks > 4096)
        return crl_error_set(err, CRL_E_INVALID, "executor = processes: %zu worker blocks for %s; expected 1-4096",
                             x->nblocks, env_label(x, lb, sizeof lb));
    procs *p = g_new0(procs, 1);
    p->nw = x->nblocks;
    p->turns = x->turns;
    p->evfd = -1;
    p->ctl_fd = -1;
    p->parent = getpid();
    int32_t rh = x->env ? crl_env_render_height(x->env) : 0, rw = x->env ? crl_env_render_width(x->env) : 0;
    p->frame_bytes = rh > 0 && rw > 0 && x->real.render ? (size_t)rh * (size_t)rw * 3 : 0;
    procs_layout lay = layout(p->nw, x->num, p->frame_bytes);
    p->map_len = lay.len;
    if (reexec) {
        /* The exec'd workers map the control region from this fd. */
        p->ctl_fd = memfd_create("crl-exec-control", MFD_CLOEXEC);
        if (p->ctl_fd >= 0 && ftruncate(p->ctl_fd, (off_t)p->map_len) != 0) {
            int e = errno;
            close(p->ctl_fd);
            p->ctl_fd = -1;
            errno = e;
        }
        p->map = p->ctl_fd < 0 ? MAP_FAILED
                               : mmap(NULL, p->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, p->ctl_fd, 0);
    } else {
        p->map = mmap(NULL, p->map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    }
    if (p->map == MAP_FAILED) {
        int e = errno;
        size_t len = p->map_len;   /* p is gone once freed */
        p->map = NULL;
        procs_free(p);
        return crl_error_set(err, CRL_E_NOMEM, "executor = processes: cannot map %zu bytes of shared memory for the "
                             "control page of %s: %s", len, env_label(x, lb, sizeof lb), g_strerror(e));
    }
    place(p, &lay);
    p->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (p->evfd < 0) {
        int e = errno;
        procs_free(p);
        return crl_error_set(err, CRL_E_IO, "executor = processes: eventfd for %s: %s", env_label(x, lb, sizeof lb),
                             g_strerror(e));
    }
    p->pid = g_new0(pid_t, p->nw);
    p->pidfd = g_new(int, p->nw);
    for (size_t b = 0; b < p->nw; b++)
        p->pidfd[b] = -1;
    /* Spinning pays only while workers and parent fit on the cores. */
    /* A futex wake-up round trip costs ~100 us, a spin hand-off well under
     * 1 us (DESIGN.md): spin a while before sleeping, and when the workers
     * and the parent outnumber the cores, yield while spinning so the one
     * with work gets a core. */
    p->crowded = (unsigned)p->nw + 1 > (unsigned)g_get_num_processors();
    p->spin = 4000;
    if (reexec) {
        crl__exec_reexec_args a = { p->ctl_fd, p->evfd, p->map_len, p->nw, p->frame_bytes, p->parent, p->spin,
                                    p->crowded };
        crl_error e = { 0 };
        p->re = x->reexec_prepare(x, &a, &e);
        if (!p->re) {
            procs_free(p);
            int code = crl_error_pass(err, &e, CRL_E_RUNTIME);
            crl_error_prefix(err, "executor = processes: %s: ", env_label(x, lb, sizeof lb));
            return code;
        }
    }
    p->ctl->job = CRL__JOB_NONE;
    atomic_store(&p->ctl->left, (uint32_t)p->nw);
    x->kstate = p;
    /* Pending output would be written once by each child that flushed it. */
    fflush(NULL);
    for (size_t b = 0; b < p->nw; b++) {
        if (spawn(x, p, b, 0, false) == 0)
            continue;
        int e = errno;
        atomic_fetch_sub(&p->ctl->left, (uint32_t)(p->nw - b));
        stop_workers(p);
        procs_free(p);
        x->kstate = NULL;
        return crl_error_set(err, CRL_E_IO, "executor = processes: cannot fork worker %zu of %zu for %s: %s", b,
                             x->nblocks, env_label(x, lb, sizeof lb), g_strerror(e));
    }
    /* Ready when every worker has answered the start-up handshake. */
    bool *part = g_alloca(sizeof(bool) * p->nw);
    wfate *fate = g_alloca(sizeof(wfate) * p->nw);
    int *status = g_alloca(sizeof(int) * p->nw);
    for (size_t b = 0; b < p->nw; b++)
        part[b] = true;
    /* A re-exec'd worker's start-up runs the env's own imports and constructor: at least PROCS_START_S, or
     * step_timeout when that is longer, or none when step_timeout = 0 says to wait forever. */
    double start_to = !p->re ? 30.0 : x->o.step_timeout <= 0 ? 0.0
                      : x->o.step_timeout > PROCS_START_S ? x->o.step_timeout : PROCS_START_S;
    wait_job(p, part, 0, start_to, fate, status);
    for (size_t b = 0; b < p->nw; b++) {
        char rb[64], what[300];
        env_range(x, b, rb, sizeof rb);
        if (fate[b] == WF_OK && p->slots[b].code) {
            /* A re-exec'd worker that could not make its instances says why. */
            int code = crl_error_set(err, p->slots[b].code, "executor = processes: worker %zu (%s of %s) could not "
                                     "start: %s", b, rb, env_label(x, lb, sizeof lb), p->slots[b].msg);
            stop_workers(p);
            procs_free(p);
            x->kstate = NULL;
            return code;
        }
        if (fate[b] == WF_OK)
            continue;
        describe(fate[b], status[b], start_to, what, sizeof what);
        int code = crl_error_set(err, fate[b] == WF_HUNG ? CRL_E_TIMEOUT : CRL_E_CRASH,
                                 "executor = processes: worker %zu (%s of %s) %s while starting", b, rb,
                                 env_label(x, lb, sizeof lb), what);
        stop_workers(p);
        procs_free(p);
        x->kstate = NULL;
        return code;
    }
    return CRL_OK;
}

/* Policy restart: a new worker for block b, forked from the parent's
 * pristine instances; it resets its envs before it reports ready. */
static int restart_block(crl__exec *x, procs *p, size_t b, uint32_t g, crl_error *err)
{
    char lb[300], rb[64];
    env_range(x, b, rb, sizeof rb);
    bool *part = g_alloca(sizeof(bool) * p->nw);
    wfate *fate = g_alloca(sizeof(wfate) * p->nw);
    int *status = g_alloca(sizeof(int) * p->nw);
    for (size_t j = 0; j < p->nw; j++)
        part[j] = j == b;
    for (;;) {
        if (p->restarts >= x->o.max_restarts)
            return crl_error_set(err, CRL_E_RUNTIME, "no restart left for the worker of %s of %s: the restart "
                                 "limit max_restarts = %lld is used up (%lld restarts so far); raise max_restarts "
                                 "or fix the backend", rb, env_label(x, lb, sizeof lb),
                                 (long long)x->o.max_restarts, (long long)p->restarts);
        p->restarts++;
        atomic_store(&p->ctl->left, 1);
        atomic_store_explicit(&p->slots[b].done, g - 1, memory_order_relaxed);
        fflush(NULL);
        if (spawn(x, p, b, g, true) < 0) {
            int e = errno;
            return crl_error_set(err, CRL_E_IO, "executor = processes: cannot fork a new worker for %s of %s: %s",
                                 rb, env_label(x, lb, sizeof lb), g_strerror(e));
        }
        double to = x->o.step_timeout;
        if (p->re && to > 0)
            to += PROCS_START_S;
        wait_job(p, part, g, to, fate, status);
        if (fate[b] == WF_OK) {
            if (p->slots[b].code)
                return crl_error_set(err, p->slots[b].code, "executor = processes: the new worker of %s could "
                                     "not reset them: %s", rb, p->slots[b].msg);
            for (int64_t i = x->blocks[b].start; i < x->blocks[b].start + x->blocks[b].count; i++)
                x->restarted[i] = true;
            x->any_restarted = true;
            return CRL_OK;
        }
        /* The replacement failed too: that uses up another restart. */
    }
}

/* The workers' state, or an error saying why there are none to use. */
static procs *usable(crl__exec *x, crl_error *err)
{
    procs *p = x->kstate;
    char lb[300];
    if (!p)
        crl_error_set(err, CRL_E_INVALID, "executor = processes: %s has no workers (not started, or already "
                      "stopped)", env_label(x, lb, sizeof lb));
    else if (p->failed)
        crl_error_set(err, CRL_E_INVALID, "executor = processes: %s is unusable since a worker failed (%s); free "
                      "the env and make a new one, or set on_worker_failure = restart", env_label(x, lb, sizeof lb),
                      p->fail.message);
    else
        return p;
    return NULL;
}

/* Run the job the control page holds on every worker; failures by policy. */
static int dispatch(crl__exec *x, procs *p, crl_error *err)
{
    procs_ctl *c = p->ctl;
    char lb[300];
    atomic_store(&c->left, (uint32_t)p->nw);
    uint32_t g = atomic_fetch_add(&c->gen, 1) + 1;
    if (atomic_load(&c->sleepers))
        futex(&c->gen, FUTEX_WAKE, INT_MAX, NULL);
    bool *part = g_alloca(sizeof(bool) * p->nw);
    wfate *fate = g_alloca(sizeof(wfate) * p->nw);
    int *status = g_alloca(sizeof(int) * p->nw);
    for (size_t b = 0; b < p->nw; b++)
        part[b] = true;
    double to = x->o.step_timeout;
    wait_job(p, part, g, to, fate, status);
    int rc = CRL_OK;
    for (size_t b = 0; b < p->nw; b++) {
        if (fate[b] == WF_OK)
            continue;
        char rb[64], what[300];
        env_range(x, b, rb, sizeof rb);
        describe(fate[b], status[b], to, what, sizeof what);
        crl_error e = { 0 };
        crl_error_set(&e, fate[b] == WF_HUNG ? CRL_E_TIMEOUT : CRL_E_CRASH,
                      "executor = processes: the worker of %s of %s %s during %s (worker %zu of %zu)", rb,
                      env_label(x, lb, sizeof lb), what, job_name(c->job), b, p->nw);
        if (x->o.on_failure == CRL__FAIL_RESTART) {
            crl_error re = { 0 };
            if (!restart_block(x, p, b, g, &re))
                continue;
            crl_error both = { 0 };
            crl_error_set(&both, re.code == CRL_E_RUNTIME ? e.code : re.code, "%s; %s", e.message, re.message);
            return fail_all(p, err, &both);
        }
        crl_error why = { 0 };
        crl_error_set(&why, e.code, "%s; the env is unusable now (on_worker_failure = fail)", e.message);
        return fail_all(p, err, &why);
    }
    /* Ordinary errors from the backends: the first failing block's. */
    if (c->job == PROCS_JOB_RENDER) {
        for (size_t b = 0; b < p->nw; b++)
            if (p->slots[b].code && rc == CRL_OK)
                rc = crl_error_set(err, p->slots[b].code, "%s", p->slots[b].msg);
        return rc;
    }
    for (size_t b = 0; b < p->nw; b++) {
        int code = p->slots[b].code;
        if (x->block_err) {
            crl_error_clear(&x->block_err[b]);
            if (code)
                crl_error_set(&x->block_err[b], code, "%s", p->slots[b].msg);
        }
        if (code && rc == CRL_OK)
            rc = crl_error_set(err, code, "%s", p->slots[b].msg);
    }
    return rc;
}

static int procs_run(crl__exec *x, crl_error *err)
{
    procs *p = usable(x, err);
    if (!p)
        return CRL_E_INVALID;   /* usable's only code */
    procs_ctl *c = p->ctl;
    c->job = (uint32_t)x->job;
    c->from_state = x->from_state;
    c->has_mask = x->mask != NULL;
    c->has_seeds = x->seeds != NULL;
    if (x->mask)
        memcpy(p->mask, x->mask, sizeof(bool) * (size_t)x->num);
    if (x->seeds)
        memcpy(p->seeds, x->seeds, sizeof(uint64_t) * (size_t)x->num);
    return dispatch(x, p, err);
}

int crl__exec_procs_render(crl__exec *x, int64_t i, uint8_t *rgb, crl_error *err)
{
    procs *p = usable(x, err);
    if (!p)
        return CRL_E_INVALID;   /* usable's only code */
    char lb[300];
    if (!p->frame)
        return crl_error_set(err, CRL_E_UNSUPPORTED, "executor = processes: %s cannot render",
                             env_label(x, lb, sizeof lb));
    if (i < 0 || i >= x->num)
        return crl_error_set(err, CRL_E_RANGE, "executor = processes: env index %lld is out of range (0..%lld)",
                             (long long)i, (long long)(x->num - 1));
    /* A worker restarted during the render drew nothing: draw again. */
    for (int attempt = 0; attempt < 2; attempt++) {
        p->ctl->job = PROCS_JOB_RENDER;
        p->ctl->render_env = i;
        bool was = x->restarted[i];
        x->restarted[i] = false;
        int rc = dispatch(x, p, err);
        bool again = x->restarted[i];
        x->restarted[i] = was || again;
        if (rc)
            return rc;
        if (!again) {
            memcpy(rgb, p->frame, p->frame_bytes);
            return CRL_OK;
        }
    }
    return crl_error_set(err, CRL_E_RUNTIME, "executor = processes: the worker of env %lld of %s failed twice "
                         "while rendering it", (long long)i, env_label(x, lb, sizeof lb));
}

static void procs_stop(crl__exec *x)
{
    procs *p = x->kstate;
    if (!p)
        return;
    stop_workers(p);
    /* Re-exec'd workers close their own envs at quit: a close that failed there is reported here, since the
     * host's close has no error to return. */
    for (size_t b = 0; p->re && !p->failed && b < p->nw; b++) {
        int st = p->quit_status[b];
        if (st == 0)
            continue;
        char lb[300], rb[64], what[CRL_ERROR_MESSAGE_MAX + 16];
        env_range(x, b, rb, sizeof rb);
        if (st == PROCS_QUIT_HUNG)
            snprintf(what, sizeof what, "did not exit within 2 s and was killed");
        else if (WIFEXITED(st) && WEXITSTATUS(st) == PROCS_EXIT_CLOSE)
            snprintf(what, sizeof what, "reported: %s", p->slots[b].msg);
        else
            describe(WF_DIED, st, 0, what, sizeof what);
        crl_host_log(x->host, CRL_LOG_WARNING, "executor = processes: worker %zu (%s of %s) failed while closing "
                     "its envs: it %s", b, rb, env_label(x, lb, sizeof lb), what);
    }
    procs_free(p);
    x->kstate = NULL;
}

const crl__exec_kind crl__exec_kind_processes = { "processes", procs_start, procs_run, procs_stop };

/* Restarts so far (0 for other kinds). */
int64_t crl__exec_procs_restarts(const crl__exec *x)
{
    return x && x->kind == &crl__exec_kind_processes && x->kstate ? ((const procs *)x->kstate)->restarts : 0;
}

/* env.c, right after the backend's step returned: envs whose worker was
 * replaced hold the fresh reset observation the new worker wrote; their
 * episodes end there, truncated (reward 0), and env.c's done handling then
 * treats them as any ended env (reset them, or auto-reset).  Restarts
 * during a reset job are reported at the next step. */
void crl__exec_mark_restarted(crl__exec *x, crl_env *env)
{
    if (!x || !x->any_restarted)
        return;
    for (int64_t i = 0; i < env->num; i++) {
        if (!x->restarted[i])
            continue;
        env->term_p[i] = 0;
        env->trunc_p[i] = 1;
        for (size_t j = 0; j < env->nleaves; j++) {
            crl__env_leaf *l = &env->leaves[j];
            if (l->role == CRL__ROLE_REWARD)
                memset(l->bdata + (size_t)i * l->row_bytes, 0, l->row_bytes);
        }
        x->restarted[i] = false;
    }
    x->any_restarted = false;
}

/* Defined here (not in exec.c): only processes needs the host's buffers in
 * MAP_SHARED memory, which forked workers write and the parent reads. */
bool crl__exec_wants_shared_buffers(const crl__exec_opts *xo)
{
    return xo && xo->kind == CRL__EXEC_PROCESSES;
}
