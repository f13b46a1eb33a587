/* crl run: config-only training (crl/trainer.h) with a run directory. */
#define _GNU_SOURCE
#include "config.h"
#include "cli-private.h"
#include "examples-private.h"
#include "remove-tree.h"

#include <crl/checkpoint.h>
#include <crl/trainer.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: crl run EXPERIMENT.ini... [section.key=value...] [--dry-run] [--quiet] [--overwrite]\n"
            "       crl run --resume RUN_DIR [section.key=value...] [--accept-changes] [--quiet]\n"
            "       crl run EXPERIMENT.ini... --seeds LIST [--jobs N] [section.key=value...] [--quiet]\n\n"
            "Train as the config says: the env of [env], the collector of [collector], the\n"
            "replay buffer of [replay] (off-policy losses), the loss of [loss] (type = dqn,\n"
            "ppo, ...), the optimizer of [optim] and the loop of [train].  Writes a run\n"
            "directory ([train] run_dir, default runs/NAME-YYYYmmdd-HHMMSS, with -2, -3, ...\n"
            "added when a run started in the same second has the name) holding\n"
            "config.ini (the resolved config with every default), experiment.ini (the\n"
            "settings given, which --resume reloads), run.txt (command line,\n"
            "crl and plugin versions, seed), metrics.csv, checkpoint/ (model, optimizer,\n"
            "replay buffer, the settings; every [train] checkpoint_interval frames and\n"
            "at the end of every run), curve.png (the learning curve) and run.lock (held\n"
            "by the crl run writing the directory).  A run directory is never shared: an\n"
            "existing [train] run_dir is refused (exit 2) unless --resume or --overwrite.\n"
            "E.g.\n\n"
            "  crl run %s/cartpole-dqn.ini\n"
            "  crl run %s/cartpole-dqn.ini collector.total_frames=20000 train.seed=3\n\n"
            "  --dry-run   check the experiment as a run would (without stepping an env),\n"
            "              print the resolved config with every default and stop\n"
            "  --overwrite with an existing [train] run_dir: remove what it holds and\n"
            "              start the run there; only a run directory (or an empty one),\n"
            "              never a symbolic link; nothing outside it is touched\n"
            "  --resume RUN_DIR  continue the run of RUN_DIR from its checkpoint (or from\n"
            "              frame 0 when it was stopped before the first), with the\n"
            "              checkpoint's settings plus the overrides given (e.g. another\n"
            "              collector.total_frames); bitwise the same as a run that was\n"
            "              never interrupted (on CPU, same OpenBLAS thread count).  Only\n"
            "              collector.total_frames, [train] log_interval, checkpoint_interval,\n"
            "              eval_interval, eval_episodes, eval_max_steps, stop_return,\n"
            "              run_dir and [env] step_timeout, pin_threads may change; any\n"
            "              other change is refused (exit 2), listing each key\n"
            "  --accept-changes  with --resume: resume with the changed settings anyway\n"
            "              (the run is then no longer bitwise reproducible; run.txt says so)\n"
            "  --seeds LIST  a sweep: one run per seed (LIST as 0-4 or 0,2,5-7), each a\n"
            "              crl run of its own with [train] seed, [env] seed and [replay] seed\n"
            "              set to the seed, in the run directory seed-SEED of the sweep\n"
            "              directory ([train] run_dir, default runs/NAME-seeds-DATE-TIME),\n"
            "              its output in seed-SEED.log there; then summary.csv (per frame\n"
            "              count: seeds, mean, std, min, max of the evaluation return and\n"
            "              each seed's), seeds.csv (per seed: exit status, frames, seconds,\n"
            "              last and best evaluation return, frames and seconds to\n"
            "              stop_return, empty when not reached) and curve.png (mean with\n"
            "              the min-max band).  A seed that fails is reported with its exit\n"
            "              status and the others go on; the sweep then exits 1.  SIGINT or\n"
            "              SIGTERM is passed on to the runs (each checkpoints as above)\n"
            "  --jobs N    with --seeds: run N seeds at a time (default 1)\n"
            "  --quiet     no progress output (the summary is still printed)\n"
            "  -h, --help  print this help\n\n"
            "SIGINT (Ctrl-C) or SIGTERM: the current update finishes, a checkpoint is\n"
            "written, the command that resumes the run is printed and crl run exits with\n"
            "130 (SIGINT) or 143 (SIGTERM); a second signal stops at once, without the\n"
            "checkpoint, with 128 + its number.\n\n"
            "Exit status: 0 ok, 1 runtime failure (a checkpoint is written first) or a\n"
            "checkpoint, metrics.csv or curve.png that could not be written, 2 bad usage\n"
            "or bad config, 130/143 stopped by a signal.\n", crl__examples_dir(), crl__examples_dir());
}

/* The raw returns (the backend's reward, before the [env] transforms) come last, so readers of the first eight
 * columns keep working. */
#define METRICS_HEADER "frames,seconds,fps,episodes,recent_return,loss,eval_return,optim_steps,recent_raw_return," \
                       "eval_raw_return\n"
/* Files of the run directory crl run reads back (metrics.csv, run.txt): regular files up to this size. */
#define RUN_FILE_MAX ((uint64_t)1 << 30)

typedef struct run_ctx {
    crl_cli_ctx *cli;
    char *dir, *ckpt_dir;
    FILE *metrics;
    crl__run_loggers *loggers;   /* [train] loggers besides metrics.csv */
    crl__eval_video *video;      /* [train] record_video */
    bool tty, quiet;
    bool stopping;        /* the progress callback stopped the run for a signal */
    bool metrics_failed;  /* a metrics.csv write failed (and was reported) */
    int64_t log_interval, ckpt_interval, next_log, next_ckpt, logged;
    bool logged_eval; /* the row at `logged` carries an evaluation */
    int64_t ckpt_frames;  /* the frame count of the last checkpoint this process wrote, -1: none */
    char *title;          /* of curve.png: env id, loss, seed */
    double target;        /* [train] stop_return, NaN: unset */
    int64_t total_frames; /* [collector] total_frames, for the percentage and ETA */
    gint64 last_line_us;  /* monotonic time of the last progress line (they are throttled) */
    int64_t printed;      /* the frame count of the last progress line, -1: none */
    double rate;          /* frames/s for the ETA, 0: none yet */
    crl_train_stats last;
} run_ctx;

/* ---- signals ------------------------------------------------------------------------------ */

/* SIGINT and SIGTERM.  The handler only records the signal: its number, written to a pipe (write is
 * async-signal-safe).  A watcher thread reads the pipe: the first signal sets stop_signal, which the
 * progress callback turns into the end of the run after the current update; a second one ends the
 * process at once with 128 + its number. */
static int sig_pipe[2] = { -1, -1 };
static gint stop_signal;     /* the first signal, 0 before it */
static gint have_checkpoint; /* the run directory holds a complete checkpoint */
static char *sig_dir;
static bool sig_newline;
static pthread_t sig_watcher;
static struct sigaction sig_old_int, sig_old_term;

static const char *sig_name(int sig)
{
    return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal";
}

static void on_signal(int sig)
{
    int saved = errno;
    unsigned char b = (unsigned char)sig;
    ssize_t n = write(sig_pipe[1], &b, 1);
    (void)n;
    errno = saved;
}

static void *watch_signals(void *unused)
{
    (void)unused;
    for (;;) {
        unsigned char b;
        ssize_t n = read(sig_pipe[0], &b, 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n != 1 || b == 0)
            return NULL;
        if (g_atomic_int_compare_and_exchange(&stop_signal, 0, (gint)b)) {
            fprintf(stderr, "%scrl run: %s: stopping after the current update to write a checkpoint (a second "
                    "signal stops at once, without it)\n", sig_newline ? "\n" : "", sig_name(b));
            continue;
        }
        char *q = g_shell_quote(sig_dir);
        if (g_atomic_int_get(&have_checkpoint))
            fprintf(stderr, "crl run: %s, a second signal: stopping now, without a checkpoint; the last "
                    "complete one stays in %s/checkpoint\ncrl run: continue with: crl run --resume %s\n",
                    sig_name(b), sig_dir, q);
        else
            fprintf(stderr, "crl run: %s, a second signal: stopping now, before the first checkpoint\ncrl run: "
                    "start again from frame 0 with: crl run --resume %s\n", sig_name(b), q);
        fflush(stderr);
        _exit(128 + b);
    }
}

