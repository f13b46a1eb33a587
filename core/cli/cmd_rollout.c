/* crl rollout: run an env for N steps (random or replayed actions), print the
 * rollout TensorDict and an episode summary, optionally save env 0's frames. */
#include "config.h"
#include "cli-private.h"
#include "examples-private.h"

#include <crl/env.h>
#include <crl/trainer.h>
#include <errno.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>

/* An actions file holds a line per step: a few bytes each, far below this for any rollout. */
#define ACTIONS_FILE_MAX (256u << 20)

/* The actions of an --actions file, one full-shape tensor per step. */
typedef struct {
    char *path;
    char *key;          /* the action leaf's (dotted) key */
    crl_tensor **steps; /* one per data line */
    int *lines;         /* its line number in the file */
    size_t n;
} action_file;

typedef struct {
    crl_env *env;
    action_file *actions;
    crl_policy *policy;   /* --policy: acts in place of the random policy */
    struct crl__video *video;  /* --video: env 0's frames */
    size_t next_action;
    const char *frames_dir;
    crl_tensor *frame;
    int64_t frames_written;
} rollout_state;

static void action_file_free(action_file *af)
{
    for (size_t i = 0; i < af->n; i++)
        crl_tensor_unref(af->steps[i]);
    g_free(af->steps);
    g_free(af->lines);
    g_free(af->key);
    g_free(af->path);
    memset(af, 0, sizeof *af);
}

/* Count the leaves of s; the first one's spec and dotted key are kept. */
static void find_leaves(const crl_spec *s, const char *prefix, int *count, const crl_spec **leaf, char **key)
{
    if (crl_spec_get_kind(s) != CRL_SPEC_COMPOSITE) {
        if ((*count)++ == 0) {
            *leaf = s;
            *key = g_strdup(prefix);
        }
        return;
    }
    for (size_t i = 0; i < crl_spec_composite_len(s); i++) {
        const char *k = crl_spec_composite_key_at(s, i);
        char *sub = *prefix ? g_strconcat(prefix, ".", k, NULL) : g_strdup(k);
        find_leaves(crl_spec_composite_at(s, i), sub, count, leaf, key);
        g_free(sub);
    }
}

static int64_t prod(int n, const int64_t *d)
{
    int64_t p = 1;
    for (int i = 0; i < n; i++)
        p *= d[i];
    return p;
}

