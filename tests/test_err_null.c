/* Check suite: err may be NULL (plugin-sdk/include/crl/error.h).  Every failure path below runs twice: once
 * with an error to check the code (and that a message was written), then with err = NULL, where it must return
 * the same code (or NULL) without crashing.  The modules: tensor, td, spec, options, config, host and loader,
 * env (core and the classic, faultenv and dm_control/gym backends when built), transforms, replay (core and
 * storages), nn and optim, checkpoint, collector, losses and trainer (a trainer whose step fails, run as
 * crl_trainer_run(t, NULL, NULL, NULL)). */
#include "host-fixture.h"
#include "keep-cairo.h"
#include "scratch-dir.h"

#include <crl/collector.h>
#include <crl/replay.h>
#include <crl/trainer.h>
#include <crl/transform.h>
#include <glib/gstdio.h>
#include <math.h>

/* `expr` (an int status) returns `code` with an error E (and writes its message), then the same with E = NULL. */
#define FAILS(want, expr)                                                                                        \
    do {                                                                                                       \
        crl_error e_;                                                                                          \
        crl_error_clear(&e_);                                                                                  \
        crl_error *E = &e_;                                                                                    \
        int r_ = (expr);                                                                                       \
        ck_assert_msg(r_ == (want) && e_.code == (want) && e_.message[0],                                      \
                      "%s: with an error: returned %s, error %s (%s); expected %s", #expr, crl_status_name(r_), \
                      crl_status_name(e_.code), e_.message, crl_status_name(want));                            \
        E = NULL;                                                                                              \
        r_ = (expr);                                                                                           \
        ck_assert_msg(r_ == (want), "%s: with err = NULL: returned %s, expected %s", #expr,                    \
                      crl_status_name(r_), crl_status_name(want));                                             \
    } while (0)

