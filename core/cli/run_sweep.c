/* crl run --seeds: one crl run per seed under a sweep directory, --jobs at a time, then the aggregate of
 * their metrics.csv (summary.csv, seeds.csv, curve.png).  Each seed is a child crl run of its own, so a
 * seed that crashes or is killed takes no other down and its run directory is a normal one (--resume). */
#define _GNU_SOURCE
#include "config.h"
#include "cli-private.h"

#include <crl/file.h>
#include <crl/trainer.h>

#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define MAX_SEEDS 10000
#define MAX_JOBS 1024
/* metrics.csv of a seed's run read back: regular files up to this size */
#define METRICS_MAX ((uint64_t)1 << 30)

/* ---- --seeds and --jobs --------------------------------------------------------------------------- */

static bool parse_u64(const char *s, uint64_t max, uint64_t *out)
{
    if (!g_ascii_isdigit(*s))
        return false;
    char *end = NULL;
    errno = 0;
    guint64 v = g_ascii_strtoull(s, &end, 10);
    if (errno || *end || v > max)
        return false;
    *out = v;
    return true;
}

static gint cmp_u64(gconstpointer a, gconstpointer b)
{
    guint64 x = *(const guint64 *)a, y = *(const guint64 *)b;
    return x < y ? -1 : x > y;
}

/* "0-4", "0,2,5-7": the seeds in the order given; false with *why naming the bad item. */
static bool parse_seeds(const char *list, GArray *seeds, char **why)
{
    /* [train] seed's range */
    const uint64_t max = (uint64_t)9200000000000000000ull;
    char **items = g_strsplit(list, ",", -1);
    bool ok = items[0] != NULL;
    if (!ok)
        *why = g_strdup("the list is empty");
    for (char **it = items; ok && *it; it++) {
        char *item = g_strstrip(*it);
        char *dash = strchr(item, '-');
        uint64_t lo, hi;
        if (dash) {
            *dash = '\0';
            ok = parse_u64(g_strstrip(item), max, &lo) && parse_u64(g_strstrip(dash + 1), max, &hi);
            *dash = '-';
        } else {
            ok = parse_u64(item, max, &lo);
            hi = lo;
        }
        if (!ok) {
            *why = g_strdup_printf("'%s' is not a seed (0 to %llu) or a range of seeds such as 0-4", item,
                                   (unsigned long long)max);
            break;
        }
        if (hi < lo) {
            *why = g_strdup_printf("the range '%s' runs backwards (write %llu-%llu)", item, (unsigned long long)hi,
                                   (unsigned long long)lo);
            ok = false;
            break;
        }
        if (hi - lo >= MAX_SEEDS || seeds->len + (hi - lo) >= MAX_SEEDS) {
            *why = g_strdup_printf("more than %d seeds", MAX_SEEDS);
            ok = false;
            break;
        }
        for (uint64_t s = lo;; s++) {
            g_array_append_val(seeds, s);
            if (s == hi)
                break;
        }
    }
    g_strfreev(items);
    if (ok) {
        GArray *sorted = g_array_copy(seeds);
        g_array_sort(sorted, cmp_u64);
        for (guint i = 1; ok && i < sorted->len; i++)
            if (g_array_index(sorted, guint64, i) == g_array_index(sorted, guint64, i - 1)) {
                *why = g_strdup_printf("seed %llu is given twice", (unsigned long long)g_array_index(sorted, guint64, i));
                ok = false;
            }
        g_array_free(sorted, TRUE);
    }
    return ok;
}

/* ---- one seed's metrics.csv --------------------------------------------------------------------- */

typedef struct seed_run {
    uint64_t seed;
    char *dir, *log;
    pid_t pid;
    int status;           /* exit status; 128 + N for a signal N; -1 not started */
    bool started, ended;
    GArray *ef, *es, *ev; /* the evaluations: frames (gint64), seconds, return */
    int64_t frames;       /* of the last row */
    double seconds;
} seed_run;