/* Parse one data line into a tensor of the leaf's full shape. */
static int parse_action_line(const action_file *af, int lineno, char *line, const crl_spec *leaf, int batch_ndim,
                             bool check_domain, crl_tensor **out, crl_error *err)
{
    crl_dtype dt = crl_spec_dtype(leaf);
    int ndim = crl_spec_ndim(leaf);
    const int64_t *shape = crl_spec_shape(leaf);
    int64_t total = prod(ndim, shape);
    int64_t per_env = prod(ndim - batch_ndim, shape + batch_ndim);
    bool is_float = crl_dtype_is_float(dt);
    bool onehot_index = crl_spec_get_kind(leaf) == CRL_SPEC_ONEHOT;
    char **tok = g_strsplit_set(g_strstrip(line), " \t", -1);
    GArray *vals = g_array_new(FALSE, FALSE, sizeof(double));
    int rc = CRL_OK;
    for (char **t = tok; *t; t++) {
        if (!**t)
            continue;
        double v;
        int64_t iv;
        if (is_float) {
            if (!crl_parse_double(*t, &v)) {
                rc = crl_error_set(err, CRL_E_USAGE, "%s:%d: '%s' is not a number (the action is %s)", af->path,
                                   lineno, *t, crl_dtype_name(dt));
                goto out;
            }
        } else {
            if (!crl_parse_int(*t, &iv)) {
                rc = crl_error_set(err, CRL_E_USAGE, "%s:%d: '%s' is not an integer (the action is %s)",
                                   af->path, lineno, *t, crl_dtype_name(dt));
                goto out;
            }
            v = (double)iv;
        }
        g_array_append_val(vals, v);
    }
    const double *v = (const double *)(void *)vals->data;
    int64_t m = (int64_t)vals->len;
    crl_error e;
    crl_error_clear(&e);
    crl_tensor *t = crl_tensor_new(dt, ndim, shape, &e);
    if (!t) {
        rc = crl_error_pass(err, &e, CRL_E_NOMEM);
        goto out;
    }
    if (onehot_index && m == 1 && per_env > 1) {
        /* A one-hot action given as its index, for every env. */
        int64_t n = shape[ndim - 1];
        if (v[0] < 0 || v[0] >= (double)n) {
            rc = crl_error_set(err, CRL_E_USAGE, "%s:%d: action index %g is outside [0, %" G_GINT64_FORMAT ")",
                               af->path, lineno, v[0], (gint64)n);
            crl_tensor_unref(t);
            goto out;
        }
        for (int64_t j = (int64_t)v[0]; j < total; j += n)
            crl_tensor_flat_set(t, j, 1.0);
    } else if (m == per_env || m == total) {
        for (int64_t j = 0; j < total; j++)
            crl_tensor_flat_set(t, j, v[j % m]);
    } else {
        char *sh = crl_shape_repr(ndim - batch_ndim, shape + batch_ndim);
        if (per_env == total)
            rc = crl_error_set(err, CRL_E_USAGE, "%s:%d: %" G_GINT64_FORMAT " value%s, but an action of shape %s "
                               "takes %" G_GINT64_FORMAT, af->path, lineno, (gint64)m, m == 1 ? "" : "s",
                               sh, (gint64)per_env);
        else
            rc = crl_error_set(err, CRL_E_USAGE, "%s:%d: %" G_GINT64_FORMAT " value%s, but an action of shape %s "
                               "takes %" G_GINT64_FORMAT " (the same for every env) or %" G_GINT64_FORMAT
                               " (one per env)", af->path, lineno, (gint64)m, m == 1 ? "" : "s", sh,
                               (gint64)per_env, (gint64)total);
        crl_free(sh);
        crl_tensor_unref(t);
        goto out;
    }
    if (check_domain && crl_spec_check(leaf, t, af->key, &e)) {
        crl_error_prefix(&e, "%s:%d: ", af->path, lineno);
        e.code = CRL_E_USAGE;
        rc = crl_error_pass(err, &e, CRL_E_USAGE);
        crl_tensor_unref(t);
        goto out;
    }
    *out = t;
out:
    g_array_free(vals, TRUE);
    g_strfreev(tok);
    return rc;
}

/* Read FILE: blank lines and lines starting with '#' are skipped. */
static int action_file_load(action_file *af, const char *path, crl_env *env, const crl_config *cfg, int64_t steps,
                            crl_error *err)
{
    memset(af, 0, sizeof *af);
    af->path = g_strdup(path);
    int count = 0;
    const crl_spec *leaf = NULL;
    find_leaves(crl_env_full_action_spec(env), "", &count, &leaf, &af->key);
    if (count != 1 || !leaf)
        return crl_error_set(err, CRL_E_USAGE, "--actions %s: env %s/%s has %d action entries; an actions file "
                             "can only drive an env with one", path, crl_env_backend_name(env), crl_env_id(env),
                             count);
    bool project = false;
    int brc = crl_config_get_bool(cfg, "env", "project_actions", false, &project, err);
    if (brc)
        return brc;
    char *text = NULL;
    size_t len = 0;
    crl_error re;
    crl_error_clear(&re);
    if (crl_file_read(path, "actions file", 0, ACTIONS_FILE_MAX, &text, &len, &re))
        return crl_error_set(err, CRL_E_USAGE, "--actions: %s", re.message);
    if (memchr(text, '\0', len)) {
        g_free(text);
        return crl_error_set(err, CRL_E_USAGE, "--actions: '%s' holds a NUL byte: give a text file", path);
    }
    char **lines = g_strsplit(text, "\n", -1);
    g_free(text);
    GPtrArray *ts = g_ptr_array_new();
    GArray *nums = g_array_new(FALSE, FALSE, sizeof(int));
    int rc = CRL_OK;
    for (int i = 0; lines[i] && (int64_t)ts->len < steps; i++) {
        char *l = g_strstrip(lines[i]);
        if (!*l || *l == '#')
            continue;
        crl_tensor *t = NULL;
        if ((rc = parse_action_line(af, i + 1, l, leaf, crl_env_batch_ndim(env), !project, &t, err)))
            break;
        g_ptr_array_add(ts, t);
        int ln = i + 1;
        g_array_append_val(nums, ln);
    }
    g_strfreev(lines);
    af->n = ts->len;
    af->steps = (crl_tensor **)g_ptr_array_free(ts, FALSE);
    af->lines = (int *)(void *)g_array_free(nums, FALSE);
    if (!rc && (int64_t)af->n < steps)
        rc = crl_error_set(err, CRL_E_USAGE, "--actions %s holds %zu action%s but --steps is %" G_GINT64_FORMAT
                           ": add %" G_GINT64_FORMAT " more line%s or lower --steps", path, af->n,
                           af->n == 1 ? "" : "s", (gint64)steps, (gint64)(steps - (int64_t)af->n),
                           steps - (int64_t)af->n == 1 ? "" : "s");
    return rc;
}

