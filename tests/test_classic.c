/* Check suite for the classic plugin's env backend contract (crl_env_ops), built in and dlopen'd. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <crl/config.h>
#include <crl/env.h>
#include <crl/env_backend.h>
#include <crl/host.h>

#include "classic.h"

/* plugins/classic/plugin.c, linked in from libclassic-builtin.la. */
const crl_plugin_desc *crl_plugin_builtin_classic(void);

#define N_IDS 5
static const char *const ids[N_IDS] = {"CartPole-v1", "Pendulum-v1", "MountainCar-v0",
                                       "MountainCarContinuous-v0", "Acrobot-v1"};

#define EXPECT_OK(expr, e)                                                                     \
    do {                                                                                       \
        int rc_ = (expr);                                                                      \
        ck_assert_msg(rc_ == CRL_OK, "%s failed: %s (%s)", #expr, (e).message,                 \
                      crl_status_name(rc_));                                                   \
    } while (0)

#define EXPECT_ERR(expr, e, want, needle)                                                      \
    do {                                                                                       \
        int rc_ = (expr);                                                                      \
        ck_assert_msg(rc_ == (want), "%s gave %s, expected %s (%s)", #expr,                   \
                      crl_status_name(rc_), crl_status_name(want), (e).message);               \
        ck_assert_int_eq((e).code, (want));                                                    \
        ck_assert_msg(strstr((e).message, (needle)) != NULL, "message '%s' lacks '%s'",       \
                      (e).message, (needle));                                                  \
    } while (0)

/* ---- the two forms of the plugin ---- */

typedef struct form {
    crl_host *host;
    const crl_component *comp;
    const crl_env_ops *ops;
} form;

/* _i == 0: built in (static registration); _i == 1: classic.so along CRL_PLUGIN_PATH. */
static form open_form(int builtin)
{
    form f = {0};
    crl_error e = {0};
    f.host = crl_host_new(NULL, &e);
    ck_assert_msg(f.host != NULL, "%s", e.message);
    if (builtin)
        EXPECT_OK(crl_host_load_builtin(f.host, crl_plugin_builtin_classic, &e), e);
    else
        EXPECT_OK(crl_host_load_name(f.host, "classic", &e), e);
    ck_assert_uint_eq(crl_host_plugin_count(f.host), 1);
    const crl_plugin_info *info = crl_host_plugin_at(f.host, 0);
    ck_assert_str_eq(info->name, "classic");
    ck_assert(info->builtin == (builtin != 0));
    if (!builtin)
        ck_assert_msg(strstr(info->path, "plugins/classic/.libs/classic.so") != NULL, "%s",
                      info->path);
    f.comp = crl_host_find(f.host, CRL_KIND_ENV, "classic");
    ck_assert_ptr_nonnull(f.comp);
    ck_assert_str_eq(crl_host_component_owner(f.host, CRL_KIND_ENV, "classic"), "classic");
    f.ops = f.comp->ops;
    ck_assert_uint_eq(f.ops->struct_size, sizeof(crl_env_ops));
    return f;
}

static void close_form(form *f)
{
    crl_host_free(f->host);
    memset(f, 0, sizeof *f);
}

/* Options of [env] from INI text (NULL: none given), as the host builds
 * them from the component's table (plus `extra`, may be NULL). */
static crl_opts *opts_of(const form *f, const char *ini, const crl_option *extra, crl_error *e)
{
    crl_config *cfg = crl_config_new(e);
    ck_assert_ptr_nonnull(cfg);
    if (ini)
        EXPECT_OK(crl_config_load_buffer(cfg, "test.ini", ini, strlen(ini), CRL_LAYER_FILE, e), *e);
    /* These tests write int64 indices; test_onehot_actions tests the one-hot default. */
    if (!ini || !strstr(ini, "categorical_action_encoding")) {
        static const char idx[] = "[env]\ncategorical_action_encoding = true\n";
        EXPECT_OK(crl_config_load_buffer(cfg, "index.ini", idx, strlen(idx), CRL_LAYER_FILE, e), *e);
    }
    const crl_option *tables[2] = {f->comp->options, extra};
    crl_opts *o = crl_config_opts(cfg, "env", tables, extra ? 2 : 1, e);
    crl_config_free(cfg);
    return o;
}

/* ---- one env instance with host-like buffers ---- */

typedef struct tenv {
    const form *f;
    const classic_def *d;
    void *env;
    crl_env_specs specs;
    int64_t num;
    crl_td *buf;
    float *obs;
    void *action;
    float *reward;
    uint8_t *term, *trunc;
    double *state;
} tenv;

static void free_specs(crl_env_specs *s)
{
    crl_spec_unref(s->observation);
    crl_spec_unref(s->action);
    crl_spec_unref(s->reward);
    crl_spec_unref(s->done);
    crl_spec_unref(s->state);
    crl_spec_unref(s->info);
    memset(s, 0, sizeof *s);
}

/* make only; returns make's status (specs are released on failure). */
static int tenv_make(tenv *t, const form *f, const char *id, int64_t num, const char *ini,
                     crl_error *e)
{
    memset(t, 0, sizeof *t);
    t->f = f;
    t->num = num;
    t->d = classic_find(id);
    t->specs.struct_size = sizeof t->specs;
    crl_opts *o = opts_of(f, ini, NULL, e);
    ck_assert_msg(o != NULL, "%s", e->message);
    int rc = f->ops->make(id, num, o, &t->specs, &t->env, e);
    crl_opts_free(o);
    if (rc != CRL_OK) {
        ck_assert_ptr_null(t->env);
        free_specs(&t->specs);
    }
    return rc;
}

/* Buffers allocated from the specs, as the host does: one zeroed tensor per leaf. */
static crl_td *buffers_of(const crl_env_specs *s, int64_t num)
{
    crl_error e = {0};
    crl_td *buf = crl_td_new(1, &num, &e);
    ck_assert_ptr_nonnull(buf);
    const crl_spec *parts[5] = {s->observation, s->action, s->reward, s->done, s->state};
    for (int k = 0; k < 5; k++) {
        if (!parts[k])
            continue;
        crl_td *z = crl_spec_zero_td(parts[k], &e);
        ck_assert_msg(z != NULL, "%s", e.message);
        EXPECT_OK(crl_td_update(buf, z, &e), e);
        crl_td_unref(z);
    }
    return buf;
}

static void tenv_bind(tenv *t)
{
    crl_error e = {0};
    t->buf = buffers_of(&t->specs, t->num);
    EXPECT_OK(t->f->ops->bind(t->env, t->buf, &e), e);
    t->obs = crl_tensor_data(crl_td_get(t->buf, "observation"));
    t->action = crl_tensor_data(crl_td_get(t->buf, "action"));
    t->reward = crl_tensor_data(crl_td_get(t->buf, "reward"));
    t->term = crl_tensor_data(crl_td_get(t->buf, "terminated"));
    t->trunc = crl_tensor_data(crl_td_get(t->buf, "truncated"));
    t->state = crl_tensor_data(crl_td_get(t->buf, "state"));
}

static void tenv_open(tenv *t, const form *f, const char *id, int64_t num, const char *ini)
{
    crl_error e = {0};
    EXPECT_OK(tenv_make(t, f, id, num, ini, &e), e);
    tenv_bind(t);
}

static void tenv_close(tenv *t)
{
    t->f->ops->close(t->env);
    free_specs(&t->specs);
    crl_td_unref(t->buf);
    memset(t, 0, sizeof *t);
}

static int tenv_reset(tenv *t, const bool *mask, const uint64_t *seeds, bool from_state)
{
    crl_error e = {0};
    int rc = t->f->ops->reset(t->env, mask, seeds, from_state, &e);
    ck_assert_msg(rc == CRL_OK, "reset: %s", e.message);
    return rc;
}

static void tenv_step(tenv *t)
{
    crl_error e = {0};
    EXPECT_OK(t->f->ops->step(t->env, &e), e);
}

/* A deterministic action for env i at step k, in the env's layout. */
static void set_actions(tenv *t, int k)
{
    for (int64_t i = 0; i < t->num; i++) {
        if (t->d->action_kind == CLASSIC_ACTION_DISCRETE)
            ((int64_t *)t->action)[i] = (i * 7 + k * 3) % t->d->action_n;
        else
            ((float *)t->action)[i] = (float)sin(0.3 * (double)k + (double)i) * 1.5f;
    }
}

static bool bytes_equal(const void *a, const void *b, size_t n)
{
    return memcmp(a, b, n) == 0;
}

/* ---- list and make ---- */

START_TEST(test_list)
{
    form f = open_form(_i == 0);
    const char *const *list = f.ops->list();
    ck_assert_ptr_nonnull(list);
    size_t n = 0;
    while (list[n]) {
        ck_assert_uint_lt(n, N_IDS);
        ck_assert_str_eq(list[n], ids[n]);
        ck_assert_ptr_eq(classic_find(list[n]), classic_def_at(n));
        n++;
    }
    ck_assert_uint_eq(n, classic_def_count());
    ck_assert_ptr_nonnull(f.ops->make);
    ck_assert_ptr_nonnull(f.ops->bind);
    ck_assert_ptr_nonnull(f.ops->reset);
    ck_assert_ptr_nonnull(f.ops->step);
    ck_assert_ptr_nonnull(f.ops->render);
    ck_assert_ptr_nonnull(f.ops->close);
    ck_assert_str_eq(crl_host_plugin_at(f.host, 0)->license, "MIT");
    close_form(&f);
}
END_TEST

