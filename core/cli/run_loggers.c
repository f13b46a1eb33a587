/* The loggers of crl run besides metrics.csv ([train] loggers): metrics.jsonl, one JSON object a row, and
 * TensorBoard event files (tb_events.c).  They get the rows metrics.csv gets. */
#include "config.h"
#include "cli-private.h"

#include <crl/file.h>
#include <crl/trainer.h>

#include <errno.h>
#include <glib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

struct crl__run_loggers {
    char *dir;
    FILE *jsonl;
    char *jsonl_path;
#ifdef CRL_CLI_HAVE_PROTOBUF_C
    crl__tb_writer *tb;
#endif
    double t0;   /* wall-clock seconds at the run's start (TensorBoard's wall_time = t0 + seconds) */
};

void crl__metrics_rows_keep(const char *rows, int64_t frames, long long (*frames_of)(const char *row), GString *keep,
                            size_t *dropped, size_t *end_evals)
{
    long long prev = -1;
    for (const char *p = rows; *p;) {
        const char *nl = strchr(p, '\n');
        long long f = nl ? frames_of(p) : -1;
        if (f < 0 || f > frames) {
            (*dropped)++;
        } else if (f == prev) {
            (*end_evals)++;
        } else {
            g_string_append_len(keep, p, nl + 1 - p);
            prev = f;
        }
        p = nl ? nl + 1 : p + strlen(p);
    }
}

void crl__metrics_report_rewind(const char *path, int64_t frames, size_t dropped, size_t end_evals)
{
    if (dropped)
        fprintf(stderr, "crl run: %s: dropped %zu row%s logged after the checkpoint's frame %lld\n", path, dropped,
                dropped == 1 ? "" : "s", (long long)frames);
    if (end_evals)
        fprintf(stderr, "crl run: %s: took out the end-of-run evaluation row%s (%zu): the resumed run goes on past "
                "%s\n", path, end_evals == 1 ? "" : "s", end_evals, end_evals == 1 ? "it" : "them");
}

/* A metrics.jsonl row's frame count: its first key. */
static long long jsonl_frames(const char *row)
{
    char *end = NULL;
    long long f = g_str_has_prefix(row, "{\"frames\":") ? g_ascii_strtoll(row + 10, &end, 10) : -1;
    return end && end != row + 10 ? f : -1;
}

/* metrics.jsonl on --resume: the rows metrics.csv keeps. */
static int jsonl_rewind(const char *path, int64_t frames, crl_error *err)
{
    char *text = NULL;
    size_t len = 0;
    crl_error e;
    crl_error_clear(&e);
    int rc = crl_file_read(path, "metrics.jsonl", 0, (uint64_t)1 << 30, &text, &len, &e);
    if (rc == CRL_E_NOT_FOUND)
        return CRL_OK;
    if (rc)
        return crl_error_pass(err, &e, rc);
    GString *keep = g_string_new(NULL);
    size_t dropped = 0, end_evals = 0;
    crl__metrics_rows_keep(text, frames, jsonl_frames, keep, &dropped, &end_evals);
    GError *ge = NULL;
    if (!g_file_set_contents(path, keep->str, (gssize)keep->len, &ge)) {
        rc = crl_error_set(err, CRL_E_IO, "cannot write '%s': %s", path, ge->message);
        g_error_free(ge);
    } else {
        crl__metrics_report_rewind(path, frames, dropped, end_evals);
    }
    g_string_free(keep, TRUE);
    g_free(text);
    return rc;
}

int crl__run_loggers_check(const crl_config *cfg, crl_error *err)
{
    char **names = NULL;
    int rc = crl_config_get_list(cfg, "train", "loggers", &names, err);
    for (size_t i = 0; !rc && names[i]; i++) {
        if (!strcmp(names[i], "csv") || !strcmp(names[i], "jsonl"))
            continue;
        if (!strcmp(names[i], "tensorboard")) {
#ifndef CRL_CLI_HAVE_PROTOBUF_C
            rc = crl_error_set(err, CRL_E_UNSUPPORTED, "%s: [train] loggers = %s: this crl was built without "
                               "protobuf-c, which TensorBoard files need; install libprotobuf-c-dev and "
                               "protobuf-c-compiler and build crl again, or drop tensorboard",
                               crl_config_origin(cfg, "train", "loggers"), crl_config_get(cfg, "train", "loggers"));
#endif
            continue;
        }
        rc = crl_error_set(err, CRL_E_CONFIG, "%s: [train] loggers: '%s' is no logger; choose among csv, jsonl, "
                           "tensorboard", crl_config_origin(cfg, "train", "loggers"), names[i]);
    }
    crl_free(names);
    return rc;
}

