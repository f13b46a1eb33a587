/* Check suite: the processes executor (worker protocol, crash/hang/exit detection, restarts, clean shutdown) and faultenv through crl_env. */
#include "config.h"

#include <check.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <glib.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <crl/crl.h>
#include <crl/env.h>
#include <crl/host.h>

#include "exec-private.h"
#include "keep-cairo.h"

/* ---- the protocol, with a stand-in run_block ------------------------------------------------
 *
 * core/exec_procs.c is compiled into this test; crl__exec_run_block below
 * plays the common layer: env i's "buffer" is shared[i]; a reset sets it to
 * its seed (or 1000), a step adds 1, and fault[i] makes env i's step crash,
 * hang, exit or fail (fault[i] is cleared first, so a replacement is fine). */

enum { F_NONE, F_SEGV, F_HANG, F_EXIT, F_ERROR, F_SPIN };

/* CPU time of the calling thread: it stands still while the process is stopped. */
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int64_t *shared;
static int *fault;

static bool under_valgrind(void)
{
    const char *v = getenv("CRL_TEST_VALGRIND");
    return v && *v == '1';
}

int crl__exec_run_block(crl__exec *x, size_t b, crl_error *err)
{
    const crl__exec_block *bl = &x->blocks[b];
    for (int64_t i = bl->start; i < bl->start + bl->count; i++) {
        if (x->job == CRL__JOB_RESET) {
            if (!x->mask || x->mask[i])
                shared[i] = x->seeds ? (int64_t)x->seeds[i] : 1000;
            continue;
        }
        int f = fault[i];
        fault[i] = F_NONE;
        if (f == F_SEGV)
            raise(SIGSEGV);
        if (f == F_HANG)
            for (;;)
                pause();
        if (f == F_EXIT)
            _exit(7);
        if (f == F_ERROR)
            return crl_error_set(err, CRL_E_RANGE, "stand-in: env %lld refuses to step", (long long)i);
        if (f == F_SPIN)
            for (double t0 = cpu_s(); cpu_s() - t0 < 0.3;)
                ;
        shared[i] += 1;
    }
    return CRL_OK;
}

static int count_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    ck_assert_ptr_nonnull(d);
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