/* Every parameter of every env is an option, without default, with one type. */
START_TEST(test_options_table)
{
    form f = open_form(_i == 0);
    const crl_option *opts = f.comp->options;
    ck_assert_ptr_nonnull(opts);
    size_t count = 0;
    /* First the one option that is no physics parameter: TorchRL GymEnv's default encoding. */
    ck_assert_str_eq(opts->name, "categorical_action_encoding");
    ck_assert_int_eq(opts->type, CRL_OPT_BOOL);
    ck_assert_str_eq(opts->default_value, "false");
    /* Last, the render size: no physics either. */
    const crl_option *end = opts;
    while (end->type != CRL_OPT_END)
        end++;
    ck_assert_str_eq(end[-2].name, "render_width");
    ck_assert_str_eq(end[-1].name, "render_height");
    for (int k = 1; k <= 2; k++) {
        ck_assert_int_eq(end[-k].type, CRL_OPT_INT);
        ck_assert_ptr_null(end[-k].default_value);
        ck_assert_uint_eq(end[-k].flags, CRL_OPT_RANGE);
        ck_assert(end[-k].min == 1 && end[-k].max == CLASSIC_RENDER_MAX_SIDE);
    }
    for (const crl_option *o = opts + 1; o < end - 2; o++) {
        count++;
        ck_assert_ptr_null(o->default_value);
        ck_assert_uint_eq(o->flags, 0);
        ck_assert_ptr_nonnull(o->doc);
        for (const crl_option *p = opts; p < o; p++)
            ck_assert_str_ne(p->name, o->name);
        bool used = false;
        for (size_t di = 0; di < classic_def_count(); di++) {
            const classic_def *d = classic_def_at(di);
            int pi = classic_param_index(d, o->name);
            if (pi < 0)
                continue;
            used = true;
            ck_assert_int_eq(d->params[pi].type, o->type);
            ck_assert_msg(strstr(o->doc, d->id) != NULL, "doc of %s lacks %s: %s", o->name,
                          d->id, o->doc);
        }
        ck_assert_msg(used, "option %s belongs to no env", o->name);
    }
    for (size_t di = 0; di < classic_def_count(); di++) {
        const classic_def *d = classic_def_at(di);
        for (int pi = 0; pi < d->n_params; pi++) {
            bool found = false;
            for (const crl_option *o = opts; o->type != CRL_OPT_END; o++)
                found = found || strcmp(o->name, d->params[pi].name) == 0;
            ck_assert_msg(found, "%s's %s is not an option", d->id, d->params[pi].name);
        }
    }
    ck_assert_uint_ge(count, 30);
    /* Spot checks of names, kinds and docs. */
    for (const crl_option *o = opts; o->type != CRL_OPT_END; o++) {
        if (!strcmp(o->name, "gravity"))
            ck_assert_msg(strstr(o->doc, "CartPole-v1 9.8") && strstr(o->doc, "MountainCar-v0 0.0025"),
                          "%s", o->doc);
        if (!strcmp(o->name, "kinematics_integrator")) {
            ck_assert_int_eq(o->type, CRL_OPT_ENUM);
            ck_assert_str_eq(o->choices, "euler|semi-implicit");
            ck_assert_msg(strstr(o->doc, "CartPole-v1 euler") != NULL, "%s", o->doc);
        }
        if (!strcmp(o->name, "sutton_barto_reward"))
            ck_assert_int_eq(o->type, CRL_OPT_BOOL);
    }
    close_form(&f);
}
END_TEST

static void check_bounds_rows(const crl_spec *s, int64_t num, int dim, const float *lo,
                              const float *hi)
{
    ck_assert_int_eq(crl_spec_get_kind(s), CRL_SPEC_BOUNDED);
    ck_assert_int_eq(crl_spec_dtype(s), CRL_F32);
    ck_assert_int_eq(crl_spec_ndim(s), 2);
    ck_assert_int_eq(crl_spec_shape(s)[0], num);
    ck_assert_int_eq(crl_spec_shape(s)[1], dim);
    const double *l = crl_tensor_data(crl_spec_low(s));
    const double *h = crl_tensor_data(crl_spec_high(s));
    for (int64_t i = 0; i < num; i++)
        for (int k = 0; k < dim; k++) {
            ck_assert(l[i * dim + k] == (double)lo[k]);
            ck_assert(h[i * dim + k] == (double)hi[k]);
        }
}

START_TEST(test_make_specs)
{
    form f = open_form(_i % 2 == 0);
    const int id_index = _i / 2;
    const char *id = ids[id_index];
    const classic_def *d = classic_find(id);
    const int64_t steps[N_IDS] = {500, 200, 200, 999, 500};
    const int sizes[N_IDS][2] = {{600, 400}, {500, 500}, {600, 400}, {600, 400}, {500, 500}};
    const int64_t num = 3;
    tenv t;
    crl_error e = {0};
    EXPECT_OK(tenv_make(&t, &f, id, num, NULL, &e), e);
    crl_env_specs *s = &t.specs;
    ck_assert_int_eq(s->max_episode_steps, steps[id_index]);
    ck_assert_int_eq(s->render_width, sizes[id_index][0]);
    ck_assert_int_eq(s->render_height, sizes[id_index][1]);
    ck_assert_ptr_null(s->info);

    /* Every part is a Composite of batch shape [num]. */
    const crl_spec *parts[5] = {s->observation, s->action, s->reward, s->done, s->state};
    for (int k = 0; k < 5; k++) {
        ck_assert_ptr_nonnull(parts[k]);
        ck_assert_int_eq(crl_spec_get_kind(parts[k]), CRL_SPEC_COMPOSITE);
        ck_assert_int_eq(crl_spec_ndim(parts[k]), 1);
        ck_assert_int_eq(crl_spec_shape(parts[k])[0], num);
    }

    ck_assert_uint_eq(crl_spec_composite_len(s->observation), 1);
    check_bounds_rows(crl_spec_composite_get(s->observation, "observation"), num, d->obs_dim,
                      d->obs_low, d->obs_high);

    ck_assert_uint_eq(crl_spec_composite_len(s->action), 1);
    const crl_spec *a = crl_spec_composite_get(s->action, "action");
    ck_assert_ptr_nonnull(a);
    if (d->action_kind == CLASSIC_ACTION_DISCRETE) {
        ck_assert_int_eq(crl_spec_get_kind(a), CRL_SPEC_CATEGORICAL);
        ck_assert_int_eq(crl_spec_dtype(a), CRL_I64);
        ck_assert_int_eq(crl_spec_n(a), d->action_n);
        ck_assert_int_eq(crl_spec_ndim(a), 1);
        ck_assert_int_eq(crl_spec_shape(a)[0], num);
    } else {
        check_bounds_rows(a, num, d->action_dim, d->action_low, d->action_high);
    }

    const crl_spec *r = crl_spec_composite_get(s->reward, "reward");
    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq(crl_spec_get_kind(r), CRL_SPEC_UNBOUNDED);
    ck_assert_int_eq(crl_spec_dtype(r), CRL_F32);
    ck_assert_int_eq(crl_spec_ndim(r), 2);
    ck_assert_int_eq(crl_spec_shape(r)[1], 1);

    ck_assert_uint_eq(crl_spec_composite_len(s->done), 3);
    const char *done_keys[3] = {"done", "terminated", "truncated"};
    for (int k = 0; k < 3; k++) {
        const crl_spec *dk = crl_spec_composite_get(s->done, done_keys[k]);
        ck_assert_ptr_nonnull(dk);
        ck_assert_int_eq(crl_spec_get_kind(dk), CRL_SPEC_CATEGORICAL);
        ck_assert_int_eq(crl_spec_dtype(dk), CRL_BOOL);
        ck_assert_int_eq(crl_spec_n(dk), 2);
        ck_assert_int_eq(crl_spec_ndim(dk), 2);
        ck_assert_int_eq(crl_spec_shape(dk)[0], num);
        ck_assert_int_eq(crl_spec_shape(dk)[1], 1);
    }

    const crl_spec *st = crl_spec_composite_get(s->state, "state");
    ck_assert_ptr_nonnull(st);
    ck_assert_int_eq(crl_spec_get_kind(st), CRL_SPEC_UNBOUNDED);
    ck_assert_int_eq(crl_spec_dtype(st), CRL_F64);
    ck_assert_int_eq(crl_spec_shape(st)[1], d->state_dim);

    tenv_bind(&t);
    /* A reset observation lies in the observation spec. */
    tenv_reset(&t, NULL, NULL, false);
    EXPECT_OK(crl_spec_check_td(s->observation, t.buf, &e), e);
    EXPECT_OK(crl_spec_check_td(s->state, t.buf, &e), e);
    EXPECT_OK(crl_spec_check_td(s->done, t.buf, &e), e);
    tenv_close(&t);
    close_form(&f);
}
END_TEST

/* A host that knows a smaller crl_env_specs gets what fits, or CRL_E_ABI. */
START_TEST(test_make_small_specs_struct)
{
    form f = open_form(_i == 0);
    crl_error e = {0};
    crl_opts *o = opts_of(&f, NULL, NULL, &e);
    crl_env_specs s;
    memset(&s, 0, sizeof s);
    s.struct_size = (uint32_t)offsetof(crl_env_specs, state);
    s.max_episode_steps = -7;
    s.render_width = -7;
    void *env = NULL;
    EXPECT_OK(f.ops->make("CartPole-v1", 2, o, &s, &env, &e), e);
    ck_assert_ptr_nonnull(s.done);
    ck_assert_ptr_null(s.state);
    ck_assert_int_eq(s.max_episode_steps, -7);
    ck_assert_int_eq(s.render_width, -7);
    f.ops->close(env);
    free_specs(&s);

    s.struct_size = (uint32_t)offsetof(crl_env_specs, done);
    EXPECT_ERR(f.ops->make("CartPole-v1", 2, o, &s, &env, &e), e, CRL_E_ABI, "crl_env_specs");
    ck_assert_ptr_null(env);
    ck_assert_ptr_null(s.observation);
    crl_opts_free(o);
    close_form(&f);
}
END_TEST