static int watch_start(const char *dir, bool newline, crl_error *err)
{
    if (pipe2(sig_pipe, O_CLOEXEC) != 0)
        return crl_error_set(err, CRL_E_IO, "cannot create the pipe for signals: %s", g_strerror(errno));
    /* A handler never blocks, even on a full pipe. */
    fcntl(sig_pipe[1], F_SETFL, fcntl(sig_pipe[1], F_GETFL) | O_NONBLOCK);
    sig_dir = g_strdup(dir);
    sig_newline = newline;
    int e = pthread_create(&sig_watcher, NULL, watch_signals, NULL);
    if (e) {
        close(sig_pipe[0]);
        close(sig_pipe[1]);
        sig_pipe[0] = sig_pipe[1] = -1;
        g_free(sig_dir);
        sig_dir = NULL;
        return crl_error_set(err, CRL_E_RUNTIME, "cannot start the signal watcher thread: %s", g_strerror(e));
    }
    /* Also when the shell started crl ignoring SIGINT (a background job of a script): the run is stopped
     * properly whoever asks.  SA_RESTART: library calls never see EINTR. */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, &sig_old_int);
    sigaction(SIGTERM, &sa, &sig_old_term);
    return CRL_OK;
}

static void watch_stop(void)
{
    if (sig_pipe[1] < 0)
        return;
    sigaction(SIGINT, &sig_old_int, NULL);
    sigaction(SIGTERM, &sig_old_term, NULL);
    unsigned char zero = 0;
    bool joined = write(sig_pipe[1], &zero, 1) == 1 && pthread_join(sig_watcher, NULL) == 0;
    if (!joined) {
        /* the watcher may still read the pipe and sig_dir: both stay */
        pthread_detach(sig_watcher);
        return;
    }
    close(sig_pipe[0]);
    close(sig_pipe[1]);
    sig_pipe[0] = sig_pipe[1] = -1;
    g_free(sig_dir);
    sig_dir = NULL;
}

/* ---- files of the run directory -------------------------------------------------------------- */

static int write_text(const char *dir, const char *name, const char *text, crl_error *err)
{
    char *path = g_build_filename(dir, name, NULL);
    GError *ge = NULL;
    int rc = CRL_OK;
    if (!g_file_set_contents(path, text, -1, &ge)) {
        rc = crl_error_set(err, CRL_E_IO, "cannot write '%s': %s", path, ge->message);
        g_error_free(ge);
    }
    g_free(path);
    return rc;
}

/* A file of the run directory, whole: only a regular file of at most RUN_FILE_MAX bytes (a FIFO would
 * block, a device might never end).  NULL with err set; *missing (may be NULL) tells a file that does not
 * exist. */
static char *read_run_file(const char *path, bool *missing, crl_error *err)
{
    char *text = NULL;
    size_t len;
    crl_error e;
    crl_error_clear(&e);
    int rc = crl_file_read(path, "run file", 0, RUN_FILE_MAX, &text, &len, &e);
    if (missing)
        *missing = rc == CRL_E_NOT_FOUND;
    if (rc) {
        crl_error_pass(err, &e, rc);
        return NULL;
    }
    return text;
}

static void clean_leftovers(const run_ctx *r)
{
    size_t n = 0;
    crl_error e;
    crl_error_clear(&e);
    if (crl_ckpt_dir_clean(r->ckpt_dir, &n, &e))
        fprintf(stderr, "crl run: %s\n", e.message);
    if (n)
        fprintf(stderr, "crl run: removed %zu temporary checkpoint director%s (%s.tmp-XXXXXX) left by an "
                "interrupted run\n", n, n == 1 ? "y" : "ies", r->ckpt_dir);
}

static int checkpoint(run_ctx *r, crl_trainer *t, crl_error *err)
{
    int rc = crl_trainer_checkpoint(t, r->ckpt_dir, err);
    if (rc)
        return rc;
    r->ckpt_frames = crl_trainer_frames(t);
    g_atomic_int_set(&have_checkpoint, 1);
    clean_leftovers(r);
    return CRL_OK;
}

static void fmt_num(char *buf, size_t n, double v)
{
    if (isnan(v))
        buf[0] = '\0';
    else
        snprintf(buf, n, "%.6g", v);
}

/* The learning curve of metrics.csv (the whole run, resumed parts included); columns found by name. */
static int curve(run_ctx *r, crl_error *err)
{
    char *mpath = g_build_filename(r->dir, "metrics.csv", NULL);
    crl_error e;
    crl_error_clear(&e);
    char *text = read_run_file(mpath, NULL, &e);
    g_free(mpath);
    if (!text)
        return crl_error_pass(err, &e, CRL_E_IO);
    GArray *a[6];
    for (int k = 0; k < 6; k++)
        a[k] = g_array_new(FALSE, FALSE, sizeof(double));
    GArray *x = a[0], *y = a[1], *ex = a[2], *ey = a[3], *lx = a[4], *ly = a[5];
    char **lines = g_strsplit(text, "\n", -1);
    int cf = -1, cr = -1, cl = -1, ce = -1;
    char **h = g_strsplit(lines[0] ? lines[0] : "", ",", -1);
    for (int i = 0; h[i]; i++) {
        int *c = !strcmp(h[i], "frames") ? &cf : !strcmp(h[i], "recent_return") ? &cr : !strcmp(h[i], "loss") ? &cl
                 : !strcmp(h[i], "eval_return") ? &ce : NULL;
        if (c && *c < 0)
            *c = i;
    }
    g_strfreev(h);
    int need = MAX(MAX(cf, cr), MAX(cl, ce));
    for (char **l = lines + 1; cf >= 0 && cr >= 0 && cl >= 0 && ce >= 0 && *l && **l; l++) {
        char **f = g_strsplit(*l, ",", -1);
        if ((int)g_strv_length(f) > need) {
            double fr = g_ascii_strtod(f[cf], NULL);
            double rr = *f[cr] ? g_ascii_strtod(f[cr], NULL) : NAN, lo = *f[cl] ? g_ascii_strtod(f[cl], NULL) : NAN;
            g_array_append_val(x, fr);
            g_array_append_val(y, rr);
            g_array_append_val(lx, fr);
            g_array_append_val(ly, lo);
            if (*f[ce]) {
                double ev = g_ascii_strtod(f[ce], NULL);
                g_array_append_val(ex, fr);
                g_array_append_val(ey, ev);
            }
        }
        g_strfreev(f);
    }
    g_strfreev(lines);
    g_free(text);
    char *path = g_build_filename(r->dir, "curve.png", NULL);
    crl_curve_plot p = { r->title, (double *)(void *)x->data, (double *)(void *)y->data, x->len,
                         (double *)(void *)ex->data, (double *)(void *)ey->data, ex->len,
                         (double *)(void *)lx->data, (double *)(void *)ly->data, lx->len, r->target };
    int rc = crl__png_write_curve(path, &p, &e);
    g_free(path);
    if (rc == CRL_E_UNSUPPORTED)  /* a crl built without cairo draws no curve */
        rc = CRL_OK;
    else if (rc)
        crl_error_pass(err, &e, rc);
    for (int k = 0; k < 6; k++)
        g_array_free(a[k], TRUE);
    return rc;
}

static int metrics_failed(run_ctx *r, int e, crl_error *err)
{
    r->metrics_failed = true;
    return crl_error_set(err, CRL_E_IO, "cannot write '%s/metrics.csv': %s", r->dir, g_strerror(e));
}