/* `expr` (a pointer) is NULL with error `code`, then NULL with E = NULL. */
#define FAILS_NULL(want, expr)                                                                                   \
    do {                                                                                                       \
        crl_error e_;                                                                                          \
        crl_error_clear(&e_);                                                                                  \
        crl_error *E = &e_;                                                                                    \
        const void *p_ = (expr);                                                                               \
        ck_assert_msg(p_ == NULL && e_.code == (want) && e_.message[0],                                        \
                      "%s: with an error: %s, error %s (%s); expected NULL and %s", #expr,                     \
                      p_ ? "not NULL" : "NULL", crl_status_name(e_.code), e_.message, crl_status_name(want));  \
        E = NULL;                                                                                              \
        p_ = (expr);                                                                                           \
        ck_assert_msg(p_ == NULL, "%s: with err = NULL: not NULL", #expr);                                     \
    } while (0)

/* ---- data model -------------------------------------------------------------------------------------------- */

START_TEST(tensor_failures)
{
    int64_t bad[1] = { -1 }, two[2] = { 2, 3 }, six[1] = { 6 }, five[1] = { 5 };
    FAILS_NULL(CRL_E_INVALID, crl_tensor_new(CRL_F32, 1, bad, E));
    crl_tensor *t = crl_tensor_new(CRL_F32, 2, two, NULL);
    ck_assert_ptr_nonnull(t);
    FAILS_NULL(CRL_E_RANGE, crl_tensor_index(t, 0, 7, E));
    FAILS_NULL(CRL_E_SHAPE, crl_tensor_reshape(t, 1, five, E));
    FAILS_NULL(CRL_E_RANGE, crl_tensor_unsqueeze(t, 9, E));
    crl_tensor *u = crl_tensor_new(CRL_F32, 1, six, NULL);
    FAILS(CRL_E_SHAPE, crl_tensor_copy(t, u, E));
    crl_tensor_unref(u);
    crl_tensor_unref(t);
}
END_TEST

START_TEST(td_failures)
{
    int64_t b[1] = { 4 }, three[1] = { 3 };
    crl_td *td = crl_td_new(1, b, NULL);
    ck_assert_ptr_nonnull(td);
    crl_tensor *t = crl_tensor_new(CRL_F32, 1, three, NULL);
    FAILS(CRL_E_SHAPE, crl_td_set(td, "x", t, E));
    FAILS(CRL_E_NOT_FOUND, crl_td_del(td, "missing", E));
    FAILS(CRL_E_NOT_FOUND, crl_td_rename(td, "missing", "y", E));
    FAILS_NULL(CRL_E_INVALID, crl_td_key_new("a..b", E));
    const char *keys[] = { "missing", NULL };
    FAILS_NULL(CRL_E_NOT_FOUND, crl_td_select(td, keys, true, E));
    FAILS_NULL(CRL_E_RANGE, crl_td_index(td, 0, 9, E));
    crl_tensor_unref(t);
    crl_td_unref(td);
}
END_TEST

START_TEST(spec_failures)
{
    int64_t s2[1] = { 2 }, s3[1] = { 3 };
    crl_spec *b = crl_spec_bounded(CRL_F32, 1, s2, 0, 1, NULL);
    ck_assert_ptr_nonnull(b);
    crl_tensor *out = crl_tensor_new(CRL_F32, 1, s2, NULL);
    crl_tensor_fill(out, 5);
    FAILS(CRL_E_RANGE, crl_spec_check(b, out, "x", E));
    crl_tensor *wrong = crl_tensor_new(CRL_F32, 1, s3, NULL);
    FAILS(CRL_E_SHAPE, crl_spec_check(b, wrong, "x", E));
    crl_spec *comp = crl_spec_composite(0, NULL, NULL);
    FAILS(CRL_E_NOT_FOUND, crl_spec_composite_del(comp, "missing", E));
    FAILS(CRL_E_INVALID, crl_spec_update_mask(b, NULL, E));
    crl_spec_unref(comp);
    crl_tensor_unref(wrong);
    crl_tensor_unref(out);
    crl_spec_unref(b);
}
END_TEST

/* ---- configuration and plugin host -------------------------------------------------------------------------- */

START_TEST(config_failures)
{
    crl_config *cfg = crl_config_new(NULL);
    ck_assert_ptr_nonnull(cfg);
    static const char bad_ini[] = "[env\nid = x\n";
    FAILS(CRL_E_CONFIG, crl_config_load_buffer(cfg, "bad.ini", bad_ini, strlen(bad_ini), CRL_LAYER_FILE, E));
    FAILS(CRL_E_IO, crl_config_load_file(cfg, "/nonexistent/crl-test.ini", CRL_LAYER_FILE, E));
    static const char ok_ini[] = "[s]\nn = seven\nflag = maybe\n";
    ck_assert_int_eq(crl_config_load_buffer(cfg, "ok.ini", ok_ini, strlen(ok_ini), CRL_LAYER_FILE, NULL), CRL_OK);
    int64_t n;
    bool flag;
    FAILS(CRL_E_CONFIG, crl_config_get_int(cfg, "s", "n", 0, &n, E));
    FAILS(CRL_E_CONFIG, crl_config_get_bool(cfg, "s", "flag", false, &flag, E));
    /* options of a section: a wrong type, and a name the table does not have */
    static const crl_option table[] = {
        { "n", CRL_OPT_INT, 0, "1", 0, 0, NULL, "a count" },
        CRL_OPTIONS_END
    };
    const crl_option *tables[1] = { table };
    FAILS_NULL(CRL_E_CONFIG, crl_config_opts(cfg, "s", tables, 1, E));
    static const char good[] = "[t]\nn = 3\n";
    ck_assert_int_eq(crl_config_load_buffer(cfg, "good.ini", good, strlen(good), CRL_LAYER_FILE, NULL), CRL_OK);
    crl_opts *o = crl_config_opts(cfg, "t", tables, 1, NULL);
    ck_assert_ptr_nonnull(o);
    double d;
    FAILS(CRL_E_NOT_FOUND, crl_opts_double(o, "nope", &d, E));
    const char *s;
    FAILS(CRL_E_INVALID, crl_opts_string(o, "n", &s, E));
    crl_opts_free(o);
    crl_config_free(cfg);
}
END_TEST

START_TEST(host_failures)
{
    crl_test_host h;
    crl_test_host_open(&h, "classic", "");
    FAILS(CRL_E_NOT_FOUND, crl_host_load_name(h.host, "no_such_plugin", E));
    FAILS(CRL_E_NOT_FOUND, crl_host_load_path(h.host, "/nonexistent/no_such_plugin.so", E));
    FAILS_NULL(CRL_E_NOT_FOUND, crl_host_lookup(h.host, CRL_KIND_ENV, "no_such_env", E));
    crl_test_host_close(&h);
    /* a [plugins] load list naming a plugin that is not there */
    crl_config *cfg = crl_config_new(NULL);
    static const char ini[] = "[plugins]\nload = no_such_plugin\n";
    ck_assert_int_eq(crl_config_load_buffer(cfg, "t.ini", ini, strlen(ini), CRL_LAYER_FILE, NULL), CRL_OK);
    crl_host *host = crl_host_new(cfg, NULL);
    ck_assert_ptr_nonnull(host);
    FAILS(CRL_E_NOT_FOUND, crl_host_load_configured(host, E));
    crl_host_free(host);
    crl_config_free(cfg);
}
END_TEST

/* ---- env ---------------------------------------------------------------------------------------------------- */

static crl_env *env_of(crl_test_host *h, const char *plugins, const char *ini)
{
    crl_test_host_open(h, plugins, ini);
    crl_env *env = crl_env_from_config(h->host, h->cfg, "env", NULL);
    ck_assert_ptr_nonnull(env);
    return env;
}

START_TEST(env_config_failures)
{
    static const char *const bad[] = {
        "[env]\nbackend = classic\nid = CartPoel-v1\n",          /* unknown id */
        "[env]\nbackend = clasic\nid = CartPole-v1\n",           /* unknown backend */
        "[env]\nbackend = classic\nid = CartPole-v1\nnum_envs = -1\n",
        "[env]\nbackend = classic\nid = CartPole-v1\nframe_skp = 2\n",
        "[env]\nbackend = classic\nid = CartPole-v1\nmasscart = 0\n",                 /* the backend's checks */
        "[env]\nbackend = classic\nid = CartPole-v1\nreset_low = 1\nreset_high = 0\n",
    };
    static const int codes[] = { CRL_E_NOT_FOUND, CRL_E_NOT_FOUND, CRL_E_CONFIG, CRL_E_CONFIG, CRL_E_CONFIG,
                                 CRL_E_CONFIG };
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
        crl_test_host h;
        crl_test_host_open(&h, "classic", bad[i]);
        FAILS_NULL(codes[i], crl_env_from_config(h.host, h.cfg, "env", E));
        crl_test_host_close(&h);
    }
}
END_TEST