START_TEST(test_make_errors)
{
    form f = open_form(_i == 0);
    tenv t;
    crl_error e = {0};

    EXPECT_ERR(tenv_make(&t, &f, "cartpole", 1, NULL, &e), e, CRL_E_NOT_FOUND,
               "did you mean CartPole-v1?");
    ck_assert_ptr_nonnull(strstr(e.message, "'cartpole'"));
    ck_assert_ptr_null(t.specs.observation);
    EXPECT_ERR(tenv_make(&t, &f, "MountainCar", 1, NULL, &e), e, CRL_E_NOT_FOUND,
               "MountainCar-v0 or MountainCarContinuous-v0");
    EXPECT_ERR(tenv_make(&t, &f, "HalfCheetah-v4", 1, NULL, &e), e, CRL_E_NOT_FOUND,
               "known ids: CartPole-v1");
    EXPECT_ERR(tenv_make(&t, &f, "CartPole-v1", 0, NULL, &e), e, CRL_E_INVALID, "at least 1");
    EXPECT_ERR(tenv_make(&t, &f, "CartPole-v1", -3, NULL, &e), e, CRL_E_INVALID, "-3");

    /* A parameter of another env. */
    EXPECT_ERR(tenv_make(&t, &f, "CartPole-v1", 1, "[env]\nid = CartPole-v1\ng = 9.81\n", &e), e,
               CRL_E_CONFIG, "test.ini:3: [env] g: CartPole-v1 has no parameter 'g'");
    ck_assert_ptr_nonnull(strstr(e.message, "gravity, masscart, masspole, length"));
    EXPECT_ERR(tenv_make(&t, &f, "Pendulum-v1", 1, "[env]\nmasscart = 2\n", &e), e, CRL_E_CONFIG,
               "test.ini:2: [env] masscart: Pendulum-v1 has no parameter 'masscart'");
    ck_assert_ptr_nonnull(strstr(e.message, "g, m, l, max_speed"));
    EXPECT_ERR(tenv_make(&t, &f, "MountainCar-v0", 1, "[env]\npower = 0.1\n", &e), e, CRL_E_CONFIG,
               "MountainCar-v0 has no parameter 'power'");
    ck_assert_ptr_nonnull(strstr(e.message, "force"));

    /* Out of range, by the table and by the rules between parameters: a config error naming the
     * line (exit 2 from crl), whatever the check found. */
    EXPECT_ERR(tenv_make(&t, &f, "CartPole-v1", 1, "[env]\n\nmasscart = -1\n", &e), e, CRL_E_CONFIG,
               "test.ini:3: [env] masscart: ");
    ck_assert_ptr_nonnull(strstr(e.message, "CartPole-v1"));
    EXPECT_ERR(tenv_make(&t, &f, "CartPole-v1", 1, "[env]\nmasscart = 0\n", &e), e, CRL_E_CONFIG,
               "greater than 0");
    EXPECT_ERR(tenv_make(&t, &f, "MountainCar-v0", 1, "[env]\ngravity = 5\n", &e), e, CRL_E_CONFIG,
               "test.ini:2: [env] gravity");
    EXPECT_ERR(tenv_make(&t, &f, "CartPole-v1", 1, "[env]\nreset_low = 0.5\n", &e), e,
               CRL_E_CONFIG, "test.ini:2: [env] reset_low: CartPole-v1: reset_low (0.5) is above");

    /* Bad values never get past the option table. */
    crl_error e2 = {0};
    ck_assert_ptr_null(opts_of(&f, "[env]\nkinematics_integrator = rk4\n", NULL, &e2));
    ck_assert_int_eq(e2.code, CRL_E_CONFIG);
    ck_assert_ptr_null(opts_of(&f, "[env]\ngravity = heavy\n", NULL, &e2));
    ck_assert_int_eq(e2.code, CRL_E_CONFIG);

    /* NULL out-parameters. */
    crl_env_specs s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    EXPECT_ERR(f.ops->make("CartPole-v1", 1, NULL, &s, NULL, &e), e, CRL_E_INVALID, "make");
    f.ops->close(NULL);
    close_form(&f);
}
END_TEST

/* Options reach the physics, the bounds and the limits. */
START_TEST(test_make_params)
{
    form f = open_form(_i == 0);
    crl_error e = {0};
    tenv t;

    tenv_open(&t, &f, "Pendulum-v1", 2, "[env]\nmax_torque = 3\nmax_speed = 6\n");
    const crl_spec *a = crl_spec_composite_get(t.specs.action, "action");
    const float alo[1] = {-3.0f}, ahi[1] = {3.0f};
    check_bounds_rows(a, 2, 1, alo, ahi);
    const float olo[3] = {-1, -1, -6}, ohi[3] = {1, 1, 6};
    check_bounds_rows(crl_spec_composite_get(t.specs.observation, "observation"), 2, 3, olo, ohi);
    tenv_close(&t);

    /* CartPole with the semi-implicit integrator and Sutton & Barto's reward
     * steps exactly as step_batch does under those parameters. */
    tenv_open(&t, &f, "CartPole-v1", 4,
              "[env]\nkinematics_integrator = semi-implicit\nsutton_barto_reward = yes\n"
              "gravity = 12.5\nx_threshold = 3\n");
    const float clo[4] = {-6.0f, -INFINITY, -(float)(12 * 2 * M_PI / 360 * 2), -INFINITY};
    const float chi[4] = {6.0f, INFINITY, (float)(12 * 2 * M_PI / 360 * 2), INFINITY};
    check_bounds_rows(crl_spec_composite_get(t.specs.observation, "observation"), 4, 4, clo, chi);
    double p[CLASSIC_MAX_PARAMS];
    classic_params_default(&classic_cartpole, p);
    p[CARTPOLE_KINEMATICS_INTEGRATOR] = CARTPOLE_SEMI_IMPLICIT_EULER;
    p[CARTPOLE_SUTTON_BARTO_REWARD] = 1;
    p[CARTPOLE_GRAVITY] = 12.5;
    p[CARTPOLE_X_THRESHOLD] = 3;
    uint64_t seeds[4] = {1, 2, 3, 4};
    tenv_reset(&t, NULL, seeds, false);
    double s[16];
    float o[16], r[4];
    uint8_t term[4];
    for (int k = 0; k < 30; k++) {
        set_actions(&t, k);
        memcpy(s, t.state, sizeof s);
        classic_cartpole.step_batch(&classic_cartpole, s, t.action, o, r, term, 4, p, NULL);
        tenv_step(&t);
        ck_assert(bytes_equal(s, t.state, sizeof s));
        ck_assert(bytes_equal(o, t.obs, sizeof o));
        ck_assert(bytes_equal(r, t.reward, sizeof r));
        ck_assert(bytes_equal(term, t.term, sizeof term));
        for (int i = 0; i < 4; i++)
            ck_assert(t.reward[i] == (t.term[i] ? -1.0f : 0.0f));
        for (int i = 0; i < 4; i++)
            if (t.term[i]) {
                bool mask[4] = {false};
                mask[i] = true;
                tenv_reset(&t, mask, NULL, false);
            }
    }
    tenv_close(&t);

    /* max_episode_steps is taken from the options when the host's table declares it. */
    static const crl_option host_table[] = {
        {"max_episode_steps", CRL_OPT_INT, 0, "0", 0, 0, NULL, "time limit"},
        CRL_OPTIONS_END,
    };
    crl_opts *o2 = opts_of(&f, "[env]\nmax_episode_steps = 123\n", host_table, &e);
    ck_assert_ptr_nonnull(o2);
    crl_env_specs sp;
    memset(&sp, 0, sizeof sp);
    sp.struct_size = sizeof sp;
    void *env = NULL;
    EXPECT_OK(f.ops->make("Acrobot-v1", 1, o2, &sp, &env, &e), e);
    ck_assert_int_eq(sp.max_episode_steps, 123);
    f.ops->close(env);
    free_specs(&sp);
    sp.struct_size = sizeof sp;
    crl_opts_free(o2);
    o2 = opts_of(&f, "[env]\nmax_episode_steps = -1\n", host_table, &e);
    EXPECT_ERR(f.ops->make("Acrobot-v1", 1, o2, &sp, &env, &e), e, CRL_E_CONFIG,
               "test.ini:2: [env] max_episode_steps = -1");
    crl_opts_free(o2);
    o2 = opts_of(&f, NULL, host_table, &e);
    EXPECT_OK(f.ops->make("Acrobot-v1", 1, o2, &sp, &env, &e), e);
    ck_assert_int_eq(sp.max_episode_steps, 500);
    f.ops->close(env);
    free_specs(&sp);
    crl_opts_free(o2);
    close_form(&f);
}
END_TEST

/* ---- bind ---- */

