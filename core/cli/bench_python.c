/* crl bench python: env steps/s of a Python env (numpy CartPole with a realistic step cost) inline, on threads and on processes. */
#include "config.h"
#include "cli-private.h"

#include <crl/env.h>
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NUM_ENVS 4
#define WORKERS 2
#define ROUNDS 3    /* best of: the machine is shared, the minimum is the cost */
#define STARTUPS 3

/* Where the test envs live (tests/python of the source tree). */
static const char *envs_dir(void)
{
    const char *d = g_getenv("CRL_BENCH_GYM_ENVS");
    return d && *d ? d : CRL_GYM_BENCH_ENVS;
}

int crl__bench_python_host(const char *who, crl_config **cfg, crl_host **host, crl_error *err)
{
    const char *dir = envs_dir();
    char *probe = g_build_filename(dir, "crl_testenvs", "benchenv.py", NULL);
    bool have_envs = g_file_test(probe, G_FILE_TEST_IS_REGULAR);
    g_free(probe);
    if (!have_envs)
        return crl_error_set(err, CRL_E_NOT_FOUND, "no crl_testenvs/benchenv.py under %s; crl %s drives the test "
                             "envs of crl's source tree (tests/python): set CRL_BENCH_GYM_ENVS=DIR", dir, who);
    /* One BLAS thread per interpreter: numpy's pools would otherwise oversubscribe the cores the executors
     * compare on (set OPENBLAS_NUM_THREADS to measure otherwise). */
    if (!g_getenv("OPENBLAS_NUM_THREADS"))
        g_setenv("OPENBLAS_NUM_THREADS", "1", TRUE);
    /* An uninstalled crl runs the build tree's worker program (processes executor). */
    if (!g_getenv("CRL_ENV_WORKER") && !g_file_test(CRL_ENV_WORKER_PATH, G_FILE_TEST_IS_EXECUTABLE) &&
        g_file_test(CRL_ENV_WORKER_BUILD, G_FILE_TEST_IS_EXECUTABLE))
        g_setenv("CRL_ENV_WORKER", CRL_ENV_WORKER_BUILD, TRUE);
    char *ini = g_strdup_printf("[plugin.gym]\npython_path = %s\n", dir);
    int rc = (*cfg = crl_config_new(err)) ? crl_config_load_buffer(*cfg, who, ini, strlen(ini), CRL_LAYER_FILE, err)
                                          : CRL_E_NOMEM;
    g_free(ini);
    if (rc || !(*host = crl_host_new(*cfg, err)))
        return rc ? rc : CRL_E_NOMEM;
    crl_error first = { 0 };
    if (crl_host_load_name(*host, "gym", &first) == CRL_OK)
        return CRL_OK;
    /* Not on the plugin path: the one this build made, if present. */
    crl_error e = { 0 };
    if (g_file_test(CRL_GYM_BUILD_PLUGIN, G_FILE_TEST_IS_REGULAR) &&
        crl_host_load_path(*host, CRL_GYM_BUILD_PLUGIN, &e) == CRL_OK)
        return CRL_OK;
    rc = crl_error_pass(err, e.code ? &e : &first, CRL_E_NOT_FOUND);
    crl_error_prefix(err, "crl %s needs the gym plugin: ", who);
    return rc;
}

/* NUM_ENVS CostlyCartPoleEnv on `kind` (WORKERS workers), next_step auto-reset; *startup_s: from config to the
 * first reset done. */
static int env_open(crl__bench_stepper *b, crl_host *host, const char *kind, double *startup_s, crl_error *err)
{
    char *text = g_strdup_printf("[env]\nbackend = gym\nid = CostlyCartPole\nentry_point = "
                                 "crl_testenvs.benchenv:CostlyCartPoleEnv\nnum_envs = %d\nauto_reset = next_step\n"
                                 "kwargs.work = 32\ncategorical_action_encoding = true\nexecutor = %s\nnum_workers = %d\nseed = 7\n",
                                 NUM_ENVS, kind, WORKERS);
    int rc = crl__bench_stepper_open(b, host, "crl bench python", text, startup_s, err);
    g_free(text);
    return rc;
}

int crl__bench_python_executors(crl_host *host, double seconds)
{
    static const char *const kinds[] = { "inline", "threads", "processes" };
    double ns[3] = { 0 }, start[3] = { 0 };
    crl_error err = { 0 };
    printf("A Python env with a realistic step cost (crl_testenvs.benchenv:CostlyCartPoleEnv, work = 32: CartPole-v1 "
           "plus 32 rounds of a 64x64 numpy layer, ~0.1 ms a step), %d envs, %d workers (threads, processes), best of %d:\n",
           NUM_ENVS, WORKERS, ROUNDS);
    for (int k = 0; k < 3; k++) {
        for (int s = 0; s < STARTUPS; s++) {
            crl__bench_stepper b;
            double t = 0;
            int rc = env_open(&b, host, kinds[k], &t, &err);
            crl__bench_stepper_close(&b);
            if (rc) {
                crl_error_prefix(&err, "executor = %s: ", kinds[k]);
                crl__cli_print_error("bench python", &err);
                return CRL_EXIT_RUNTIME;
            }
            start[k] = s == 0 || t < start[k] ? t : start[k];
        }
        crl__bench_stepper b;
        if (env_open(&b, host, kinds[k], NULL, &err)) {
            crl__bench_stepper_close(&b);
            crl_error_prefix(&err, "executor = %s: ", kinds[k]);
            crl__cli_print_error("bench python", &err);
            return CRL_EXIT_RUNTIME;
        }
        for (int r = 0; r < ROUNDS; r++) {
            crl_bench_result res = crl__bench_measure(crl__bench_stepper_run, &b, seconds, 20);
            if (b.failed) {
                crl_error e = b.err;
                crl__bench_stepper_close(&b);
                crl_error_prefix(&e, "executor = %s: ", kinds[k]);
                crl__cli_print_error("bench python", &e);
                return CRL_EXIT_RUNTIME;
            }
            ns[k] = r == 0 || res.ns_per_op < ns[k] ? res.ns_per_op : ns[k];
        }
        crl__bench_stepper_close(&b);
    }
    printf("  %-11s %14s %14s %10s %12s\n", "executor", "batch steps/s", "env steps/s", "vs inline", "start-up");
    for (int k = 0; k < 3; k++)
        printf("  %-11s %14.0f %14.0f %9.2fx %9.0f ms\n", kinds[k], 1e9 / ns[k], 1e9 / ns[k] * NUM_ENVS,
               ns[0] / ns[k], start[k] * 1e3);
    printf("  (threads share one interpreter and its GIL; each process worker runs its own interpreter, started "
           "fresh by crl-env-worker; %ld cores here, OPENBLAS_NUM_THREADS=%s)\n", sysconf(_SC_NPROCESSORS_ONLN),
           g_getenv("OPENBLAS_NUM_THREADS") ? g_getenv("OPENBLAS_NUM_THREADS") : "unset");
    return CRL_EXIT_OK;
}

int crl__bench_python(double seconds)
{
    crl_error err = { 0 };
    crl_config *cfg = NULL;
    crl_host *host = NULL;
    int status = CRL_EXIT_RUNTIME;
    if (crl__bench_python_host("bench python", &cfg, &host, &err))
        crl__cli_print_error("bench python", &err);
    else {
        printf("crl bench python (%.2f s per measurement)\n", seconds);
        status = crl__bench_python_executors(host, seconds);
    }
    crl_host_free(host);
    crl_config_free(cfg);
    return status;
}