/* The columns are found by name, so a metrics.csv with more columns reads the same. */
static int read_metrics(seed_run *s, crl_error *err)
{
    char *path = g_build_filename(s->dir, "metrics.csv", NULL);
    char *text = NULL;
    size_t len = 0;
    int rc = crl_file_read(path, "metrics.csv", 0, METRICS_MAX, &text, &len, err);
    if (rc) {
        g_free(path);
        return rc;
    }
    char **lines = g_strsplit(text, "\n", -1);
    int cf = -1, cs = -1, ce = -1;
    if (lines[0]) {
        char **h = g_strsplit(lines[0], ",", -1);
        for (int i = 0; h[i]; i++) {
            if (!strcmp(h[i], "frames"))
                cf = i;
            else if (!strcmp(h[i], "seconds"))
                cs = i;
            else if (!strcmp(h[i], "eval_return"))
                ce = i;
        }
        g_strfreev(h);
    }
    if (cf < 0 || cs < 0 || ce < 0)
        rc = crl_error_set(err, CRL_E_CORRUPT, "'%s' has no frames, seconds and eval_return columns in its "
                           "first line: not a metrics.csv of crl run", path);
    for (char **l = lines + 1; !rc && *l && **l; l++) {
        char **f = g_strsplit(*l, ",", -1);
        int nf = (int)g_strv_length(f);
        char *end = NULL;
        /* a row cut short (the run was killed while writing it) ends the file */
        if (nf <= cf || nf <= cs || nf <= ce) {
            g_strfreev(f);
            break;
        }
        gint64 fr = g_ascii_strtoll(f[cf], &end, 10);
        if (end == f[cf] || *end) {
            g_strfreev(f);
            break;
        }
        s->frames = fr;
        s->seconds = g_ascii_strtod(f[cs], NULL);
        if (*f[ce]) {
            double v = g_ascii_strtod(f[ce], &end);
            if (!*end && isfinite(v)) {
                g_array_append_val(s->ef, fr);
                g_array_append_val(s->es, s->seconds);
                g_array_append_val(s->ev, v);
            }
        }
        g_strfreev(f);
    }
    g_strfreev(lines);
    g_free(text);
    g_free(path);
    return rc;
}

/* The first evaluation at or above target: its index, -1 none. */
static int reached_at(const seed_run *s, double target)
{
    for (guint i = 0; !isnan(target) && i < s->ev->len; i++)
        if (g_array_index(s->ev, double, i) >= target)
            return (int)i;
    return -1;
}

/* ---- the aggregate ------------------------------------------------------------------------------- */

static gint cmp_i64(gconstpointer a, gconstpointer b)
{
    gint64 x = *(const gint64 *)a, y = *(const gint64 *)b;
    return x < y ? -1 : x > y;
}

static void fmt(char *buf, size_t n, double v)
{
    if (isnan(v))
        buf[0] = '\0';
    else
        snprintf(buf, n, "%.6g", v);
}