/* Off a terminal with log_interval = 0 a progress line comes at most this often (and at each evaluation
 * and the end), not after every batch. */
#define PLAIN_LINE_US (5 * G_USEC_PER_SEC)
/* On a terminal the line is redrawn at most this often. */
#define TTY_LINE_US (G_USEC_PER_SEC / 10)

/* "1:02:03" or "2:03" */
static void fmt_eta(char *buf, size_t n, double secs)
{
    if (!isfinite(secs) || secs < 0 || secs > 1e8) {
        snprintf(buf, n, "-");
        return;
    }
    long t = lround(secs);
    if (t >= 3600)
        snprintf(buf, n, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(buf, n, "%ld:%02ld", t / 60, t % 60);
}

/* The progress on stdout: on a terminal one line redrawn in place with the percentage of total_frames,
 * frames/s and the time left at that rate (an evaluation keeps its line); off one, plain lines: one per
 * metrics.csv row with log_interval > 0, else one every PLAIN_LINE_US (time-based, whatever the batch
 * size), at each evaluation and at the end.  `row`: this batch wrote a metrics.csv row. */
static void progress_line(run_ctx *r, const crl_train_stats *s, bool row)
{
    gint64 now = g_get_monotonic_time();
    bool first = r->last_line_us == 0, forced = s->evaluated || s->done;
    if (r->tty) {
        if (!forced && !first && now - r->last_line_us < TTY_LINE_US)
            return;
    } else if (!row || (r->log_interval == 0 && !forced && !first && now - r->last_line_us < PLAIN_LINE_US)) {
        return;
    }
    /* the ETA's rate: frames/s between lines, smoothed (the overall fps counts the fast random frames
     * before learning starts and evaluation pauses alike) */
    if (r->printed >= 0 && now > r->last_line_us && s->frames > r->printed) {
        double inst = (double)(s->frames - r->printed) * 1e6 / (double)(now - r->last_line_us);
        r->rate = r->rate > 0 ? 0.8 * r->rate + 0.2 * inst : inst;
    }
    r->last_line_us = now;
    r->printed = s->frames;
    char a[32], b[32], c[32];
    fmt_num(a, sizeof a, s->recent_return);
    fmt_num(b, sizeof b, s->loss);
    fmt_num(c, sizeof c, s->evaluated ? s->eval_return : NAN);
    char line[320];
    if (r->tty) {
        char eta[32];
        double left = (double)(r->total_frames - s->frames);
        double rate = r->rate > 0 ? r->rate : s->fps;
        fmt_eta(eta, sizeof eta, rate > 0 ? left / rate : NAN);
        double pct = r->total_frames > 0 ? 100.0 * (double)s->frames / (double)r->total_frames : 100;
        snprintf(line, sizeof line, "%3.0f%%  frames %lld/%lld  %.0f frames/s  ETA %s  episodes %lld  return %s  "
                 "loss %s%s%s", pct, (long long)s->frames, (long long)r->total_frames, s->fps, eta,
                 (long long)s->episodes, *a ? a : "-", *b ? b : "-", s->evaluated ? "  eval " : "",
                 s->evaluated ? c : "");
        printf("\r\033[K%s%s", line, s->evaluated ? "\n" : "");
    } else {
        snprintf(line, sizeof line, "frames %lld  fps %.0f  episodes %lld  return %s  loss %s%s%s",
                 (long long)s->frames, s->fps, (long long)s->episodes, *a ? a : "-", *b ? b : "-",
                 s->evaluated ? "  eval " : "", s->evaluated ? c : "");
        printf("%s\n", line);
    }
    fflush(stdout);
}

static int progress(void *user, crl_trainer *t, const crl_train_stats *s, crl_error *err)
{
    run_ctx *r = user;
    r->last = *s;
    /* The evaluation at the end of a run comes after its last batch's row: a second row at that frame
     * count carries it (metrics_rewind takes it out again when the run is resumed past it). */
    bool final_eval = s->done && s->evaluated && !(s->frames == r->logged && r->logged_eval);
    bool log = (s->done && s->frames != r->logged) || s->evaluated || s->frames >= r->next_log;
    if (s->done && s->frames == r->logged && !final_eval) {
        /* the last row is written; its line may have been left out by the throttle */
        if (!r->quiet && r->printed != s->frames)
            progress_line(r, s, true);
        return CRL_OK;
    }
    if (log) {
        while (r->next_log <= s->frames)
            r->next_log += r->log_interval > 0 ? r->log_interval : 1;
        char a[32], b[32], c[32], ra[32], rc_[32];
        fmt_num(a, sizeof a, s->recent_return);
        fmt_num(b, sizeof b, s->loss);
        fmt_num(c, sizeof c, s->evaluated ? s->eval_return : NAN);
        fmt_num(ra, sizeof ra, s->recent_raw_return);
        fmt_num(rc_, sizeof rc_, s->evaluated ? s->eval_raw_return : NAN);
        if (fprintf(r->metrics, "%lld,%.3f,%.1f,%lld,%s,%s,%s,%lld,%s,%s\n", (long long)s->frames, s->seconds, s->fps,
                    (long long)s->episodes, a, b, c, (long long)s->optim_steps, ra, rc_) < 0 ||
            fflush(r->metrics) != 0)
            return metrics_failed(r, errno, err);
        int lrc = crl__run_loggers_write(r->loggers, s, err);
        if (lrc)
            return lrc;
        r->logged = s->frames;
        r->logged_eval = s->evaluated;
    }
    if (!r->quiet)
        progress_line(r, s, log);
    if (!s->done && r->ckpt_interval > 0 && s->frames >= r->next_ckpt) {
        while (r->next_ckpt <= s->frames)
            r->next_ckpt += r->ckpt_interval;
        int rc = checkpoint(r, t, err);
        if (rc)
            return rc;
    }
    int sig = g_atomic_int_get(&stop_signal);
    if (sig && !s->done) {
        r->stopping = true;
        return crl_error_set(err, CRL_E_RUNTIME, "stopped by %s", sig_name(sig));
    }
    return CRL_OK;
}

/* [train] record_video: before any work, a crl that can encode and an evaluation env that renders. */
static int check_videos(const crl_config *cfg, crl_error *err)
{
    bool on = false;
    int rc = crl_config_get_bool(cfg, "train", "record_video", false, &on, err);
    if (rc || !on)
        return rc;
#ifndef CRL_CLI_HAVE_FFMPEG
    return crl_error_set(err, CRL_E_UNSUPPORTED, "%s: [train] record_video = true: this crl was built without FFmpeg's "
                         "libraries; install libavcodec-dev libavformat-dev libswscale-dev libavutil-dev and build "
                         "crl again, or set record_video = false", crl_config_origin(cfg, "train", "record_video"));
#else
    return CRL_OK;
#endif
}

static int start_videos(run_ctx *r, const crl_config *cfg, crl_trainer *t, crl_error *err)
{
    bool on = false;
    int rc = crl_config_get_bool(cfg, "train", "record_video", false, &on, err);
    if (rc || !on)
        return rc;
#ifdef CRL_CLI_HAVE_FFMPEG
    crl_env *ev = crl_trainer_eval_env(t);
    if (!ev)
        return crl_error_set(err, CRL_E_CONFIG, "%s: [train] record_video = true records evaluations, but [train] "
                             "eval_episodes = 0: set eval_episodes > 0", crl_config_origin(cfg, "train", "record_video"));
    if (crl_env_render_height(ev) <= 0 || crl_env_render_width(ev) <= 0)
        return crl_error_set(err, CRL_E_CONFIG, "%s: [train] record_video = true, but env %s/%s cannot render (its "
                             "backend declares no frame size); set record_video = false",
                             crl_config_origin(cfg, "train", "record_video"), crl_env_backend_name(ev), crl_env_id(ev));
    char *dir = g_build_filename(r->dir, "videos", NULL);
    if (g_mkdir_with_parents(dir, 0777) != 0) {
        rc = crl_error_set(err, CRL_E_IO, "cannot create '%s': %s", dir, g_strerror(errno));
        g_free(dir);
        return rc;
    }
    r->video = crl__eval_video_new(dir, NULL);
    g_free(dir);
    crl_eval_hook h = crl__eval_video_hook(r->video);
    return crl_trainer_set_eval_hook(t, &h, err);
#else
    (void)r, (void)t;
    return check_videos(cfg, err);
#endif
}

/* On --resume: metrics.csv keeps its rows up to the checkpoint's frame count (a run stopped by kill -9
 * logged past its last checkpoint; the resumed run logs those frames again), less a second row at the
 * frame count of the one before it: the evaluation at the end of the run, which the resumed run goes on
 * past.  Missing: a new one. */
/* A metrics.csv row's frame count: its first column. */
static long long csv_frames(const char *row)
{
    char *end = NULL;
    long long f = g_ascii_strtoll(row, &end, 10);
    return end != row && *end == ',' ? f : -1;
}

static int metrics_rewind(run_ctx *r, int64_t frames, crl_error *err)
{
    char *path = g_build_filename(r->dir, "metrics.csv", NULL);
    bool missing;
    crl_error e;
    crl_error_clear(&e);
    char *text = read_run_file(path, &missing, &e);
    int rc = CRL_OK;
    if (!text) {
        rc = missing ? write_text(r->dir, "metrics.csv", METRICS_HEADER, err) : crl_error_pass(err, &e, CRL_E_IO);
        g_free(path);
        return rc;
    }
    GString *keep = g_string_new(METRICS_HEADER);
    size_t dropped = 0, end_evals = 0;
    const char *rows = strchr(text, '\n');
    crl__metrics_rows_keep(rows ? rows + 1 : "", frames, csv_frames, keep, &dropped, &end_evals);
    if (dropped || end_evals || !g_str_has_prefix(text, METRICS_HEADER)) {
        rc = write_text(r->dir, "metrics.csv", keep->str, err);
        if (!rc)
            crl__metrics_report_rewind(path, frames, dropped, end_evals);
    }
    g_string_free(keep, TRUE);
    g_free(text);
    g_free(path);
    return rc;
}

/* The keys set by files and overrides (no defaults) as INI text: what
 * --resume reloads (the resolved config.ini also lists defaults that only
 * apply to other choices, such as [replay] alpha without prioritized). */
static char *explicit_config(const crl_config *cfg)
{
    char *ini = crl_config_to_ini(cfg);
    char *s = g_strconcat("; the settings of this run (files and overrides, no defaults): crl run --resume reads "
                          "this\n\n", ini, NULL);
    crl_free(ini);
    return s;
}

/* ---- run directories ------------------------------------------------------------------------- */

/* The crl run writing a run directory holds a lock on DIR/run.lock for its whole life: a POSIX record
 * lock, which the kernel releases when the process ends however it ends, and which the env workers it
 * forks do not inherit. */
static int lock_run_dir(const char *dir, int *fd_out, crl_error *err)
{
    char *path = g_build_filename(dir, "run.lock", NULL);
    int rc = CRL_OK;
    int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
        rc = crl_error_set(err, CRL_E_IO, "cannot open the run directory's lock '%s': %s", path,
                           g_strerror(errno));
        goto out;
    }
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    if (fcntl(fd, F_SETLK, &fl) != 0) {
        int e = errno;
        if (e == EAGAIN || e == EACCES) {
            struct flock who = fl;
            long pid = fcntl(fd, F_GETLK, &who) == 0 && who.l_type != F_UNLCK ? (long)who.l_pid : 0;
            char by[64] = "";
            if (pid > 0)
                snprintf(by, sizeof by, " (process %ld)", pid);
            rc = crl_error_set(err, CRL_E_USAGE, "run directory '%s' is in use by another crl run%s, which holds "
                               "%s: wait for it to end, or choose another run directory", dir, by, path);
        } else {
            rc = crl_error_set(err, CRL_E_IO, "cannot lock '%s': %s", path, g_strerror(e));
        }
        close(fd);
        goto out;
    }
    *fd_out = fd;
out:
    g_free(path);
    return rc;
}