/* No child of ours is left, dead or alive. */
static void assert_no_children(void)
{
    errno = 0;
    pid_t r = waitpid(-1, NULL, WNOHANG);
    ck_assert_msg(r == -1 && errno == ECHILD, "a child is left (waitpid = %d, errno = %d)", (int)r, errno);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct drv {
    crl__exec x;
    int fds_before;
} drv;

/* nb workers of per envs each. */
static void drv_open(drv *d, size_t nb, int64_t per, crl__exec_failure pol, int64_t max_restarts, double timeout)
{
    memset(d, 0, sizeof *d);
    if (!shared) {
        shared = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        fault = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        ck_assert(shared != MAP_FAILED && fault != MAP_FAILED);
    }
    memset(shared, 0, 1 << 16);
    memset(fault, 0, 1 << 16);
    d->fds_before = count_fds();
    crl__exec *x = &d->x;
    x->num = (int64_t)nb * per;
    x->nblocks = nb;
    x->blocks = g_new0(crl__exec_block, nb);
    for (size_t b = 0; b < nb; b++) {
        x->blocks[b].start = (int64_t)b * per;
        x->blocks[b].count = per;
    }
    x->restarted = g_new0(bool, (size_t)x->num);
    x->block_err = g_new0(crl_error, nb);
    x->o.kind = CRL__EXEC_PROCESSES;
    x->o.on_failure = pol;
    x->o.max_restarts = max_restarts;
    x->o.step_timeout = timeout;
    x->kind = &crl__exec_kind_processes;
    crl_error e = { 0 };
    int rc = x->kind->start(x, &e);
    ck_assert_msg(rc == CRL_OK, "start: %s", e.message);
}

static int drv_run(drv *d, crl__exec_job job, crl_error *e)
{
    d->x.job = job;
    crl_error_clear(e);
    return d->x.kind->run(&d->x, e);
}

static void drv_close(drv *d)
{
    d->x.kind->stop(&d->x);
    d->x.kind->stop(&d->x);  /* idempotent */
    ck_assert_ptr_null(d->x.kstate);
    assert_no_children();
    ck_assert_int_eq(count_fds(), d->fds_before);
    g_free(d->x.blocks);
    g_free(d->x.restarted);
    g_free(d->x.block_err);
}

/* step_timeout for runs that inject a hang: the test waits this long for each.  A normal step (microseconds)
 * or a worker's restart (fork and reset, milliseconds) within the same run must fit in it on a loaded
 * machine, hence seconds. */
static double hang_timeout(void)
{
    return under_valgrind() ? 10.0 : 2.0;
}

/* step_timeout for runs where nothing hangs: only a wedged test ever reaches it. */
#define NO_HANG_TIMEOUT 120.0

START_TEST(proto_steps_and_masks)
{
    drv d;
    drv_open(&d, 3, 2, CRL__FAIL_FAIL, 0, 0);
    crl_error e = { 0 };
    ck_assert_int_eq(drv_run(&d, CRL__JOB_RESET, &e), CRL_OK);
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(shared[i], 1000);
    for (int k = 0; k < 50; k++)
        ck_assert_int_eq(drv_run(&d, CRL__JOB_STEP, &e), CRL_OK);
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(shared[i], 1050);
    /* A partial reset with seeds reaches exactly the masked envs. */
    bool mask[6] = { false, true, false, false, true, false };
    uint64_t seeds[6] = { 10, 11, 12, 13, 14, 15 };
    d.x.mask = mask;
    d.x.seeds = seeds;
    ck_assert_int_eq(drv_run(&d, CRL__JOB_RESET, &e), CRL_OK);
    d.x.mask = NULL;
    d.x.seeds = NULL;
    int64_t want[6] = { 1050, 11, 1050, 1050, 14, 1050 };
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(shared[i], want[i]);
    /* An ordinary backend error is the failing block's, and the env goes on. */
    fault[3] = F_ERROR;
    ck_assert_int_eq(drv_run(&d, CRL__JOB_STEP, &e), CRL_E_RANGE);
    ck_assert_str_eq(e.message, "stand-in: env 3 refuses to step");
    ck_assert_int_eq(d.x.block_err[1].code, CRL_E_RANGE);
    ck_assert_int_eq(d.x.block_err[0].code, CRL_OK);
    ck_assert_int_eq(drv_run(&d, CRL__JOB_STEP, &e), CRL_OK);
    ck_assert_int_eq(shared[3], 1051);
    ck_assert(!d.x.any_restarted);
    drv_close(&d);
}
END_TEST

/* Start-up: 8 workers answer the handshake and then run a job (the start-up
 * time itself is measured by `crl bench batched`, not asserted here). */
START_TEST(proto_startup)
{
    drv d;
    drv_open(&d, 8, 1, CRL__FAIL_FAIL, 0, 0);
    crl_error e = { 0 };
    ck_assert_int_eq(drv_run(&d, CRL__JOB_RESET, &e), CRL_OK);
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(shared[i], 1000);
    drv_close(&d);
}
END_TEST

/* Policy fail: each fault is an error naming the envs and the signal or status, and the env is unusable after. */
static void fail_case(int f, int code, const char *what)
{
    drv d;
    drv_open(&d, 4, 2, CRL__FAIL_FAIL, 0, f == F_HANG ? hang_timeout() : NO_HANG_TIMEOUT);
    crl_error e = { 0 };
    ck_assert_int_eq(drv_run(&d, CRL__JOB_RESET, &e), CRL_OK);
    fault[5] = f;
    ck_assert_int_eq(drv_run(&d, CRL__JOB_STEP, &e), code);
    ck_assert_msg(strstr(e.message, "envs 4-5") && strstr(e.message, what) && strstr(e.message, "during step") &&
                  strstr(e.message, "on_worker_failure = fail"), "%s", e.message);
    /* Every worker is gone at once, none left as a zombie. */
    assert_no_children();
    /* The other blocks finished their step. */
    ck_assert_int_eq(shared[0], 1001);
    ck_assert_int_eq(shared[7], 1001);
    ck_assert_int_eq(drv_run(&d, CRL__JOB_STEP, &e), CRL_E_INVALID);
    ck_assert_msg(strstr(e.message, "unusable") && strstr(e.message, what), "%s", e.message);
    drv_close(&d);
}

START_TEST(proto_fail_crash)
{
    fail_case(F_SEGV, CRL_E_CRASH, "killed by signal 11 (Segmentation fault)");
}
END_TEST

START_TEST(proto_fail_exit)
{
    fail_case(F_EXIT, CRL_E_CRASH, "exited with status 7");
}
END_TEST

START_TEST(proto_fail_hang)
{
    double t0 = now();
    fail_case(F_HANG, CRL_E_TIMEOUT, "did not finish within step_timeout");
    /* No upper bound: how soon a loaded machine gets round to it is not the executor's doing. */
    ck_assert(now() - t0 >= hang_timeout());
}
END_TEST

/* Send sig to process `pid` and to each of its children but the caller (the workers of the test's executor). */
static void signal_family(pid_t pid, int sig)
{
    DIR *d = opendir("/proc");
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        pid_t c = (pid_t)atoi(de->d_name);
        if (c <= 0 || c == getpid())
            continue;
        char path[64], buf[512];
        snprintf(path, sizeof path, "/proc/%d/stat", (int)c);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = '\0';
        const char *rp = strrchr(buf, ')');   /* "pid (comm) state ppid ..." */
        int ppid = 0;
        char state;
        if (rp && sscanf(rp + 1, " %c %d", &state, &ppid) == 2 && ppid == (int)pid)
            kill(c, sig);
    }
    closedir(d);
    kill(pid, sig);
}

