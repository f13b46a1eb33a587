/* Check suite: the validation before work (crl_experiment_check, core/trainer_check.c): the bad-config
 * table's experiment cases, the shipped examples, what is checked when, that no env is stepped, the one
 * default of [replay] batch_size, and the rules the trainer shares with it. */
#include "host-fixture.h"
#include "keep-cairo.h"

#include "cli-schema.h"
#include <crl/replay.h>
#include <crl/trainer.h>

#define BAD_DIR TEST_SRCDIR "/config/bad"
#define EXAMPLES TEST_SRCDIR "/../conf/examples"

/* A config of file `path` (plus overrides, NULL-terminated) and a host with the plugins it names. */
static int open_file(crl_test_host *h, const char *path, const char *const *overrides, crl_error *e)
{
    memset(h, 0, sizeof *h);
    h->cfg = crl_config_new(e);
    ck_assert_ptr_nonnull(h->cfg);
    int rc = crl_config_load_file(h->cfg, path, CRL_LAYER_FILE, e);
    for (size_t i = 0; !rc && overrides && overrides[i]; i++)
        rc = crl_config_override(h->cfg, NULL, overrides[i], e);
    if (!rc && !(h->host = crl_host_new(h->cfg, e)))
        rc = e->code;
    if (!rc)
        rc = crl_host_load_configured(h->host, e);
    return rc;
}

/* Each experiment case of EXPECTED ("experiment FILE LINE MESSAGE"): CRL_E_CONFIG starting with
 * "PATH:LINE: " and holding MESSAGE, the same with CRL_CHECK_TRAIN (crl run's check), and the code
 * alone when err is NULL. */
START_TEST(bad_config_table)
{
    char *text = NULL;
    ck_assert(g_file_get_contents(BAD_DIR "/EXPECTED", &text, NULL, NULL));
    char **lines = g_strsplit(text, "\n", -1);
    size_t cases = 0;
    for (char **l = lines; *l; l++) {
        if (!g_str_has_prefix(*l, "experiment "))
            continue;
        char **f = g_strsplit(*l, " ", 4);
        ck_assert_msg(f[1] && f[2] && f[3], "malformed EXPECTED line '%s'", *l);
        char *path = g_strdup_printf("%s/%s", BAD_DIR, f[1]);
        char *prefix = g_strdup_printf("%s:%s: ", path, f[2]);
        crl_test_host h;
        crl_error e = { 0 };
        ck_assert_msg(open_file(&h, path, NULL, &e) == CRL_OK, "%s: %s", f[1], e.message);
        ck_assert_msg(crl_experiment_check(h.host, h.cfg, NULL, 0, &e) == CRL_E_CONFIG, "%s: %s (%s)", f[1],
                      e.message, crl_status_name(e.code));
        ck_assert_int_eq(e.code, CRL_E_CONFIG);
        ck_assert_msg(g_str_has_prefix(e.message, prefix), "%s: '%s' does not start with '%s'", f[1], e.message,
                      prefix);
        ck_assert_msg(strstr(e.message, f[3]) != NULL, "%s: '%s' lacks '%s'", f[1], e.message, f[3]);
        crl_error e2 = { 0 };
        ck_assert_int_eq(crl_experiment_check(h.host, h.cfg, NULL, CRL_CHECK_TRAIN, &e2), CRL_E_CONFIG);
        ck_assert_str_eq(e2.message, e.message);
        ck_assert_int_eq(crl_experiment_check(h.host, h.cfg, NULL, 0, NULL), CRL_E_CONFIG);
        crl_test_host_close(&h);
        g_free(prefix);
        g_free(path);
        g_strfreev(f);
        cases++;
    }
    ck_assert_uint_ge(cases, 20);
    g_strfreev(lines);
    g_free(text);
}
END_TEST