START_TEST(env_step_failures)
{
    crl_test_host h;
    crl_env *env = env_of(&h, "classic", "[env]\nbackend = classic\nid = CartPole-v1\nnum_envs = 2\n"
                                      "categorical_action_encoding = true\n");
    int64_t two = 2;
    crl_td *td = crl_td_new(1, &two, NULL);
    crl_tensor *a = crl_tensor_new(CRL_I64, 1, &two, NULL);
    ck_assert_int_eq(crl_td_set(td, "action", a, NULL), CRL_OK);
    FAILS(CRL_E_INVALID, crl_env_step(env, td, E));             /* before any reset */
    ck_assert_ptr_nonnull(crl_env_reset(env, td, NULL));
    crl_td_unref(td);   /* reset returned a new reference to td */
    crl_tensor_flat_set(a, 1, 7);
    FAILS(CRL_E_RANGE, crl_env_step(env, td, E));               /* action outside Categorical(2) */
    crl_tensor *f = crl_tensor_new(CRL_F32, 1, &two, NULL);
    ck_assert_int_eq(crl_td_set(td, "action", f, NULL), CRL_OK);
    FAILS(CRL_E_DTYPE, crl_env_step(env, td, E));
    FAILS(CRL_E_INVALID, crl_env_step(env, NULL, E));
    FAILS_NULL(CRL_E_INVALID, crl_env_rollout(env, 0, NULL, NULL, false, true, NULL, E));
    int64_t big[3] = { 10, 10, 3 };
    crl_tensor *frame = crl_tensor_new(CRL_U8, 3, big, NULL);
    FAILS(CRL_E_RANGE, crl_env_render(env, 5, frame, E));
    FAILS(CRL_E_INVALID, crl_env_send(env, td, E));              /* not an async env */
    FAILS_NULL(CRL_E_INVALID, crl_env_recv(env, E));
    crl_tensor_unref(frame);
    crl_tensor_unref(f);
    crl_tensor_unref(a);
    crl_td_unref(td);
    crl_env_free(env);
    crl_test_host_close(&h);
}
END_TEST

/* faultenv's step fails with CRL_E_RUNTIME for action 2 in the process that made it. */
#define FAULT_ENV "[env]\nbackend = faultenv\nid = Fault-v0\nseed = 3\n"

START_TEST(env_backend_failure)
{
    crl_test_host h;
    crl_env *env = env_of(&h, "faultenv", FAULT_ENV);
    crl_td *td = crl_env_reset(env, NULL, NULL);
    ck_assert_ptr_nonnull(td);
    crl_tensor *a = crl_td_get(td, "action");
    if (!a) {
        ck_assert_int_eq(crl_env_rand_action(env, td, NULL), CRL_OK);
        a = crl_td_get(td, "action");
    }
    crl_tensor_fill(a, 2);
    FAILS(CRL_E_RUNTIME, crl_env_step(env, td, E));
    crl_td_unref(td);
    crl_env_free(env);
    crl_test_host_close(&h);
}
END_TEST

/* The optional backends, when this build has them: an unknown task or env id.  Without them, loading the
 * plugin fails (with err = NULL too). */