/* The whole process stopped (Ctrl-Z, then fg) for longer than step_timeout, in the middle of a step, is no
 * hang: once it goes on, the workers get a whole step_timeout again and the step finishes.  The step spins
 * on CPU time, which stands still while stopped, so it is unfinished when the pause ends. */
START_TEST(proto_pause_is_no_hang)
{
    drv d;
    double to = hang_timeout();
    drv_open(&d, 2, 1, CRL__FAIL_FAIL, 0, to);
    crl_error e = { 0 };
    ck_assert_int_eq(drv_run(&d, CRL__JOB_RESET, &e), CRL_OK);
    fault[1] = F_SPIN;
    pid_t me = getpid();
    pid_t helper = fork();
    ck_assert_int_ge(helper, 0);
    if (helper == 0) {
        struct timespec soon = { 0, 100 * 1000 * 1000 }, pause = { (time_t)(2 * to) + 1, 0 };
        nanosleep(&soon, NULL);
        signal_family(me, SIGSTOP);
        nanosleep(&pause, NULL);
        signal_family(me, SIGCONT);
        _exit(0);
    }
    int rc = drv_run(&d, CRL__JOB_STEP, &e);
    int st;
    ck_assert_int_eq(waitpid(helper, &st, 0), helper);
    ck_assert_msg(rc == CRL_OK, "a pause counted as a hang: %s", e.message);
    ck_assert_int_eq(shared[0], 1001);
    ck_assert_int_eq(shared[1], 1001);
    drv_close(&d);
}
END_TEST

/* Policy restart: the block comes back reset, flagged, counted; the limit holds. */
START_TEST(proto_restart)
{
    drv d;
    drv_open(&d, 4, 2, CRL__FAIL_RESTART, 3, hang_timeout());
    crl_error e = { 0 };
    ck_assert_int_eq(drv_run(&d, CRL__JOB_RESET, &e), CRL_OK);
    int faults[3] = { F_SEGV, F_HANG, F_EXIT };
    for (int k = 0; k < 3; k++) {
        ck_assert_int_eq(drv_run(&d, CRL__JOB_STEP, &e), CRL_OK);
        memset(d.x.restarted, 0, sizeof(bool) * 8);
        d.x.any_restarted = false;
        fault[2] = faults[k];
        ck_assert_msg(drv_run(&d, CRL__JOB_STEP, &e) == CRL_OK, "fault %d: %s", faults[k], e.message);
        ck_assert(d.x.any_restarted);
        for (int i = 0; i < 8; i++)
            ck_assert_int_eq(d.x.restarted[i], i == 2 || i == 3);
        /* The replacement reset its envs; the others stepped twice. */
        ck_assert_int_eq(shared[2], 1000);
        ck_assert_int_eq(shared[3], 1000);
        ck_assert_int_eq(shared[0], 1002);
        ck_assert_int_eq(crl__exec_procs_restarts(&d.x), k + 1);
        /* The new worker steps like the old one. */
        ck_assert_int_eq(drv_run(&d, CRL__JOB_RESET, &e), CRL_OK);
        ck_assert_int_eq(shared[0], 1000);
    }
    /* The fourth failure is past max_restarts = 3. */
    fault[6] = F_SEGV;
    ck_assert_int_eq(drv_run(&d, CRL__JOB_STEP, &e), CRL_E_CRASH);
    ck_assert_msg(strstr(e.message, "envs 6-7") && strstr(e.message, "signal 11") &&
                  strstr(e.message, "max_restarts = 3"), "%s", e.message);
    assert_no_children();
    ck_assert_int_eq(drv_run(&d, CRL__JOB_STEP, &e), CRL_E_INVALID);
    drv_close(&d);
}
END_TEST