START_TEST(test_bind_errors)
{
    form f = open_form(_i == 0);
    crl_error e = {0};
    tenv t;
    EXPECT_OK(tenv_make(&t, &f, "CartPole-v1", 3, NULL, &e), e);
    int64_t num = 3;

    /* Nothing works before bind. */
    EXPECT_ERR(f.ops->reset(t.env, NULL, NULL, false, &e), e, CRL_E_INVALID, "before bind");
    EXPECT_ERR(f.ops->step(t.env, &e), e, CRL_E_INVALID, "before bind");
    uint8_t px[3];
    EXPECT_ERR(f.ops->render(t.env, 0, px, &e), e, CRL_E_INVALID, "before bind");
    EXPECT_ERR(f.ops->bind(t.env, NULL, &e), e, CRL_E_INVALID, "bind");

    crl_td *buf = buffers_of(&t.specs, num);
    EXPECT_OK(crl_td_del(buf, "reward", &e), e);
    EXPECT_ERR(f.ops->bind(t.env, buf, &e), e, CRL_E_NOT_FOUND, "no 'reward' buffer");
    crl_td_unref(buf);

    buf = buffers_of(&t.specs, num);
    int64_t shape2[2] = {num, 1};
    crl_tensor *wrong = crl_tensor_new(CRL_F64, 2, shape2, &e);
    EXPECT_OK(crl_td_set(buf, "reward", wrong, &e), e);
    crl_tensor_unref(wrong);
    EXPECT_ERR(f.ops->bind(t.env, buf, &e), e, CRL_E_DTYPE, "'reward' is float64, expected float32");
    crl_td_unref(buf);

    buf = buffers_of(&t.specs, num);
    int64_t shape5[2] = {num, 5};
    wrong = crl_tensor_new(CRL_F32, 2, shape5, &e);
    EXPECT_OK(crl_td_set(buf, "observation", wrong, &e), e);
    crl_tensor_unref(wrong);
    EXPECT_ERR(f.ops->bind(t.env, buf, &e), e, CRL_E_SHAPE, "'observation' has shape");
    ck_assert_ptr_nonnull(strstr(e.message, "torch.Size([3, 4])"));
    crl_td_unref(buf);

    /* A strided view: every other column of [num, 8]. */
    buf = buffers_of(&t.specs, num);
    int64_t shape8[2] = {num, 8};
    crl_tensor *wide = crl_tensor_new(CRL_F32, 2, shape8, &e);
    crl_tensor *view = crl_tensor_slice(wide, 1, 0, 8, 2, &e);
    ck_assert_ptr_nonnull(view);
    ck_assert(!crl_tensor_is_contiguous(view));
    EXPECT_OK(crl_td_set(buf, "observation", view, &e), e);
    crl_tensor_unref(view);
    crl_tensor_unref(wide);
    EXPECT_ERR(f.ops->bind(t.env, buf, &e), e, CRL_E_INVALID, "'observation' must be a contiguous");
    crl_td_unref(buf);

    /* Still unbound after the failures. */
    EXPECT_ERR(f.ops->step(t.env, &e), e, CRL_E_INVALID, "before bind");
    tenv_bind(&t);
    /* Bound but never reset: step and render refuse. */
    EXPECT_ERR(f.ops->step(t.env, &e), e, CRL_E_INVALID, "env 0 was ever reset");
    EXPECT_ERR(f.ops->render(t.env, 1, px, &e), e, CRL_E_INVALID, "never reset");
    bool mask[3] = {true, false, true};
    tenv_reset(&t, mask, NULL, false);
    EXPECT_ERR(f.ops->step(t.env, &e), e, CRL_E_INVALID, "env 1 was ever reset");
    tenv_reset(&t, NULL, NULL, false);
    tenv_step(&t);
    tenv_close(&t);
    close_form(&f);
}
END_TEST

/* ---- reset ---- */

START_TEST(test_reset_unseeded)
{
    form f = open_form(_i % 2 == 0);
    const char *id = ids[_i / 2];
    tenv t;
    tenv_open(&t, &f, id, 8, NULL);
    const classic_def *d = t.d;
    memset(t.term, 1, 8);
    memset(t.trunc, 1, 8);
    tenv_reset(&t, NULL, NULL, false);
    const int sd = d->state_dim, od = d->obs_dim;
    double p[CLASSIC_MAX_PARAMS];
    classic_params_default(d, p);
    for (int i = 0; i < 8; i++) {
        ck_assert_int_eq(t.term[i], 0);
        ck_assert_int_eq(t.trunc[i], 0);
        /* The observation is the state's. */
        float o[CLASSIC_MAX_OBS];
        d->observe_batch(d, t.state + i * sd, o, 1, p);
        ck_assert(bytes_equal(o, t.obs + i * od, sizeof(float) * (size_t)od));
        /* Unseeded envs each have their own stream: stream i of seed 0. */
        crl_rng r;
        crl_rng_init(&r, 0, (uint64_t)i);
        double s[CLASSIC_MAX_STATE];
        d->reset_one(d, s, &r, p);
        ck_assert(bytes_equal(s, t.state + i * sd, sizeof(double) * (size_t)sd));
        if (i > 0)
            ck_assert(!bytes_equal(t.state + i * sd, t.state + (i - 1) * sd,
                                   sizeof(double) * (size_t)sd));
    }
    /* A second reset continues the streams: new states. */
    double first[8 * CLASSIC_MAX_STATE];
    memcpy(first, t.state, sizeof(double) * (size_t)(8 * sd));
    tenv_reset(&t, NULL, NULL, false);
    ck_assert(!bytes_equal(first, t.state, sizeof(double) * (size_t)(8 * sd)));
    tenv_close(&t);
    close_form(&f);
}
END_TEST

START_TEST(test_reset_seeded)
{
    form f = open_form(_i % 2 == 0);
    const char *id = ids[_i / 2];
    tenv t;
    tenv_open(&t, &f, id, 4, NULL);
    const classic_def *d = t.d;
    const size_t sb = sizeof(double) * (size_t)d->state_dim;
    const size_t ob = sizeof(float) * (size_t)d->obs_dim;
    const size_t od = (size_t)d->obs_dim, sd = (size_t)d->state_dim;

    uint64_t seeds[4] = {42, 42, 7, 43};
    tenv_reset(&t, NULL, seeds, false);
    /* Same seed, same observation, whatever the env's position. */
    ck_assert(bytes_equal(t.obs, t.obs + od, ob));
    ck_assert(bytes_equal(t.state, t.state + sd, sb));
    /* Different seeds differ. */
    ck_assert(!bytes_equal(t.obs, t.obs + 2 * od, ob));
    ck_assert(!bytes_equal(t.obs, t.obs + 3 * od, ob));
    ck_assert(!bytes_equal(t.obs + 2 * od, t.obs + 3 * od, ob));
    /* The seeded stream is stream 0 of the seed. */
    double p[CLASSIC_MAX_PARAMS];
    classic_params_default(d, p);
    crl_rng r;
    crl_rng_init(&r, 7, 0);
    double s[CLASSIC_MAX_STATE];
    d->reset_one(d, s, &r, p);
    ck_assert(bytes_equal(s, t.state + 2 * sd, sb));

    float seeded[4 * CLASSIC_MAX_OBS];
    memcpy(seeded, t.obs, 4 * ob);
    /* Reseeding repeats; an unseeded reset then moves on. */
    tenv_reset(&t, NULL, NULL, false);
    ck_assert(!bytes_equal(seeded, t.obs, ob));
    tenv_reset(&t, NULL, seeds, false);
    ck_assert(bytes_equal(seeded, t.obs, 4 * ob));

    /* Another instance with the same seeds gives the same observations. */
    tenv t2;
    tenv_open(&t2, &f, id, 4, NULL);
    tenv_reset(&t2, NULL, seeds, false);
    ck_assert(bytes_equal(seeded, t2.obs, 4 * ob));
    tenv_close(&t2);
    tenv_close(&t);
    close_form(&f);
}
END_TEST

START_TEST(test_reset_masked)
{
    form f = open_form(_i == 0);
    tenv t;
    tenv_open(&t, &f, "Acrobot-v1", 6, NULL);
    tenv_reset(&t, NULL, NULL, false);
    for (int k = 0; k < 3; k++) {
        set_actions(&t, k);
        tenv_step(&t);
    }
    /* Sentinels in every buffer of every env. */
    for (int i = 0; i < 6; i++) {
        t.term[i] = 1;
        t.trunc[i] = 1;
        t.reward[i] = 123.0f;
    }
    double state_before[6 * 4];
    float obs_before[6 * 6];
    memcpy(state_before, t.state, sizeof state_before);
    memcpy(obs_before, t.obs, sizeof obs_before);
    int64_t act_before[6];
    memcpy(act_before, t.action, sizeof act_before);

    bool mask[6] = {false, true, true, false, false, true};
    uint64_t seeds[6] = {100, 101, 102, 103, 104, 105};
    tenv_reset(&t, mask, seeds, false);
    for (int i = 0; i < 6; i++) {
        if (mask[i]) {
            ck_assert_int_eq(t.term[i], 0);
            ck_assert_int_eq(t.trunc[i], 0);
            ck_assert(!bytes_equal(state_before + i * 4, t.state + i * 4, 4 * sizeof(double)));
            /* seeded: stream 0 of seeds[i] */
            crl_rng r;
            crl_rng_init(&r, seeds[i], 0);
            double s[4], p[CLASSIC_MAX_PARAMS];
            classic_params_default(&classic_acrobot, p);
            classic_acrobot.reset_one(&classic_acrobot, s, &r, p);
            ck_assert(bytes_equal(s, t.state + i * 4, sizeof s));
            float o[6];
            classic_acrobot.observe_batch(&classic_acrobot, s, o, 1, p);
            ck_assert(bytes_equal(o, t.obs + i * 6, sizeof o));
        } else {
            ck_assert_int_eq(t.term[i], 1);
            ck_assert_int_eq(t.trunc[i], 1);
            ck_assert(bytes_equal(state_before + i * 4, t.state + i * 4, 4 * sizeof(double)));
            ck_assert(bytes_equal(obs_before + i * 6, t.obs + i * 6, 6 * sizeof(float)));
        }
        ck_assert(t.reward[i] == 123.0f);
    }
    ck_assert(bytes_equal(act_before, t.action, sizeof act_before));
    /* An all-false mask changes nothing. */
    bool none[6] = {false};
    memcpy(state_before, t.state, sizeof state_before);
    tenv_reset(&t, none, seeds, false);
    ck_assert(bytes_equal(state_before, t.state, sizeof state_before));
    tenv_close(&t);
    close_form(&f);
}
END_TEST