/* Every shipped example passes; the training ones also as crl run checks them. */
START_TEST(examples_pass)
{
    static const struct {
        const char *file;
        unsigned flags;
    } ex[] = {
        { "cartpole-dqn.ini", CRL_CHECK_TRAIN },   { "cartpole-ppo.ini", CRL_CHECK_TRAIN },
        { "pendulum-ddpg.ini", CRL_CHECK_TRAIN },  { "pendulum-sac.ini", CRL_CHECK_TRAIN },
        { "pendulum-td3.ini", CRL_CHECK_TRAIN },   { "cartpole-collect.ini", 0 },
        { "cartpole-random.ini", 0 },              { "pendulum-pixels.ini", 0 },
        { "pendulum-pixels-64.ini", 0 },           { "pendulum-workers.ini", 0 },
        { "plugins-check.ini", 0 },                { "cartpole-pixels-dqn.ini", CRL_CHECK_TRAIN },
        { "cartpole-masked-lstm-ppo.ini", CRL_CHECK_TRAIN }, { "cartpole-masked-lstm-dqn.ini", CRL_CHECK_TRAIN },
    };
    static const char *const load[] = { "plugins.load=classic, transforms, replay, losses", NULL };
    for (size_t i = 0; i < G_N_ELEMENTS(ex); i++) {
        char *path = g_strdup_printf("%s/%s", EXAMPLES, ex[i].file);
        crl_test_host h;
        crl_error e = { 0 };
        ck_assert_msg(open_file(&h, path, load, &e) == CRL_OK, "%s: %s", ex[i].file, e.message);
        crl_schema *schema = crl__cli_schema_new(h.host, &e);
        ck_assert_msg(schema != NULL, "%s", e.message);
        ck_assert_msg(crl_experiment_check(h.host, h.cfg, schema, ex[i].flags, &e) == CRL_OK,
                      "%s: %s", ex[i].file, e.message);
        crl_schema_free(schema);
        ck_assert_int_eq(e.code, CRL_OK);
        crl_test_host_close(&h);
        g_free(path);
    }
}
END_TEST

#define ENV_ONLY "[env]\nbackend = classic\nid = CartPole-v1\n"

/* What is checked when: an env-only config passes, but not as a training run (crl run), which needs
 * [collector] and [loss], checked in the trainer's order; a [loss] section makes any check a training
 * one. */
START_TEST(training_needs_loss)
{
    crl_test_host h;
    crl_error e = { 0 };
    crl_test_host_open(&h, "classic, replay, losses", ENV_ONLY);
    ck_assert_int_eq(crl_experiment_check(h.host, h.cfg, NULL, 0, &e), CRL_OK);
    ck_assert_int_eq(crl_experiment_check(h.host, h.cfg, NULL, CRL_CHECK_TRAIN, &e), CRL_E_CONFIG);
    ck_assert_msg(strstr(e.message, "[collector] frames_per_batch is required") != NULL, "%s", e.message);
    crl_test_host_close(&h);

    crl_test_host_open(&h, "classic, replay, losses", ENV_ONLY "[collector]\nframes_per_batch = 10\n");
    ck_assert_int_eq(crl_experiment_check(h.host, h.cfg, NULL, 0, &e), CRL_OK);
    ck_assert_int_eq(crl_experiment_check(h.host, h.cfg, NULL, CRL_CHECK_TRAIN, &e), CRL_E_CONFIG);
    ck_assert_msg(strstr(e.message, "[loss] has no 'type'") != NULL, "%s", e.message);
    crl_test_host_close(&h);

    crl_test_host_open(&h, "classic, replay, losses", ENV_ONLY "[loss]\ntype = ppo\n");
    ck_assert_int_eq(crl_experiment_check(h.host, h.cfg, NULL, 0, &e), CRL_E_CONFIG);
    ck_assert_msg(strstr(e.message, "[collector] frames_per_batch is required") != NULL, "%s", e.message);
    crl_test_host_close(&h);

    /* a config with no env at all (plugins and logging only) has nothing more to check */
    crl_test_host_open(&h, "classic", "[log]\nlevel = info\n");
    ck_assert_int_eq(crl_experiment_check(h.host, h.cfg, NULL, 0, &e), CRL_OK);
    crl_test_host_close(&h);
}
END_TEST

/* With a schema every section and key is checked first; without one (the caller validated) an unknown
 * section is not this function's business, but a section it builds still refuses unknown keys. */
