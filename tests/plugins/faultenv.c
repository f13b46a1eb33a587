/* faultenv: a counting env backend (component env/faultenv) whose step crashes, hangs or exits on request, for the executor fault tests.
 *
 * Env i keeps a counter that starts at 0 and grows by 1 per step.
 *   observation "observation" float32 [num, 2] = (counter, steps since make)
 *   action      "action" int64 Categorical(5) [num]
 *   reward      float32 [num, 1] = 1
 *   terminated  never; truncated never (no time limit of its own)
 * The action picks what env i does inside step:
 *   0, 1  a normal step
 *   2     crash: kill the process with crash_signal (SEGV: a real write
 *         through a null pointer, ABRT: abort(), BUS, KILL: raise)
 *   3     hang: sleep until killed (or until the process that made the env
 *         is gone)
 *   4     _exit(exit_code)
 * A fault fires only in a process other than the one that made the env (a
 * forked worker of executor = processes); in the maker's own process the step
 * returns CRL_E_RUNTIME instead, so a test that gets the executor wrong fails
 * instead of taking the test runner down.  "Fault-v0" is the only id. */
#include <crl/crl.h>
#include <crl/env_backend.h>

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { FAULT_CRASH = 2, FAULT_HANG = 3, FAULT_EXIT = 4, FAULT_NACT = 5 };

static const char *const fault_ids[] = { "Fault-v0", NULL };

typedef struct fault_env {
    int64_t num;
    pid_t maker;
    int crash_signal;
    int exit_code;
    int64_t *counter;
    int64_t steps;
    float *obs;
    const int64_t *action;
    float *reward;
    uint8_t *terminated;
    uint8_t *truncated;
} fault_env;

static const char *const *fault_list(void)
{
    return fault_ids;
}

static void fault_close(void *env)
{
    fault_env *e = env;
    if (!e)
        return;
    free(e->counter);
    free(e);
}

static int signal_of(const char *name)
{
    if (!strcmp(name, "SEGV"))
        return SIGSEGV;
    if (!strcmp(name, "ABRT"))
        return SIGABRT;
    if (!strcmp(name, "BUS"))
        return SIGBUS;
    if (!strcmp(name, "KILL"))
        return SIGKILL;
    return 0;
}

static int fault_make(const char *id, int64_t num, const crl_opts *opts, crl_env_specs *specs, void **env,
                      crl_error *err)
{
    if (strcmp(id, "Fault-v0") != 0)
        return crl_error_set(err, CRL_E_NOT_FOUND, "faultenv: no env '%s' (ids: Fault-v0)", id);
    const char *sig = "SEGV";
    int64_t code = 3;
    if (opts && (crl_opts_string(opts, "crash_signal", &sig, err) || crl_opts_int(opts, "exit_code", &code, err)))
        return err->code;
    int signo = signal_of(sig);
    if (!signo)
        return crl_error_set(err, CRL_E_CONFIG, "faultenv: crash_signal = %s is not one of SEGV, ABRT, BUS, KILL",
                             sig);
    int64_t col[2] = { num, 1 }, obs_shape[2] = { num, 2 };
    specs->observation = crl_spec_composite_of(num, "observation", crl_spec_unbounded(CRL_F32, 2, obs_shape, err), err);
    specs->action = crl_spec_composite_of(num, "action", crl_spec_categorical(FAULT_NACT, CRL_I64, 1, &num, err), err);
    specs->reward = crl_spec_composite_of(num, "reward", crl_spec_unbounded(CRL_F32, 2, col, err), err);
    specs->done = crl_env_backend_done_spec(num, err);
    if (!specs->observation || !specs->action || !specs->reward || !specs->done)
        return err ? err->code : CRL_E_INVALID;
    fault_env *e = calloc(1, sizeof *e);
    if (e)
        e->counter = calloc((size_t)num, sizeof *e->counter);
    if (!e || !e->counter) {
        fault_close(e);
        return crl_error_set(err, CRL_E_NOMEM, "faultenv: out of memory for %lld envs", (long long)num);
    }
    e->num = num;
    e->maker = getpid();
    e->crash_signal = signo;
    e->exit_code = (int)code;
    *env = e;
    return CRL_OK;
}

static void *buffer(crl_td *buffers, const char *key, crl_dtype dt, int *rc, crl_error *err)
{
    if (*rc)
        return NULL;
    crl_tensor *t = crl_td_get(buffers, key);
    if (!t || crl_tensor_dtype(t) != dt || !crl_tensor_is_contiguous(t)) {
        *rc = crl_error_set(err, CRL_E_INVALID, "faultenv: bind: buffer '%s' is missing or not a contiguous %s "
                            "tensor", key, crl_dtype_name(dt));
        return NULL;
    }
    return crl_tensor_data(t);
}