/* max_restarts = 0 with restart: the first failure is the error. */
START_TEST(proto_restart_zero)
{
    drv d;
    drv_open(&d, 2, 1, CRL__FAIL_RESTART, 0, 0);
    crl_error e = { 0 };
    ck_assert_int_eq(drv_run(&d, CRL__JOB_RESET, &e), CRL_OK);
    fault[1] = F_EXIT;
    ck_assert_int_eq(drv_run(&d, CRL__JOB_STEP, &e), CRL_E_CRASH);
    ck_assert_msg(strstr(e.message, "env 1 ") && strstr(e.message, "exited with status 7") &&
                  strstr(e.message, "max_restarts = 0"), "%s", e.message);
    drv_close(&d);
}
END_TEST

/* A worker killed from outside while idle is found at the next job. */
START_TEST(proto_killed_idle)
{
    drv d;
    drv_open(&d, 2, 1, CRL__FAIL_FAIL, 0, 0);
    crl_error e = { 0 };
    ck_assert_int_eq(drv_run(&d, CRL__JOB_RESET, &e), CRL_OK);
    /* Find worker 1 among our children: the only way in from here is the kind's state. */
    pid_t victim = 0;
    char path[300];
    DIR *dir = opendir("/proc");
    struct dirent *de;
    while ((de = readdir(dir)) && !victim) {
        snprintf(path, sizeof path, "/proc/%s/stat", de->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        int pid = 0, ppid = 0;
        char st;
        if (fscanf(f, "%d %*s %c %d", &pid, &st, &ppid) == 3 && ppid == getpid())
            victim = pid;
        fclose(f);
    }
    closedir(dir);
    ck_assert_int_gt(victim, 0);
    kill(victim, SIGTERM);
    ck_assert_int_eq(drv_run(&d, CRL__JOB_STEP, &e), CRL_E_CRASH);
    ck_assert_msg(strstr(e.message, "signal 15"), "%s", e.message);
    drv_close(&d);
}
END_TEST

/* A backend whose plugin links libpython is refused before any fork. */
START_TEST(proto_refuses_python)
{
    crl__exec x = { 0 };
    crl__exec_block bl = { 0, 1, 0, 1 };
    bool restarted = false;
    x.num = 1;
    x.nblocks = 1;
    x.blocks = &bl;
    x.restarted = &restarted;
    x.kind = &crl__exec_kind_processes;
    crl_error e = { 0 };
    /* libcrl links no Python: workers start. */
    void *fn = (void *)crl_error_set;
    memcpy(&x.real.make, &fn, sizeof fn);
    ck_assert_msg(x.kind->start(&x, &e) == CRL_OK, "%s", e.message);
    x.kind->stop(&x);
    assert_no_children();
#ifdef HAVE_PYTHON
    /* The gym plugin does. */
    char *path = g_strdup_printf("%s/../plugins/gym/.libs/gym.so", TEST_BUILDDIR);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(h != NULL, "%s: %s", path, dlerror());
    void *sym = dlsym(h, "crl_plugin_v1");
    ck_assert_ptr_nonnull(sym);
    memcpy(&x.real.make, &sym, sizeof sym);
    ck_assert_int_eq(x.kind->start(&x, &e), CRL_E_UNSUPPORTED);
    ck_assert_msg(strstr(e.message, "embeds CPython") && strstr(e.message, "libpython") &&
                  strstr(e.message, "executor = threads"), "%s", e.message);
    ck_assert_ptr_null(x.kstate);
    assert_no_children();
    g_free(path);  /* gym.so stays loaded: unloading libpython is not safe */
#endif
}
END_TEST

/* Stand-in render: byte 0 = env i's value, byte 1 = drawn outside the parent. */
static pid_t render_parent;
static int stand_in_render(void *benv, int64_t li, uint8_t *rgb, crl_error *err)
{
    int64_t i = *(const int64_t *)benv + li;  /* benv: the instance's first env */
    if (i == 5)
        return crl_error_set(err, CRL_E_RANGE, "stand-in: env %lld cannot draw", (long long)i);
    rgb[0] = (uint8_t)shared[i];
    rgb[1] = getpid() != render_parent;
    return CRL_OK;
}

static crl_env *countenv_for_dims(crl_config **cfg, crl_host **host);

/* Render runs in the worker that owns the env (the parent's copy was never stepped). */
START_TEST(proto_render)
{
    crl_config *cfg;
    crl_host *host;
    crl_env *dims = countenv_for_dims(&cfg, &host);  /* Count-v0 renders 6 x 8 */
    render_parent = getpid();
    drv d;
    memset(&d, 0, sizeof d);
    /* drv_open with a render function and an env for the frame size. */
    shared = shared ? shared : mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    fault = fault ? fault : mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    memset(fault, 0, 1 << 16);
    d.fds_before = count_fds();
    crl__exec *x = &d.x;
    crl__exec_inst inst[3];
    memset(inst, 0, sizeof inst);
    x->num = 6;
    x->nblocks = 3;
    x->blocks = g_new0(crl__exec_block, 3);
    for (size_t b = 0; b < 3; b++) {
        x->blocks[b] = (crl__exec_block){ b, 1, (int64_t)b * 2, 2 };
        inst[b].start = (int64_t)b * 2;
        inst[b].count = 2;
        inst[b].benv = &inst[b].start;
    }
    x->inst = inst;
    x->ninst = 3;
    x->restarted = g_new0(bool, 6);
    x->block_err = g_new0(crl_error, 3);
    x->real.render = stand_in_render;
    x->env = dims;
    x->kind = &crl__exec_kind_processes;
    crl_error e = { 0 };
    ck_assert_int_eq(x->kind->start(x, &e), CRL_OK);
    ck_assert_int_eq(drv_run(&d, CRL__JOB_RESET, &e), CRL_OK);
    for (int k = 0; k < 3; k++)
        ck_assert_int_eq(drv_run(&d, CRL__JOB_STEP, &e), CRL_OK);
    uint8_t frame[6 * 8 * 3];
    memset(frame, 0xee, sizeof frame);
    ck_assert_msg(crl__exec_procs_render(x, 3, frame, &e) == CRL_OK, "%s", e.message);
    ck_assert_int_eq(frame[0], (uint8_t)1003);
    ck_assert_int_eq(frame[1], 1);
    ck_assert_int_eq(crl__exec_procs_render(x, 5, frame, &e), CRL_E_RANGE);
    ck_assert_str_eq(e.message, "stand-in: env 5 cannot draw");
    ck_assert_int_eq(crl__exec_procs_render(x, 6, frame, &e), CRL_E_RANGE);
    ck_assert_msg(strstr(e.message, "out of range"), "%s", e.message);
    /* Later jobs are unaffected. */
    ck_assert_int_eq(drv_run(&d, CRL__JOB_STEP, &e), CRL_OK);
    ck_assert_int_eq(shared[3], 1004);
    x->inst = NULL;
    drv_close(&d);
    crl_env_free(dims);
    crl_host_free(host);
    crl_config_free(cfg);
}
END_TEST

/* ---- through crl_env: faultenv and the classic envs ----------------------------------------- */

typedef struct fx {
    crl_config *cfg;
    crl_host *host;
} fx;

static void fx_open(fx *f)
{
    memset(f, 0, sizeof *f);
    crl_error e = { 0 };
    f->cfg = crl_config_new(&e);
    ck_assert_ptr_nonnull(f->cfg);
    const char *text = "[plugins]\nload = faultenv, countenv, classic\n";
    int rc = crl_config_load_buffer(f->cfg, "test.ini", text, strlen(text), CRL_LAYER_FILE, &e);
    ck_assert_msg(rc == CRL_OK, "config: %s", e.message);
    f->host = crl_host_new(f->cfg, &e);
    ck_assert_ptr_nonnull(f->host);
    rc = crl_host_load_configured(f->host, &e);
    ck_assert_msg(rc == CRL_OK, "loading the plugins: %s", e.message);
}

static void fx_close(fx *f)
{
    crl_host_free(f->host);
    crl_config_free(f->cfg);
}

static crl_env *env_new(fx *f, const char *section, const char *lines)
{
    crl_error e = { 0 };
    char *text = g_strdup_printf("[%s]\n%s\n", section, lines);
    int rc = crl_config_load_buffer(f->cfg, section, text, strlen(text), CRL_LAYER_FILE, &e);
    g_free(text);
    ck_assert_msg(rc == CRL_OK, "config: %s", e.message);
    crl_env *env = crl_env_from_config(f->host, f->cfg, section, &e);
    ck_assert_msg(env != NULL, "crl_env_from_config [%s]: %s", section, e.message);
    return env;
}

static void set_actions(crl_td *td, const int64_t *a, int64_t n)
{
    crl_tensor *t = crl_tensor_new(CRL_I64, 1, &n, NULL);
    memcpy(crl_tensor_data(t), a, sizeof(int64_t) * (size_t)n);
    ck_assert_int_eq(crl_td_set(td, "action", t, NULL), CRL_OK);
    crl_tensor_unref(t);
}

static const uint8_t *next_flag(crl_td *td, const char *key)
{
    char k[64];
    snprintf(k, sizeof k, "next.%s", key);
    crl_tensor *t = crl_td_get(td, k);
    ck_assert_ptr_nonnull(t);
    return crl_tensor_data(t);
}

static crl_env *countenv_for_dims(crl_config **cfg, crl_host **host)
{
    fx f;
    fx_open(&f);
    crl_env *env = env_new(&f, "dims", "backend = countenv\nid = Count-v0\nnum_envs = 6\n");
    *cfg = f.cfg;
    *host = f.host;
    return env;
}

/* faultenv itself: normal steps count; in the process that made it a fault
 * request is an error, never a crash; a bad crash_signal is named. */
START_TEST(env_faultenv_inline)
{
    fx f;
    fx_open(&f);
    crl_env *env = env_new(&f, "inl", "backend = faultenv\nid = Fault-v0\nnum_envs = 3\n");
    crl_error e = { 0 };
    crl_td *td = crl_env_reset(env, NULL, &e);
    ck_assert_msg(td != NULL, "%s", e.message);
    int64_t ok[3] = { 0, 1, 1 };
    for (int k = 0; k < 3; k++) {
        set_actions(td, ok, 3);
        ck_assert_msg(crl_env_step(env, td, &e) == CRL_OK, "%s", e.message);
    }
    const float *obs = crl_tensor_data(crl_td_get(td, "next.observation"));
    for (int i = 0; i < 3; i++) {
        ck_assert_float_eq(obs[2 * i], 3.0f);
        ck_assert_float_eq(obs[2 * i + 1], 3.0f);
    }
    for (int64_t a = 2; a <= 4; a++) {
        int64_t acts[3] = { 0, a, 0 };
        set_actions(td, acts, 3);
        ck_assert_int_eq(crl_env_step(env, td, &e), CRL_E_RUNTIME);
        ck_assert_msg(strstr(e.message, "env 1 was asked to") && strstr(e.message, "executor = processes"), "%s",
                      e.message);
    }
    crl_td_unref(td);
    crl_env_free(env);
    crl_error_clear(&e);
    char text[] = "[bad]\nbackend = faultenv\nid = Fault-v0\ncrash_signal = TERM\n";
    ck_assert_int_eq(crl_config_load_buffer(f.cfg, "bad.ini", text, strlen(text), CRL_LAYER_FILE, &e), CRL_OK);
    ck_assert_ptr_null(crl_env_from_config(f.host, f.cfg, "bad", &e));
    ck_assert_msg(strstr(e.message, "crash_signal"), "%s", e.message);
    fx_close(&f);
}
END_TEST

START_TEST(env_fault_fail)
{
    fx f;
    fx_open(&f);
    int fds = count_fds();
    char lines[256];
    snprintf(lines, sizeof lines, "backend = faultenv\nid = Fault-v0\nnum_envs = 4\nexecutor = processes\n"
             "num_workers = 2\nstep_timeout = %g\nauto_reset = next_step\n", NO_HANG_TIMEOUT);
    crl_env *env = env_new(&f, "env", lines);
    crl_error e = { 0 };
    crl_td *td = crl_env_reset(env, NULL, &e);
    ck_assert_msg(td != NULL, "%s", e.message);
    int64_t ok[4] = { 0, 1, 0, 1 }, bad[4] = { 0, 0, 0, 2 };
    set_actions(td, ok, 4);
    ck_assert_msg(crl_env_step(env, td, &e) == CRL_OK, "%s", e.message);
    set_actions(td, bad, 4);
    ck_assert_int_eq(crl_env_step(env, td, &e), CRL_E_CRASH);
    ck_assert_msg(strstr(e.message, "envs 2-3") && strstr(e.message, "signal 11") &&
                  strstr(e.message, "faultenv/Fault-v0"), "%s", e.message);
    assert_no_children();
    set_actions(td, ok, 4);
    ck_assert_int_eq(crl_env_step(env, td, &e), CRL_E_INVALID);
    crl_td_unref(td);
    crl_env_free(env);
    assert_no_children();
    ck_assert_int_eq(count_fds(), fds);
    fx_close(&f);
}
END_TEST

START_TEST(env_fault_restart)
{
    fx f;
    fx_open(&f);
    int fds = count_fds();
    char lines[300];
    snprintf(lines, sizeof lines, "backend = faultenv\nid = Fault-v0\nnum_envs = 4\nexecutor = processes\n"
             "num_workers = 4\nstep_timeout = %g\non_worker_failure = restart\nmax_restarts = 2\n"
             "crash_signal = ABRT\n", hang_timeout());
    crl_env *env = env_new(&f, "env", lines);
    crl_error e = { 0 };
    crl_td *td = crl_env_reset(env, NULL, &e);
    ck_assert_msg(td != NULL, "%s", e.message);
    int64_t ok[4] = { 1, 1, 1, 1 }, hang[4] = { 1, 3, 1, 1 }, crash[4] = { 2, 1, 1, 1 };
    set_actions(td, ok, 4);
    ck_assert_msg(crl_env_step(env, td, &e) == CRL_OK, "%s", e.message);
    set_actions(td, hang, 4);
    ck_assert_msg(crl_env_step(env, td, &e) == CRL_OK, "%s", e.message);
    ck_assert_int_eq(crl_env_restarts(env), 1);
    const uint8_t *tr = next_flag(td, "truncated"), *dn = next_flag(td, "done");
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(tr[i], i == 1);
        ck_assert_int_eq(dn[i], i == 1);
    }
    /* Env 1 holds its reset observation (counter 0); env 0 stepped twice. */
    const float *obs = crl_tensor_data(crl_td_get(td, "next.observation"));
    ck_assert_float_eq(obs[2 * 1], 0.0f);
    ck_assert_float_eq(obs[2 * 0], 2.0f);
    /* auto_reset off: env 1 must be reset before it steps again. */
    set_actions(td, ok, 4);
    ck_assert_int_eq(crl_env_step(env, td, &e), CRL_E_INVALID);
    crl_td_unref(td);
    td = crl_env_reset(env, NULL, &e);
    set_actions(td, crash, 4);
    ck_assert_msg(crl_env_step(env, td, &e) == CRL_OK, "%s", e.message);
    ck_assert_int_eq(crl_env_restarts(env), 2);
    ck_assert_int_eq(next_flag(td, "truncated")[0], 1);
    crl_td_unref(td);
    td = crl_env_reset(env, NULL, &e);
    set_actions(td, crash, 4);
    ck_assert_int_eq(crl_env_step(env, td, &e), CRL_E_CRASH);
    ck_assert_msg(strstr(e.message, "env 0 ") && strstr(e.message, "signal 6") &&
                  strstr(e.message, "max_restarts = 2"), "%s", e.message);
    crl_td_unref(td);
    crl_env_free(env);
    assert_no_children();
    ck_assert_int_eq(count_fds(), fds);
    fx_close(&f);
}
END_TEST