START_TEST(optional_backends)
{
    static const char *const names[] = { "dm_control", "gym" };
    static const char *const ini[] = {
        "[env]\nbackend = dm_control\nid = cartpole/no_such_task\n",
        "[env]\nbackend = gym\nid = NoSuchEnv-v0\n",
    };
    static const int codes[] = { CRL_E_NOT_FOUND, CRL_E_NOT_FOUND };
    for (size_t i = 0; i < G_N_ELEMENTS(names); i++) {
        crl_config *cfg = crl_config_new(NULL);
        ck_assert_int_eq(crl_config_load_buffer(cfg, "t.ini", ini[i], strlen(ini[i]), CRL_LAYER_FILE, NULL), CRL_OK);
        crl_host *host = crl_host_new(cfg, NULL);
        crl_error le;
        crl_error_clear(&le);
        if (crl_host_load_name(host, names[i], &le) != CRL_OK) {
            ck_assert_int_eq(le.code, CRL_E_NOT_FOUND);
            ck_assert_int_eq(crl_host_load_name(host, names[i], NULL), CRL_E_NOT_FOUND);
        } else {
            FAILS_NULL(codes[i], crl_env_from_config(host, cfg, "env", E));
        }
        crl_host_free(host);
        crl_config_free(cfg);
    }
}
END_TEST

/* ---- transforms --------------------------------------------------------------------------------------------- */

START_TEST(transform_failures)
{
    crl_test_host h;
    crl_test_host_open(&h, "transforms", "");
    FAILS_NULL(CRL_E_NOT_FOUND, crl_transform_new(h.host, "NoSuchTransform", NULL, E));
    static const char *const bad_kv[] = { "in_keys", NULL };
    FAILS_NULL(CRL_E_INVALID, crl_transform_new(h.host, "ClipTransform", bad_kv, E));
    static const char *const typo[] = { "in_key = x", NULL };
    FAILS_NULL(CRL_E_CONFIG, crl_transform_new(h.host, "ClipTransform", typo, E));
    static const char *const kv[] = { "in_keys = x", "low = -1", "high = 1", NULL };
    crl_transform *t = crl_transform_new(h.host, "ClipTransform", kv, NULL);
    ck_assert_ptr_nonnull(t);
    crl_td *td = crl_td_new(0, NULL, NULL);
    FAILS(CRL_E_NOT_FOUND, crl_transform_apply(t, td, E));   /* no 'x' */
    FAILS(CRL_E_INVALID, crl_transform_apply(t, NULL, E));
    crl_spec *obs = crl_spec_composite(0, NULL, NULL);
    FAILS_NULL(CRL_E_NOT_FOUND, crl_transform_observation_spec(t, obs, E));
    crl_spec_unref(obs);
    crl_td_unref(td);
    crl_transform_free(t);
    /* other groups' ops: an image transform, a key transform and a state transform on a td without their key */
    static const char *const resize[] = { "in_keys = pixels", "w = 4", NULL };
    static const char *const rename_kv[] = { "in_keys = a", "out_keys = b", NULL };
    static const char *const norm[] = { "in_keys = obs", "loc = 0", "scale = 1", NULL };
    const char *types[] = { "Resize", "RenameTransform", "ObservationNorm" };
    const char *const *args[] = { resize, rename_kv, norm };
    for (size_t i = 0; i < G_N_ELEMENTS(types); i++) {
        crl_transform *x = crl_transform_new(h.host, types[i], args[i], NULL);
        ck_assert_msg(x != NULL, "%s", types[i]);
        crl_td *empty = crl_td_new(0, NULL, NULL);
        FAILS(CRL_E_NOT_FOUND, crl_transform_apply(x, empty, E));
        crl_td_unref(empty);
        crl_transform_free(x);
    }
    /* an env whose chain names a transform section that is missing */
    crl_test_host_close(&h);
    crl_test_host_open(&h, "classic, transforms",
                       "[env]\nbackend = classic\nid = CartPole-v1\ntransforms = nope\n");
    FAILS_NULL(CRL_E_CONFIG, crl_env_from_config(h.host, h.cfg, "env", E));
    crl_test_host_close(&h);
}
END_TEST

/* ---- replay ------------------------------------------------------------------------------------------------- */

static crl_td *transitions(int64_t n)
{
    crl_td *td = crl_td_new(1, &n, NULL);
    int64_t shape[2] = { n, 3 };
    crl_tensor *x = crl_tensor_new(CRL_F32, 2, shape, NULL);
    crl_tensor_fill(x, 1);
    ck_assert_int_eq(crl_td_set(td, "obs", x, NULL), CRL_OK);
    crl_tensor_unref(x);
    return td;
}