/* Record a trajectory, then replay it from its first state: bit for bit. */
START_TEST(test_reset_from_state_replay)
{
    form f = open_form(_i % 2 == 0);
    const char *id = ids[_i / 2];
    /* Acrobot with torque noise also replays its random draws (seeded). */
    const char *ini = strcmp(id, "Acrobot-v1") == 0 ? "[env]\ntorque_noise_max = 0.5\n" : NULL;
    tenv t;
    enum { NUM = 3, T = 40 };
    tenv_open(&t, &f, id, NUM, ini);
    const classic_def *d = t.d;
    const size_t sb = sizeof(double) * (size_t)d->state_dim * NUM;
    const size_t ob = sizeof(float) * (size_t)d->obs_dim * NUM;
    uint64_t seeds[NUM] = {11, 12, 13};
    tenv_reset(&t, NULL, seeds, false);
    double start[NUM * CLASSIC_MAX_STATE];
    memcpy(start, t.state, sb);
    static double states[T][NUM * CLASSIC_MAX_STATE];
    static float obs[T][NUM * CLASSIC_MAX_OBS], rew[T][NUM];
    static uint8_t term[T][NUM];
    for (int k = 0; k < T; k++) {
        set_actions(&t, k);
        tenv_step(&t);
        memcpy(states[k], t.state, sb);
        memcpy(obs[k], t.obs, ob);
        memcpy(rew[k], t.reward, sizeof rew[k]);
        memcpy(term[k], t.term, sizeof term[k]);
    }
    /* Put the first state back and reset from it. */
    memcpy(t.state, start, sb);
    memset(t.obs, 0, ob);
    t.term[0] = 1;
    tenv_reset(&t, NULL, seeds, true);
    ck_assert(bytes_equal(start, t.state, sb));
    ck_assert_int_eq(t.term[0], 0);
    float o0[NUM * CLASSIC_MAX_OBS];
    double p[CLASSIC_MAX_PARAMS];
    classic_params_default(d, p);
    if (ini)
        p[ACROBOT_TORQUE_NOISE_MAX] = 0.5;
    d->observe_batch(d, start, o0, NUM, p);
    ck_assert(bytes_equal(o0, t.obs, ob));
    for (int k = 0; k < T; k++) {
        set_actions(&t, k);
        tenv_step(&t);
        ck_assert_msg(bytes_equal(states[k], t.state, sb), "%s: state differs at step %d", id, k);
        ck_assert(bytes_equal(obs[k], t.obs, ob));
        ck_assert(bytes_equal(rew[k], t.reward, sizeof rew[k]));
        ck_assert(bytes_equal(term[k], t.term, sizeof term[k]));
    }
    tenv_close(&t);
    close_form(&f);
}
END_TEST

START_TEST(test_reset_from_state_errors)
{
    form f = open_form(_i == 0);
    tenv t;
    tenv_open(&t, &f, "CartPole-v1", 3, NULL);
    tenv_reset(&t, NULL, NULL, false);
    t.state[1 * 4 + 2] = NAN;
    double before[12];
    float obs_before[12];
    memcpy(before, t.state, sizeof before);
    memcpy(obs_before, t.obs, sizeof obs_before);
    t.term[0] = 1;
    crl_error e = {0};
    EXPECT_ERR(f.ops->reset(t.env, NULL, NULL, true, &e), e, CRL_E_INVALID, "env 1 has theta = nan");
    /* Nothing changed. */
    ck_assert(bytes_equal(obs_before, t.obs, sizeof obs_before));
    ck_assert_int_eq(t.term[0], 1);
    /* A mask that skips the bad env makes it fine. */
    bool mask[3] = {true, false, true};
    EXPECT_OK(f.ops->reset(t.env, mask, NULL, true, &e), e);
    ck_assert_int_eq(t.term[0], 0);
    ck_assert(bytes_equal(before, t.state, sizeof before));
    t.state[1 * 4 + 0] = INFINITY;
    EXPECT_ERR(f.ops->reset(t.env, NULL, NULL, true, &e), e, CRL_E_INVALID, "env 1 has x = inf");
    EXPECT_ERR(f.ops->reset(NULL, NULL, NULL, false, &e), e, CRL_E_INVALID, "reset");
    tenv_close(&t);
    close_form(&f);
}
END_TEST

/* ---- step ---- */

/* Step writes the bound buffers in place, exactly as step_batch would. */
START_TEST(test_step_in_place)
{
    form f = open_form(_i % 2 == 0);
    const char *id = ids[_i / 2];
    enum { NUM = 5 };
    tenv t;
    tenv_open(&t, &f, id, NUM, NULL);
    const classic_def *d = t.d;
    double p[CLASSIC_MAX_PARAMS];
    classic_params_default(d, p);
    tenv_reset(&t, NULL, NULL, false);
    const float *obs_ptr = t.obs;
    const double *state_ptr = t.state;
    double s[NUM * CLASSIC_MAX_STATE];
    float o[NUM * CLASSIC_MAX_OBS], r[NUM];
    uint8_t term[NUM];
    const size_t sb = sizeof(double) * (size_t)d->state_dim * NUM;
    const size_t ob = sizeof(float) * (size_t)d->obs_dim * NUM;
    for (int k = 0; k < 25; k++) {
        set_actions(&t, k);
        memcpy(s, t.state, sb);
        d->step_batch(d, s, t.action, o, r, term, NUM, p, NULL);
        memset(t.trunc, 0, NUM);
        tenv_step(&t);
        ck_assert_ptr_eq(crl_tensor_data(crl_td_get(t.buf, "observation")), obs_ptr);
        ck_assert_ptr_eq(crl_tensor_data(crl_td_get(t.buf, "state")), state_ptr);
        ck_assert(bytes_equal(s, t.state, sb));
        ck_assert(bytes_equal(o, t.obs, ob));
        ck_assert(bytes_equal(r, t.reward, sizeof r));
        ck_assert(bytes_equal(term, t.term, sizeof term));
        for (int i = 0; i < NUM; i++)
            ck_assert_int_eq(t.trunc[i], 0);
        /* Keep every env alive. */
        for (int i = 0; i < NUM; i++)
            if (t.term[i]) {
                bool mask[NUM] = {false};
                mask[i] = true;
                tenv_reset(&t, mask, NULL, false);
            }
    }
    tenv_close(&t);
    close_form(&f);
}
END_TEST

/* The time limit is the host's: the backend never truncates. */
START_TEST(test_step_never_truncates)
{
    form f = open_form(_i == 0);
    tenv t;
    /* Without gravity or force the pole stands still forever. */
    tenv_open(&t, &f, "CartPole-v1", 2, "[env]\ngravity = 0\nforce_mag = 0\n");
    ck_assert_int_eq(t.specs.max_episode_steps, 500);
    uint64_t seeds[2] = {5, 6};
    tenv_reset(&t, NULL, seeds, false);
    t.state[1] = 0;
    t.state[3] = 0;
    t.state[5] = 0;
    t.state[7] = 0;
    tenv_reset(&t, NULL, NULL, true);
    for (int k = 0; k < 700; k++) {
        set_actions(&t, k);
        tenv_step(&t);
        ck_assert_int_eq(t.term[0], 0);
        ck_assert_int_eq(t.term[1], 0);
        ck_assert_int_eq(t.trunc[0], 0);
        ck_assert_int_eq(t.trunc[1], 0);
    }
    /* Nor does it clear a flag the host set. */
    t.trunc[1] = 1;
    tenv_step(&t);
    ck_assert_int_eq(t.trunc[1], 1);
    tenv_close(&t);
    close_form(&f);
}
END_TEST

START_TEST(test_step_bad_actions)
{
    form f = open_form(_i == 0);
    crl_error e = {0};
    tenv t;
    tenv_open(&t, &f, "MountainCar-v0", 4, NULL);
    tenv_reset(&t, NULL, NULL, false);
    double before[8];
    memcpy(before, t.state, sizeof before);
    int64_t *a = t.action;
    a[0] = 0;
    a[1] = 1;
    a[2] = 3;
    a[3] = 2;
    EXPECT_ERR(f.ops->step(t.env, &e), e, CRL_E_RANGE, "action 3 of env 2 is outside Discrete(3)");
    ck_assert(bytes_equal(before, t.state, sizeof before));
    a[2] = -1;
    EXPECT_ERR(f.ops->step(t.env, &e), e, CRL_E_RANGE, "action -1 of env 2");
    a[2] = 2;
    EXPECT_OK(f.ops->step(t.env, &e), e);
    EXPECT_ERR(f.ops->step(NULL, &e), e, CRL_E_INVALID, "step");
    tenv_close(&t);

    /* Box actions outside the bounds are clipped by the physics, as in Gymnasium. */
    tenv_open(&t, &f, "Pendulum-v1", 2, NULL);
    uint64_t seeds[2] = {9, 9};
    tenv_reset(&t, NULL, seeds, false);
    float *u = t.action;
    u[0] = 2.0f;
    u[1] = 50.0f;
    EXPECT_OK(f.ops->step(t.env, &e), e);
    ck_assert(bytes_equal(t.state, t.state + 2, 2 * sizeof(double)));
    ck_assert(t.reward[0] == t.reward[1]);
    tenv_close(&t);
    close_form(&f);
}
END_TEST

