/* crl bench plugins: start-up of a command (crl envs) with many plugins on the path, with a cold registry
 * cache (every plugin scanned in its own process) next to a warm one (nothing scanned, nothing loaded). */
#include "config.h"
#include "cli-private.h"
#include "remove-tree.h"

#include <glib.h>
#include <glib/gstdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *self;        /* this crl program */
    char *tmp;
    char **env;        /* hermetic: only the bench's plugins, its own cache */
} bench_ctx;

/* Run `crl envs` once; milliseconds, or a negative value on failure (with the reason printed). */
static double run_once(bench_ctx *c, const char *plugdir, const char *cache, bool cold)
{
    if (cold) {
        char *dir = g_build_filename(cache, "crl", NULL);
        GDir *d = g_dir_open(dir, 0, NULL);
        const char *e;
        while (d && (e = g_dir_read_name(d))) {
            char *p = g_build_filename(dir, e, NULL);
            g_unlink(p);
            g_free(p);
        }
        if (d)
            g_dir_close(d);
        g_free(dir);
    }
    char **env = g_environ_setenv(g_strdupv(c->env), "CRL_PLUGIN_PATH", plugdir, TRUE);
    env = g_environ_setenv(env, "XDG_CACHE_HOME", cache, TRUE);
    char *argv[] = { c->self, (char *)"envs", NULL };
    int status = 0;
    GError *ge = NULL;
    char *err_out = NULL;
    gint64 t0 = g_get_monotonic_time();
    gboolean ok = g_spawn_sync(NULL, argv, env, G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL, NULL, &err_out, &status, &ge);
    gint64 t1 = g_get_monotonic_time();
    g_strfreev(env);
    double ms = (double)(t1 - t0) / 1e3;
    if (!ok || !g_spawn_check_wait_status(status, NULL)) {
        fprintf(stderr, "crl bench plugins: crl envs failed: %s\n%s", ge ? ge->message : "non-zero exit",
                err_out ? err_out : "");
        ms = -1;
    }
    g_clear_error(&ge);
    g_free(err_out);
    return ms;
}

/* Median of `reps` runs (after one unmeasured run that warms the page cache, and the registry cache when
 * warm). */
static double median(bench_ctx *c, const char *plugdir, const char *cache, bool cold, int reps)
{
    double *t = g_new(double, reps), m = -1;
    if (run_once(c, plugdir, cache, cold) < 0)
        goto out;
    for (int i = 0; i < reps; i++)
        if ((t[i] = run_once(c, plugdir, cache, cold)) < 0)
            goto out;
    m = crl__bench_median(t, (size_t)reps);
out:
    g_free(t);
    return m;
}

/* dir/bpNN.so for NN < n: copies of the benchmark plugin (each takes its name from its file). */
static int fill(const char *dir, const char *data, gsize len, int n)
{
    g_mkdir_with_parents(dir, 0755);
    for (int i = 0; i < n; i++) {
        char file[32];
        g_snprintf(file, sizeof file, "bp%02d.so", i);
        char *p = g_build_filename(dir, file, NULL);
        GError *ge = NULL;
        gboolean ok = g_file_set_contents(p, data, (gssize)len, &ge) && g_chmod(p, 0755) == 0;
        if (!ok)
            fprintf(stderr, "crl bench plugins: cannot write %s: %s\n", p, ge ? ge->message : g_strerror(errno));
        g_clear_error(&ge);
        g_free(p);
        if (!ok)
            return -1;
    }
    return 0;
}

int crl__bench_plugins(double seconds)
{
    const char *plug = getenv("CRL_BENCH_PLUGIN");
    if (!plug || !*plug) {
        fprintf(stderr, "crl bench plugins: set CRL_BENCH_PLUGIN to the benchmark plugin "
                        "(_build/tests/plugins/bench/.libs/benchplug.so; ./bootstrap.sh bench does)\n");
        return CRL_EXIT_USAGE;
    }
    char *data = NULL;
    size_t len = 0;
    GError *ge = NULL;
    crl_error e;
    crl_error_clear(&e);
    if (crl_file_read(plug, "benchmark plugin", 0, 256u << 20, &data, &len, &e)) {
        fprintf(stderr, "crl bench plugins: %s\n", e.message);
        return CRL_EXIT_USAGE;
    }
    bench_ctx c = { 0 };
    c.self = g_file_read_link("/proc/self/exe", NULL);
    c.tmp = g_dir_make_tmp("crl-bench-plugins-XXXXXX", &ge);
    if (!c.self || !c.tmp) {
        fprintf(stderr, "crl bench plugins: %s\n", ge ? ge->message : "cannot find this program");
        g_clear_error(&ge);
        crl_free(data);
        g_free(c.self);
        return CRL_EXIT_RUNTIME;
    }
    char *none = g_build_filename(c.tmp, "none", NULL);
    c.env = g_get_environ();
    c.env = g_environ_setenv(c.env, "CRL_PLUGINSDIR", "", TRUE);
    c.env = g_environ_setenv(c.env, "XDG_DATA_HOME", none, TRUE);
    c.env = g_environ_setenv(c.env, "XDG_CONFIG_HOME", none, TRUE);
    c.env = g_environ_setenv(c.env, "CRL_SYSCONFDIR", none, TRUE);
    int reps = (int)(seconds * 10);
    reps = reps < 5 ? 5 : reps > 51 ? 51 : reps;

    printf("crl envs start-up with N plugins on the path (median of %d runs; cold: the registry cache removed "
           "before each run, so every plugin is scanned in its own process; warm: all cached, none loaded)\n\n",
           reps);
    printf("%10s %12s %12s %12s\n", "plugins", "cold ms", "warm ms", "cold/warm");
    static const int counts[] = { 0, 10, 50 };
    double warm[3] = { 0 };
    int rc = CRL_EXIT_OK;
    for (size_t i = 0; i < G_N_ELEMENTS(counts) && rc == CRL_EXIT_OK; i++) {
        char sub[32];
        g_snprintf(sub, sizeof sub, "p%d", counts[i]);
        char *dir = g_build_filename(c.tmp, sub, NULL);
        char *cache = g_build_filename(c.tmp, sub, "cache", NULL);
        if (fill(dir, data, len, counts[i]) != 0) {
            rc = CRL_EXIT_RUNTIME;
        } else {
            double cold = median(&c, dir, cache, true, reps);
            warm[i] = median(&c, dir, cache, false, reps);
            if (cold < 0 || warm[i] < 0)
                rc = CRL_EXIT_RUNTIME;
            else
                printf("%10d %12.1f %12.1f %11.1fx\n", counts[i], cold, warm[i], cold / warm[i]);
        }
        g_free(dir);
        g_free(cache);
    }
    if (rc == CRL_EXIT_OK)
        printf("\nwarm start-up, 50 plugins vs none: %.2fx (%.1f ms vs %.1f ms)\n", warm[2] / warm[0], warm[2],
               warm[0]);
    crl__remove_tree(c.tmp);
    g_strfreev(c.env);
    g_free(none);
    g_free(c.tmp);
    g_free(c.self);
    crl_free(data);
    return rc;
}