/* Same seed, same rollouts: processes against inline, bitwise, with a partial reset. */
static void equivalence(const char *id, const char *extra)
{
    fx f;
    fx_open(&f);
    int fds = count_fds();
    char a[300], b[400];
    snprintf(a, sizeof a, "backend = classic\nid = %s\nnum_envs = 6\nauto_reset = next_step\n%s", id, extra);
    snprintf(b, sizeof b, "%sexecutor = processes\nnum_workers = 3\n", a);
    crl_env *e1 = env_new(&f, "inl", a), *e2 = env_new(&f, "prc", b);
    crl_error e = { 0 };
    crl_env_set_seed(e1, 7);
    crl_env_set_seed(e2, 7);
    crl_td *t1 = crl_env_reset(e1, NULL, &e), *t2 = crl_env_reset(e2, NULL, &e);
    ck_assert_msg(t1 && t2, "%s", e.message);
    for (int k = 0; k < 60; k++) {
        ck_assert_int_eq(crl_env_rand_action(e1, t1, &e), CRL_OK);
        crl_td_set(t2, "action", crl_td_get(t1, "action"), NULL);
        ck_assert_msg(crl_env_step(e1, t1, &e) == CRL_OK, "%s", e.message);
        ck_assert_msg(crl_env_step(e2, t2, &e) == CRL_OK, "%s", e.message);
        const char *keys[] = { "next.observation", "next.reward", "next.done", "next.truncated" };
        for (size_t j = 0; j < 4; j++) {
            crl_tensor *x1 = crl_td_get(t1, keys[j]), *x2 = crl_td_get(t2, keys[j]);
            ck_assert_msg(x1 && x2 && crl_tensor_nbytes(x1) == crl_tensor_nbytes(x2) &&
                          !memcmp(crl_tensor_data(x1), crl_tensor_data(x2), crl_tensor_nbytes(x1)),
                          "%s differs at step %d", keys[j], k);
        }
        ck_assert_int_eq(crl_env_step_mdp_into(e1, t1, t1, &e), CRL_OK);
        ck_assert_int_eq(crl_env_step_mdp_into(e2, t2, t2, &e), CRL_OK);
        if (k == 20) {
            /* Partial reset of envs 1 and 4. */
            int64_t shp[2] = { 6, 1 };
            for (int w = 0; w < 2; w++) {
                crl_tensor *m = crl_tensor_new(CRL_BOOL, 2, shp, NULL);
                bool *mb = crl_tensor_data(m);
                mb[1] = mb[4] = true;
                crl_td *t = w ? t2 : t1;
                crl_td_set(t, "_reset", m, NULL);
                crl_tensor_unref(m);
                crl_td *r = crl_env_reset(w ? e2 : e1, t, &e);
                ck_assert_msg(r != NULL, "%s", e.message);
                crl_td_unref(r);
            }
        }
    }
    crl_td_unref(t1);
    crl_td_unref(t2);
    crl_env_free(e1);
    crl_env_free(e2);
    assert_no_children();
    ck_assert_int_eq(count_fds(), fds);
    fx_close(&f);
}