/* Acrobot's torque noise draws from stream 1 of each env's seed. */
START_TEST(test_step_noise_streams)
{
    form f = open_form(_i == 0);
    tenv t;
    tenv_open(&t, &f, "Acrobot-v1", 3, "[env]\ntorque_noise_max = 1\n");
    uint64_t seeds[3] = {77, 77, 78};
    tenv_reset(&t, NULL, seeds, false);
    double p[CLASSIC_MAX_PARAMS];
    classic_params_default(&classic_acrobot, p);
    p[ACROBOT_TORQUE_NOISE_MAX] = 1;
    double s[12];
    memcpy(s, t.state, sizeof s);
    crl_rng r[3];
    for (int i = 0; i < 3; i++)
        crl_rng_init(&r[i], seeds[i], 1);
    float o[18], rew[3];
    uint8_t term[3];
    for (int k = 0; k < 10; k++) {
        for (int i = 0; i < 3; i++)
            ((int64_t *)t.action)[i] = 1;
        classic_acrobot.step_batch(&classic_acrobot, s, t.action, o, rew, term, 3, p, r);
        tenv_step(&t);
        ck_assert(bytes_equal(s, t.state, sizeof s));
    }
    ck_assert(bytes_equal(t.state, t.state + 4, 4 * sizeof(double)));
    ck_assert(!bytes_equal(t.state, t.state + 8, 4 * sizeof(double)));
    tenv_close(&t);
    close_form(&f);
}
END_TEST

/* ---- render ---- */

static bool all_white(const uint8_t *rgb, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (rgb[i] != 255)
            return false;
    return true;
}

START_TEST(test_render)
{
    form f = open_form(_i % 2 == 0);
    const char *id = ids[_i / 2];
    crl_error e = {0};
    tenv t;
    tenv_open(&t, &f, id, 2, NULL);
    const classic_def *d = t.d;
    const int w = t.specs.render_width, h = t.specs.render_height;
    ck_assert_int_eq(w, d->render_width);
    ck_assert_int_eq(h, d->render_height);
    const size_t n = (size_t)w * (size_t)h * 3;
    uint8_t *a = malloc(n), *b = malloc(n), *c = malloc(n);
    uint64_t seeds[2] = {1, 2};
    tenv_reset(&t, NULL, seeds, false);
    EXPECT_OK(f.ops->render(t.env, 0, a, &e), e);
    ck_assert(!all_white(a, n));
    /* The frame is render_one's of env 0's state (no action after a reset). */
    double p[CLASSIC_MAX_PARAMS];
    classic_params_default(d, p);
    EXPECT_OK(d->render_one(d, t.state, NULL, c, w, h, p, &e), e);
    ck_assert(bytes_equal(a, c, n));
    for (int k = 0; k < 5; k++) {
        set_actions(&t, k);
        tenv_step(&t);
    }
    EXPECT_OK(f.ops->render(t.env, 1, b, &e), e);
    ck_assert(!bytes_equal(a, b, n));
    /* After a step, the env's last action is drawn (Pendulum's arrow). */
    const void *last = d->action_kind == CLASSIC_ACTION_DISCRETE
                           ? (const void *)((const int64_t *)t.action + 1)
                           : (const void *)((const float *)t.action + 1);
    EXPECT_OK(d->render_one(d, t.state + d->state_dim, last, c, w, h, p, &e), e);
    ck_assert(bytes_equal(b, c, n));

    EXPECT_ERR(f.ops->render(t.env, 2, a, &e), e, CRL_E_RANGE, "env 2 is not in 0..1");
    EXPECT_ERR(f.ops->render(t.env, -1, a, &e), e, CRL_E_RANGE, "env -1");
    EXPECT_ERR(f.ops->render(t.env, 0, NULL, &e), e, CRL_E_INVALID, "no frame buffer");
    free(a);
    free(b);
    free(c);
    tenv_close(&t);
    close_form(&f);
}
END_TEST

/* render_width / render_height: the frame is drawn at that size (the specs say so), the same picture
 * render_one draws at that size. */
START_TEST(test_render_size)
{
    form f = open_form(_i % 2 == 0);
    const char *id = ids[_i / 2];
    crl_error e = {0};
    tenv t;
    tenv_open(&t, &f, id, 2, "[env]\nrender_width = 84\nrender_height = 60\n");
    ck_assert_int_eq(t.specs.render_width, 84);
    ck_assert_int_eq(t.specs.render_height, 60);
    const size_t n = (size_t)84 * 60 * 3;
    uint8_t *a = malloc(n), *c = malloc(n);
    uint64_t seeds[2] = {3, 4};
    tenv_reset(&t, NULL, seeds, false);
    EXPECT_OK(f.ops->render(t.env, 1, a, &e), e);
    ck_assert(!all_white(a, n));
    double p[CLASSIC_MAX_PARAMS];
    classic_params_default(t.d, p);
    EXPECT_OK(t.d->render_one(t.d, t.state + t.d->state_dim, NULL, c, 84, 60, p, &e), e);
    ck_assert(bytes_equal(a, c, n));
    free(a);
    free(c);
    tenv_close(&t);
    close_form(&f);
}
END_TEST

/* Pendulum's picture shows the last action after a step, none after a reset. */
START_TEST(test_render_last_action)
{
    form f = open_form(_i == 0);
    crl_error e = {0};
    tenv t;
    tenv_open(&t, &f, "Pendulum-v1", 1, NULL);
    const size_t n = 500 * 500 * 3;
    uint8_t *a = malloc(n), *b = malloc(n);
    tenv_reset(&t, NULL, NULL, false);
    ((float *)t.action)[0] = 1.5f;
    tenv_step(&t);
    /* The caller may overwrite the action buffer before rendering. */
    ((float *)t.action)[0] = -1.5f;
    EXPECT_OK(f.ops->render(t.env, 0, a, &e), e);
    double p[CLASSIC_MAX_PARAMS];
    classic_params_default(&classic_pendulum, p);
    float u = 1.5f;
    EXPECT_OK(classic_pendulum.render_one(&classic_pendulum, t.state, &u, b, 500, 500, p, &e), e);
    ck_assert(bytes_equal(a, b, n));
    /* Same state, reset from it: no arrow any more. */
    tenv_reset(&t, NULL, NULL, true);
    EXPECT_OK(f.ops->render(t.env, 0, b, &e), e);
    ck_assert(!bytes_equal(a, b, n));
    EXPECT_OK(classic_pendulum.render_one(&classic_pendulum, t.state, NULL, a, 500, 500, p, &e), e);
    ck_assert(bytes_equal(a, b, n));
    free(a);
    free(b);
    tenv_close(&t);
    close_form(&f);
}
END_TEST

/* ---- batch throughput sanity: 1024 envs, bit-exact with step_batch ---- */

START_TEST(test_large_batch)
{
    form f = open_form(_i == 0);
    enum { NUM = 1024 };
    tenv t;
    tenv_open(&t, &f, "CartPole-v1", NUM, NULL);
    tenv_reset(&t, NULL, NULL, false);
    double *s = malloc(sizeof(double) * 4 * NUM);
    float *o = malloc(sizeof(float) * 4 * NUM), *r = malloc(sizeof(float) * NUM);
    uint8_t *term = malloc(NUM);
    double p[CLASSIC_MAX_PARAMS];
    classic_params_default(&classic_cartpole, p);
    memcpy(s, t.state, sizeof(double) * 4 * NUM);
    for (int k = 0; k < 20; k++) {
        set_actions(&t, k);
        classic_cartpole.step_batch(&classic_cartpole, s, t.action, o, r, term, NUM, p, NULL);
        tenv_step(&t);
    }
    ck_assert(bytes_equal(s, t.state, sizeof(double) * 4 * NUM));
    ck_assert(bytes_equal(o, t.obs, sizeof(float) * 4 * NUM));
    free(s);
    free(o);
    free(r);
    free(term);
    tenv_close(&t);
    close_form(&f);
}
END_TEST

/* ---- through the host's crl_env ---- */

typedef struct henv {
    crl_config *cfg;
    crl_env *env;
} henv;

static int henv_open(henv *h, const form *f, const char *ini, crl_error *e)
{
    memset(h, 0, sizeof *h);
    h->cfg = crl_config_new(e);
    ck_assert_ptr_nonnull(h->cfg);
    EXPECT_OK(crl_config_load_buffer(h->cfg, "host.ini", ini, strlen(ini), CRL_LAYER_FILE, e), *e);
    h->env = crl_env_from_config(f->host, h->cfg, "env", e);
    return h->env ? CRL_OK : e->code;
}

static void henv_close(henv *h)
{
    crl_env_free(h->env);
    crl_config_free(h->cfg);
    memset(h, 0, sizeof *h);
}