int crl__run_loggers_open(const crl_config *cfg, const char *dir, int64_t resume_frames, crl__run_loggers **out,
                          crl_error *err)
{
    *out = NULL;
    char **names = NULL;
    int rc = crl__run_loggers_check(cfg, err);
    if (!rc)
        rc = crl_config_get_list(cfg, "train", "loggers", &names, err);
    if (rc)
        return rc;
    crl__run_loggers *l = g_new0(crl__run_loggers, 1);
    l->dir = g_strdup(dir);
    l->t0 = (double)g_get_real_time() / 1e6;
    for (size_t i = 0; names[i] && !rc; i++) {
        if (!strcmp(names[i], "csv"))
            continue;   /* metrics.csv: crl run's own */
        if (!strcmp(names[i], "jsonl")) {
            if (l->jsonl)
                continue;
            l->jsonl_path = g_build_filename(dir, "metrics.jsonl", NULL);
            if (resume_frames >= 0 && (rc = jsonl_rewind(l->jsonl_path, resume_frames, err)))
                break;
            if (!(l->jsonl = fopen(l->jsonl_path, resume_frames >= 0 ? "a" : "w")))
                rc = crl_error_set(err, CRL_E_IO, "cannot write '%s': %s", l->jsonl_path, g_strerror(errno));
        } else if (!strcmp(names[i], "tensorboard")) {
#ifdef CRL_CLI_HAVE_PROTOBUF_C
            crl_error e;
            crl_error_clear(&e);
            if (!l->tb && !(l->tb = crl__tb_open(dir, l->t0, &e)))
                rc = crl_error_pass(err, &e, CRL_E_IO);
#endif
        }
    }
    crl_free(names);
    if (rc) {
        crl__run_loggers_close(l, NULL);
        return rc;
    }
    *out = l;
    return CRL_OK;
}

static void json_field(GString *s, const char *key, double v)
{
    g_string_append_printf(s, ",\"%s\":", key);
    if (isfinite(v)) {
        char b[G_ASCII_DTOSTR_BUF_SIZE];
        g_string_append(s, g_ascii_formatd(b, sizeof b, "%.17g", v));
    } else {
        g_string_append(s, "null");
    }
}

int crl__run_loggers_write(crl__run_loggers *l, const crl_train_stats *s, crl_error *err)
{
    if (!l)
        return CRL_OK;
    double eval = s->evaluated ? s->eval_return : NAN, eval_raw = s->evaluated ? s->eval_raw_return : NAN;
    if (l->jsonl) {
        GString *j = g_string_new(NULL);
        g_string_append_printf(j, "{\"frames\":%lld", (long long)s->frames);
        json_field(j, "seconds", s->seconds);
        json_field(j, "fps", s->fps);
        g_string_append_printf(j, ",\"episodes\":%lld", (long long)s->episodes);
        json_field(j, "recent_return", s->recent_return);
        json_field(j, "loss", s->loss);
        json_field(j, "eval_return", eval);
        g_string_append_printf(j, ",\"optim_steps\":%lld", (long long)s->optim_steps);
        json_field(j, "recent_raw_return", s->recent_raw_return);
        json_field(j, "eval_raw_return", eval_raw);
        g_string_append(j, "}\n");
        bool ok = fwrite(j->str, 1, j->len, l->jsonl) == j->len && fflush(l->jsonl) == 0;
        g_string_free(j, TRUE);
        if (!ok)
            return crl_error_set(err, CRL_E_IO, "cannot write '%s': %s", l->jsonl_path, g_strerror(errno));
    }
#ifdef CRL_CLI_HAVE_PROTOBUF_C
    if (l->tb) {
        /* metrics.csv's columns (an empty cell is no value) under TensorBoard's train/eval/perf groups */
        const char *tags[] = { "train/recent_return", "train/recent_raw_return", "train/loss", "train/episodes",
                               "train/optim_steps", "eval/return", "eval/raw_return", "perf/fps" };
        const double all[] = { s->recent_return, s->recent_raw_return, s->loss, (double)s->episodes,
                               (double)s->optim_steps, eval, eval_raw, s->fps };
        const char *t[G_N_ELEMENTS(tags)];
        double v[G_N_ELEMENTS(tags)];
        size_t n = 0;
        for (size_t i = 0; i < G_N_ELEMENTS(tags); i++)
            if (isfinite(all[i])) {
                t[n] = tags[i];
                v[n++] = all[i];
            }
        int rc = crl__tb_scalars(l->tb, l->t0 + s->seconds, s->frames, t, v, n, err);
        if (rc)
            return rc;
    }
#endif
    return CRL_OK;
}

int crl__run_loggers_close(crl__run_loggers *l, crl_error *err)
{
    if (!l)
        return CRL_OK;
    int rc = CRL_OK;
    if (l->jsonl && fclose(l->jsonl) != 0)
        rc = crl_error_set(err, CRL_E_IO, "cannot write '%s': %s", l->jsonl_path, g_strerror(errno));
#ifdef CRL_CLI_HAVE_PROTOBUF_C
    crl_error e;
    crl_error_clear(&e);
    if (crl__tb_close(l->tb, &e) && !rc)
        rc = crl_error_pass(err, &e, CRL_E_IO);
#endif
    g_free(l->jsonl_path);
    g_free(l->dir);
    g_free(l);
    return rc;
}