/* summary.csv, seeds.csv and curve.png of the sweep directory; each failure is reported, and fails. */
static bool aggregate(const char *dir, seed_run *runs, size_t n, const char *title, double target)
{
    /* every frame count at which some seed evaluated */
    GArray *frames = g_array_new(FALSE, FALSE, sizeof(gint64));
    for (size_t i = 0; i < n; i++)
        g_array_append_vals(frames, runs[i].ef->data, runs[i].ef->len);
    g_array_sort(frames, cmp_i64);
    guint u = 0;
    for (guint i = 0; i < frames->len; i++)
        if (!u || g_array_index(frames, gint64, i) != g_array_index(frames, gint64, u - 1))
            g_array_index(frames, gint64, u++) = g_array_index(frames, gint64, i);
    g_array_set_size(frames, u);
    GString *csv = g_string_new("frames,seeds,mean,std,min,max");
    for (size_t i = 0; i < n; i++)
        g_string_append_printf(csv, ",seed_%llu", (unsigned long long)runs[i].seed);
    g_string_append_c(csv, '\n');
    double *x = g_new(double, u + 1), *mean = g_new(double, u + 1), *lo = g_new(double, u + 1),
           *hi = g_new(double, u + 1);
    size_t *cursor = g_new0(size_t, n);
    for (guint k = 0; k < u; k++) {
        gint64 fr = g_array_index(frames, gint64, k);
        double *val = g_new(double, n);
        double sum = 0, mn = INFINITY, mx = -INFINITY;
        int cnt = 0;
        for (size_t i = 0; i < n; i++) {
            val[i] = NAN;
            /* each seed's evaluations are in frame order */
            GArray *ef = runs[i].ef;
            while (cursor[i] < ef->len && g_array_index(ef, gint64, cursor[i]) < fr)
                cursor[i]++;
            if (cursor[i] < ef->len && g_array_index(ef, gint64, cursor[i]) == fr) {
                val[i] = g_array_index(runs[i].ev, double, cursor[i]);
                sum += val[i];
                mn = fmin(mn, val[i]);
                mx = fmax(mx, val[i]);
                cnt++;
            }
        }
        double m = sum / cnt, ss = 0;
        for (size_t i = 0; i < n; i++)
            if (!isnan(val[i]))
                ss += (val[i] - m) * (val[i] - m);
        /* the population standard deviation (numpy's std) */
        double sd = sqrt(ss / cnt);
        char a[32], b[32], c[32], d[32];
        fmt(a, sizeof a, m);
        fmt(b, sizeof b, sd);
        fmt(c, sizeof c, mn);
        fmt(d, sizeof d, mx);
        g_string_append_printf(csv, "%lld,%d,%s,%s,%s,%s", (long long)fr, cnt, a, b, c, d);
        for (size_t i = 0; i < n; i++) {
            fmt(a, sizeof a, val[i]);
            g_string_append_printf(csv, ",%s", a);
        }
        g_string_append_c(csv, '\n');
        x[k] = (double)fr;
        mean[k] = m;
        lo[k] = mn;
        hi[k] = mx;
        g_free(val);
    }
    GString *sc = g_string_new("seed,exit_status,frames,seconds,eval_return,best_eval_return,"
                               "frames_to_target,seconds_to_target\n");
    for (size_t i = 0; i < n; i++) {
        const seed_run *s = &runs[i];
        double last = s->ev->len ? g_array_index(s->ev, double, s->ev->len - 1) : NAN, best = NAN;
        for (guint k = 0; k < s->ev->len; k++)
            best = isnan(best) ? g_array_index(s->ev, double, k) : fmax(best, g_array_index(s->ev, double, k));
        int at = reached_at(s, target);
        char a[32], b[32], c[32], tf[32] = "", ts[32] = "", st[16] = "";
        fmt(a, sizeof a, s->frames >= 0 ? s->seconds : NAN);
        fmt(b, sizeof b, last);
        fmt(c, sizeof c, best);
        if (at >= 0) {
            snprintf(tf, sizeof tf, "%lld", (long long)g_array_index(s->ef, gint64, at));
            fmt(ts, sizeof ts, g_array_index(s->es, double, at));
        }
        if (s->started)
            snprintf(st, sizeof st, "%d", s->status);
        char fr[32] = "";
        if (s->frames >= 0)
            snprintf(fr, sizeof fr, "%lld", (long long)s->frames);
        g_string_append_printf(sc, "%llu,%s,%s,%s,%s,%s,%s,%s\n", (unsigned long long)s->seed, st, fr, a, b, c, tf,
                               ts);
    }
    bool ok = true;
    const char *names[2] = { "summary.csv", "seeds.csv" };
    GString *texts[2] = { csv, sc };
    for (int f = 0; f < 2; f++) {
        char *path = g_build_filename(dir, names[f], NULL);
        GError *ge = NULL;
        if (!g_file_set_contents(path, texts[f]->str, (gssize)texts[f]->len, &ge)) {
            fprintf(stderr, "crl run: cannot write '%s': %s\n", path, ge->message);
            g_error_free(ge);
            ok = false;
        }
        g_free(path);
    }
    char *path = g_build_filename(dir, "curve.png", NULL);
    crl_error e;
    crl_error_clear(&e);
    int rc = crl__png_write_band(path, title, x, mean, lo, hi, u, target, &e);
    if (rc && rc != CRL_E_UNSUPPORTED) {
        fprintf(stderr, "crl run: cannot draw the sweep's curve: %s\n", e.message);
        ok = false;
    }
    g_free(path);
    g_free(cursor);
    g_free(x);
    g_free(mean);
    g_free(lo);
    g_free(hi);
    g_string_free(csv, TRUE);
    g_string_free(sc, TRUE);
    g_array_free(frames, TRUE);
    return ok;
}