/* check_env_specs passes for every id, batched and single. */
START_TEST(test_host_check_specs)
{
    form f = open_form(_i % 2 == 0);
    const char *id = ids[_i / 2];
    crl_error e = {0};
    for (int batched = 0; batched < 2; batched++) {
        char ini[256];
        snprintf(ini, sizeof ini, "[env]\nbackend = classic\nid = %s\nnum_envs = %d\nseed = 3\n", id,
                 batched ? 3 : 0);
        henv h;
        EXPECT_OK(henv_open(&h, &f, ini, &e), e);
        ck_assert_str_eq(crl_env_id(h.env), id);
        ck_assert_str_eq(crl_env_backend_name(h.env), "classic");
        ck_assert_int_eq(crl_env_num(h.env), batched ? 3 : 1);
        ck_assert_int_eq(crl_env_batch_ndim(h.env), batched);
        ck_assert_int_eq(crl_env_max_episode_steps(h.env), classic_find(id)->max_episode_steps);
        ck_assert_int_eq(crl_env_render_width(h.env), classic_find(id)->render_width);
        ck_assert_int_eq(crl_env_render_height(h.env), classic_find(id)->render_height);
        EXPECT_OK(crl_env_check_specs(h.env, 30, &e), e);
        henv_close(&h);
    }
    close_form(&f);
}
END_TEST

/* Gymnasium's CartPole equations, in its order of operations. */
static void cartpole_by_hand(const double *s, int64_t action, double *out)
{
    const double gravity = 9.8, masscart = 1.0, masspole = 0.1, length = 0.5, tau = 0.02;
    const double total_mass = masspole + masscart, polemass_length = masspole * length;
    double x = s[0], x_dot = s[1], theta = s[2], theta_dot = s[3];
    double force = action == 1 ? 10.0 : -10.0;
    double costheta = cos(theta), sintheta = sin(theta);
    double temp = (force + polemass_length * (theta_dot * theta_dot) * sintheta) / total_mass;
    double thetaacc = (gravity * sintheta - costheta * temp) /
                      (length * (4.0 / 3.0 - masspole * (costheta * costheta) / total_mass));
    double xacc = temp - polemass_length * thetaacc * costheta / total_mass;
    out[0] = x + tau * x_dot;
    out[1] = x_dot + tau * xacc;
    out[2] = theta + tau * theta_dot;
    out[3] = theta_dot + tau * thetaacc;
}

static crl_tensor *scalar_i64(int64_t v)
{
    crl_error e = {0};
    crl_tensor *t = crl_tensor_new(CRL_I64, 0, NULL, &e);
    ck_assert_ptr_nonnull(t);
    *(int64_t *)crl_tensor_data(t) = v;
    return t;
}

static bool flag(const crl_td *td, const char *key)
{
    const crl_tensor *t = crl_td_get(td, key);
    ck_assert_msg(t != NULL, "no %s", key);
    ck_assert_int_eq(crl_tensor_dtype(t), CRL_BOOL);
    return *(const bool *)crl_tensor_data(t);
}

/* Single CartPole steps through the host, checked against the equations. */
START_TEST(test_host_cartpole_steps)
{
    form f = open_form(_i == 0);
    crl_error e = {0};
    henv h;
    EXPECT_OK(henv_open(&h, &f,
                        "[env]\nbackend = classic\nid = CartPole-v1\nreturn_state = true\n"
                        "categorical_action_encoding = true\n",
                        &e),
              e);
    ck_assert_int_eq(crl_env_batch_ndim(h.env), 0);

    /* A seeded reset: env 0's state is stream 0 of the seed. */
    uint64_t next = crl_env_set_seed(h.env, 1234);
    ck_assert(next == crl_seed_next(1234));
    crl_td *td = crl_env_reset(h.env, NULL, &e);
    ck_assert_msg(td != NULL, "%s", e.message);
    crl_rng r;
    crl_rng_init(&r, 1234, 0);
    double s0[4];
    for (int k = 0; k < 4; k++)
        s0[k] = crl_rng_range(&r, -0.05, 0.05);
    const crl_tensor *obs = crl_td_get(td, "observation");
    ck_assert_ptr_nonnull(obs);
    ck_assert_int_eq(crl_tensor_ndim(obs), 1);
    const crl_tensor *st = crl_td_get(td, "state");
    ck_assert_ptr_nonnull(st);
    for (int k = 0; k < 4; k++) {
        ck_assert(((const float *)crl_tensor_data(obs))[k] == (float)s0[k]);
        ck_assert(((const double *)crl_tensor_data(st))[k] == s0[k]);
    }
    ck_assert(!flag(td, "done") && !flag(td, "terminated") && !flag(td, "truncated"));

    /* From a chosen state, push right: one step of the equations. */
    const double chosen[4] = {0.01, -0.02, 0.03, 0.04};
    memcpy(crl_tensor_data(crl_td_get(td, "state")), chosen, sizeof chosen);
    crl_td *td2 = crl_env_reset_from_state(h.env, td, &e);
    ck_assert_msg(td2 == td, "%s", e.message);
    crl_td_unref(td2);
    for (int k = 0; k < 4; k++)
        ck_assert(((const float *)crl_tensor_data(crl_td_get(td, "observation")))[k] == (float)chosen[k]);
    crl_tensor *a = scalar_i64(1);
    EXPECT_OK(crl_td_set(td, "action", a, &e), e);
    crl_tensor_unref(a);
    EXPECT_OK(crl_env_step(h.env, td, &e), e);
    double want[4];
    cartpole_by_hand(chosen, 1, want);
    const float *nobs = crl_tensor_data(crl_td_get(td, "next.observation"));
    const double *nst = crl_tensor_data(crl_td_get(td, "next.state"));
    for (int k = 0; k < 4; k++) {
        ck_assert_msg(nobs[k] == (float)want[k], "obs[%d] %.9g != %.9g", k, nobs[k], want[k]);
        ck_assert(nst[k] == want[k]);
    }
    ck_assert(*(const float *)crl_tensor_data(crl_td_get(td, "next.reward")) == 1.0f);
    ck_assert(!flag(td, "next.done") && !flag(td, "next.terminated") && !flag(td, "next.truncated"));
    /* The next push goes left from there. */
    crl_td *mdp = crl_env_step_mdp(h.env, td, &e);
    ck_assert_msg(mdp != NULL, "%s", e.message);
    a = scalar_i64(0);
    EXPECT_OK(crl_td_set(mdp, "action", a, &e), e);
    crl_tensor_unref(a);
    EXPECT_OK(crl_env_step(h.env, mdp, &e), e);
    double want2[4];
    cartpole_by_hand(want, 0, want2);
    nobs = crl_tensor_data(crl_td_get(mdp, "next.observation"));
    for (int k = 0; k < 4; k++)
        ck_assert(nobs[k] == (float)want2[k]);
    crl_td_unref(mdp);

    /* Past the edge: terminated (and done), still paid 1. */
    const double edge[4] = {2.39, 1.0, 0.0, 0.0};
    memcpy(crl_tensor_data(crl_td_get(td, "state")), edge, sizeof edge);
    td2 = crl_env_reset_from_state(h.env, td, &e);
    ck_assert_msg(td2 == td, "%s", e.message);
    crl_td_unref(td2);
    EXPECT_OK(crl_env_step(h.env, td, &e), e);
    cartpole_by_hand(edge, 0, want);
    ck_assert(want[0] > 2.4);
    ck_assert(flag(td, "next.terminated") && flag(td, "next.done") && !flag(td, "next.truncated"));
    ck_assert(*(const float *)crl_tensor_data(crl_td_get(td, "next.reward")) == 1.0f);
    crl_td_unref(td);
    henv_close(&h);
    close_form(&f);
}
END_TEST

/* categorical_action_encoding = false (the default, TorchRL GymEnv's): OneHot int64 [num, n] actions that
 * step exactly as their indices do; a row that is no one-hot changes nothing and names the env. */