START_TEST(replay_failures)
{
    crl_test_host h;
    crl_test_host_open(&h, "replay", "");
    static const char *const typo[] = { "capacty = 10", NULL };
    FAILS_NULL(CRL_E_CONFIG, crl_replay_new(h.host, typo, E));
    static const char *const nostore[] = { "storage = nope", NULL };
    FAILS_NULL(CRL_E_NOT_FOUND, crl_replay_new(h.host, nostore, E));
    static const char *const kv[] = { "storage = tensor", "capacity = 8", "batch_size = 4", NULL };
    crl_replay *rb = crl_replay_new(h.host, kv, NULL);
    ck_assert_ptr_nonnull(rb);
    FAILS_NULL(CRL_E_INVALID, crl_replay_sample(rb, 0, E));     /* empty */
    crl_td *items = transitions(3);
    ck_assert_int_eq(crl_replay_extend(rb, items, NULL, NULL), CRL_OK);
    crl_td *other = crl_td_new(0, NULL, NULL);
    FAILS(CRL_E_NOT_FOUND, crl_replay_add(rb, other, NULL, E));   /* holds no tensors */
    FAILS_NULL(CRL_E_RANGE, crl_replay_get(rb, 99, E));
    int64_t idx = 0;
    double pr = 1;
    FAILS(CRL_E_UNSUPPORTED, crl_replay_update_priority(rb, &idx, &pr, 1, E));   /* not prioritized */
    /* a corrupt checkpoint directory */
    scratch_open("crl-err-null-XXXXXX");
    char *dir = tpath("rb");
    ck_assert_int_eq(crl_replay_dump(rb, dir, NULL), CRL_OK);
    char *manifest = g_build_filename(dir, "replay.ckpt", NULL);
    if (!g_file_test(manifest, G_FILE_TEST_EXISTS)) {
        g_free(manifest);
        GDir *d = g_dir_open(dir, 0, NULL);
        const char *name;
        manifest = NULL;
        while (d && (name = g_dir_read_name(d)) != NULL)
            if (g_str_has_suffix(name, ".ckpt") && !manifest)
                manifest = g_build_filename(dir, name, NULL);
        if (d)
            g_dir_close(d);
    }
    ck_assert_ptr_nonnull(manifest);
    ck_assert(g_file_set_contents(manifest, "not a checkpoint", -1, NULL));
    FAILS(CRL_E_CORRUPT, crl_replay_load(rb, dir, E));
    FAILS(CRL_E_IO, crl_replay_load(rb, "/nonexistent/crl-replay", E));
    g_free(manifest);
    g_free(dir);
    scratch_close();
    crl_td_unref(other);
    crl_td_unref(items);
    crl_replay_free(rb);
    /* the list storage and the memmap storage's own failures */
    static const char *const list_kv[] = { "storage = list", "capacity = 4", NULL };
    rb = crl_replay_new(h.host, list_kv, NULL);
    ck_assert_ptr_nonnull(rb);
    FAILS(CRL_E_IO, crl_replay_load(rb, "/nonexistent/crl-replay", E));
    crl_replay_free(rb);
    static const char *const mm_kv[] = { "storage = memmap", "capacity = 4", "dir = /proc/crl-no-such-dir", NULL };
    FAILS_NULL(CRL_E_IO, crl_replay_new(h.host, mm_kv, E));
    crl_test_host_close(&h);
}
END_TEST

/* ---- nn, optim and checkpoint ------------------------------------------------------------------------------- */

START_TEST(nn_failures)
{
    crl_activation act;
    FAILS(CRL_E_INVALID, crl_activation_from_name("relux", &act, E));
    crl_optim_kind kind;
    FAILS(CRL_E_INVALID, crl_optim_kind_from_name("adamw2", &kind, E));
    FAILS_NULL(CRL_E_INVALID, crl_optim_new(CRL_OPTIM_ADAM, -1, E));
    crl_optim *o = crl_optim_new(CRL_OPTIM_ADAM, 0.01, NULL);
    FAILS(CRL_E_INVALID, crl_optim_set(o, "no_such_knob", 1, E));
    crl_rng rng;
    crl_rng_init(&rng, 1, 0);
    const int64_t cells[1] = { 4 };
    crl_mlp *m = crl_mlp_new("m", 3, 2, cells, 1, CRL_ACT_TANH, false, &rng, NULL);
    ck_assert_ptr_nonnull(m);
    int64_t wrong[2] = { 5, 4 }, out_shape[2] = { 5, 2 };
    crl_tensor *in = crl_tensor_new(CRL_F32, 2, wrong, NULL), *out = crl_tensor_new(CRL_F32, 2, out_shape, NULL);
    FAILS(CRL_E_SHAPE, crl_mlp_infer(m, in, out, E));
    FAILS_NULL(CRL_E_SHAPE, crl_mlp_forward(m, in, E));
    FAILS(CRL_E_INVALID, crl_mlp_backward(m, out, NULL, E));    /* no forward yet */
    FAILS(CRL_E_SHAPE, crl_params_soft_update(crl_mlp_params_get(m), in, 0.5, E));
    const char *keys[] = { "obs", NULL };
    crl_tdmodule *mod = crl_tdmodule_new(m, keys, "y", NULL);
    crl_td *td = crl_td_new(0, NULL, NULL);
    FAILS(CRL_E_NOT_FOUND, crl_tdmodule_infer(mod, td, E));
    crl_td_unref(td);
    crl_tdmodule_free(mod);
    crl_tensor_unref(in);
    crl_tensor_unref(out);
    crl_mlp_unref(m);
    crl_optim_free(o);
}
END_TEST