static int refuse_existing(const crl_config *cfg, const char *dir, crl_error *err)
{
    const char *at = crl_config_origin(cfg, "train", "run_dir");
    char *q = g_shell_quote(dir);
    int rc = crl_error_set(err, CRL_E_USAGE, "%s: [train] run_dir = %s exists, and a run directory is never "
                           "reused: continue that run with: crl run --resume %s; or choose another run_dir, or "
                           "add --overwrite to replace it", at ? at : "command line", dir, q);
    g_free(q);
    return rc;
}

/* An explicit run_dir that does not exist yet, made with its parents; mkdir is the test, so a run that
 * made it meanwhile is refused as one made before. */
static int create_run_dir(const crl_config *cfg, const char *dir, crl_error *err)
{
    char *parent = g_path_get_dirname(dir);
    int rc = CRL_OK;
    if (g_mkdir_with_parents(parent, 0755) != 0)
        rc = crl_error_set(err, CRL_E_IO, "cannot create '%s' for the run directory: %s", parent,
                           g_strerror(errno));
    else if (mkdir(dir, 0755) != 0)
        rc = errno == EEXIST ? refuse_existing(cfg, dir, err)
                             : crl_error_set(err, CRL_E_IO, "cannot create run directory '%s': %s", dir,
                                             g_strerror(errno));
    g_free(parent);
    return rc;
}

/* runs/NAME[TAG]-YYYYmmdd-HHMMSS from the first experiment file's name, with -2, -3, ... when the name is
 * taken (runs started in the same second): made by mkdir, which fails on an existing name, so no two
 * runs ever share one. */
int crl__run_default_dir(const crl_cli_ctx *cli, const char *tag, char **out, crl_error *err)
{
    char *base = g_path_get_basename(cli->files && cli->files[0] ? cli->files[0] : "run");
    char *dot = strrchr(base, '.');
    if (dot && dot != base)
        *dot = '\0';
    char stamp[32];
    time_t now = time(NULL);
    struct tm tm;
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", gmtime_r(&now, &tm));
    char *stem = g_strdup_printf("runs/%s%s-%s", base, tag ? tag : "", stamp);
    g_free(base);
    int rc = CRL_OK;
    *out = NULL;
    if (g_mkdir_with_parents("runs", 0755) != 0) {
        rc = crl_error_set(err, CRL_E_IO, "cannot create the directory 'runs' for the run: %s", g_strerror(errno));
        goto out;
    }
    for (unsigned i = 1; i <= 10000 && !*out && !rc; i++) {
        char *d = i == 1 ? g_strdup(stem) : g_strdup_printf("%s-%u", stem, i);
        if (mkdir(d, 0755) == 0)
            *out = d;
        else {
            if (errno != EEXIST)
                rc = crl_error_set(err, CRL_E_IO, "cannot create run directory '%s': %s", d, g_strerror(errno));
            g_free(d);
        }
    }
    if (!*out && !rc)
        rc = crl_error_set(err, CRL_E_EXISTS, "the run directories %s to %s-10000 all exist; set [train] "
                           "run_dir", stem, stem);
out:
    g_free(stem);
    return rc;
}

/* What crl run writes in a run directory: --overwrite replaces only a directory holding one of them, or
 * an empty one. */
static const char *const run_files[] = { "experiment.ini", "config.ini", "run.txt", "metrics.csv", "run.lock",
                                         "checkpoint", NULL };

/* --overwrite: an existing run directory emptied (and locked first, so no live run loses it); a missing
 * one made. */