START_TEST(test_onehot_actions)
{
    form f = open_form(_i == 0);
    crl_error e = {0};
    static const char *const ids[] = {"CartPole-v1", "MountainCar-v0", "Acrobot-v1"};
    for (int k = 0; k < 3; k++) {
        tenv oh, ix;
        tenv_open(&oh, &f, ids[k], 3, "[env]\ncategorical_action_encoding = false\n");
        tenv_open(&ix, &f, ids[k], 3, "[env]\ncategorical_action_encoding = true\n");
        const classic_def *d = oh.d;
        const crl_spec *a = crl_spec_composite_get(oh.specs.action, "action");
        ck_assert_int_eq(crl_spec_get_kind(a), CRL_SPEC_ONEHOT);
        ck_assert_int_eq(crl_spec_dtype(a), CRL_I64);
        ck_assert_int_eq(crl_spec_n(a), d->action_n);
        ck_assert_int_eq(crl_spec_ndim(a), 2);
        ck_assert_int_eq(crl_spec_shape(a)[1], d->action_n);
        uint64_t seeds[3] = {1, 2, 3};
        tenv_reset(&oh, NULL, seeds, false);
        tenv_reset(&ix, NULL, seeds, false);
        int64_t *hot = oh.action, *idx = ix.action;
        for (int step = 0; step < 5; step++) {
            memset(hot, 0, sizeof(int64_t) * 3 * (size_t)d->action_n);
            for (int i = 0; i < 3; i++) {
                idx[i] = (i + step) % d->action_n;
                hot[i * d->action_n + idx[i]] = 1;
            }
            tenv_step(&oh);
            tenv_step(&ix);
            ck_assert(bytes_equal(oh.obs, ix.obs, sizeof(float) * 3 * (size_t)d->obs_dim));
            ck_assert(bytes_equal(oh.state, ix.state, sizeof(double) * 3 * (size_t)d->state_dim));
        }
        double before[3 * CLASSIC_MAX_STATE];
        memcpy(before, oh.state, sizeof(double) * 3 * (size_t)d->state_dim);
        hot[d->action_n] = 0; /* env 1: no one left */
        for (int j = 0; j < d->action_n; j++)
            hot[d->action_n + j] = 0;
        EXPECT_ERR(f.ops->step(oh.env, &e), e, CRL_E_RANGE, "action of env 1 is not one-hot (0 ones");
        ck_assert(bytes_equal(before, oh.state, sizeof(double) * 3 * (size_t)d->state_dim));
        hot[d->action_n] = 2;
        EXPECT_ERR(f.ops->step(oh.env, &e), e, CRL_E_RANGE, "values other than 0 and 1");
        hot[d->action_n] = 1;
        hot[d->action_n + 1] = 1;
        EXPECT_ERR(f.ops->step(oh.env, &e), e, CRL_E_RANGE, "(2 ones");
        ck_assert_msg(strstr(e.message, "categorical_action_encoding = true") != NULL, "%s", e.message);
        tenv_close(&oh);
        tenv_close(&ix);
    }
    /* The continuous envs ignore the setting, as TorchRL does. */
    tenv t;
    tenv_open(&t, &f, "Pendulum-v1", 2, "[env]\ncategorical_action_encoding = false\n");
    ck_assert_int_eq(crl_spec_get_kind(crl_spec_composite_get(t.specs.action, "action")), CRL_SPEC_BOUNDED);
    tenv_close(&t);

    /* Through the host, left at its default: OneHot, random actions step it. */
    henv h;
    EXPECT_OK(henv_open(&h, &f, "[env]\nbackend = classic\nid = CartPole-v1\nnum_envs = 2\n", &e), e);
    const crl_spec *ha = crl_env_action_spec(h.env);
    ck_assert_int_eq(crl_spec_get_kind(ha), CRL_SPEC_ONEHOT);
    EXPECT_OK(crl_env_check_specs(h.env, 50, &e), e);
    henv_close(&h);
    close_form(&f);
}
END_TEST

/* By default (as TorchRL's GymEnv) the state is in no output and the state spec is empty, yet a state
 * handed to reset_from_state is where the env starts. */
START_TEST(test_host_state_hidden)
{
    form f = open_form(_i == 0);
    crl_error e = {0};
    henv h;
    EXPECT_OK(henv_open(&h, &f, "[env]\nbackend = classic\nid = CartPole-v1\ncategorical_action_encoding = true\n", &e),
              e);
    ck_assert_uint_eq(crl_spec_composite_len(crl_env_state_spec(h.env)), 0);
    crl_td *td = crl_env_reset(h.env, NULL, &e);
    ck_assert_msg(td != NULL, "%s", e.message);
    ck_assert_ptr_null(crl_td_get(td, "state"));
    const double chosen[4] = {0.01, -0.02, 0.03, 0.04};
    crl_tensor *st = crl_tensor_new(CRL_F64, 1, (int64_t[]){4}, &e);
    memcpy(crl_tensor_data(st), chosen, sizeof chosen);
    EXPECT_OK(crl_td_set(td, "state", st, &e), e);
    crl_tensor_unref(st);
    crl_td *td2 = crl_env_reset_from_state(h.env, td, &e);
    ck_assert_msg(td2 == td, "%s", e.message);
    crl_td_unref(td2);
    crl_tensor *a = scalar_i64(1);
    EXPECT_OK(crl_td_set(td, "action", a, &e), e);
    crl_tensor_unref(a);
    EXPECT_OK(crl_env_step(h.env, td, &e), e);
    double want[4];
    cartpole_by_hand(chosen, 1, want);
    const float *nobs = crl_tensor_data(crl_td_get(td, "next.observation"));
    for (int k = 0; k < 4; k++)
        ck_assert(nobs[k] == (float)want[k]);
    ck_assert_ptr_null(crl_td_get(td, "next.state"));
    crl_td_unref(td);
    henv_close(&h);
    close_form(&f);
}
END_TEST

/* The host truncates at max_episode_steps (the backend never does). */
START_TEST(test_host_truncation)
{
    form f = open_form(_i == 0);
    crl_error e = {0};
    henv h;
    EXPECT_OK(henv_open(&h, &f,
                        "[env]\nbackend = classic\nid = CartPole-v1\nnum_envs = 2\n"
                        "max_episode_steps = 3\ngravity = 0\nforce_mag = 0\n",
                        &e),
              e);
    ck_assert_int_eq(crl_env_max_episode_steps(h.env), 3);
    crl_td *td = crl_env_reset(h.env, NULL, &e);
    ck_assert_msg(td != NULL, "%s", e.message);
    for (int k = 1; k <= 3; k++) {
        EXPECT_OK(crl_env_rand_step(h.env, td, &e), e);
        const bool *tr = crl_tensor_data(crl_td_get(td, "next.truncated"));
        const bool *te = crl_tensor_data(crl_td_get(td, "next.terminated"));
        const bool *dn = crl_tensor_data(crl_td_get(td, "next.done"));
        for (int i = 0; i < 2; i++) {
            ck_assert(tr[i] == (k == 3));
            ck_assert(dn[i] == (k == 3));
            ck_assert(!te[i]);
        }
        crl_td *mdp = crl_env_step_mdp(h.env, td, &e);
        ck_assert_ptr_nonnull(mdp);
        crl_td_unref(td);
        td = mdp;
    }
    crl_td_unref(td);
    henv_close(&h);
    close_form(&f);
}
END_TEST

START_TEST(test_host_config_errors)
{
    form f = open_form(_i == 0);
    crl_error e = {0};
    henv h;
    EXPECT_ERR(henv_open(&h, &f, "[env]\nbackend = classic\nid = CartPole-v1\ng = 9.81\n", &e), e,
               CRL_E_CONFIG, "host.ini:4: [env] g: CartPole-v1 has no parameter 'g'");
    henv_close(&h);
    EXPECT_ERR(henv_open(&h, &f, "[env]\nbackend = classic\nid = Pendulum-v1\nmax_torque = -2\n", &e), e,
               CRL_E_CONFIG, "host.ini:4: [env] max_torque");
    henv_close(&h);
    ck_assert_int_ne(henv_open(&h, &f, "[env]\nbackend = classic\nid = cartpole\n", &e), CRL_OK);
    ck_assert_msg(strstr(e.message, "CartPole-v1") != NULL, "%s", e.message);
    henv_close(&h);
    close_form(&f);
}
END_TEST

static Suite *classic_suite(void)
{
    Suite *s = suite_create("classic");
    TCase *tc = tcase_create("plugin");
    /* Loop index: 0 built in, 1 dlopen'd. */
    tcase_add_loop_test(tc, test_list, 0, 2);
    tcase_add_loop_test(tc, test_options_table, 0, 2);
    tcase_add_loop_test(tc, test_make_small_specs_struct, 0, 2);
    tcase_add_loop_test(tc, test_make_errors, 0, 2);
    tcase_add_loop_test(tc, test_make_params, 0, 2);
    tcase_add_loop_test(tc, test_bind_errors, 0, 2);
    tcase_add_loop_test(tc, test_reset_masked, 0, 2);
    tcase_add_loop_test(tc, test_reset_from_state_errors, 0, 2);
    tcase_add_loop_test(tc, test_step_never_truncates, 0, 2);
    tcase_add_loop_test(tc, test_step_bad_actions, 0, 2);
    tcase_add_loop_test(tc, test_onehot_actions, 0, 2);
    tcase_add_loop_test(tc, test_step_noise_streams, 0, 2);
    tcase_add_loop_test(tc, test_render_last_action, 0, 2);
    tcase_add_loop_test(tc, test_large_batch, 0, 2);
    tcase_add_loop_test(tc, test_host_cartpole_steps, 0, 2);
    tcase_add_loop_test(tc, test_host_state_hidden, 0, 2);
    tcase_add_loop_test(tc, test_host_truncation, 0, 2);
    tcase_add_loop_test(tc, test_host_config_errors, 0, 2);
    suite_add_tcase(s, tc);

    tc = tcase_create("per-id");
    tcase_set_timeout(tc, 30);
    /* Loop index: 2 * id + (0 built in, 1 dlopen'd). */
    tcase_add_loop_test(tc, test_make_specs, 0, 2 * N_IDS);
    tcase_add_loop_test(tc, test_reset_unseeded, 0, 2 * N_IDS);
    tcase_add_loop_test(tc, test_reset_seeded, 0, 2 * N_IDS);
    tcase_add_loop_test(tc, test_reset_from_state_replay, 0, 2 * N_IDS);
    tcase_add_loop_test(tc, test_step_in_place, 0, 2 * N_IDS);
    tcase_add_loop_test(tc, test_render, 0, 2 * N_IDS);
    tcase_add_loop_test(tc, test_render_size, 0, 2 * N_IDS);
    tcase_add_loop_test(tc, test_host_check_specs, 0, 2 * N_IDS);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    /* Run by hand (not by make check): find classic.so in the build tree and
     * nothing installed. */
    if (!getenv("CRL_PLUGIN_PATH"))
        setenv("CRL_PLUGIN_PATH", CLASSIC_PLUGIN_DIR, 1);
    if (!getenv("CRL_PLUGINSDIR"))
        setenv("CRL_PLUGINSDIR", "", 1);
    SRunner *sr = srunner_create(classic_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