static int save_frame(rollout_state *st, crl_error *err)
{
    int rc = crl_env_render(st->env, 0, st->frame, err);
    if (rc) {
        if (rc == CRL_E_UNSUPPORTED)
            crl_error_prefix(err, "--save-frames: env %s/%s cannot render: ", crl_env_backend_name(st->env),
                             crl_env_id(st->env));
        return rc;
    }
    char name[32];
    g_snprintf(name, sizeof name, "frame_%05" G_GINT64_FORMAT ".png", (gint64)st->frames_written);
    char *path = g_build_filename(st->frames_dir, name, NULL);
    const int64_t *shape = crl_tensor_shape(st->frame);
    rc = crl__png_write_rgb(path, crl_tensor_data(st->frame), (int)shape[1], (int)shape[0], err);
    g_free(path);
    if (!rc)
        st->frames_written++;
    return rc;
}

/* env 0's frame into --video */
static int video_frame(rollout_state *st, crl_error *err)
{
#ifdef CRL_CLI_HAVE_FFMPEG
    int rc = crl_env_render(st->env, 0, st->frame, err);
    return rc ? rc : crl__video_add(st->video, crl_tensor_data(st->frame), err);
#else
    (void)st;
    return crl_error_set(err, CRL_E_UNSUPPORTED, "--video: built without FFmpeg");
#endif
}

static int policy(void *user, crl_env *env, crl_td *td, crl_error *err)
{
    rollout_state *st = user;
    int rc = st->frames_dir ? save_frame(st, err) : CRL_OK;
    if (!rc && st->video)
        rc = video_frame(st, err);
    if (rc)
        return rc;
    if (st->policy)
        return crl_policy_act(st->policy, env, td, err);
    if (!st->actions)
        return crl_env_rand_action(env, td, err);
    action_file *af = st->actions;
    if (st->next_action >= af->n)
        return crl_error_set(err, CRL_E_RUNTIME, "--actions %s: the rollout asked for action %zu of %zu",
                             af->path, st->next_action + 1, af->n);
    crl_tensor *src = af->steps[st->next_action];
    crl_tensor *dst = crl_td_get(td, af->key);
    rc = (dst && crl_tensor_dtype(dst) == crl_tensor_dtype(src) && crl_tensor_same_shape(dst, src))
            ? crl_tensor_copy(dst, src, err)
            : crl_td_set(td, af->key, src, err);
    if (rc)
        crl_error_prefix(err, "%s:%d: ", af->path, af->lines[st->next_action]);
    st->next_action++;
    return rc;
}

/* ---- output -------------------------------------------------------------- */

