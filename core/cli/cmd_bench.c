/* crl bench: benchmarks that print figures measured side by side. */
#include "config.h"
#include "cli-private.h"

#include <glib.h>
#include <stdlib.h>
#include <string.h>

/* `crl bench replay` (bench_replay.c): prioritized sampling on 1M items. */

static const struct {
    const char *name;
    int (*run)(double seconds);
    const char *summary;
} benches[] = {
    { "core", crl__bench_core, "TensorDict get/set through key handles, td creation, spec rand" },
    { "envs", crl__bench_envs, "classic env steps/s through the host API vs the bare backend, bit-exactness" },
    { "replay", crl__bench_replay, "prioritized sample / priority update of 256 among 1M items, vs a binary sum tree" },
    { "nn", crl__bench_nn, "MLP forward + backward + Adam steps/s (64x64, 256x256, batch 256), the Nature-DQN conv stack (batch 32), an LSTM step, next to raw sgemm and (built with oneDNN) oneDNN's primitives" },
    { "transforms", crl__bench_transforms,
      "ToTensorImage, Resize, GrayScale on 500x500x3 frames: MB/s next to memcpy; CartPole pixels drawn at 84x84" },
    { "train", crl__bench_train,
      "frames and seconds until each training example reaches its target (475 CartPole, -200 Pendulum, 195 CartPole pixels), per seed" },
    { "plugins", crl__bench_plugins,
      "crl envs start-up with 0, 10 and 50 plugins on the path: cold registry cache (all scanned) vs warm" },
    { "batched", crl__bench_batched,
      "CartPole/Pendulum and dm_control steps/s: inline, serial, threads, processes executors, async; start-up" },
#ifdef CRL_HAVE_MPI
    { "mpi", crl__bench_mpi, "crl run under mpirun: frames/s with 1, 2, 3 collector ranks; ms per batch and weight sync" },
#endif
#ifdef CRL_HAVE_GYM
    { "gym", crl__bench_gym, "a pure-Python CartPole: plain Python loop vs crl's gym backend, ns crl adds per step" },
    { "python", crl__bench_python,
      "a Python env with a realistic step cost: env steps/s inline, on threads and on processes (2 workers)" },
#endif
#ifdef CRL_HAVE_DM_CONTROL
    { "dm_control", crl__bench_dm_control,
      "dm_control tasks: env steps/s next to bare suite stepping in turns (host overhead), pixel frames/s" },
#endif
};

int crl__bench_classic_host(crl_config **cfg, crl_host **host, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    int rc;
    if (!(*cfg = crl_config_new(&e)) || !(*host = crl_host_new(*cfg, &e)) || (rc = crl__cli_load_builtins(*host, &e)))
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    if (!crl_host_find(*host, CRL_KIND_ENV, "classic") && (rc = crl_host_load_name(*host, "classic", err))) {
        crl_error_prefix(err, "the classic env backend is neither built in nor on the plugin path: ");
        return rc;
    }
    return CRL_OK;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double crl__bench_median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return v[n / 2];
}

crl_bench_result crl__bench_measure(void (*fn)(void *, uint64_t), void *state, double seconds, uint64_t warmup)
{
    uint64_t n = 1, total = 0;
    fn(state, warmup);
    gint64 start = g_get_monotonic_time(), now = start;
    while ((double)(now - start) < seconds * 1e6) {
        fn(state, n);
        total += n;
        now = g_get_monotonic_time();
        if (n < (1u << 24))
            n *= 2;
    }
    crl_bench_result r = { (double)(now - start) * 1e3 / (double)total, total };
    return r;
}

static void usage(FILE *f)
{
    fprintf(f, "Usage: crl bench NAME [--seconds S]\n\nBenchmarks (each prints its figures and ratios):\n");
    for (size_t i = 0; i < sizeof benches / sizeof benches[0]; i++)
        fprintf(f, "  %-10s %s\n", benches[i].name, benches[i].summary);
    fprintf(f, "\n  --seconds S   time budget per measurement (default 0.5)\n"
               "  --seeds N     train: seeds 0 to N-1 for each example (default 5)\n"
               "  --only LIST   train: only these examples (e.g. cartpole-dqn,cartpole-ppo);\n"
               "                dm_control: only these tasks (e.g. point_mass/easy,pendulum/swingup)\n");
}

int crl__cmd_bench(int argc, char **argv)
{
    double seconds = 0.5;
    const char *name = NULL, *seeds = NULL, *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return CRL_EXIT_OK;
        } else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) {
            char *end;
            seconds = strtod(argv[++i], &end);
            if (*end || !(seconds > 0 && seconds <= 600)) {
                fprintf(stderr, "crl bench: --seconds '%s': give a number in (0, 600]\n", argv[i]);
                return CRL_EXIT_USAGE;
            }
        } else if ((!strcmp(argv[i], "--seeds") || !strcmp(argv[i], "--only")) && i + 1 < argc) {
            const char **v = argv[i][2] == 's' ? &seeds : &only;
            *v = argv[++i];
            if (v == &only && !**v) {
                fprintf(stderr, "crl bench: --only '': name at least one (comma-separated)\n");
                return CRL_EXIT_USAGE;
            }
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "crl bench: unknown option '%s'; run 'crl bench --help'\n", argv[i]);
            return CRL_EXIT_USAGE;
        } else if (!name) {
            name = argv[i];
        } else {
            fprintf(stderr, "crl bench: unexpected argument '%s'\n", argv[i]);
            return CRL_EXIT_USAGE;
        }
    }
    if (!name) {
        usage(stderr);
        return CRL_EXIT_USAGE;
    }
    if (only && !strcmp(name, "dm_control")) {
        crl__bench_dm_control_only(only);
    } else if ((seeds || only) && strcmp(name, "train")) {
        fprintf(stderr, "crl bench: %s goes with crl bench train%s\n", seeds ? "--seeds" : "--only",
                seeds ? "" : " or crl bench dm_control");
        return CRL_EXIT_USAGE;
    } else if (seeds || only) {
        int st = crl__bench_train_options(seeds, only);
        if (st)
            return st;
    }
    const char *names[sizeof benches / sizeof benches[0] + 1];
    for (size_t i = 0; i < sizeof benches / sizeof benches[0]; i++) {
        if (!strcmp(name, benches[i].name))
            return benches[i].run(seconds);
        names[i] = benches[i].name;
    }
    names[sizeof benches / sizeof benches[0]] = NULL;
    const char *hint = crl_did_you_mean(name, names);
    fprintf(stderr, "crl bench: no benchmark '%s'%s%s%s; run 'crl bench --help'\n", name,
            hint ? "; did you mean '" : "", hint ? hint : "", hint ? "'?" : "");
    return CRL_EXIT_USAGE;
}