START_TEST(checkpoint_failures)
{
    scratch_open("crl-err-null-XXXXXX");
    char *path = tpath("x.ckpt");
    FAILS_NULL(CRL_E_IO, crl_ckpt_reader_open("/nonexistent/x.ckpt", "crl.test", 1, E));
    ck_assert(g_file_set_contents(path, "CRLCKPT\0garbage, not a checkpoint", 34, NULL));
    FAILS_NULL(CRL_E_CORRUPT, crl_ckpt_reader_open(path, "crl.test", 1, E));
    /* a good file: another kind, missing sections, a short read */
    crl_ckpt_writer *w = crl_ckpt_writer_new(path, "crl.test", 1, NULL);
    ck_assert_ptr_nonnull(w);
    double v = 1;
    ck_assert_int_eq(crl_ckpt_write(w, "v", &v, sizeof v, NULL), CRL_OK);
    FAILS(CRL_E_INVALID, crl_ckpt_write(w, "", &v, sizeof v, E));
    ck_assert_int_eq(crl_ckpt_writer_close(w, NULL), CRL_OK);
    FAILS_NULL(CRL_E_CORRUPT, crl_ckpt_reader_open(path, "crl.other", 1, E));
    crl_ckpt_reader *r = crl_ckpt_reader_open(path, "crl.test", 1, NULL);
    ck_assert_ptr_nonnull(r);
    size_t len;
    FAILS_NULL(CRL_E_CORRUPT, crl_ckpt_section(r, "missing", &len, E));
    float f;
    FAILS(CRL_E_CORRUPT, crl_ckpt_read(r, "v", &f, sizeof f, E));
    FAILS(CRL_E_CORRUPT, crl_ckpt_read(r, "missing", &f, sizeof f, E));
    FAILS_NULL(CRL_E_CORRUPT, crl_ckpt_read_td(r, "missing", E));
    crl_rng rng;
    crl_rng_init(&rng, 1, 0);
    const int64_t cells[1] = { 4 };
    crl_mlp *m = crl_mlp_new("m", 3, 2, cells, 1, CRL_ACT_TANH, false, &rng, NULL);
    FAILS(CRL_E_CORRUPT, crl_mlp_load(m, r, "net", E));
    crl_optim *o = crl_optim_new(CRL_OPTIM_ADAM, 0.01, NULL);
    ck_assert_int_eq(crl_optim_add_mlp(o, m, NULL), CRL_OK);
    FAILS(CRL_E_CORRUPT, crl_optim_load(o, r, "optim", E));
    crl_optim_free(o);
    crl_mlp_unref(m);
    crl_ckpt_reader_free(r);
    FAILS_NULL(CRL_E_IO, crl_ckpt_dir_begin("/proc/crl-no-such-dir/ckpt", E));
    FAILS(CRL_E_IO, crl_ckpt_dir_clean("/proc/crl-no-such-dir/ckpt", NULL, E));
    FAILS(CRL_E_INVALID, crl_ckpt_dir_clean("", NULL, E));
    g_free(path);
    scratch_close();
}
END_TEST

/* ---- collector, losses and trainer -------------------------------------------------------------------------- */

static int no_policy(void *user, crl_env *env, crl_td *td, crl_error *err)
{
    (void)user;
    return crl_env_rand_action(env, td, err);
}