static int overwrite_run_dir(const crl_config *cfg, const char *dir, int *lockfd, crl_error *err)
{
    struct stat st;
    if (lstat(dir, &st) != 0) {
        if (errno != ENOENT)
            return crl_error_set(err, CRL_E_IO, "cannot look at run directory '%s': %s", dir, g_strerror(errno));
        int rc = create_run_dir(cfg, dir, err);
        return rc ? rc : lock_run_dir(dir, lockfd, err);
    }
    if (S_ISLNK(st.st_mode))
        return crl_error_set(err, CRL_E_USAGE, "--overwrite: run directory '%s' is a symbolic link; --overwrite "
                             "replaces a run directory itself, never what a link points to: name the directory",
                             dir);
    if (!S_ISDIR(st.st_mode))
        return crl_error_set(err, CRL_E_USAGE, "--overwrite: '%s' exists and is not a directory; remove it or "
                             "choose another run_dir", dir);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *dh = dfd < 0 ? NULL : fdopendir(dfd);
    if (!dh) {
        int e = errno;
        if (dfd >= 0)
            close(dfd);
        return crl_error_set(err, CRL_E_IO, "cannot list run directory '%s': %s", dir, g_strerror(e));
    }
    GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
    bool is_run = false;
    struct dirent *de;
    while ((de = readdir(dh))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        g_ptr_array_add(names, g_strdup(de->d_name));
        for (const char *const *f = run_files; *f; f++)
            is_run |= !strcmp(de->d_name, *f);
    }
    int rc = CRL_OK;
    if (names->len && !is_run)
        rc = crl_error_set(err, CRL_E_USAGE, "--overwrite: '%s' holds no crl run (no experiment.ini, config.ini, "
                           "run.txt, metrics.csv or checkpoint): --overwrite only replaces run directories; "
                           "choose another run_dir", dir);
    if (!rc)
        rc = lock_run_dir(dir, lockfd, err);
    int first = 0;
    for (guint i = 0; !rc && i < names->len; i++) {
        const char *name = g_ptr_array_index(names, i);
        if (strcmp(name, "run.lock")) {
            int e = crl__remove_at(dfd, name, st.st_dev, 0);
            if (e && !first) {
                first = e;
                rc = crl_error_set(err, CRL_E_IO, "--overwrite: cannot remove '%s/%s': %s", dir, name,
                                   g_strerror(e));
            }
        }
    }
    if (!rc && names->len)
        fprintf(stderr, "crl run: --overwrite: removed the previous run in %s\n", dir);
    g_ptr_array_free(names, TRUE);
    closedir(dh);
    return rc;
}

/* ---- resume: the settings against the checkpoint's -------------------------------------------- */

/* Settings a resume may change while it still continues bitwise as the run never interrupted: how long
 * it runs, when it logs, evaluates (on its own env and seeds) and checkpoints, where it writes, and how
 * long an executor waits for a worker or where its threads sit.  Everything else feeds the trainer's
 * state: the seeds, the env and its transforms and executor, the collector's batches, the replay buffer,
 * the loss, the optimizer, the updates per batch and the plugins. */
static const struct {
    const char *section, *key;
} resume_free[] = {
    { "collector", "total_frames" }, { "train", "log_interval" },   { "train", "checkpoint_interval" },
    { "train", "eval_interval" },    { "train", "eval_episodes" },  { "train", "eval_max_steps" },
    { "train", "stop_return" },      { "train", "run_dir" },        { "env", "step_timeout" },
    { "env", "pin_threads" },        { "train", "stop_on" },        { "train", "loggers" },
    { "train", "record_video" },
};

static bool resume_may_change(const char *section, const char *key)
{
    for (size_t i = 0; i < G_N_ELEMENTS(resume_free); i++)
        if (!strcmp(resume_free[i].section, section) && !strcmp(resume_free[i].key, key))
            return true;
    return false;
}

typedef struct setting_change {
    char *section, *key, *from, *from_at, *to, *to_at;
    bool breaks;  /* the resumed run would not be bitwise the uninterrupted one */
} setting_change;

static void setting_change_free(gpointer p)
{
    setting_change *c = p;
    g_free(c->section);
    g_free(c->key);
    g_free(c->from);
    g_free(c->from_at);
    g_free(c->to);
    g_free(c->to_at);
    g_free(c);
}

static const crl_option *option_named(const crl_option *const *tables, size_t n, const char *key)
{
    for (size_t t = 0; t < n; t++)
        for (const crl_option *o = tables[t]; o->type != CRL_OPT_END; o++) {
            size_t len = strlen(o->name);
            if ((o->flags & CRL_OPT_PREFIX) ? !strncmp(key, o->name, len) && key[len] : !strcmp(key, o->name))
                return o;
        }
    return NULL;
}

/* What [section] key resolves to in cfg: its value or its default (NULL: neither), and where that came
 * from; *opt the option declaring it (NULL: undeclared). */
static const char *resolve(const crl_config *cfg, const crl_schema *schema, const char *section,
                           const char *key, const char **at, const crl_option **opt)
{
    size_t n = 0;
    const crl_option *const *tables = crl_schema_tables(schema, cfg, section, &n);
    *opt = tables ? option_named(tables, n, key) : NULL;
    const char *v = crl_config_get(cfg, section, key);
    if (v) {
        *at = crl_config_origin(cfg, section, key);
        return v;
    }
    *at = "default";
    if (*opt && !((*opt)->flags & CRL_OPT_PREFIX) && (*opt)->default_value)
        return (*opt)->default_value;
    *at = "not set";
    return NULL;
}

/* Comma-separated lists, item by item (numbers by value). */
static bool same_list(const char *a, const char *b, bool numbers)
{
    char **x = g_strsplit(a, ",", -1), **y = g_strsplit(b, ",", -1);
    bool same = g_strv_length(x) == g_strv_length(y);
    for (size_t i = 0; same && x[i]; i++) {
        g_strstrip(x[i]);
        g_strstrip(y[i]);
        double u, v;
        same = numbers && crl_parse_double(x[i], &u) && crl_parse_double(y[i], &v) ? u == v : !strcmp(x[i], y[i]);
    }
    g_strfreev(x);
    g_strfreev(y);
    return same;
}

/* Two values of one option the same once parsed as it declares ("0.5" and "5e-1", "yes" and "true"). */
static bool same_value(const crl_option *o, const char *a, const char *b)
{
    if (!a || !b)
        return a == b;
    bool p, q;
    int64_t i, j;
    double u, v;
    uint64_t s, t;
    switch (o ? o->type : CRL_OPT_STRING) {
    case CRL_OPT_BOOL:
        if (crl_parse_bool(a, &p) && crl_parse_bool(b, &q))
            return p == q;
        break;
    case CRL_OPT_INT:
        if (crl_parse_int(a, &i) && crl_parse_int(b, &j))
            return i == j;
        break;
    case CRL_OPT_DOUBLE:
        if (crl_parse_double(a, &u) && crl_parse_double(b, &v))
            return u == v;
        break;
    case CRL_OPT_SIZE:
        if (crl_parse_size(a, &s) && crl_parse_size(b, &t))
            return s == t;
        break;
    case CRL_OPT_LIST:
        return same_list(a, b, false);
    case CRL_OPT_DOUBLES:
        return same_list(a, b, true);
    default:
        break;
    }
    char *x = g_strstrip(g_strdup(a)), *y = g_strstrip(g_strdup(b));
    bool same = !strcmp(x, y);
    g_free(x);
    g_free(y);
    return same;
}

static void add_name(GPtrArray *names, GHashTable *seen, const char *name)
{
    if (!g_hash_table_contains(seen, name)) {
        char *n = g_strdup(name);
        g_hash_table_add(seen, n);
        g_ptr_array_add(names, n);
    }
}

/* The keys of section in cfg: declared ones (defaults included) and those the config sets. */
static void add_keys(GPtrArray *keys, GHashTable *seen, const crl_config *cfg, const crl_schema *schema,
                     const char *section)
{
    size_t n = 0;
    const crl_option *const *tables = crl_schema_tables(schema, cfg, section, &n);
    for (size_t t = 0; tables && t < n; t++)
        for (const crl_option *o = tables[t]; o->type != CRL_OPT_END; o++)
            if (!(o->flags & CRL_OPT_PREFIX))
                add_name(keys, seen, o->name);
    for (size_t k = 0; k < crl_config_key_count(cfg, section); k++)
        add_name(keys, seen, crl_config_key_at(cfg, section, k));
}

