/* crl bench core: the data model's hot paths, with plain-C baselines measured
 * in the same run so the figures can be compared as ratios. */
#include "config.h"
#include "cli-private.h"

#include <glib.h>
#include <stdlib.h>
#include <string.h>

/* Keeps the compiler from dropping the measured work. */
static volatile uintptr_t sink;

static const char *const td_keys[] = {
    "action", "done", "observation", "reward", "terminated", "truncated",
    "next.done", "next.observation", "next.reward", "next.terminated",
};
#define N_KEYS (sizeof td_keys / sizeof td_keys[0])

typedef struct {
    crl_td *td;
    crl_td_key *handles[N_KEYS];
    crl_tensor *tensors[N_KEYS];
    crl_tensor *array[N_KEYS]; /* the baseline: a plain array of pointers */
} td_state;

static void run_array_get(void *p, uint64_t n)
{
    td_state *s = p;
    uintptr_t acc = 0;
    for (uint64_t i = 0; i < n; i++)
        acc += (uintptr_t)s->array[i % N_KEYS];
    sink = acc;
}

static void run_get_k(void *p, uint64_t n)
{
    td_state *s = p;
    uintptr_t acc = 0;
    for (uint64_t i = 0; i < n; i++)
        acc += (uintptr_t)crl_td_get_k(s->td, s->handles[i % N_KEYS]);
    sink = acc;
}

static void run_get_str(void *p, uint64_t n)
{
    td_state *s = p;
    uintptr_t acc = 0;
    for (uint64_t i = 0; i < n; i++)
        acc += (uintptr_t)crl_td_get(s->td, td_keys[i % N_KEYS]);
    sink = acc;
}

static void run_set_k(void *p, uint64_t n)
{
    td_state *s = p;
    for (uint64_t i = 0; i < n; i++)
        crl_td_set_k(s->td, s->handles[i % N_KEYS], s->tensors[i % N_KEYS], NULL);
}

static void run_td_create(void *p, uint64_t n)
{
    td_state *s = p;
    for (uint64_t i = 0; i < n; i++) {
        crl_td *td = crl_td_new(0, NULL, NULL);
        for (size_t k = 0; k < N_KEYS; k++)
            crl_td_set_k(td, s->handles[k], s->tensors[k], NULL);
        crl_td_unref(td);
    }
}

typedef struct {
    crl_spec *spec;
    crl_tensor *out;
    crl_rng rng;
    float *plain;
    int64_t numel;
} rand_state;

static void run_spec_rand(void *p, uint64_t n)
{
    rand_state *s = p;
    for (uint64_t i = 0; i < n; i++)
        crl_spec_rand_into(s->spec, &s->rng, s->out, NULL);
}

/* Baseline: the same uniform draws written by a plain loop over the rng. */
static void run_plain_rand(void *p, uint64_t n)
{
    rand_state *s = p;
    for (uint64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < s->numel; j++)
            s->plain[j] = -2.0f + 4.0f * crl_rng_uniform_f32(&s->rng);
    sink = (uintptr_t)s->plain[0];
}

static void report(const char *what, crl_bench_result r, const char *unit_note)
{
    printf("  %-44s %10.2f ns/op  %12.0f ops/s%s\n", what, r.ns_per_op, 1e9 / r.ns_per_op,
           unit_note ? unit_note : "");
}

int crl__bench_core(double seconds)
{
    crl_error err;
    crl_error_clear(&err);
    td_state ts;
    memset(&ts, 0, sizeof ts);
    int rc = CRL_EXIT_RUNTIME;
    int64_t one = 1, three = 3;
    if (!(ts.td = crl_td_new(0, NULL, &err)))
        goto out;
    for (size_t k = 0; k < N_KEYS; k++) {
        if (!(ts.handles[k] = crl_td_key_new(td_keys[k], &err)))
            goto out;
        bool obs = strstr(td_keys[k], "observation") != NULL;
        if (!(ts.tensors[k] = crl_tensor_new(obs ? CRL_F32 : CRL_BOOL, 1, obs ? &three : &one, &err)))
            goto out;
        if (crl_td_set_k(ts.td, ts.handles[k], ts.tensors[k], &err))
            goto out;
        ts.array[k] = ts.tensors[k];
    }
    printf("crl bench core (%.2f s per measurement; 10 keys, 4 of them under 'next')\n", seconds);
    crl_bench_result base = crl__bench_measure(run_array_get, &ts, seconds, 1000);
    crl_bench_result getk = crl__bench_measure(run_get_k, &ts, seconds, 1000);
    crl_bench_result gets = crl__bench_measure(run_get_str, &ts, seconds, 1000);
    crl_bench_result setk = crl__bench_measure(run_set_k, &ts, seconds, 1000);
    crl_bench_result create = crl__bench_measure(run_td_create, &ts, seconds, 1000);
    report("baseline: plain pointer-array load", base, NULL);
    report("td get through key handle", getk, NULL);
    report("td get through string key", gets, NULL);
    report("td set (replace) through key handle", setk, NULL);
    report("td create + 10 sets + free", create, NULL);
    printf("  ratio get_k / string get: %.2fx faster\n", gets.ns_per_op / getk.ns_per_op);

    rand_state rs;
    memset(&rs, 0, sizeof rs);
    int64_t shape[2] = { 1024, 4 };
    rs.numel = 1024 * 4;
    crl_rng_init(&rs.rng, 0, 0);
    if (!(rs.spec = crl_spec_bounded(CRL_F32, 2, shape, -2.0, 2.0, &err)) ||
        !(rs.out = crl_tensor_new(CRL_F32, 2, shape, &err))) {
        crl_spec_unref(rs.spec);
        goto out;
    }
    rs.plain = g_new(float, (gsize)rs.numel);
    crl_bench_result sr = crl__bench_measure(run_spec_rand, &rs, seconds, 1000);
    crl_bench_result pr = crl__bench_measure(run_plain_rand, &rs, seconds, 1000);
    report("spec rand_into Bounded f32 [1024, 4]", sr, NULL);
    report("baseline: plain loop of rng uniforms [1024, 4]", pr, NULL);
    printf("  spec rand: %.1f M values/s, %.2fx the plain loop's time\n",
           (double)rs.numel / sr.ns_per_op * 1e3, sr.ns_per_op / pr.ns_per_op);
    g_free(rs.plain);
    crl_tensor_unref(rs.out);
    crl_spec_unref(rs.spec);
    rc = CRL_EXIT_OK;
out:
    if (rc != CRL_EXIT_OK)
        crl__cli_print_error("bench core", &err);
    for (size_t k = 0; k < N_KEYS; k++) {
        crl_td_key_free(ts.handles[k]);
        crl_tensor_unref(ts.tensors[k]);
    }
    crl_td_unref(ts.td);
    return rc;
}