/* ---- the children -------------------------------------------------------------------------------- */

/* The last non-empty line of a seed's log, for the report of a failure (g_free). */
static char *last_line(const char *log)
{
    char *text = NULL;
    size_t len = 0;
    if (crl_file_read(log, "log", 0, (uint64_t)1 << 30, &text, &len, NULL))
        return NULL;
    while (len && (text[len - 1] == '\n' || text[len - 1] == '\r'))
        text[--len] = '\0';
    char *nl = strrchr(text, '\n');
    char *line = g_strdup(nl ? nl + 1 : text);
    g_free(text);
    return *line ? line : (g_free(line), NULL);
}

static int spawn_seed(seed_run *s, const char *exe, GPtrArray *base, bool has_replay, crl_error *err)
{
    int fd = open(s->log, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return crl_error_set(err, CRL_E_IO, "cannot create '%s': %s", s->log, g_strerror(errno));
    GPtrArray *argv = g_ptr_array_new_with_free_func(g_free);
    g_ptr_array_add(argv, g_strdup("crl"));
    for (guint i = 0; i < base->len; i++)
        g_ptr_array_add(argv, g_strdup(base->pdata[i]));
    unsigned long long sd = (unsigned long long)s->seed;
    g_ptr_array_add(argv, g_strdup_printf("train.seed=%llu", sd));
    g_ptr_array_add(argv, g_strdup_printf("env.seed=%llu", sd));
    if (has_replay)
        g_ptr_array_add(argv, g_strdup_printf("replay.seed=%llu", sd));
    g_ptr_array_add(argv, g_strdup_printf("train.run_dir=%s", s->dir));
    g_ptr_array_add(argv, NULL);
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, fd, STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&fa, fd, STDERR_FILENO);
    posix_spawnattr_init(&at);
    /* its own process group: a Ctrl-C reaches only this crl, which passes it on once (a second one would
     * stop a run without its checkpoint) */
    sigset_t none, dfl;
    sigemptyset(&none);
    sigemptyset(&dfl);
    sigaddset(&dfl, SIGINT);
    sigaddset(&dfl, SIGTERM);
    sigaddset(&dfl, SIGCHLD);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setsigdefault(&at, &dfl);
    posix_spawnattr_setpgroup(&at, 0);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    int e = posix_spawn(&s->pid, exe, &fa, &at, (char **)argv->pdata, environ);
    posix_spawnattr_destroy(&at);
    posix_spawn_file_actions_destroy(&fa);
    close(fd);
    g_ptr_array_free(argv, TRUE);
    if (e)
        return crl_error_set(err, CRL_E_RUNTIME, "cannot start the crl run of seed %llu (%s): %s", sd, exe,
                             g_strerror(e));
    s->started = true;
    return CRL_OK;
}

static void report_end(const seed_run *s, double target, bool quiet)
{
    if (s->status) {
        char *line = last_line(s->log);
        fprintf(stderr, "crl run: seed %llu failed with exit status %d%s%s; its output is in %s\n",
                (unsigned long long)s->seed, s->status, line ? ": " : "", line ? line : "", s->log);
        g_free(line);
        return;
    }
    if (quiet)
        return;
    int at = reached_at(s, target);
    double last = s->ev->len ? g_array_index(s->ev, double, s->ev->len - 1) : NAN;
    printf("seed %llu: done, %lld frames in %.1f s", (unsigned long long)s->seed, (long long)s->frames, s->seconds);
    if (!isnan(last))
        printf(", eval return %.6g", last);
    if (at >= 0)
        printf(", reached %g at frame %lld (%.1f s)", target, (long long)g_array_index(s->ef, gint64, at),
               g_array_index(s->es, double, at));
    else if (!isnan(target))
        printf(", did not reach %g", target);
    printf("\n");
    fflush(stdout);
}