/* Every key whose resolved value differs between the checkpoint's settings `from` and the resume's `to`. */
static GPtrArray *setting_changes(const crl_config *from, const crl_config *to, const crl_schema *schema)
{
    GPtrArray *out = g_ptr_array_new_with_free_func(setting_change_free);
    GPtrArray *sections = g_ptr_array_new();
    GHashTable *seen_sec = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    for (size_t i = 0; i < crl_config_section_count(to); i++)
        add_name(sections, seen_sec, crl_config_section_at(to, i));
    for (size_t i = 0; i < crl_config_section_count(from); i++)
        add_name(sections, seen_sec, crl_config_section_at(from, i));
    for (guint s = 0; s < sections->len; s++) {
        const char *sec = g_ptr_array_index(sections, s);
        GPtrArray *keys = g_ptr_array_new();
        GHashTable *seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
        add_keys(keys, seen, to, schema, sec);
        add_keys(keys, seen, from, schema, sec);
        for (guint k = 0; k < keys->len; k++) {
            const char *key = g_ptr_array_index(keys, k), *at_from, *at_to;
            const crl_option *o_from, *o_to;
            const char *a = resolve(from, schema, sec, key, &at_from, &o_from);
            const char *b = resolve(to, schema, sec, key, &at_to, &o_to);
            if (same_value(o_to ? o_to : o_from, a, b))
                continue;
            setting_change *c = g_new0(setting_change, 1);
            c->section = g_strdup(sec);
            c->key = g_strdup(key);
            c->from = g_strdup(a ? a : "(not set)");
            c->from_at = g_strdup(at_from ? at_from : "?");
            c->to = g_strdup(b ? b : "(not set)");
            c->to_at = g_strdup(at_to ? at_to : "?");
            c->breaks = !resume_may_change(sec, key);
            g_ptr_array_add(out, c);
        }
        g_ptr_array_free(keys, TRUE);
        g_hash_table_unref(seen);
    }
    g_ptr_array_free(sections, TRUE);
    g_hash_table_unref(seen_sec);
    return out;
}

/* "  [section] key: OLD (WHERE) -> NEW (WHERE)" lines of the changes that break (or do not) bitwise resume. */
static char *changes_text(const GPtrArray *changes, bool breaking)
{
    GString *s = g_string_new(NULL);
    for (guint i = 0; i < changes->len; i++) {
        const setting_change *c = g_ptr_array_index(changes, i);
        if (c->breaks == breaking)
            g_string_append_printf(s, "  [%s] %s: %s (%s) -> %s (%s)\n", c->section, c->key, c->from, c->from_at,
                                   c->to, c->to_at);
    }
    return g_string_free(s, FALSE);
}

/* The settings the checkpoint was written with (the file `path`), against the resume's config: refused
 * (CRL_E_CONFIG, each change listed) when one breaks bitwise resume, unless `accept`.  *changes receives
 * all of them. */
static int compare_with_checkpoint(const crl_cli_ctx *ctx, const char *path, bool accept, GPtrArray **changes,
                                   crl_error *err)
{
    *changes = NULL;
    crl_error e;
    crl_error_clear(&e);
    crl_config *from = crl_config_new(&e);
    if (!from)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    int rc = crl_config_load_defaults(from, err);
    if (!rc && (rc = crl_config_load_file(from, path, CRL_LAYER_FILE, err)))
        crl_error_prefix(err, "the checkpoint's settings: ");
    if (rc) {
        crl_config_free(from);
        return rc;
    }
    *changes = setting_changes(from, ctx->cfg, ctx->schema);
    crl_config_free(from);
    size_t breaking = 0;
    for (guint i = 0; i < (*changes)->len; i++)
        breaking += ((setting_change *)g_ptr_array_index(*changes, i))->breaks;
    if (!breaking)
        return CRL_OK;
    char *list = changes_text(*changes, true);
    if (accept) {
        fprintf(stderr, "crl run: --accept-changes: resuming with %zu changed setting%s; the run is no longer "
                "bitwise reproducible (run.txt says so):\n%s", breaking, breaking == 1 ? "" : "s", list);
    } else {
        list[strlen(list) - 1] = '\0';
        rc = crl_error_set(err, CRL_E_CONFIG, "%zu setting%s differ%s from the checkpoint's, and the resumed run "
                           "would not continue bitwise as the run never interrupted:\n%s\nKeep %s as the "
                           "checkpoint has %s, or add --accept-changes to resume with %s anyway (the run is then "
                           "no longer bitwise reproducible)", breaking, breaking == 1 ? "" : "s",
                           breaking == 1 ? "s" : "", list, breaking == 1 ? "it" : "them",
                           breaking == 1 ? "it" : "them", breaking == 1 ? "it" : "them");
    }
    g_free(list);
    return rc;
}

static char *run_info(const crl_cli_ctx *cli, int argc, char **argv)
{
    GString *s = g_string_new("command:");
    for (int i = 0; i < argc; i++)
        g_string_append_printf(s, " %s", argv[i]);
    const char *seed = crl_config_get(cli->cfg, "train", "seed");
    g_string_append_printf(s, "\ncrl: %s\nseed: %s\nplugins:\n", crl_version(), seed ? seed : "0 (default)");
    for (size_t i = 0; i < crl_host_plugin_count(cli->host); i++) {
        const crl_plugin_info *p = crl_host_plugin_at(cli->host, i);
        g_string_append_printf(s, "  %s %s (ABI %u.%u) %s\n", p->name, p->version, p->abi_major, p->abi_minor,
                               p->path);
    }
    return g_string_free(s, FALSE);
}