START_TEST(schema_first)
{
    crl_test_host h;
    crl_error e = { 0 };
    crl_test_host_open(&h, "classic", ENV_ONLY "[trian]\nseed = 1\n");
    crl_schema *s = crl_schema_new(&e);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(crl_schema_add(s, "plugins", crl_host_plugins_options(), NULL, &e), CRL_OK);
    ck_assert_int_eq(crl_schema_add(s, "env", crl_env_options(), NULL, &e), CRL_OK);
    ck_assert_int_eq(crl_schema_add(s, "train", crl_train_options(), NULL, &e), CRL_OK);
    ck_assert_int_eq(crl_experiment_check(h.host, h.cfg, s, 0, &e), CRL_E_CONFIG);
    ck_assert_msg(strstr(e.message, "test.ini:6: unknown section [trian]; did you mean [train]?") != NULL, "%s",
                  e.message);
    ck_assert_int_eq(crl_experiment_check(h.host, h.cfg, NULL, 0, &e), CRL_OK);
    crl_schema_free(s);
    crl_test_host_close(&h);

    crl_test_host_open(&h, "classic", ENV_ONLY "seeed = 3\n");
    ck_assert_int_eq(crl_experiment_check(h.host, h.cfg, NULL, 0, &e), CRL_E_CONFIG);
    ck_assert_msg(strstr(e.message, "test.ini:6: unknown key 'seeed' in [env]; did you mean 'seed'?") != NULL, "%s",
                  e.message);
    crl_test_host_close(&h);
}
END_TEST

START_TEST(null_arguments)
{
    crl_test_host h;
    crl_error e = { 0 };
    crl_test_host_open(&h, "classic", ENV_ONLY);
    ck_assert_int_eq(crl_experiment_check(NULL, h.cfg, NULL, 0, &e), CRL_E_INVALID);
    ck_assert_str_eq(e.message, "crl_experiment_check: host is NULL");
    ck_assert_int_eq(crl_experiment_check(h.host, NULL, NULL, 0, &e), CRL_E_INVALID);
    ck_assert_str_eq(e.message, "crl_experiment_check: cfg is NULL");
    ck_assert_int_eq(crl_experiment_check(h.host, NULL, NULL, 0, NULL), CRL_E_INVALID);
    ck_assert_int_eq(crl_experiment_check(h.host, h.cfg, NULL, 0, NULL), CRL_OK);
    crl_test_host_close(&h);
}
END_TEST

/* badspec's step swaps its reward buffer, which the host reports as an error.  ObservationNorm's
 * init_stats rolls the env out at bind, so building the env steps it and fails; validation builds
 * it without that rollout and passes, and leaves that mode behind it. */
START_TEST(no_env_step)
{
    crl_test_host h;
    crl_error e = { 0 };
    crl_test_host_open(&h, "badspec, transforms",
                       "[env]\nbackend = badspec\nid = Bad-v0\nmode = reward_dtype\ntransforms = norm\n"
                       "[transform.norm]\ntype = ObservationNorm\ninit_stats = 3\n");
    crl_env *env = crl_env_from_config(h.host, h.cfg, "env", &e);
    ck_assert_ptr_null(env);
    ck_assert_msg(strstr(e.message, "init_stats = 3") != NULL, "%s", e.message);
    crl_error e2 = { 0 };
    ck_assert_msg(crl_experiment_check(h.host, h.cfg, NULL, 0, &e2) == CRL_OK, "%s", e2.message);
    crl_error e3 = { 0 };
    ck_assert_ptr_null(crl_env_from_config(h.host, h.cfg, "env", &e3));
    ck_assert_str_eq(e3.message, e.message);
    crl_test_host_close(&h);

    /* without the transform the env builds, and validation never steps it either */
    crl_test_host_open(&h, "badspec", "[env]\nbackend = badspec\nid = Bad-v0\nmode = reward_dtype\n");
    ck_assert_msg(crl_experiment_check(h.host, h.cfg, NULL, 0, &e) == CRL_OK, "%s", e.message);
    crl_test_host_close(&h);
}
END_TEST

#define DQN_NO_BATCH                                                                                  \
    "[env]\nbackend = classic\nid = CartPole-v1\nseed = 0\n"                                         \
    "[collector]\nframes_per_batch = 10\ntotal_frames = 1500\ninit_random_frames = 1000\n"          \
    "[replay]\nstorage = tensor\ncapacity = 5000\n"                                                 \
    "[loss]\ntype = dqn\nnum_cells = 32, 32\n"                                                      \
    "[train]\neval_episodes = 0\n"