static int fault_bind(void *env, crl_td *buffers, crl_error *err)
{
    fault_env *e = env;
    int rc = CRL_OK;
    e->obs = buffer(buffers, "observation", CRL_F32, &rc, err);
    e->action = buffer(buffers, "action", CRL_I64, &rc, err);
    e->reward = buffer(buffers, "reward", CRL_F32, &rc, err);
    e->terminated = buffer(buffers, "terminated", CRL_BOOL, &rc, err);
    e->truncated = buffer(buffers, "truncated", CRL_BOOL, &rc, err);
    return rc;
}

static void write_outputs(fault_env *e, int64_t i)
{
    e->obs[2 * i] = (float)e->counter[i];
    e->obs[2 * i + 1] = (float)e->steps;
    e->terminated[i] = 0;
    e->truncated[i] = 0;
}

static int fault_reset(void *env, const bool *mask, const uint64_t *seeds, bool from_state, crl_error *err)
{
    fault_env *e = env;
    (void)seeds;
    if (from_state)
        return crl_error_set(err, CRL_E_UNSUPPORTED, "faultenv: Fault-v0 has no state to start from");
    for (int64_t i = 0; i < e->num; i++) {
        if (mask && !mask[i])
            continue;
        e->counter[i] = 0;
        write_outputs(e, i);
    }
    return CRL_OK;
}

/* UBSan would report the null write and exit before the access faults. */
static void __attribute__((noreturn, no_sanitize("undefined"))) crash(fault_env *e)
{
    if (e->crash_signal == SIGSEGV && !getenv("CRL_TEST_VALGRIND")) {
        /* A real invalid access, as a buggy plugin makes (under valgrind a
         * raise keeps the log free of the invalid-write report). */
        volatile int *volatile nowhere = NULL;
        *nowhere = 1;
    }
    if (e->crash_signal == SIGABRT)
        abort();
    raise(e->crash_signal);
    _exit(125);
}

static void __attribute__((noreturn)) hang(fault_env *e)
{
    /* Until the executor kills us; a worker whose parent is gone ends. */
    while (getppid() == e->maker) {
        struct timespec ts = { 0, 10 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    _exit(124);
}

static int fault_step(void *env, crl_error *err)
{
    fault_env *e = env;
    e->steps++;
    for (int64_t i = 0; i < e->num; i++) {
        int64_t a = e->action[i];
        if (a < 0 || a >= FAULT_NACT)
            return crl_error_set(err, CRL_E_RANGE, "faultenv: env %lld got action %lld", (long long)i,
                                 (long long)a);
        if (a >= FAULT_CRASH) {
            if (getpid() == e->maker)
                return crl_error_set(err, CRL_E_RUNTIME, "faultenv: env %lld was asked to %s, which it does "
                                     "only in a worker process (executor = processes), never in the process that "
                                     "made it", (long long)i, a == FAULT_CRASH ? "crash" : a == FAULT_HANG ? "hang"
                                                                                                           : "exit");
            if (a == FAULT_CRASH)
                crash(e);
            if (a == FAULT_HANG)
                hang(e);
            _exit(e->exit_code);
        }
        e->counter[i]++;
        e->reward[i] = 1.0f;
        write_outputs(e, i);
    }
    return CRL_OK;
}

static const crl_env_ops fault_ops = {
    sizeof(crl_env_ops), 0, fault_list, fault_make, fault_bind, fault_reset, fault_step, NULL, fault_close
};

static const crl_option fault_options[] = {
    { "crash_signal", CRL_OPT_ENUM, 0, "SEGV", 0, 0, "SEGV|ABRT|BUS|KILL",
      "how action 2 crashes a worker: SEGV (a null write), ABRT (abort), BUS or KILL" },
    { "exit_code", CRL_OPT_INT, CRL_OPT_RANGE, "3", 0, 255, NULL, "the status action 4 exits a worker with" },
    CRL_OPTIONS_END
};

static const crl_component fault_component = {
    sizeof(crl_component), CRL_KIND_ENV, "faultenv", "envs that crash, hang or exit on request, for tests",
    fault_options, &fault_ops
};

static int fault_init(crl_host *host, const crl_opts *section, crl_error *err)
{
    (void)section;
    return crl_host_register(host, &fault_component, err);
}

CRL_PLUGIN_DEFINE(faultenv, "faultenv", "1.0.0", "MIT", "fault-injecting env backend for the executor tests", NULL,
                  fault_init, NULL)