static int run_main(int argc, char **argv)
{
    bool dry = false, quiet = false, overwrite = false, accept = false;
    const char *resume = NULL, *seeds = NULL, *jobs = NULL;
    GPtrArray *rest = g_ptr_array_new_with_free_func(g_free);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            g_ptr_array_free(rest, TRUE);
            return CRL_EXIT_OK;
        }
        if (!strcmp(argv[i], "--dry-run"))
            dry = true;
        else if (!strcmp(argv[i], "--quiet"))
            quiet = true;
        else if (!strcmp(argv[i], "--overwrite"))
            overwrite = true;
        else if (!strcmp(argv[i], "--accept-changes"))
            accept = true;
        else if (!strcmp(argv[i], "--resume") && i + 1 < argc)
            resume = argv[++i];
        else if (!strncmp(argv[i], "--seeds=", 8))
            seeds = argv[i] + 8;
        else if (!strncmp(argv[i], "--jobs=", 7))
            jobs = argv[i] + 7;
        else if (!strcmp(argv[i], "--seeds") || !strcmp(argv[i], "--jobs")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "crl run: %s needs a value (e.g. %s; see crl run --help)\n", argv[i],
                        argv[i][2] == 's' ? "--seeds 0-4 or --seeds 0,2,5-7" : "--jobs 2");
                g_ptr_array_free(rest, TRUE);
                return CRL_EXIT_USAGE;
            }
            const char **v = argv[i][2] == 's' ? &seeds : &jobs;
            *v = argv[++i];
        } else if (argv[i][0] == '-' && argv[i][1] == '-') {
            fprintf(stderr, "crl run: unknown option '%s' (see crl run --help)\n", argv[i]);
            g_ptr_array_free(rest, TRUE);
            return CRL_EXIT_USAGE;
        } else
            g_ptr_array_add(rest, g_strdup(argv[i]));
    }
    if ((overwrite && resume) || (accept && !resume)) {
        fprintf(stderr, "crl run: %s (see crl run --help)\n",
                overwrite && resume ? "--overwrite starts a new run; it does not go with --resume"
                                    : "--accept-changes goes with --resume RUN_DIR");
        g_ptr_array_free(rest, TRUE);
        return CRL_EXIT_USAGE;
    }
    if (seeds || jobs) {
        const char *why = !seeds ? "--jobs goes with --seeds LIST"
                          : resume ? "--seeds starts new runs; it does not go with --resume (resume each "
                                     "seed's run directory on its own)"
                          : dry ? "--dry-run checks one run; drop --seeds"
                          : overwrite ? "--overwrite does not go with --seeds: remove the sweep directory, or "
                                        "choose another [train] run_dir"
                                      : NULL;
        if (why) {
            fprintf(stderr, "crl run: %s (see crl run --help)\n", why);
            g_ptr_array_free(rest, TRUE);
            return CRL_EXIT_USAGE;
        }
        int st = crl__run_sweep(seeds, jobs, quiet, (int)rest->len, (char **)rest->pdata);
        g_ptr_array_free(rest, TRUE);
        return st;
    }
    /* --resume: the settings the checkpoint was written with (those of the run directory when it holds no
     * checkpoint yet, or one of an older crl), the overrides after them. */
    char *base = NULL;
    bool has_ckpt = false;
    if (resume) {
        char *ck = g_build_filename(resume, "checkpoint", NULL);
        char *ck_ini = g_build_filename(ck, CRL_TRAINER_SETTINGS_FILE, NULL);
        struct stat st;
        has_ckpt = lstat(ck, &st) == 0;
        base = has_ckpt && lstat(ck_ini, &st) == 0 ? g_strdup(ck_ini)
                                                    : g_build_filename(resume, "experiment.ini", NULL);
        g_free(ck);
        g_free(ck_ini);
        g_ptr_array_insert(rest, 0, g_strdup(base));
        g_ptr_array_add(rest, g_strdup_printf("train.run_dir=%s", resume));
    }
    crl_cli_ctx ctx;
    crl_error err = { 0 };
    int rc = crl__cli_setup(&ctx, (int)rest->len, (char **)rest->pdata,
                            CRL_CLI_LOAD_PLUGINS | CRL_CLI_VALIDATE | CRL_CLI_REQUIRE_FILE, &err);
    g_ptr_array_free(rest, TRUE);
    if (rc && resume)
        crl_error_prefix(&err, "--resume %s: ", resume);
    if (rc) {
        g_free(base);
        return crl__cli_setup_failed("run", &err);
    }
    bool mpi = crl__mpi_wanted(ctx.cfg);
    if (mpi) {
        int rank = 0, st = crl__mpi_begin(&ctx, resume != NULL, &rank, &err);
        if (st || rank > 0) {
            if (st && err.code)
                crl__cli_print_error("run", &err);
            if (!st)
                st = crl__mpi_collector_main(&ctx);
            g_free(base);
            crl__cli_teardown(&ctx);
            return st;
        }
    }
    GPtrArray *changes = NULL;
    if (resume && has_ckpt && compare_with_checkpoint(&ctx, base, accept, &changes, &err)) {
        crl_error_prefix(&err, "--resume %s: ", resume);
        crl__cli_print_error("run", &err);
        if (changes)
            g_ptr_array_free(changes, TRUE);
        g_free(base);
        crl__cli_teardown(&ctx);
        return crl__cli_exit_code(&err);
    }
    g_free(base);
    /* Every config error before any work: no run directory, no env step. */
    char *resolved = NULL;
    const char *dir = crl_config_get(ctx.cfg, "train", "run_dir");
    bool explicit_dir = dir && *dir;
    if (crl_experiment_check(ctx.host, ctx.cfg, NULL, CRL_CHECK_TRAIN, &err) || crl__run_loggers_check(ctx.cfg, &err) || check_videos(ctx.cfg, &err) ||
        !(resolved = crl_config_show(ctx.cfg, ctx.schema, &err))) {
        crl__cli_print_error("run", &err);
        if (changes)
            g_ptr_array_free(changes, TRUE);
        crl__cli_teardown(&ctx);
        return crl__cli_exit_code(&err);
    }
    if (dry) {
        fputs(resolved, stdout);
        crl_free(resolved);
        if (changes)
            g_ptr_array_free(changes, TRUE);
        crl__cli_teardown(&ctx);
        return CRL_EXIT_OK;
    }
    crl__blas_single_thread();
    int status = CRL_EXIT_RUNTIME, lockfd = -1;
    run_ctx r = { 0 };
    r.cli = &ctx;
    r.quiet = quiet;
    r.tty = isatty(STDOUT_FILENO);
    r.ckpt_frames = -1;
    r.printed = -1;
    char *info = NULL, *explicit = NULL;
    crl_trainer *t = NULL;
    if (crl_config_get_int(ctx.cfg, "train", "log_interval", 0, &r.log_interval, &err) ||
        crl_config_get_int(ctx.cfg, "train", "checkpoint_interval", 0, &r.ckpt_interval, &err))
        goto fail;
    r.next_ckpt = r.ckpt_interval;
    /* Refused before the work of building the trainer; made after it (a run that cannot start leaves no
     * directory). */
    if (resume) {
        r.dir = g_strdup(resume);
        if (lock_run_dir(r.dir, &lockfd, &err))
            goto fail;
    } else if (explicit_dir && !overwrite) {
        struct stat st;
        if (lstat(dir, &st) == 0) {
            refuse_existing(ctx.cfg, dir, &err);
            goto fail;
        }
    }
    if (!(t = mpi ? crl__mpi_trainer(&ctx, &err) : crl_trainer_from_config(ctx.host, ctx.cfg, &err)))
        goto fail;
    if (!resume) {
        if (explicit_dir && overwrite)
            rc = overwrite_run_dir(ctx.cfg, dir, &lockfd, &err);
        else if (explicit_dir)
            rc = create_run_dir(ctx.cfg, dir, &err);
        else
            rc = crl__run_default_dir(&ctx, NULL, &r.dir, &err);
        if (rc)
            goto fail;
        if (!r.dir)
            r.dir = g_strdup(dir);
        if (lockfd < 0 && lock_run_dir(r.dir, &lockfd, &err))
            goto fail;
    }
    r.ckpt_dir = g_build_filename(r.dir, "checkpoint", NULL);
    info = run_info(&ctx, argc, argv);
    explicit = explicit_config(ctx.cfg);
    if (!resume && (write_text(r.dir, "config.ini", resolved, &err) ||
                    write_text(r.dir, "experiment.ini", explicit, &err) || write_text(r.dir, "run.txt", info, &err)))
        goto fail;
    if (!quiet)
        printf("run directory: %s\n", r.dir);
    fflush(stdout);
    if (watch_start(r.dir, r.tty && !quiet, &err))
        goto fail;
    if (resume) {
        clean_leftovers(&r);
        if (has_ckpt) {
            if (crl_trainer_resume(t, r.ckpt_dir, &err))
                goto fail;
            g_atomic_int_set(&have_checkpoint, 1);
        } else {
            fprintf(stderr, "crl run: --resume %s: no checkpoint yet (the run was stopped before its first): "
                    "starting again from frame 0\n", resume);
        }
        int64_t fr = crl_trainer_frames(t), li = r.log_interval > 0 ? r.log_interval : 1;
        if (has_ckpt) {
            r.next_log = (fr / li + 1) * li;   /* as the uninterrupted run would have it */
            r.logged = fr;
        }
        while (r.next_ckpt <= crl_trainer_frames(t) && r.ckpt_interval > 0)
            r.next_ckpt += r.ckpt_interval;
        char *p = g_build_filename(r.dir, "run.txt", NULL);
        bool missing;
        crl_error re;
        crl_error_clear(&re);
        char *old = read_run_file(p, &missing, &re);
        g_free(p);
        if (!old && !missing) {
            crl_error_pass(&err, &re, CRL_E_IO);
            goto fail;
        }
        char *all = changes ? changes_text(changes, false) : NULL, *breaking = changes ? changes_text(changes, true)
                                                                                      : NULL;
        GString *s = g_string_new(old ? old : "");
        g_string_append_printf(s, "\nresumed at frame %lld:\n%s", (long long)crl_trainer_frames(t), info);
        if (all && *all)
            g_string_append_printf(s, "changed settings:\n%s", all);
        if (breaking && *breaking)
            g_string_append_printf(s, "changed settings accepted with --accept-changes: from frame %lld the run is "
                                   "no longer bitwise reproducible (not the run an uninterrupted crl run would "
                                   "give):\n%s", (long long)crl_trainer_frames(t), breaking);
        g_free(all);
        g_free(breaking);
        g_free(old);
        g_free(info);
        info = g_string_free(s, FALSE);
        if (write_text(r.dir, "config.ini", resolved, &err) || write_text(r.dir, "experiment.ini", explicit, &err) ||
            write_text(r.dir, "run.txt", info, &err) || metrics_rewind(&r, crl_trainer_frames(t), &err))
            goto fail;
    }
    char *mpath = g_build_filename(r.dir, "metrics.csv", NULL);
    r.metrics = fopen(mpath, resume ? "a" : "w");
    if (!r.metrics)
        crl_error_set(&err, CRL_E_IO, "cannot write '%s': %s", mpath, g_strerror(errno));
    g_free(mpath);
    if (!r.metrics)
        goto fail;
    if (!resume && (fputs(METRICS_HEADER, r.metrics) < 0 || fflush(r.metrics) != 0)) {
        metrics_failed(&r, errno, &err);
        goto fail;
    }
    if (crl__run_loggers_open(ctx.cfg, r.dir, resume ? crl_trainer_frames(t) : -1, &r.loggers, &err))
        goto fail;
    if (start_videos(&r, ctx.cfg, t, &err))
        goto fail;
    {
        const char *id = crl_config_get(ctx.cfg, "env", "id"), *loss = crl_config_get(ctx.cfg, "loss", "type");
        const char *seed = crl_config_get(ctx.cfg, "train", "seed");
        r.title = g_strdup_printf("%s, %s, seed %s", id ? id : "env", loss ? loss : "loss", seed ? seed : "0");
        r.target = NAN;
        if (crl_config_get(ctx.cfg, "train", "stop_return") &&
            crl_config_get_double(ctx.cfg, "train", "stop_return", 0, &r.target, &err))
            goto fail;
        if (crl_config_get_int(ctx.cfg, "collector", "total_frames", 0, &r.total_frames, &err))
            goto fail;
    }
    int trc = CRL_OK;
    if (!g_atomic_int_get(&stop_signal))
        trc = crl_trainer_run(t, progress, &r, &err);
    if (r.tty && !quiet)
        printf("\n");
    fflush(stdout);
    int sig = g_atomic_int_get(&stop_signal);
    bool ckpt_failed = false, failed = false;
    int64_t frames = crl_trainer_frames(t);
    /* Whatever happened, keep what was learned: a checkpoint (unless this very state was just written),
     * metrics.csv and the curve; each failure is reported and fails the command. */
    crl_error e2;
    crl_error_clear(&e2);
    if (r.ckpt_frames != frames && checkpoint(&r, t, &e2)) {
        fprintf(stderr, "crl run: %s\n", e2.message);
        ckpt_failed = failed = true;
    }
    if (fclose(r.metrics) != 0 && !r.metrics_failed) {
        crl_error_clear(&e2);
        metrics_failed(&r, errno, &e2);
        fprintf(stderr, "crl run: %s\n", e2.message);
    }
    r.metrics = NULL;
    failed |= r.metrics_failed;
    crl_error_clear(&e2);
    if (crl__run_loggers_close(r.loggers, &e2)) {
        fprintf(stderr, "crl run: %s\n", e2.message);
        failed = true;
    }
    r.loggers = NULL;
    crl_error_clear(&e2);
    if (curve(&r, &e2)) {
        fprintf(stderr, "crl run: cannot draw the learning curve: %s\n", e2.message);
        failed = true;
    }
    if (trc && !r.stopping) {
        fprintf(stderr, "crl run: stopped: %s\n", err.message);
        if (!ckpt_failed)
            fprintf(stderr, "crl run: the last checkpoint is in %s\n", r.ckpt_dir);
    }
    if (sig) {
        char *q = g_shell_quote(r.dir);
        if (!ckpt_failed)
            fprintf(stderr, "crl run: stopped by %s at frame %lld; the checkpoint is in %s\n", sig_name(sig),
                    (long long)frames, r.ckpt_dir);
        else if (g_atomic_int_get(&have_checkpoint))
            fprintf(stderr, "crl run: stopped by %s at frame %lld, but its checkpoint could not be written (see "
                    "above); the last complete one stays in %s\n", sig_name(sig), (long long)frames, r.ckpt_dir);
        else
            fprintf(stderr, "crl run: stopped by %s at frame %lld, but its checkpoint could not be written (see "
                    "above), and there is no earlier one: resuming starts again from frame 0\n", sig_name(sig),
                    (long long)frames);
        fprintf(stderr, "crl run: continue with: crl run --resume %s\n", q);
        g_free(q);
        status = 128 + sig;
        goto done;
    }
    if (trc && !r.stopping) {
        status = CRL_EXIT_RUNTIME;
        goto done;
    }
    printf("summary:\n  frames:           %lld in %.1f s (%.0f frames/s)\n  optimizer steps:  %lld\n"
           "  episodes:         %lld\n", (long long)r.last.frames, r.last.seconds, r.last.fps,
           (long long)r.last.optim_steps, (long long)r.last.episodes);
    if (!isnan(r.last.recent_return))
        printf("  recent return:    %.6g\n", r.last.recent_return);
    if (!isnan(r.last.eval_return))
        printf("  eval return:      %.6g\n", r.last.eval_return);
    /* the raw returns when the transforms changed the reward */
    if (!isnan(r.last.recent_raw_return) && r.last.recent_raw_return != r.last.recent_return)
        printf("  recent (raw):     %.6g\n", r.last.recent_raw_return);
    if (!isnan(r.last.eval_raw_return) && r.last.eval_raw_return != r.last.eval_return)
        printf("  eval (raw):       %.6g\n", r.last.eval_raw_return);
    double stop;
    const char *stop_on = crl_config_get(ctx.cfg, "train", "stop_on");
    double stop_at = stop_on && !strcmp(stop_on, "transformed") ? r.last.eval_return : r.last.eval_raw_return;
    if (crl_config_get(ctx.cfg, "train", "stop_return") &&
        !crl_config_get_double(ctx.cfg, "train", "stop_return", 0, &stop, &err) && stop_at >= stop)
        printf("  stopped:          the evaluation return reached stop_return = %g\n", stop);
    crl__mpi_summary(stdout);
    printf("  run directory:    %s\n", r.dir);
    if (failed)
        fprintf(stderr, "crl run: the run ended, but what is listed above could not be written: exit status 1\n");
    status = failed ? CRL_EXIT_RUNTIME : CRL_EXIT_OK;
    goto done;
fail:
    crl__cli_print_error("run", &err);
    status = crl__cli_exit_code(&err);
done:
    fflush(stdout);
    watch_stop();
    if (r.metrics)
        fclose(r.metrics);
    crl__run_loggers_close(r.loggers, NULL);
#ifdef CRL_CLI_HAVE_FFMPEG
    crl__eval_video_free(r.video);
#endif
    crl_trainer_free(t);
    if (lockfd >= 0)
        close(lockfd);
    if (changes)
        g_ptr_array_free(changes, TRUE);
    g_free(r.dir);
    g_free(r.title);
    g_free(r.ckpt_dir);
    g_free(info);
    g_free(explicit);
    crl_free(resolved);
    crl__cli_teardown(&ctx);
    return status;
}

int crl__cmd_run(int argc, char **argv)
{
    /* the learner rank stops the collector ranks whichever way the run ended */
    return crl__mpi_end(run_main(argc, argv));
}