static void print_json(const crl_td *td)
{
    crl_error err = { 0 };
    char **keys = crl_td_leaf_keys(td, &err);
    printf("{");
    for (char **k = keys; k && *k; k++) {
        const crl_tensor *t = crl_td_get(td, *k);
        if (k != keys)
            printf(",");
        crl__cli_json_string(stdout, *k);
        printf(":{\"dtype\":\"%s\",\"shape\":", crl_dtype_name(crl_tensor_dtype(t)));
        crl__cli_json_shape(stdout, crl_tensor_ndim(t), crl_tensor_shape(t));
        printf(",\"data\":");
        crl__cli_json_tensor_data(stdout, t);
        printf("}");
    }
    printf("}\n");
    crl_free(keys);
}

/* Episodes per env along the time dim: returns of completed ones, and the
 * partial return of the one still running at the end. */
static int print_summary(const crl_env *env, const crl_td *td, int64_t asked, crl_error *err)
{
    crl_tensor *reward = crl_td_get(td, "next.reward");
    crl_tensor *done = crl_td_get(td, "next.done");
    if (!reward || !done)
        return crl_error_set(err, CRL_E_RUNTIME, "the rollout of %s/%s has no %s", crl_env_backend_name(env),
                             crl_env_id(env), reward ? "next.done" : "next.reward");
    int bnd = crl_td_batch_ndim(td);
    const int64_t *bs = crl_td_batch_shape(td);
    int64_t T = bnd ? bs[bnd - 1] : 0, E = prod(bnd - 1, bs);
    crl_error ce;
    crl_error_clear(&ce);
    crl_tensor *r = crl_tensor_cast(reward, CRL_F64, &ce);
    crl_tensor *d = r ? crl_tensor_cast(done, CRL_BOOL, &ce) : NULL;
    if (!d) {
        crl_tensor_unref(r);
        return crl_error_pass(err, &ce, CRL_E_NOMEM);
    }
    const double *rv = crl_tensor_data(r);
    const uint8_t *dv = crl_tensor_data(d);
    int64_t cells = E * T;
    int64_t rper = cells > 0 ? crl_tensor_numel(r) / cells : 0, dper = cells > 0 ? crl_tensor_numel(d) / cells : 0;
    int64_t completed = 0;
    double completed_sum = 0, partial_sum = 0;
    for (int64_t e = 0; e < E; e++) {
        double ret = 0;
        for (int64_t t = 0; t < T; t++) {
            int64_t i = e * T + t;
            for (int64_t j = 0; j < rper; j++)
                ret += rv[i * rper + j];
            bool ended = false;
            for (int64_t j = 0; j < dper; j++)
                ended |= dv[i * dper + j] != 0;
            if (ended) {
                completed++;
                completed_sum += ret;
                ret = 0;
            }
        }
        partial_sum += ret;
    }
    printf("summary:\n");
    printf("  steps:              %" G_GINT64_FORMAT " (x %" G_GINT64_FORMAT " env%s of %s/%s)\n", (gint64)T,
           (gint64)E, E == 1 ? "" : "s", crl_env_backend_name(env), crl_env_id(env));
    if (T < asked)
        printf("  stopped:            after step %" G_GINT64_FORMAT " of %" G_GINT64_FORMAT ", at the first done "
               "(--auto-reset runs on through ended episodes)\n", (gint64)T, (gint64)asked);
    printf("  episodes completed: %" G_GINT64_FORMAT "\n", (gint64)completed);
    if (completed)
        printf("  mean return:        %.6g (over the completed episodes)\n", completed_sum / (double)completed);
    else
        printf("  mean return:        n/a (no episode completed)\n");
    printf("  partial return:     %.6g (mean over the %" G_GINT64_FORMAT " running episode%s)\n",
           E ? partial_sum / (double)E : 0.0, (gint64)E, E == 1 ? "" : "s");
    crl_tensor_unref(r);
    crl_tensor_unref(d);
    return CRL_OK;
}