START_TEST(collector_failures)
{
    crl_test_host h;
    crl_test_host_open(&h, "classic", "[env]\nbackend = classic\nid = CartPole-v1\n[collector]\nframes_per_batch = 0\n");
    FAILS_NULL(CRL_E_CONFIG, crl_collector_from_config(h.host, h.cfg, "collector", "env", no_policy, NULL, E));
    crl_test_host_close(&h);
    /* an env whose step fails: the failure, then the same failure on every later call */
    crl_test_host_open(&h, "faultenv",
                       FAULT_ENV "[collector]\nframes_per_batch = 50\ntotal_frames = 5000\n");
    crl_collector *c = crl_collector_from_config(h.host, h.cfg, "collector", "env", no_policy, NULL, NULL);
    ck_assert_ptr_nonnull(c);
    crl_td *b = NULL;
    /* the first batches may all be clean: a fault needs a random action 2 (p = 1/5 per frame) */
    for (int i = 0; i < 100 && (b = crl_collector_next(c, NULL)) != NULL; i++)
        crl_td_unref(b);
    ck_assert_ptr_null(b);
    ck_assert_int_lt(crl_collector_frames(c), 5000);
    FAILS_NULL(CRL_E_RUNTIME, crl_collector_next(c, E));
    crl_collector_free(c);
    crl_test_host_close(&h);
}
END_TEST

#define DQN_INI(env)                                                                                             \
    env "[collector]\nframes_per_batch = 10\ntotal_frames = 400\ninit_random_frames = 100\n"                    \
        "[replay]\nstorage = tensor\ncapacity = 1000\nbatch_size = 16\n"                                      \
        "[loss]\ntype = dqn\nnum_cells = 8\n[optim]\nlr = 0.001\n[train]\nnum_updates = 1\neval_episodes = 0\n"

START_TEST(loss_failures)
{
    crl_test_host h;
    crl_test_host_open(&h, "classic, replay, losses", DQN_INI("[env]\nbackend = classic\nid = CartPole-v1\n"));
    crl_trainer *t = crl_trainer_from_config(h.host, h.cfg, NULL);
    ck_assert_ptr_nonnull(t);
    const crl_loss_ops *ops = crl_trainer_loss_ops(t);
    void *st = crl_trainer_loss_state(t);
    crl_td *empty = crl_td_new(0, NULL, NULL), *losses = crl_td_new(0, NULL, NULL);
    FAILS(CRL_E_NOT_FOUND, ops->forward(st, empty, losses, E));   /* a batch without next.reward */
    const char *name;
    crl_tensor *p, *g;
    FAILS(CRL_E_RANGE, ops->param(st, 99, &name, &p, &g, E));
    crl_rng rng;
    crl_rng_init(&rng, 1, 0);
    FAILS(CRL_E_NOT_FOUND, ops->act(st, empty, CRL_EXPLORE_MODE, &rng, E));
    crl_td_unref(losses);
    crl_td_unref(empty);
    crl_trainer_free(t);
    crl_test_host_close(&h);
    /* a loss of the wrong kind for the env (dqn on a continuous action), and an unknown loss option */
    crl_test_host_open(&h, "classic, replay, losses", DQN_INI("[env]\nbackend = classic\nid = Pendulum-v1\n"));
    FAILS_NULL(CRL_E_INVALID, crl_trainer_from_config(h.host, h.cfg, E));
    crl_test_host_close(&h);
    crl_test_host_open(&h, "classic, replay, losses",
                       DQN_INI("[env]\nbackend = classic\nid = CartPole-v1\n") "[loss]\ngama = 0.9\n");
    FAILS_NULL(CRL_E_CONFIG, crl_trainer_from_config(h.host, h.cfg, E));
    crl_test_host_close(&h);
}
END_TEST