static int count_steps(void *user, crl_trainer *t, const crl_train_stats *s, crl_error *err)
{
    (void)t;
    (void)err;
    *(int64_t *)user = s->optim_steps;
    return CRL_OK;
}

/* Without [replay] batch_size, training samples the replay table's one default (it used to stop at
 * the first update, the trainer reading another default than the buffer). */
START_TEST(batch_size_one_default)
{
    const char *dflt = NULL;
    for (const crl_option *o = crl_replay_options(); o->type != CRL_OPT_END; o++)
        if (!strcmp(o->name, "batch_size"))
            dflt = o->default_value;
    ck_assert_ptr_nonnull(dflt);
    ck_assert_int_gt(atoi(dflt), 0);
    crl_test_host h;
    crl_error e = { 0 };
    crl_test_host_open(&h, "classic, replay, losses", DQN_NO_BATCH);
    ck_assert_msg(crl_experiment_check(h.host, h.cfg, NULL, CRL_CHECK_TRAIN, &e) == CRL_OK, "%s", e.message);
    crl_trainer *t = crl_trainer_from_config(h.host, h.cfg, &e);
    ck_assert_msg(t != NULL, "%s", e.message);
    ck_assert_uint_eq(crl_replay_batch_size(crl_trainer_replay(t)), (size_t)atoi(dflt));
    int64_t steps = 0;
    ck_assert_msg(crl_trainer_run(t, count_steps, &steps, &e) == CRL_OK, "%s", e.message);
    ck_assert_int_gt(steps, 0);
    crl_trainer_free(t);
    crl_test_host_close(&h);
}
END_TEST

/* The trainer refuses what validation refuses, with the same message: the rules are written once. */
START_TEST(trainer_shares_rules)
{
    static const char *const files[] = { "replay-batch-size-zero.ini", "replay-batch-over-capacity.ini",
                                         "replay-drop-last.ini", "train-async-collectors.ini", "loss-no-replay.ini",
                                         "loss-onpolicy-random-frames.ini", "collector-async-env.ini" };
    for (size_t i = 0; i < G_N_ELEMENTS(files); i++) {
        char *path = g_strdup_printf("%s/%s", BAD_DIR, files[i]);
        crl_test_host h;
        crl_error e = { 0 }, e2 = { 0 };
        ck_assert_msg(open_file(&h, path, NULL, &e) == CRL_OK, "%s: %s", files[i], e.message);
        ck_assert_int_eq(crl_experiment_check(h.host, h.cfg, NULL, CRL_CHECK_TRAIN, &e), CRL_E_CONFIG);
        ck_assert_ptr_null(crl_trainer_from_config(h.host, h.cfg, &e2));
        ck_assert_int_eq(e2.code, CRL_E_CONFIG);
        ck_assert_str_eq(e2.message, e.message);
        crl_test_host_close(&h);
        g_free(path);
    }
    /* a backend's range error is a config error wherever the env is built */
    crl_test_host h;
    crl_error e = { 0 };
    ck_assert_int_eq(open_file(&h, BAD_DIR "/physics-pendulum-range.ini", NULL, &e), CRL_OK);
    ck_assert_ptr_null(crl_env_from_config(h.host, h.cfg, "env", &e));
    ck_assert_int_eq(e.code, CRL_E_CONFIG);
    ck_assert_msg(strstr(e.message, BAD_DIR "/physics-pendulum-range.ini:8: [env] max_torque: ") != NULL, "%s",
                  e.message);
    crl_test_host_close(&h);
}
END_TEST

static Suite *check_suite(void)
{
    Suite *s = suite_create("trainer_check");
    TCase *tc = tcase_create("check");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, bad_config_table);
    tcase_add_test(tc, examples_pass);
    tcase_add_test(tc, training_needs_loss);
    tcase_add_test(tc, schema_first);
    tcase_add_test(tc, null_arguments);
    tcase_add_test(tc, no_env_step);
    tcase_add_test(tc, batch_size_one_default);
    tcase_add_test(tc, trainer_shares_rules);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    crl_test_keep_cairo();
    SRunner *sr = srunner_create(check_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