/* ---- the command --------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: crl rollout [FILE.ini...] [section.key=value...] --steps N [--seed S]\n"
            "                   [--auto-reset] [--actions FILE | --policy RUN_DIR] [--json]\n"
            "                   [--save-frames DIR] [--video FILE.mp4]\n\n"
            "Build the env of the [env] section, reset it and run up to N steps with a\n"
            "random policy (or the actions of FILE).  As TorchRL's rollout\n"
            "(break_when_any_done=True), it stops after the first step where any env is\n"
            "done; with --auto-reset ended episodes are reset and it runs all N steps.\n"
            "Prints the rollout TensorDict (batch [batch..., T], T <= N) and a summary:\n"
            "steps, episodes completed, the mean return of the completed ones and the\n"
            "partial return of the running ones.  E.g.\n\n"
            "  crl rollout %s/cartpole-random.ini --steps 200 --auto-reset\n"
            "  crl rollout env.backend=classic env.id=Pendulum-v1 --steps 20 --seed 7\n\n"
            "  --steps N          number of steps (required, 1..100000000)\n"
            "  --seed S           seed the envs with S (overrides [env] seed)\n"
            "  --auto-reset       reset ended episodes and go on through all N steps\n"
            "                     (TorchRL's break_when_any_done=False) instead of\n"
            "                     stopping at the first done\n"
            "  --actions FILE     replay the actions of FILE, one step per line: one integer\n"
            "                     for a categorical action (the index for one-hot), or\n"
            "                     whitespace-separated numbers for a vector action, given once\n"
            "                     for every env or once per env; blank lines and lines\n"
            "                     starting with '#' are skipped\n"
            "  --policy RUN_DIR   act with the exploration-free policy of a crl run\n"
            "                     directory's checkpoint (as crl eval does) on its evaluation\n"
            "                     env: the env of the run's [env], with the transform\n"
            "                     statistics of the checkpoint, frozen; no FILE.ini then,\n"
            "                     overrides change the run's settings\n"
            "  --json             print every entry of the rollout instead, as\n"
            "                     {\"KEY\": {\"dtype\":..., \"shape\": [...], \"data\": [...]}, ...}\n"
            "                     with dotted keys (\"next.reward\"); inf and nan are the\n"
            "                     strings \"inf\", \"-inf\" and \"nan\"\n"
            "  --save-frames DIR  write env 0's frames to DIR/frame_00000.png ... (after the\n"
            "                     reset and after every step: T+1 files); the env must render\n"
            "  --video FILE.mp4   write env 0's frames (T+1, as --save-frames) as an MP4 at 30\n"
            "                     frames/s: H.264 through libx264 when this FFmpeg has it,\n"
            "                     else MPEG-4 part 2; the env must render\n"
            "  -h, --help         print this help\n\n"
            "Exit status: 0 ok, 1 runtime failure (e.g. the env cannot render), 2 bad usage,\n"
            "bad config, unknown env or a malformed actions file.\n", crl__examples_dir());
}

/* "--name VALUE" or "--name=VALUE": 1 when matched (value in *out), -1 when
 * the value is missing, 0 otherwise. */
static int take_value(int argc, char **argv, int *i, const char *name, const char **out)
{
    size_t n = strlen(name);
    if (strncmp(argv[*i], name, n))
        return 0;
    if (argv[*i][n] == '=') {
        *out = argv[*i] + n + 1;
        return 1;
    }
    if (argv[*i][n] != '\0')
        return 0;
    if (*i + 1 >= argc)
        return -1;
    *out = argv[++*i];
    return 1;
}