static void print_table(const char *dir, seed_run *runs, size_t n, double target)
{
    printf("sweep summary (%s):\n  %6s %5s %9s %8s %11s", dir, "seed", "exit", "frames", "seconds", "eval return");
    if (!isnan(target))
        printf("  %s %-8g %s", "to", target, "frames  seconds");
    printf("\n");
    int reached = 0;
    double fsum = 0, ssum = 0;
    for (size_t i = 0; i < n; i++) {
        const seed_run *s = &runs[i];
        double last = s->ev->len ? g_array_index(s->ev, double, s->ev->len - 1) : NAN;
        char st[16] = "-";
        if (s->started && s->ended)
            snprintf(st, sizeof st, "%d", s->status);
        char fr[32] = "-", sec[32] = "-", ev[32] = "-";
        if (s->frames >= 0) {
            snprintf(fr, sizeof fr, "%lld", (long long)s->frames);
            snprintf(sec, sizeof sec, "%.1f", s->seconds);
        }
        if (!isnan(last))
            snprintf(ev, sizeof ev, "%.6g", last);
        printf("  %6llu %5s %9s %8s %11s", (unsigned long long)s->seed, st, fr, sec, ev);
        int at = reached_at(s, target);
        if (at >= 0) {
            gint64 f = g_array_index(s->ef, gint64, at);
            double secs = g_array_index(s->es, double, at);
            printf("  %15lld %8.1f", (long long)f, secs);
            reached++;
            fsum += (double)f;
            ssum += secs;
        } else if (!isnan(target)) {
            printf("  %15s %8s", "not reached", "");
        }
        printf("\n");
    }
    if (!isnan(target) && reached)
        printf("  reached %g: %d of %zu seeds, in %.0f frames and %.1f s on average\n", target, reached, n,
               fsum / reached, ssum / reached);
    else if (!isnan(target))
        printf("  reached %g: 0 of %zu seeds\n", target, n);
    printf("  summary.csv, seeds.csv and curve.png are in %s\n", dir);
}

/* ---- the sweep ----------------------------------------------------------------------------------- */