/* A trainer run to its end with err = NULL (every step's success path), then trainers whose step fails. */
START_TEST(trainer_run_null)
{
    crl_test_host h;
    crl_test_host_open(&h, "classic, replay, losses", DQN_INI("[env]\nbackend = classic\nid = CartPole-v1\n"));
    crl_trainer *t = crl_trainer_from_config(h.host, h.cfg, NULL);
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(crl_trainer_run(t, NULL, NULL, NULL), CRL_OK);
    ck_assert_int_eq(crl_trainer_frames(t), 400);
    double ret;
    FAILS(CRL_E_INVALID, crl_trainer_evaluate(t, 1, &ret, E));   /* eval_episodes = 0: no evaluation env */
    crl_eval_result res = { sizeof res, 0, NULL, NULL, 0, 0, 0, 0 };
    FAILS(CRL_E_INVALID, crl_trainer_evaluate_ex(t, 1, &res, E));
    FAILS(CRL_E_INVALID, crl_trainer_evaluate_ex(NULL, 1, &res, E));
    crl_eval_hook bad_hook = { sizeof bad_hook, NULL, NULL };
    FAILS(CRL_E_INVALID, crl_trainer_set_eval_hook(t, &bad_hook, E));
    FAILS(CRL_E_INVALID, crl_trainer_set_eval_hook(NULL, NULL, E));
    FAILS_NULL(CRL_E_INVALID, crl_policy_load(NULL, h.cfg, "/nonexistent", E));
    FAILS_NULL(CRL_E_IO, crl_policy_load(h.host, h.cfg, "/nonexistent", E));
    FAILS(CRL_E_INVALID, crl_policy_evaluate(NULL, 1, &res, E));
    FAILS(CRL_E_INVALID, crl_policy_set_eval_hook(NULL, NULL, E));
    FAILS_NULL(CRL_E_INVALID, crl_env_transforms_state(NULL, E));
    FAILS(CRL_E_INVALID, crl_env_load_transforms_state(NULL, NULL, true, E));
    FAILS(CRL_E_IO, crl_trainer_load(t, "/nonexistent/trainer.ckpt", E));
    FAILS(CRL_E_INVALID, crl_trainer_resume(t, "/nonexistent/ckpt", E));   /* this trainer has run */
    crl_trainer_free(t);

    /* A parameter poisoned before the run: the first update's loss is not finite. */
    t = crl_trainer_from_config(h.host, h.cfg, NULL);
    const char *name;
    crl_tensor *p, *g;
    ck_assert_int_eq(crl_trainer_loss_ops(t)->param(crl_trainer_loss_state(t), 0, &name, &p, &g, NULL), CRL_OK);
    crl_tensor_flat_set(p, crl_tensor_numel(p) - 1, NAN);  /* an output bias */
    ck_assert_int_eq(crl_trainer_run(t, NULL, NULL, NULL), CRL_E_RUNTIME);
    ck_assert_int_lt(crl_trainer_frames(t), 400);
    crl_trainer_free(t);
    /* the same with an error: the message names it */
    t = crl_trainer_from_config(h.host, h.cfg, NULL);
    ck_assert_int_eq(crl_trainer_loss_ops(t)->param(crl_trainer_loss_state(t), 0, &name, &p, &g, NULL), CRL_OK);
    crl_tensor_flat_set(p, crl_tensor_numel(p) - 1, NAN);
    crl_error e;
    crl_error_clear(&e);
    ck_assert_int_eq(crl_trainer_run(t, NULL, NULL, &e), CRL_E_RUNTIME);
    ck_assert_msg(strstr(e.message, "not finite") != NULL, "%s", e.message);
    crl_trainer_free(t);
    crl_test_host_close(&h);

    /* An env whose step fails while collecting. */
    crl_test_host_open(&h, "faultenv, replay, losses", DQN_INI(FAULT_ENV));
    t = crl_trainer_from_config(h.host, h.cfg, NULL);
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(crl_trainer_run(t, NULL, NULL, NULL), CRL_E_RUNTIME);
    crl_trainer_free(t);
    crl_test_host_close(&h);
}
END_TEST

START_TEST(trainer_checkpoint_failures)
{
    crl_test_host h;
    crl_test_host_open(&h, "classic, replay, losses", DQN_INI("[env]\nbackend = classic\nid = CartPole-v1\n"));
    crl_trainer *t = crl_trainer_from_config(h.host, h.cfg, NULL);
    ck_assert_ptr_nonnull(t);
    scratch_open("crl-err-null-XXXXXX");
    char *path = tpath("trainer.ckpt");
    ck_assert(g_file_set_contents(path, "CRLCKPT\0garbage, not a checkpoint", 34, NULL));
    FAILS(CRL_E_CORRUPT, crl_trainer_load(t, path, E));
    FAILS(CRL_E_IO, crl_trainer_save(t, "/proc/crl-no-such-dir/trainer.ckpt", E));
    FAILS(CRL_E_IO, crl_trainer_checkpoint(t, "/proc/crl-no-such-dir/ckpt", E));
    g_free(path);
    scratch_close();
    crl_trainer_free(t);
    crl_test_host_close(&h);
}
END_TEST

static Suite *err_null_suite(void)
{
    Suite *s = suite_create("err_null");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, tensor_failures);
    tcase_add_test(tc, td_failures);
    tcase_add_test(tc, spec_failures);
    tcase_add_test(tc, config_failures);
    tcase_add_test(tc, host_failures);
    tcase_add_test(tc, env_config_failures);
    tcase_add_test(tc, env_step_failures);
    tcase_add_test(tc, env_backend_failure);
    tcase_add_test(tc, optional_backends);
    tcase_add_test(tc, transform_failures);
    tcase_add_test(tc, replay_failures);
    tcase_add_test(tc, nn_failures);
    tcase_add_test(tc, checkpoint_failures);
    tcase_add_test(tc, collector_failures);
    tcase_add_test(tc, loss_failures);
    tcase_add_test(tc, trainer_run_null);
    tcase_add_test(tc, trainer_checkpoint_failures);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    crl_test_keep_cairo();
    SRunner *sr = srunner_create(err_null_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