int crl__cmd_rollout(int argc, char **argv)
{
    bool json = false, auto_reset = false;
    const char *steps_s = NULL, *seed_s = NULL, *actions_path = NULL, *frames_dir = NULL, *policy_dir = NULL;
    const char *video_path = NULL;
    GPtrArray *rest = g_ptr_array_new();
    int status = CRL_EXIT_USAGE;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int m = 0;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            g_ptr_array_free(rest, TRUE);
            return CRL_EXIT_OK;
        } else if (!strcmp(a, "--json")) {
            json = true;
        } else if (!strcmp(a, "--auto-reset")) {
            auto_reset = true;
        } else if ((m = take_value(argc, argv, &i, "--steps", &steps_s)) ||
                   (m = take_value(argc, argv, &i, "--seed", &seed_s)) ||
                   (m = take_value(argc, argv, &i, "--actions", &actions_path)) ||
                   (m = take_value(argc, argv, &i, "--save-frames", &frames_dir)) ||
                   (m = take_value(argc, argv, &i, "--policy", &policy_dir)) ||
                   (m = take_value(argc, argv, &i, "--video", &video_path))) {
            if (m < 0) {
                fprintf(stderr, "crl rollout: %s needs a value; run 'crl rollout --help'\n", a);
                g_ptr_array_free(rest, TRUE);
                return CRL_EXIT_USAGE;
            }
        } else if (!strcmp(a, "--")) {
            for (i++; i < argc; i++)
                g_ptr_array_add(rest, argv[i]);
        } else {
            g_ptr_array_add(rest, argv[i]);
        }
    }
    int64_t steps = 0;
    guint64 seed = 0;
    if (!steps_s) {
        fprintf(stderr, "crl rollout: --steps N is required (e.g. --steps 200)\n");
        g_ptr_array_free(rest, TRUE);
        return CRL_EXIT_USAGE;
    }
    if (!crl_parse_int(steps_s, &steps) || steps < 1 || steps > 100000000) {
        fprintf(stderr, "crl rollout: --steps '%s': give a whole number in [1, 100000000]\n", steps_s);
        g_ptr_array_free(rest, TRUE);
        return CRL_EXIT_USAGE;
    }
    if (seed_s) {
        char *end = NULL;
        errno = 0;
        seed = g_ascii_strtoull(seed_s, &end, 0);
        if (!*seed_s || *seed_s == '-' || *seed_s == '+' || *end || errno) {
            fprintf(stderr, "crl rollout: --seed '%s': give a whole number in [0, 2^64)\n", seed_s);
            g_ptr_array_free(rest, TRUE);
            return CRL_EXIT_USAGE;
        }
    }
    if (policy_dir && actions_path) {
        fprintf(stderr, "crl rollout: --policy and --actions both choose the actions; give one of them\n");
        g_ptr_array_free(rest, TRUE);
        return CRL_EXIT_USAGE;
    }
    for (guint k = 0; policy_dir && k < rest->len; k++)
        if (!strchr(rest->pdata[k], '=')) {
            fprintf(stderr, "crl rollout: --policy %s takes the run's own settings: '%s' is no section.key=value "
                    "override; drop it\n", policy_dir, (const char *)rest->pdata[k]);
            g_ptr_array_free(rest, TRUE);
            return CRL_EXIT_USAGE;
        }
#ifndef CRL_CLI_HAVE_FFMPEG
    if (video_path) {
        fprintf(stderr, "crl rollout: --video: this crl was built without FFmpeg's libraries; install "
                "libavcodec-dev libavformat-dev libswscale-dev libavutil-dev and build crl again\n");
        g_ptr_array_free(rest, TRUE);
        return CRL_EXIT_USAGE;
    }