START_TEST(env_equivalence_cartpole)
{
    equivalence("CartPole-v1", "");
}
END_TEST

START_TEST(env_equivalence_pendulum)
{
    equivalence("Pendulum-v1", "");
}
END_TEST

static Suite *exec_procs_suite(void)
{
    Suite *s = suite_create("exec_procs");
    TCase *tc = tcase_create("protocol");
    tcase_set_timeout(tc, under_valgrind() ? 300 : 30);
    tcase_add_test(tc, proto_steps_and_masks);
    tcase_add_test(tc, proto_startup);
    tcase_add_test(tc, proto_fail_crash);
    tcase_add_test(tc, proto_fail_exit);
    tcase_add_test(tc, proto_fail_hang);
    tcase_add_test(tc, proto_pause_is_no_hang);
    tcase_add_test(tc, proto_restart);
    tcase_add_test(tc, proto_restart_zero);
    tcase_add_test(tc, proto_killed_idle);
    tcase_add_test(tc, proto_refuses_python);
    tcase_add_test(tc, proto_render);
    suite_add_tcase(s, tc);
    TCase *te = tcase_create("env");
    tcase_set_timeout(te, under_valgrind() ? 300 : 30);
    tcase_add_test(te, env_faultenv_inline);
    tcase_add_test(te, env_fault_fail);
    tcase_add_test(te, env_fault_restart);
    tcase_add_test(te, env_equivalence_cartpole);
    tcase_add_test(te, env_equivalence_pendulum);
    suite_add_tcase(s, te);
    return s;
}

int main(void)
{
    crl_test_keep_cairo();
    SRunner *sr = srunner_create(exec_procs_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