int crl__run_sweep(const char *seeds_arg, const char *jobs_arg, bool quiet, int nargs, char **args)
{
    GArray *seeds = g_array_new(FALSE, FALSE, sizeof(guint64));
    char *why = NULL;
    uint64_t jobs = 1;
    if (!parse_seeds(seeds_arg, seeds, &why)) {
        fprintf(stderr, "crl run: --seeds '%s': %s (e.g. --seeds 0-4 or --seeds 0,2,5-7)\n", seeds_arg, why);
        g_free(why);
        g_array_free(seeds, TRUE);
        return CRL_EXIT_USAGE;
    }
    if (jobs_arg && (!parse_u64(jobs_arg, MAX_JOBS, &jobs) || jobs < 1)) {
        fprintf(stderr, "crl run: --jobs '%s': give a number of runs at a time from 1 to %d\n", jobs_arg, MAX_JOBS);
        g_array_free(seeds, TRUE);
        return CRL_EXIT_USAGE;
    }
    /* every config error before any run: each seed's run checks again, and finds the same */
    crl_cli_ctx ctx;
    crl_error err = { 0 };
    if (crl__cli_setup(&ctx, nargs, args, CRL_CLI_LOAD_PLUGINS | CRL_CLI_VALIDATE | CRL_CLI_REQUIRE_FILE, &err)) {
        g_array_free(seeds, TRUE);
        return crl__cli_setup_failed("run", &err);
    }
    int status = CRL_EXIT_USAGE;
    char *dir = NULL;
    seed_run *runs = NULL;
    size_t n = seeds->len;
    GPtrArray *base = g_ptr_array_new();
    const char *keys[][2] = { { "train", "seed" }, { "env", "seed" }, { "replay", "seed" } };
    for (size_t k = 0; k < G_N_ELEMENTS(keys); k++) {
        const char *at = crl_config_origin(ctx.cfg, keys[k][0], keys[k][1]);
        if (at && !strcmp(at, "command line")) {
            fprintf(stderr, "crl run: --seeds sets [%s] %s of each run: drop the override %s.%s=...\n", keys[k][0],
                    keys[k][1], keys[k][0], keys[k][1]);
            goto out;
        }
    }
    if (crl__mpi_wanted(ctx.cfg)) {
        fprintf(stderr, "crl run: --seeds runs each seed as a crl run of one process: it does not go with "
                "[distributed] backend = mpi (start one mpirun per seed)\n");
        goto out;
    }
    if (crl_experiment_check(ctx.host, ctx.cfg, NULL, CRL_CHECK_TRAIN, &err)) {
        crl__cli_print_error("run", &err);
        status = crl__cli_exit_code(&err);
        goto out;
    }
    double target = NAN;
    if (crl_config_get(ctx.cfg, "train", "stop_return") &&
        crl_config_get_double(ctx.cfg, "train", "stop_return", 0, &target, &err)) {
        crl__cli_print_error("run", &err);
        status = crl__cli_exit_code(&err);
        goto out;
    }
    bool has_replay = false;
    for (size_t i = 0; i < crl_config_section_count(ctx.cfg); i++)
        has_replay |= !strcmp(crl_config_section_at(ctx.cfg, i), "replay");
    const char *id = crl_config_get(ctx.cfg, "env", "id"), *loss = crl_config_get(ctx.cfg, "loss", "type");
    char *title = g_strdup_printf("%s, %s, seeds %s (mean, min-max band)", id ? id : "env", loss ? loss : "loss",
                                  seeds_arg);
    /* the sweep directory: [train] run_dir (never an existing one) or a new runs/NAME-seeds-DATE */
    const char *rd = crl_config_get(ctx.cfg, "train", "run_dir");
    status = CRL_EXIT_RUNTIME;
    if (rd && *rd) {
        char *parent = g_path_get_dirname(rd);
        int e = g_mkdir_with_parents(parent, 0755) == 0 ? (mkdir(rd, 0755) == 0 ? 0 : errno) : errno;
        g_free(parent);
        if (e) {
            const char *at = crl_config_origin(ctx.cfg, "train", "run_dir");
            if (e == EEXIST)
                fprintf(stderr, "crl run: %s: [train] run_dir = %s exists, and a sweep directory is never reused: "
                        "choose another run_dir\n", at ? at : "command line", rd);
            else
                fprintf(stderr, "crl run: cannot create the sweep directory '%s': %s\n", rd, g_strerror(e));
            status = e == EEXIST ? CRL_EXIT_USAGE : CRL_EXIT_RUNTIME;
            g_free(title);
            goto out;
        }
        dir = g_strdup(rd);
    } else if (crl__run_default_dir(&ctx, "-seeds", &dir, &err)) {
        crl__cli_print_error("run", &err);
        g_free(title);
        goto out;
    }
    char *exe = g_file_read_link("/proc/self/exe", NULL);
    if (!exe) {
        fprintf(stderr, "crl run: cannot find the crl program (/proc/self/exe) to start the seeds' runs\n");
        g_free(title);
        goto out;
    }
    g_ptr_array_add(base, "run");
    for (int i = 0; i < nargs; i++)
        g_ptr_array_add(base, args[i]);
    /* each run's progress goes to its log, off a terminal: a line every few seconds */
    if (quiet)
        g_ptr_array_add(base, "--quiet");
    runs = g_new0(seed_run, n);
    for (size_t i = 0; i < n; i++) {
        runs[i].seed = g_array_index(seeds, guint64, i);
        runs[i].dir = g_strdup_printf("%s/seed-%llu", dir, (unsigned long long)runs[i].seed);
        runs[i].log = g_strdup_printf("%s/seed-%llu.log", dir, (unsigned long long)runs[i].seed);
        runs[i].status = -1;
        runs[i].frames = -1;
        runs[i].ef = g_array_new(FALSE, FALSE, sizeof(gint64));
        runs[i].es = g_array_new(FALSE, FALSE, sizeof(double));
        runs[i].ev = g_array_new(FALSE, FALSE, sizeof(double));
    }
    if (!quiet)
        printf("sweep directory: %s (%zu seed%s, %llu at a time)\n", dir, n, n == 1 ? "" : "s",
               (unsigned long long)jobs);
    fflush(stdout);
    fflush(stderr);
    /* SIGINT, SIGTERM and SIGCHLD are taken by sigtimedwait, never by a handler: no race with the waits */
    sigset_t mask, old;
    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGCHLD);
    sigprocmask(SIG_BLOCK, &mask, &old);
    int first_sig = 0;
    bool failed = false;
    size_t next = 0, running = 0;
    while (next < n || running) {
        while (!first_sig && running < jobs && next < n) {
            seed_run *s = &runs[next++];
            crl_error e;
            crl_error_clear(&e);
            if (spawn_seed(s, exe, base, has_replay, &e)) {
                fprintf(stderr, "crl run: seed %llu: %s\n", (unsigned long long)s->seed, e.message);
                failed = true;
                continue;
            }
            running++;
            if (!quiet)
                printf("seed %llu: started (process %ld), run directory %s\n", (unsigned long long)s->seed,
                       (long)s->pid, s->dir);
            fflush(stdout);
        }
        if (!running)
            break;
        int ws;
        pid_t pid;
        while ((pid = waitpid(-1, &ws, WNOHANG)) > 0) {
            for (size_t i = 0; i < n; i++) {
                seed_run *s = &runs[i];
                if (!s->started || s->ended || s->pid != pid)
                    continue;
                s->ended = true;
                running--;
                s->status = WIFEXITED(ws) ? WEXITSTATUS(ws) : WIFSIGNALED(ws) ? 128 + WTERMSIG(ws) : 1;
                crl_error e;
                crl_error_clear(&e);
                if (read_metrics(s, &e) && !s->status)
                    fprintf(stderr, "crl run: seed %llu: %s\n", (unsigned long long)s->seed, e.message);
                failed |= s->status != 0;
                report_end(s, target, quiet);
            }
        }
        if (!running)
            continue;
        struct timespec tick = { 1, 0 };
        int sig = sigtimedwait(&mask, NULL, &tick);
        if (sig == SIGINT || sig == SIGTERM) {
            if (!first_sig) {
                first_sig = sig;
                fprintf(stderr, "crl run: %s: passing it on to the %zu running seed%s (each writes its checkpoint); "
                        "the seeds not started yet are not run\n", sig == SIGINT ? "SIGINT" : "SIGTERM", running,
                        running == 1 ? "" : "s");
            }
            for (size_t i = 0; i < n; i++)
                if (runs[i].started && !runs[i].ended)
                    kill(runs[i].pid, sig);
        }
    }
    /* a signal that came after the last seed ended would otherwise act (and end this process) when
     * unblocked, before the aggregate */
    struct timespec zero = { 0, 0 };
    for (int sig; (sig = sigtimedwait(&mask, NULL, &zero)) > 0;)
        if ((sig == SIGINT || sig == SIGTERM) && !first_sig)
            first_sig = sig;
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (!aggregate(dir, runs, n, title, target))
        failed = true;
    print_table(dir, runs, n, target);
    if (first_sig)
        status = 128 + first_sig;
    else
        status = failed ? CRL_EXIT_RUNTIME : CRL_EXIT_OK;
    if (failed && !first_sig)
        fprintf(stderr, "crl run: not every seed's run ended well (see above): exit status 1\n");
    g_free(exe);
    g_free(title);
out:
    for (size_t i = 0; runs && i < n; i++) {
        g_free(runs[i].dir);
        g_free(runs[i].log);
        g_array_free(runs[i].ef, TRUE);
        g_array_free(runs[i].es, TRUE);
        g_array_free(runs[i].ev, TRUE);
    }
    g_free(runs);
    g_free(dir);
    g_ptr_array_free(base, TRUE);
    g_array_free(seeds, TRUE);
    crl__cli_teardown(&ctx);
    fflush(stdout);
    return status;
}