#endif
    if (video_path && !*video_path) {
        fprintf(stderr, "crl rollout: --video needs a file name\n");
        g_ptr_array_free(rest, TRUE);
        return CRL_EXIT_USAGE;
    }
    if (frames_dir && !*frames_dir) {
        fprintf(stderr, "crl rollout: --save-frames needs a directory name\n");
        g_ptr_array_free(rest, TRUE);
        return CRL_EXIT_USAGE;
    }

    crl_cli_ctx ctx;
    crl_error err = { 0 };
    crl_env *env = NULL;
    action_file af = { 0 };
    rollout_state st = { 0 };
    crl_td *out = NULL;
    crl_policy *pol = NULL;
    int rc = policy_dir ? crl__cli_policy_setup(&ctx, policy_dir, (int)rest->len, (char **)rest->pdata, &pol, &err)
                        : crl__cli_env_setup(&ctx, (int)rest->len, (char **)rest->pdata, &env, &err);
    g_ptr_array_free(rest, TRUE);
    if (rc)
        return crl__cli_setup_failed("rollout", &err);
    if (pol)
        env = crl_policy_env(pol);   /* the policy's, freed with it */
    st.policy = pol;
    if (seed_s)
        crl_env_set_seed(env, seed);
    st.env = env;
    if (actions_path) {
        if (action_file_load(&af, actions_path, env, ctx.cfg, steps, &err))
            goto fail;
        st.actions = &af;
    }
    if (frames_dir) {
        int32_t h = crl_env_render_height(env), w = crl_env_render_width(env);
        if (h <= 0 || w <= 0) {
            crl_error_set(&err, CRL_E_UNSUPPORTED, "--save-frames: env %s/%s cannot render (its backend "
                          "declares no frame size); drop --save-frames", crl_env_backend_name(env),
                          crl_env_id(env));
            goto fail;
        }
        if (g_mkdir_with_parents(frames_dir, 0777)) {
            crl_error_set(&err, CRL_E_IO, "--save-frames: cannot create directory '%s': %s", frames_dir,
                          g_strerror(errno));
            goto fail;
        }
        int64_t shape[3] = { h, w, 3 };
        if (!(st.frame = crl_tensor_new(CRL_U8, 3, shape, &err)))
            goto fail;
        st.frames_dir = frames_dir;
    }
    if (video_path) {
        int32_t h = crl_env_render_height(env), w = crl_env_render_width(env);
        if (h <= 0 || w <= 0) {
            crl_error_set(&err, CRL_E_UNSUPPORTED, "--video: env %s/%s cannot render (its backend declares no frame "
                          "size); drop --video", crl_env_backend_name(env), crl_env_id(env));
            goto fail;
        }
        int64_t shape[3] = { h, w, 3 };
        if (!st.frame && !(st.frame = crl_tensor_new(CRL_U8, 3, shape, &err)))
            goto fail;
#ifdef CRL_CLI_HAVE_FFMPEG
        if (!(st.video = crl__video_open(video_path, w, h, 30, &err)))
            goto fail;
#endif
    }
    if (!(out = crl_env_rollout(env, steps, policy, &st, !auto_reset, true, NULL, &err)))
        goto fail;
    if (frames_dir && save_frame(&st, &err))
        goto fail;
#ifdef CRL_CLI_HAVE_FFMPEG
    if (st.video) {
        int64_t vf = 0;
        int vrc = video_frame(&st, &err);
        struct crl__video *v = st.video;
        st.video = NULL;
        if (vrc || crl__video_close(v, &vf, vrc ? NULL : &err)) {
            if (vrc)
                crl__video_close(v, NULL, NULL);
            goto fail;
        }
        fprintf(stderr, "crl rollout: wrote %s: %lld frames of env 0 (%s)\n", video_path, (long long)vf,
                crl__video_encoder_name());
    }
#endif
    if (json) {
        print_json(out);
    } else {
        char *repr = crl_td_repr(out);
        printf("%s\n", repr ? repr : "");
        crl_free(repr);
        if (print_summary(env, out, steps, &err))
            goto fail;
    }
    if (frames_dir)
        fprintf(stderr, "crl rollout: wrote %" G_GINT64_FORMAT " frames to %s/frame_%05d.png ... frame_%05"
                G_GINT64_FORMAT ".png\n", (gint64)st.frames_written, frames_dir, 0,
                (gint64)(st.frames_written - 1));
    status = CRL_EXIT_OK;
    goto done;
fail:
    crl__cli_print_error("rollout", &err);
    status = crl__cli_exit_code(&err);
done:
    fflush(stdout);
    crl_td_unref(out);
#ifdef CRL_CLI_HAVE_FFMPEG
    crl__video_close(st.video, NULL, NULL);
#endif
    crl_tensor_unref(st.frame);
    action_file_free(&af);
    if (pol)
        crl_policy_free(pol);
    else
        crl_env_free(env);
    crl__cli_teardown(&ctx);
    return status;
}
