/* The losses plugin (losses.so): gradients against finite differences, loss_* and td_error
 * entries, checkpoints, and bad input (wrong specs, missing keys, wrong shapes, non-finite losses). */
#include "host-fixture.h"
#include "nn-test.h"
#include "ckpt-edit.h"

#include <crl/trainer.h>
#include <glib/gstdio.h>
#include <unistd.h>

typedef struct loss_fx {
    crl_test_host h;
    crl_spec *obs, *act;
    const crl_loss_ops *ops;
    void *st;
} loss_fx;

/* Specs (one env) of a 4-feature observation and a 2-way Categorical (or a Bounded [1]) action. */
static void fx_specs(loss_fx *f, bool discrete)
{
    crl_error e = { 0 };
    f->obs = crl_spec_composite_of(1, "observation", crl_spec_unbounded(CRL_F32, 2, SHAPE(1, 4), &e), &e);
    f->act = discrete ? crl_spec_composite_of(1, "action", crl_spec_categorical(2, CRL_I64, 1, SHAPE(1), &e), &e)
                      : crl_spec_composite_of(1, "action", crl_spec_bounded(CRL_F32, 2, SHAPE(1, 1), -2, 2, &e), &e);
    ck_assert_msg(f->obs && f->act, "specs: %s", e.message);
}

static int fx_open(loss_fx *f, const char *loss_ini, bool discrete, crl_error *e)
{
    memset(f, 0, sizeof *f);
    crl_test_host_open(&f->h, "losses", loss_ini);
    fx_specs(f, discrete);
    return crl_loss_from_config(f->h.host, f->h.cfg, "loss", f->obs, f->act, 7, &f->ops, &f->st, e);
}

static void fx_close(loss_fx *f)
{
    if (f->st)
        f->ops->destroy(f->st);
    crl_spec_unref(f->obs);
    crl_spec_unref(f->act);
    crl_test_host_close(&f->h);
}

/* A random off-policy batch of B transitions. */
static crl_td *dqn_batch(int64_t B, crl_rng *rng)
{
    crl_error e = { 0 };
    crl_td *td = crl_td_new(1, &B, &e);
    crl_tensor *obs = t_rows(B, 4, NULL, rng), *nobs = t_rows(B, 4, NULL, rng), *r = t_rows(B, 1, NULL, rng);
    crl_tensor *a = t_new(CRL_I64, 1, SHAPE(B)), *term = t_new(CRL_BOOL, 2, SHAPE(B, 1));
    for (int64_t i = 0; i < B; i++) {
        crl_tensor_flat_set(a, i, (double)crl_rng_below(rng, 2));
        crl_tensor_flat_set(term, i, i % 3 == 0);
    }
    ck_assert_int_eq(crl_td_set(td, "observation", obs, &e), CRL_OK);
    ck_assert_int_eq(crl_td_set(td, "action", a, &e), CRL_OK);
    ck_assert_int_eq(crl_td_set(td, "next.observation", nobs, &e), CRL_OK);
    ck_assert_int_eq(crl_td_set(td, "next.reward", r, &e), CRL_OK);
    ck_assert_int_eq(crl_td_set(td, "next.terminated", term, &e), CRL_OK);
    UNREF_ALL(obs, nobs, r, a, term);
    return td;
}

/* Which loss terms a parameter vector is checked against (NULL: all). */
static const char *const *terms_for(const char *group);
static bool actor_terms_only;

/* The sum of the loss_* terms (or of `terms`) of a forward on batch. */
static double loss_terms(loss_fx *f, crl_td *batch, const char *const *terms)
{
    crl_error e = { 0 };
    crl_td *losses = crl_td_new(0, NULL, &e);
    int rc = f->ops->forward(f->st, batch, losses, &e);
    ck_assert_msg(rc == CRL_OK, "forward: %s", e.message);
    double s = 0;
    for (size_t i = 0; i < crl_td_len(losses); i++) {
        const char *k = crl_td_key_at(losses, i);
        bool in = !terms && !strncmp(k, "loss", 4);
        for (size_t j = 0; terms && terms[j]; j++)
            in = in || !strcmp(k, terms[j]);
        if (in)
            s += crl_tensor_flat_get(crl_td_tensor_at(losses, i), 0);
    }
    crl_td_unref(losses);
    return s;
}

static double loss_of(loss_fx *f, crl_td *batch) { return loss_terms(f, batch, NULL); }

/* Compare every parameter's gradient (from one forward) with central
 * differences of the loss; the networks use tanh so the loss is smooth. */
static void check_gradients(loss_fx *f, crl_td *batch, double h, double tol)
{
    crl_error e = { 0 };
    size_t np = f->ops->num_params(f->st);
    for (size_t k = 0; k < np; k++) {
        const char *name;
        crl_tensor *p, *g;
        ck_assert_int_eq(f->ops->param(f->st, k, &name, &p, &g, &e), CRL_OK);
        crl_tensor_fill(g, 0);
    }
    loss_of(f, batch);
    /* Copy every gradient before the finite differences accumulate more. */
    crl_tensor *g0s[8];
    ck_assert_uint_le(np, 8);
    for (size_t k = 0; k < np; k++) {
        const char *name;
        crl_tensor *p, *g;
        ck_assert_int_eq(f->ops->param(f->st, k, &name, &p, &g, &e), CRL_OK);
        g0s[k] = crl_tensor_clone(g, &e);
    }
    int checked = 0;
    for (size_t k = 0; k < np; k++) {
        const char *name;
        crl_tensor *p, *g;
        ck_assert_int_eq(f->ops->param(f->st, k, &name, &p, &g, &e), CRL_OK);
        crl_tensor *g0 = g0s[k];
        float *pv = crl_tensor_data(p);
        int64_t n = crl_tensor_numel(p), stride = n > 40 ? n / 40 : 1;
        for (int64_t i = 0; i < n; i += stride) {
            float keep = pv[i];
            pv[i] = keep + (float)h;
            double lp = loss_terms(f, batch, terms_for(name));
            pv[i] = keep - (float)h;
            double lm = loss_terms(f, batch, terms_for(name));
            pv[i] = keep;
            double fd = (lp - lm) / (2 * h), an = crl_tensor_flat_get(g0, i);
            ck_assert_msg(fabs(fd - an) <= tol * (1 + fabs(fd)), "%s[%lld]: analytic %.6g, finite differences %.6g",
                          name, (long long)i, an, fd);
            checked++;
        }
        crl_tensor_unref(g0);
    }
    ck_assert_int_gt(checked, 10);
}

static void dqn_gradients(const char *extra)
{
    char *ini = g_strdup_printf("[loss]\ntype = dqn\nnum_cells = 16\nactivation = tanh\n%s", extra);
    loss_fx f;
    crl_error e = { 0 };
    ck_assert_msg(fx_open(&f, ini, true, &e) == CRL_OK, "dqn: %s", e.message);
    crl_rng rng;
    crl_rng_init(&rng, 3, 0);
    crl_td *b = dqn_batch(12, &rng);
    check_gradients(&f, b, 1e-2, 2e-2);
    crl_tensor *tde = crl_td_get(b, "td_error");
    ck_assert_ptr_nonnull(tde);
    ck_assert_int_eq(crl_tensor_numel(tde), 12);
    crl_td_unref(b);
    fx_close(&f);
    g_free(ini);
}

START_TEST(dqn_grad_l2) { dqn_gradients(""); }
END_TEST
START_TEST(dqn_grad_smooth_l1_double) { dqn_gradients("loss_function = smooth_l1\ndouble_dqn = true\n"); }
END_TEST

/* Weighted by the prioritized sampler's _weight, the loss is the weighted mean. */
START_TEST(dqn_weights)
{
    loss_fx f;
    crl_error e = { 0 };
    ck_assert_int_eq(fx_open(&f, "[loss]\ntype = dqn\nnum_cells = 8\n", true, &e), CRL_OK);
    crl_rng rng;
    crl_rng_init(&rng, 4, 0);
    crl_td *b = dqn_batch(8, &rng);
    double l = loss_of(&f, b);
    crl_tensor *w = t_new(CRL_F32, 1, SHAPE(8));
    crl_tensor_fill(w, 0.5);
    ck_assert_int_eq(crl_td_set(b, "_weight", w, &e), CRL_OK);
    ck_assert_double_eq_tol(loss_of(&f, b), 0.5 * l, 1e-5 * (1 + l));
    check_gradients(&f, b, 1e-2, 5e-2);
    crl_tensor_unref(w);
    crl_td_unref(b);
    fx_close(&f);
}
END_TEST

/* Learning signal: repeated Adam steps on a fixed batch make the loss fall. */
START_TEST(dqn_loss_falls)
{
    loss_fx f;
    crl_error e = { 0 };
    ck_assert_int_eq(fx_open(&f, "[loss]\ntype = dqn\nnum_cells = 32\n", true, &e), CRL_OK);
    crl_optim *o = crl_optim_new(CRL_OPTIM_ADAM, 1e-2, &e);
    const char *name;
    crl_tensor *p, *g;
    ck_assert_int_eq(f.ops->param(f.st, 0, &name, &p, &g, &e), CRL_OK);
    ck_assert_int_eq(crl_optim_add(o, p, g, &e), CRL_OK);
    crl_rng rng;
    crl_rng_init(&rng, 5, 0);
    crl_td *b = dqn_batch(32, &rng);
    double first = 0, last = 0;
    for (int i = 0; i < 200; i++) {
        crl_optim_zero_grad(o);
        last = loss_of(&f, b);
        if (i == 0)
            first = last;
        ck_assert_int_eq(crl_optim_step(o, &e), CRL_OK);
    }
    ck_assert_msg(last < 0.2 * first, "loss %g -> %g", first, last);
    crl_optim_free(o);
    crl_td_unref(b);
    fx_close(&f);
}
END_TEST

/* The target network follows with hard updates every N steps, or soft ones. */
START_TEST(dqn_target_updates)
{
    loss_fx f;
    crl_error e = { 0 };
    ck_assert_int_eq(fx_open(&f, "[loss]\ntype = dqn\nnum_cells = 8\nhard_update_interval = 2\n", true, &e), CRL_OK);
    crl_rng rng;
    crl_rng_init(&rng, 6, 0);
    crl_td *b = dqn_batch(4, &rng);
    double l0 = loss_of(&f, b);
    const char *name;
    crl_tensor *p, *g;
    ck_assert_int_eq(f.ops->param(f.st, 0, &name, &p, &g, &e), CRL_OK);
    float *pv = crl_tensor_data(p);
    for (int64_t i = 0; i < crl_tensor_numel(p); i++)
        pv[i] *= 0.5f;
    /* The online net changed, the target not yet: the loss differs from a
     * copy of both nets; after two updates the target is the online net. */
    ck_assert_int_eq(f.ops->update(f.st, &e), CRL_OK);
    double l1 = loss_of(&f, b);
    ck_assert_int_eq(f.ops->update(f.st, &e), CRL_OK);
    double l2 = loss_of(&f, b);
    ck_assert(l1 != l2);
    ck_assert(l0 != l1);
    crl_td_unref(b);
    fx_close(&f);
}
END_TEST

START_TEST(dqn_save_load)
{
    loss_fx f, g2;
    crl_error e = { 0 };
    ck_assert_int_eq(fx_open(&f, "[loss]\ntype = dqn\nnum_cells = 8\n", true, &e), CRL_OK);
    char path[] = "/tmp/crl-test-loss-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    f.ops->explore_step(f.st, 100);
    crl_ckpt_writer *w = crl_ckpt_writer_new(path, "test", 1, &e);
    ck_assert_int_eq(f.ops->save(f.st, w, "loss", &e), CRL_OK);
    ck_assert_int_eq(crl_ckpt_writer_close(w, &e), CRL_OK);
    /* Another seed, same architecture: load restores the same losses. */
    memset(&g2, 0, sizeof g2);
    crl_test_host_open(&g2.h, "losses", "[loss]\ntype = dqn\nnum_cells = 8\n");
    fx_specs(&g2, true);
    ck_assert_int_eq(crl_loss_from_config(g2.h.host, g2.h.cfg, "loss", g2.obs, g2.act, 99, &g2.ops, &g2.st, &e),
                     CRL_OK);
    crl_rng rng;
    crl_rng_init(&rng, 8, 0);
    crl_td *b = dqn_batch(5, &rng);
    ck_assert(loss_of(&f, b) != loss_of(&g2, b));
    crl_ckpt_reader *r = crl_ckpt_reader_open(path, "test", 1, &e);
    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq(g2.ops->load(g2.st, r, "loss", &e), CRL_OK);
    ck_assert(loss_of(&f, b) == loss_of(&g2, b));
    crl_ckpt_reader_free(r);
    fx_close(&g2);
    /* A network of another shape (wrong module shape) is refused, nothing changes. */
    crl_test_host_open(&g2.h, "losses", "[loss]\ntype = dqn\nnum_cells = 16\n");
    fx_specs(&g2, true);
    g2.st = NULL;
    ck_assert_int_eq(crl_loss_from_config(g2.h.host, g2.h.cfg, "loss", g2.obs, g2.act, 99, &g2.ops, &g2.st, &e),
                     CRL_OK);
    double before = loss_of(&g2, b);
    r = crl_ckpt_reader_open(path, "test", 1, &e);
    ck_assert_int_eq(g2.ops->load(g2.st, r, "loss", &e), CRL_E_CORRUPT);
    assert_msg_has(&e, "qvalue");
    ck_assert(loss_of(&g2, b) == before);
    crl_ckpt_reader_free(r);
    fx_close(&g2);
    crl_td_unref(b);
    fx_close(&f);
    g_unlink(path);
}
END_TEST

/* Actions of f's exploring policy on B observations from a fixed stream. */
static crl_tensor *explore_actions(loss_fx *f, int64_t B)
{
    crl_error e = { 0 };
    crl_rng rng, data;
    crl_rng_init(&rng, 5, 1);
    crl_rng_init(&data, 6, 0);
    crl_td *td = crl_td_new(1, &B, &e);
    crl_tensor *obs = t_rows(B, 4, NULL, &data);
    ck_assert_int_eq(crl_td_set(td, "observation", obs, &e), CRL_OK);
    ck_assert_msg(f->ops->act(f->st, td, CRL_EXPLORE_RANDOM, &rng, &e) == CRL_OK, "act: %s", e.message);
    crl_tensor *a = crl_tensor_clone(crl_td_get(td, "action"), &e);
    crl_tensor_unref(obs);
    crl_td_unref(td);
    return a;
}

static void save_loss(loss_fx *f, const char *path)
{
    crl_error e = { 0 };
    crl_ckpt_writer *w = crl_ckpt_writer_new(path, "test", 1, &e);
    ck_assert_msg(f->ops->save(f->st, w, "loss", &e) == CRL_OK, "%s", e.message);
    ck_assert_int_eq(crl_ckpt_writer_close(w, &e), CRL_OK);
}

static int load_loss(loss_fx *f, const char *path, crl_error *e)
{
    crl_ckpt_reader *r = crl_ckpt_reader_open(path, "test", 1, e);
    ck_assert_msg(r != NULL, "%s", e->message);
    int rc = f->ops->load(f->st, r, "loss", e);
    crl_ckpt_reader_free(r);
    return rc;
}

/* DQN's counters are little-endian doubles, checked on load (counts, sizes), and a load replays the
 * epsilon schedule bitwise however many explore calls the file counts (past the schedule's end, further
 * calls change nothing, and 2^50 of them must not stall the load). */
START_TEST(dqn_counters_checked)
{
    loss_fx f, g2;
    crl_error e = { 0 };
    const char *ini = "[loss]\ntype = dqn\nnum_cells = 8\nannealing_num_steps = 5000\neps_init = 1\neps_end = 0.1\n";
    ck_assert_int_eq(fx_open(&f, ini, true, &e), CRL_OK);
    for (int i = 0; i < 1000; i++)
        f.ops->explore_step(f.st, 10);
    char *dir = g_dir_make_tmp("crl-test-loss-XXXXXX", NULL);
    char *path = g_build_filename(dir, "a.ckpt", NULL), *bad = g_build_filename(dir, "b.ckpt", NULL);
    save_loss(&f, path);
    size_t len;
    uint8_t *c = ckpt_edit_section(path, "test", "loss/counters", &len), want[32];
    const double cv[4] = { 0, 10000, 1000, 10 };
    for (int i = 0; i < 4; i++)
        ckpt_le_f64(want + 8 * i, cv[i]);
    ck_assert_uint_eq(len, 32);
    ck_assert_msg(memcmp(c, want, 32) == 0, "loss/counters is not 4 little-endian doubles {0, 10000, 1000, 10}");

    /* 1000 calls replayed (fewer once the schedule has ended): the same exploring actions. */
    ck_assert_int_eq(fx_open(&g2, ini, true, &e), CRL_OK);
    ck_assert_msg(load_loss(&g2, path, &e) == CRL_OK, "%s", e.message);
    crl_tensor *a = explore_actions(&f, 64), *b = explore_actions(&g2, 64);
    ck_assert(crl_tensor_equal(a, b));
    UNREF_ALL(a, b);
    /* ... and the counters it saves are the file's. */
    save_loss(&g2, bad);
    uint8_t *c2 = ckpt_edit_section(bad, "test", "loss/counters", &len);
    ck_assert(len == 32 && memcmp(c2, want, 32) == 0);
    g_free(c2);

    /* 2^50 calls of one frame load at once. */
    const double huge[4] = { 3, 0x1p50, 0x1p50, 1 };
    for (int i = 0; i < 4; i++)
        ckpt_le_f64(c + 8 * i, huge[i]);
    ckpt_edit_replace(path, bad, "test", "loss/counters", c, 32);
    ck_assert_msg(load_loss(&g2, bad, &e) == CRL_OK, "%s", e.message);
    save_loss(&g2, bad);
    c2 = ckpt_edit_section(bad, "test", "loss/counters", &len);
    ck_assert(len == 32 && memcmp(c2, c, 32) == 0);
    g_free(c2);

    /* Counts that no run has, and a wrong size: CRL_E_CORRUPT naming the file, section and field; the
     * loss keeps its state. */
    ck_assert_msg(load_loss(&g2, path, &e) == CRL_OK, "%s", e.message);
    const struct { int field; double v; const char *msg; } cases[] = {
        { 2, 3.5, "explore calls = 3.5; expected a whole number in [0, 2^53]" },
        { 0, -1, "optimizer steps = -1; expected" },
        { 3, NAN, "frames per explore call = nan; expected" },
        { 1, 0x1p60, "explore frames = 1.15292e+18; expected" },
        { 3, 0x1p44, "explore calls = 1000; expected calls times frames per call at most 2^53" },
    };
    a = explore_actions(&g2, 64);
    for (size_t k = 0; k < G_N_ELEMENTS(cases); k++) {
        for (int i = 0; i < 4; i++)
            ckpt_le_f64(c + 8 * i, cv[i]);
        ckpt_le_f64(c + 8 * cases[k].field, cases[k].v);
        ckpt_edit_replace(path, bad, "test", "loss/counters", c, 32);
        ck_assert_msg(load_loss(&g2, bad, &e) == CRL_E_CORRUPT, "case %zu loaded", k);
        ck_assert_msg(g_str_has_prefix(e.message, bad), "%s", e.message);
        assert_msg_has(&e, "section 'loss/counters'");
        assert_msg_has(&e, cases[k].msg);
    }
    ckpt_edit_replace(path, bad, "test", "loss/counters", c, 24);
    ck_assert_int_eq(load_loss(&g2, bad, &e), CRL_E_CORRUPT);
    assert_msg_has(&e, "holds 24 bytes; expected 32 (4 doubles)");
    b = explore_actions(&g2, 64);
    ck_assert(crl_tensor_equal(a, b));
    UNREF_ALL(a, b);
    g_free(c);
    fx_close(&g2);
    fx_close(&f);
    g_unlink(path);
    g_unlink(bad);
    g_rmdir(dir);
    g_free(path);
    g_free(bad);
    g_free(dir);
}
END_TEST

/* PPO's random stream is 12 little-endian words; a state no stream is in is refused. */
START_TEST(ppo_rng_checked)
{
    loss_fx f;
    crl_error e = { 0 };
    ck_assert_int_eq(fx_open(&f, "[loss]\ntype = ppo\n" "num_cells = 8\n", true, &e), CRL_OK);
    char *dir = g_dir_make_tmp("crl-test-loss-XXXXXX", NULL);
    char *path = g_build_filename(dir, "a.ckpt", NULL), *bad = g_build_filename(dir, "b.ckpt", NULL);
    save_loss(&f, path);
    size_t len;
    uint8_t *rb = ckpt_edit_section(path, "test", "loss/rng", &len);
    ck_assert_uint_eq(len, 48);
    ck_assert_msg(load_loss(&f, path, &e) == CRL_OK, "%s", e.message);
    ckpt_le_u32(rb + 40, 9);
    ckpt_edit_replace(path, bad, "test", "loss/rng", rb, 48);
    ck_assert_int_eq(load_loss(&f, bad, &e), CRL_E_CORRUPT);
    ck_assert_msg(g_str_has_prefix(e.message, bad), "%s", e.message);
    assert_msg_has(&e, "section 'loss/rng': word index 9");
    ckpt_edit_replace(path, bad, "test", "loss/rng", rb, 40);
    ck_assert_int_eq(load_loss(&f, bad, &e), CRL_E_CORRUPT);
    assert_msg_has(&e, "holds 40 bytes; expected 48 (a random stream)");
    uint8_t st[24];
    const double sv[3] = { -1, 0, 0 };
    for (int i = 0; i < 3; i++)
        ckpt_le_f64(st + 8 * i, sv[i]);
    ckpt_edit_replace(path, bad, "test", "loss/state", st, 24);
    ck_assert_int_eq(load_loss(&f, bad, &e), CRL_E_CORRUPT);
    assert_msg_has(&e, "beta = -1; expected a number >= 0");
    g_free(rb);
    fx_close(&f);
    g_unlink(path);
    g_unlink(bad);
    g_rmdir(dir);
    g_free(path);
    g_free(bad);
    g_free(dir);
}
END_TEST

/* forward on b fails with `code` and a message holding needle; drops b. */
static void forward_fails(loss_fx *f, crl_td *b, int code, const char *needle)
{
    crl_error e = { 0 };
    crl_td *losses = crl_td_new(0, NULL, &e);
    int rc = f->ops->forward(f->st, b, losses, &e);
    ck_assert_msg(code ? rc == code : rc != CRL_OK, "forward: %s, wanted %s: %s", crl_status_name(rc),
                  crl_status_name(code), e.message);
    assert_msg_has(&e, needle);
    crl_td_unref(losses);
    crl_td_unref(b);
}

/* Discrete transitions with one entry replaced by a random float [B, w] tensor. */
static crl_td *with_rows(crl_td *b, const char *key, int64_t B, int64_t w, crl_rng *rng)
{
    crl_error e = { 0 };
    crl_tensor *t = t_rows(B, w, NULL, rng);
    ck_assert_int_eq(crl_td_set(b, key, t, &e), CRL_OK);
    crl_tensor_unref(t);
    return b;
}

/* A DQN over uint8 frames (kept so in a replay buffer) computes bit for bit what it computes over the floats
 * ToTensorImage gives for them: the Q-network divides its input by 255 as SB3's NatureCNN does.  uint8 that
 * is no image, and losses that do not read frames (ppo), are refused. */
#define PIX_NET "[net.q]\nencoder = enc\nnum_cells = 8\n[net.enc]\ntype = conv\nnum_cells = 3\nkernel_sizes = 3\n" \
                "strides = 2\n"

static crl_td *pixel_batch(int64_t B, crl_dtype dt, uint64_t seed)
{
    crl_error e = { 0 };
    crl_rng rng;
    crl_rng_init(&rng, seed, 0);
    crl_td *td = crl_td_new(1, &B, &e);
    const char *keys[] = { "pixels", "next.pixels" };
    for (int k = 0; k < 2; k++) {
        crl_tensor *t = t_new(dt, 4, SHAPE(B, 2, 8, 8));
        for (int64_t i = 0; i < B * 128; i++) {
            uint8_t v = (uint8_t)crl_rng_below(&rng, 256);
            if (dt == CRL_U8)
                ((uint8_t *)crl_tensor_data(t))[i] = v;
            else
                ((float *)crl_tensor_data(t))[i] = (float)v / 255.0f;
        }
        ck_assert_int_eq(crl_td_set(td, keys[k], t, &e), CRL_OK);
        crl_tensor_unref(t);
    }
    crl_tensor *a = t_new(CRL_I64, 1, SHAPE(B)), *term = t_new(CRL_BOOL, 2, SHAPE(B, 1)), *r = t_rows(B, 1, NULL, &rng);
    for (int64_t i = 0; i < B; i++) {
        crl_tensor_flat_set(a, i, (double)crl_rng_below(&rng, 2));
        crl_tensor_flat_set(term, i, i % 3 == 0);
    }
    ck_assert_int_eq(crl_td_set(td, "action", a, &e), CRL_OK);
    ck_assert_int_eq(crl_td_set(td, "next.reward", r, &e), CRL_OK);
    ck_assert_int_eq(crl_td_set(td, "next.terminated", term, &e), CRL_OK);
    UNREF_ALL(a, term, r);
    return td;
}

START_TEST(dqn_uint8_frames)
{
    crl_test_host h;
    crl_error e = { 0 };
    crl_test_host_open(&h, "losses", "[loss]\ntype = dqn\nin_key = pixels\ndouble_dqn = true\n" PIX_NET);
    crl_spec *act = crl_spec_composite_of(1, "action", crl_spec_categorical(2, CRL_I64, 1, SHAPE(1), &e), &e);
    crl_spec *u8 = crl_spec_composite_of(1, "pixels", crl_spec_bounded(CRL_U8, 4, SHAPE(1, 2, 8, 8), 0, 255, &e), &e);
    crl_spec *f32 = crl_spec_composite_of(1, "pixels", crl_spec_bounded(CRL_F32, 4, SHAPE(1, 2, 8, 8), 0, 1, &e), &e);
    ck_assert_msg(act && u8 && f32, "%s", e.message);
    const crl_loss_ops *ops = NULL, *ops2 = NULL;
    void *su = NULL, *sf = NULL;
    ck_assert_msg(crl_loss_from_config(h.host, h.cfg, "loss", u8, act, 7, &ops, &su, &e) == CRL_OK, "%s", e.message);
    ck_assert_msg(crl_loss_from_config(h.host, h.cfg, "loss", f32, act, 7, &ops2, &sf, &e) == CRL_OK, "%s",
                  e.message);
    crl_td *bu = pixel_batch(6, CRL_U8, 5), *bf = pixel_batch(6, CRL_F32, 5);
    crl_td *lu = crl_td_new(0, NULL, &e), *lf = crl_td_new(0, NULL, &e);
    const char *name;
    crl_tensor *pu, *gu, *pf, *gf;
    ck_assert_int_eq(ops->param(su, 0, &name, &pu, &gu, &e), CRL_OK);
    ck_assert_int_eq(ops2->param(sf, 0, &name, &pf, &gf, &e), CRL_OK);
    ck_assert_mem_eq(crl_tensor_data(pu), crl_tensor_data(pf), crl_tensor_nbytes(pu));
    crl_tensor_fill(gu, 0);
    crl_tensor_fill(gf, 0);
    ck_assert_msg(ops->forward(su, bu, lu, &e) == CRL_OK, "%s", e.message);
    ck_assert_msg(ops2->forward(sf, bf, lf, &e) == CRL_OK, "%s", e.message);
    double l1 = crl_tensor_flat_get(crl_td_get(lu, "loss"), 0), l2 = crl_tensor_flat_get(crl_td_get(lf, "loss"), 0);
    ck_assert_msg(l1 == l2 && l1 > 0, "loss %.9g over uint8 frames, %.9g over floats", l1, l2);
    ck_assert_mem_eq(crl_tensor_data(gu), crl_tensor_data(gf), crl_tensor_nbytes(gu));
    crl_tensor *tu = crl_td_get(bu, "td_error"), *tf = crl_td_get(bf, "td_error");
    ck_assert_mem_eq(crl_tensor_data(tu), crl_tensor_data(tf), crl_tensor_nbytes(tu));
    /* acting on a uint8 frame: the greedy action of the float frame */
    for (int k = 0; k < 2; k++) {
        crl_td *ou = pixel_batch(1, CRL_U8, 20 + (uint64_t)k), *of = pixel_batch(1, CRL_F32, 20 + (uint64_t)k);
        crl_rng r1, r2;
        crl_rng_init(&r1, 1, 0);
        crl_rng_init(&r2, 1, 0);
        ck_assert_msg(ops->act(su, ou, CRL_EXPLORE_MODE, &r1, &e) == CRL_OK, "%s", e.message);
        ck_assert_msg(ops2->act(sf, of, CRL_EXPLORE_MODE, &r2, &e) == CRL_OK, "%s", e.message);
        ck_assert_int_eq((int)crl_tensor_flat_get(crl_td_get(ou, "action"), 0),
                         (int)crl_tensor_flat_get(crl_td_get(of, "action"), 0));
        crl_td_unref(ou);
        crl_td_unref(of);
    }
    ops->destroy(su);
    ops2->destroy(sf);
    crl_td_unref(bu);
    crl_td_unref(bf);
    crl_td_unref(lu);
    crl_td_unref(lf);
    /* uint8 that is no image */
    crl_spec *vec = crl_spec_composite_of(1, "pixels", crl_spec_bounded(CRL_U8, 2, SHAPE(1, 5), 0, 255, &e), &e);
    su = NULL;
    ck_assert_int_eq(crl_loss_from_config(h.host, h.cfg, "loss", vec, act, 7, &ops, &su, &e), CRL_E_DTYPE);
    assert_msg_has(&e, "uint8 but not an image [C, H, W]");
    ck_assert_ptr_null(su);
    crl_spec_unref(vec);
    crl_test_host_close(&h);
    /* ppo reads float32 only */
    crl_test_host_open(&h, "losses", "[loss]\ntype = ppo\nin_key = pixels\n[net.actor]\nencoder = enc\n"
                                     "[net.critic]\nencoder = enc\n[net.enc]\ntype = conv\nnum_cells = 3\n"
                                     "kernel_sizes = 3\nstrides = 2\n");
    ck_assert_int_eq(crl_loss_from_config(h.host, h.cfg, "loss", u8, act, 7, &ops, &su, &e), CRL_E_DTYPE);
    assert_msg_has(&e, "uint8");
    ck_assert_ptr_null(su);
    crl_test_host_close(&h);
    crl_spec_unref(act);
    crl_spec_unref(u8);
    crl_spec_unref(f32);
}
END_TEST

START_TEST(dqn_bad_input)
{
    loss_fx f;
    crl_error e = { 0 };
    /* A continuous action spec. */
    ck_assert_int_eq(fx_open(&f, "[loss]\ntype = dqn\n", false, &e), CRL_E_INVALID);
    assert_msg_has(&e, "discrete action");
    fx_close(&f);
    /* An observation key the env lacks. */
    ck_assert_int_eq(fx_open(&f, "[loss]\ntype = dqn\nin_key = pixels\n", true, &e), CRL_E_NOT_FOUND);
    assert_msg_has(&e, "'pixels'");
    assert_msg_has(&e, "'observation'");
    fx_close(&f);
    /* An observation of more than one dim per env (pixels [C, H, W]) is no network input; a vector
     * per env of a batch of envs is. */
    crl_test_host h;
    crl_test_host_open(&h, "losses", "[loss]\ntype = dqn\n");
    crl_spec *act = crl_spec_composite_of(3, "action", crl_spec_categorical(2, CRL_I64, 1, SHAPE(3), &e), &e);
    crl_spec *img = crl_spec_composite_of(3, "observation", crl_spec_unbounded(CRL_F32, 4, SHAPE(3, 1, 8, 8), &e), &e);
    crl_spec *vec = crl_spec_composite_of(3, "observation", crl_spec_unbounded(CRL_F32, 2, SHAPE(3, 5), &e), &e);
    ck_assert_msg(act && img && vec, "%s", e.message);
    const crl_loss_ops *ops = NULL;
    void *st = NULL;
    ck_assert_int_eq(crl_loss_from_config(h.host, h.cfg, "loss", img, act, 7, &ops, &st, &e), CRL_E_SHAPE);
    assert_msg_has(&e, "network 'qvalue' reads [1, 8, 8] per row, but an MLP reads vectors");
    ck_assert_ptr_null(st);
    ck_assert_int_eq(crl_loss_from_config(h.host, h.cfg, "loss", vec, act, 7, &ops, &st, &e), CRL_OK);
    ops->destroy(st);
    crl_spec_unref(act);
    crl_spec_unref(img);
    crl_spec_unref(vec);
    crl_test_host_close(&h);
    ck_assert_int_eq(fx_open(&f, "[loss]\ntype = dqn\nnum_cells = 8\n", true, &e), CRL_OK);
    crl_rng rng;
    crl_rng_init(&rng, 9, 0);
    crl_td *losses = crl_td_new(0, NULL, &e);
    /* A missing key; observations of the wrong width. */
    crl_td *b = dqn_batch(4, &rng);
    ck_assert_int_eq(crl_td_del(b, "next.reward", &e), CRL_OK);
    forward_fails(&f, b, CRL_E_NOT_FOUND, "next.reward");
    forward_fails(&f, with_rows(dqn_batch(4, &rng), "observation", 4, 5, &rng), 0, "observation");
    /* A non-finite reward gives a non-finite loss: refused, the gradients untouched. */
    b = dqn_batch(4, &rng);
    crl_tensor_flat_set(crl_td_get(b, "next.reward"), 1, NAN);
    const char *name;
    crl_tensor *p, *g;
    ck_assert_int_eq(f.ops->param(f.st, 0, &name, &p, &g, &e), CRL_OK);
    crl_tensor_fill(g, 0);
    ck_assert_int_eq(f.ops->forward(f.st, b, losses, &e), CRL_E_RUNTIME);
    assert_msg_has(&e, "not finite");
    for (int64_t i = 0; i < crl_tensor_numel(g); i++)
        ck_assert(crl_tensor_flat_get(g, i) == 0.0);
    crl_td_unref(b);
    crl_td_unref(losses);
    fx_close(&f);
}
END_TEST

/* An on-policy minibatch of M rows collected by the loss's own policy:
 * sample_log_prob is shifted by up to +-shift (ratios near 1, or, with a
 * big shift, some outside the clip range). */
static crl_td *pg_batch(loss_fx *f, int64_t M, double shift, crl_rng *rng)
{
    crl_error e = { 0 };
    crl_td *td = crl_td_new(1, &M, &e);
    crl_tensor *obs = t_rows(M, 4, NULL, rng), *adv = t_rows(M, 1, NULL, rng), *vt = t_rows(M, 1, NULL, rng);
    ck_assert_int_eq(crl_td_set(td, "observation", obs, &e), CRL_OK);
    ck_assert_msg(f->ops->act(f->st, td, CRL_EXPLORE_RANDOM, rng, &e) == CRL_OK, "act: %s", e.message);
    /* PPO's own policy returns the log-probs, [M] as TorchRL's; A2C's and REINFORCE's do not */
    crl_tensor *lp = crl_td_get(td, "sample_log_prob");
    ck_assert(shift > 0 ? lp != NULL : true);
    if (lp)
        ck_assert(crl_tensor_ndim(lp) == 1 && crl_tensor_shape(lp)[0] == M);
    for (int64_t i = 0; lp && i < M; i++)
        crl_tensor_flat_set(lp, i, crl_tensor_flat_get(lp, i) + crl_rng_range(rng, -shift, shift));
    ck_assert_int_eq(crl_td_set(td, "advantage", adv, &e), CRL_OK);
    ck_assert_int_eq(crl_td_set(td, "value_target", vt, &e), CRL_OK);
    UNREF_ALL(obs, adv, vt);
    return td;
}

static void pg_gradients(const char *ini, bool discrete, double shift)
{
    loss_fx f;
    crl_error e = { 0 };
    ck_assert_msg(fx_open(&f, ini, discrete, &e) == CRL_OK, "%s: %s", ini, e.message);
    crl_rng rng;
    crl_rng_init(&rng, 11, 0);
    crl_td *b = pg_batch(&f, 10, shift, &rng);
    check_gradients(&f, b, 1e-2, 3e-2);
    crl_td *losses = crl_td_new(0, NULL, &e);
    ck_assert_int_eq(f.ops->forward(f.st, b, losses, &e), CRL_OK);
    ck_assert(crl_td_has(losses, "loss_objective") && crl_td_has(losses, "loss_critic") &&
              crl_td_has(losses, "loss_entropy"));
    crl_td_unref(losses);
    crl_td_unref(b);
    fx_close(&f);
}

#define PG_NET "num_cells = 16\nactivation = tanh\ninit = default\n"
START_TEST(ppo_grad_clip) { pg_gradients("[loss]\ntype = ppo\n" PG_NET, true, 0.05); }
END_TEST
START_TEST(ppo_grad_clip_outside) { pg_gradients("[loss]\ntype = ppo\nclip_epsilon = 0.1\n" PG_NET, true, 0.6); }
END_TEST
START_TEST(ppo_grad_kl) { pg_gradients("[loss]\ntype = ppo\nvariant = kl\nloss_critic_type = l2\n" PG_NET, true, 0.1); }
END_TEST
START_TEST(ppo_grad_continuous)
{
    pg_gradients("[loss]\ntype = ppo\nentropy_coef = 0\n" PG_NET, false, 0.05);
}
END_TEST
START_TEST(a2c_grad) { pg_gradients("[loss]\ntype = a2c\nnormalize_advantage = false\n" PG_NET, true, 0); }
END_TEST
START_TEST(reinforce_grad) { pg_gradients("[loss]\ntype = reinforce\n" PG_NET, true, 0); }
END_TEST

/* prepare: terminated steps do not bootstrap, truncated ones do (TD(0) targets). */
START_TEST(pg_prepare_targets)
{
    loss_fx f;
    crl_error e = { 0 };
    ck_assert_int_eq(fx_open(&f, "[loss]\ntype = a2c\nestimator = td0\ngamma = 0.5\n" PG_NET, true, &e), CRL_OK);
    int64_t T = 3;
    crl_td *td = crl_td_new(1, &T, &e);
    crl_rng rng;
    crl_rng_init(&rng, 12, 0);
    crl_tensor *obs = t_rows(T, 4, NULL, &rng), *nobs = t_rows(T, 4, NULL, &rng);
    crl_tensor *r = t_new(CRL_F32, 2, SHAPE(T, 1)), *done = t_new(CRL_BOOL, 2, SHAPE(T, 1)),
               *term = t_new(CRL_BOOL, 2, SHAPE(T, 1));
    for (int64_t i = 0; i < T; i++)
        crl_tensor_flat_set(r, i, 1.0 + (double)i);
    crl_tensor_flat_set(done, 0, 1);
    crl_tensor_flat_set(term, 0, 1);   /* step 0 terminated */
    crl_tensor_flat_set(done, 1, 1);   /* step 1 truncated */
    ck_assert_int_eq(crl_td_set(td, "observation", obs, &e), CRL_OK);
    ck_assert_int_eq(crl_td_set(td, "next.observation", nobs, &e), CRL_OK);
    ck_assert_int_eq(crl_td_set(td, "next.reward", r, &e), CRL_OK);
    ck_assert_int_eq(crl_td_set(td, "next.done", done, &e), CRL_OK);
    ck_assert_int_eq(crl_td_set(td, "next.terminated", term, &e), CRL_OK);
    /* A2C does not read the policy's log-probs (TorchRL's A2CLoss): no sample_log_prob needed */
    crl_tensor *lp = t_new(CRL_F32, 1, SHAPE(T));
    ck_assert_msg(f.ops->prepare(f.st, td, &e) == CRL_OK, "prepare: %s", e.message);
    crl_tensor *vt = crl_td_get(td, "value_target"), *nv = crl_td_get(td, "next.state_value");
    ck_assert_ptr_nonnull(vt);
    ck_assert_double_eq_tol(crl_tensor_flat_get(vt, 0), 1.0, 1e-6);
    ck_assert_double_eq_tol(crl_tensor_flat_get(vt, 1), 2.0 + 0.5 * crl_tensor_flat_get(nv, 1), 1e-5);
    ck_assert_double_eq_tol(crl_tensor_flat_get(vt, 2), 3.0 + 0.5 * crl_tensor_flat_get(nv, 2), 1e-5);
    UNREF_ALL(obs, nobs, r, done, term, lp);
    crl_td_unref(td);
    fx_close(&f);
}
END_TEST

/* ---- recurrent PPO -------------------------------------------------------------------------- */

/* Specs of an env that carries an LSTM's state (TensorDictPrimer, [1, H]) and is_init (InitTracker). */
static int fx_open_recurrent(loss_fx *f, const char *loss_ini, bool primer, int64_t H, crl_error *e)
{
    memset(f, 0, sizeof *f);
    crl_test_host_open(&f->h, "losses", loss_ini);
    fx_specs(f, true);
    crl_spec *is_init = crl_spec_categorical(2, CRL_BOOL, 2, SHAPE(1, 1), e);
    ck_assert_ptr_nonnull(is_init);
    ck_assert_int_eq(crl_spec_composite_set(f->obs, "is_init", is_init, e), CRL_OK);
    crl_spec_unref(is_init);
    for (int i = 0; primer && i < 2; i++) {
        crl_spec *s = crl_spec_unbounded(CRL_F32, 3, SHAPE(1, 1, H), e);
        ck_assert_ptr_nonnull(s);
        ck_assert_int_eq(crl_spec_composite_set(f->obs, i ? "recurrent_state_c" : "recurrent_state_h", s, e), CRL_OK);
        crl_spec_unref(s);
    }
    return crl_loss_from_config(f->h.host, f->h.cfg, "loss", f->obs, f->act, 7, &f->ops, &f->st, e);
}

/* N sequences of T steps with stored start states and an episode start inside, as the trainer's
 * sequence_length slices are: the LSTM's, the heads' gradients (through time) against finite
 * differences of the whole loss; then prepare on the collected [N, T] batch. */
/* A batch of N sequences of T steps with stored start states and episode starts (sequence 0 at its step 0,
 * sequence 1 at its step 2), acted on by the loss's policy, with advantages and value targets. */
static crl_td *rec_batch(loss_fx *f, int64_t N, int64_t T, int64_t H, bool gru, crl_rng *rng_)
{
    crl_error e = { 0 };
    crl_rng rng = *rng_;
    crl_td *b = crl_td_new(2, SHAPE(N, T), &e);
    crl_tensor *obs = t_new(CRL_F32, 3, SHAPE(N, T, 4)), *init = t_new(CRL_BOOL, 3, SHAPE(N, T, 1));
    crl_tensor *hs = t_new(CRL_F32, 4, SHAPE(N, T, 1, H)), *cs = t_new(CRL_F32, 4, SHAPE(N, T, 1, H));
    crl_tensor *adv = t_new(CRL_F32, 3, SHAPE(N, T, 1)), *vt = t_new(CRL_F32, 3, SHAPE(N, T, 1));
    crl_tensor *ts[] = { obs, hs, cs, adv, vt };
    for (size_t k = 0; k < 5; k++)
        for (int64_t i = 0; i < crl_tensor_numel(ts[k]); i++)
            crl_tensor_flat_set(ts[k], i, crl_rng_range(&rng, -1, 1) * (k == 1 || k == 2 ? 0.5 : 1));
    crl_tensor_flat_set(init, 0, 1);        /* sequence 0 starts an episode, */
    crl_tensor_flat_set(init, T + 2, 1);    /* sequence 1 starts one at its step 2 */
    ck_assert_int_eq(crl_td_set(b, "observation", obs, &e), CRL_OK);
    ck_assert_int_eq(crl_td_set(b, "is_init", init, &e), CRL_OK);
    ck_assert_int_eq(crl_td_set(b, gru ? "recurrent_state" : "recurrent_state_h", hs, &e), CRL_OK);
    if (!gru)
        ck_assert_int_eq(crl_td_set(b, "recurrent_state_c", cs, &e), CRL_OK);
    ck_assert_msg(f->ops->act(f->st, b, CRL_EXPLORE_RANDOM, &rng, &e) == CRL_OK, "act: %s", e.message);
    /* act wrote each step's next state */
    ck_assert_ptr_nonnull(crl_td_get(b, gru ? "next.recurrent_state" : "next.recurrent_state_h"));
    ck_assert_int_eq(crl_td_set(b, "advantage", adv, &e), CRL_OK);
    ck_assert_int_eq(crl_td_set(b, "value_target", vt, &e), CRL_OK);
    UNREF_ALL(obs, init, hs, cs, adv, vt);
    *rng_ = rng;
    return b;
}

START_TEST(ppo_recurrent_grad)
{
    enum { N = 3, T = 4, H = 5 };
    loss_fx f;
    crl_error e = { 0 };
    ck_assert_msg(fx_open_recurrent(&f, "[loss]\ntype = ppo\nclip_epsilon = 5\ncritic_coef = 5\nloss_critic_type = l2\n" PG_NET
                                        "[net.actor]\ntype = lstm\nhidden_size = 5\n", true, H, &e) == CRL_OK,
                  "%s", e.message);
    ck_assert_uint_eq(f.ops->num_params(f.st), 3);
    crl_rng rng;
    crl_rng_init(&rng, 21, 0);
    crl_td *b = rec_batch(&f, N, T, H, false, &rng);
    check_gradients(&f, b, 1e-2, 3e-2);
    /* The LSTM's gradient is not zero: the loss reaches it through both heads. */
    const char *name;
    crl_tensor *p, *g;
    ck_assert_int_eq(f.ops->param(f.st, 2, &name, &p, &g, &e), CRL_OK);
    ck_assert_str_eq(name, "lstm");
    double gn = 0;
    for (int64_t i = 0; i < crl_tensor_numel(g); i++)
        gn += fabs(crl_tensor_flat_get(g, i));
    ck_assert(gn > 0);
    /* A flat minibatch (no sequence_length) is refused with the fix. */
    int64_t M = N * T;
    crl_td *flat = crl_td_new(1, &M, &e);
    crl_tensor *o2 = t_rows(M, 4, NULL, &rng);
    ck_assert_int_eq(crl_td_set(flat, "observation", o2, &e), CRL_OK);
    crl_td *losses = crl_td_new(0, NULL, &e);
    ck_assert_int_eq(f.ops->forward(f.st, flat, losses, &e), CRL_E_CONFIG);
    assert_msg_has(&e, "set [train] sequence_length");
    /* prepare: values and targets of the whole [N, T] batch, V(s') from the state after each step. */
    crl_tensor *nobs = t_new(CRL_F32, 3, SHAPE(N, T, 4)), *r = t_new(CRL_F32, 3, SHAPE(N, T, 1));
    crl_tensor *done = t_new(CRL_BOOL, 3, SHAPE(N, T, 1));
    crl_tensor_fill(nobs, 0.1);
    crl_tensor_fill(r, 1);
    ck_assert_int_eq(crl_td_set(b, "next.observation", nobs, &e), CRL_OK);
    ck_assert_int_eq(crl_td_set(b, "next.reward", r, &e), CRL_OK);
    ck_assert_int_eq(crl_td_set(b, "next.done", done, &e), CRL_OK);
    ck_assert_int_eq(crl_td_set(b, "next.terminated", done, &e), CRL_OK);
    ck_assert_msg(f.ops->prepare(f.st, b, &e) == CRL_OK, "prepare: %s", e.message);
    ck_assert_ptr_nonnull(crl_td_get(b, "next.state_value"));
    ck_assert_ptr_nonnull(crl_td_get(b, "value_target"));
    UNREF_ALL(o2, nobs, r, done);
    crl_td_unref(losses);
    crl_td_unref(flat);
    crl_td_unref(b);
    fx_close(&f);
    /* Without the primer's state in the specs: the config error says what to add. */
    ck_assert_int_eq(fx_open_recurrent(&f, "[loss]\ntype = ppo\n[net.actor]\ntype = gru\nhidden_size = 5\n", false,
                                       H, &e), CRL_E_CONFIG);
    assert_msg_has(&e, "add a transform with type = TensorDictPrimer and primers.recurrent_state = float32 [1, 5] 0");
    fx_close(&f);
    ck_assert_int_eq(fx_open_recurrent(&f, "[loss]\ntype = ppo\n[net.actor]\ntype = lstm\nhidden_size = 5\n"
                                       "[net.critic]\ntype = lstm\nhidden_size = 5\n", true, H, &e), CRL_E_CONFIG);
    assert_msg_has(&e, "the critic shares the actor's recurrent network");
    fx_close(&f);
}
END_TEST

/* A2C (no ratio, no sample_log_prob) with a GRU: the same check through time. */
START_TEST(a2c_recurrent_grad)
{
    loss_fx f;
    crl_error e = { 0 };
    ck_assert_msg(fx_open_recurrent(&f, "[loss]\ntype = a2c\ncritic_coef = 5\nloss_critic_type = l2\n" PG_NET
                                        "[net.actor]\ntype = gru\nhidden_size = 4\n", false, 4, &e) == CRL_E_CONFIG,
                  "a GRU without its primer state");
    fx_close(&f);
    crl_test_host_open(&f.h, "losses", "[loss]\ntype = a2c\ncritic_coef = 5\nloss_critic_type = l2\n" PG_NET
                                       "[net.actor]\ntype = gru\nhidden_size = 4\n");
    fx_specs(&f, true);
    crl_spec *is_init = crl_spec_categorical(2, CRL_BOOL, 2, SHAPE(1, 1), &e);
    crl_spec *st = crl_spec_unbounded(CRL_F32, 3, SHAPE(1, 1, 4), &e);
    ck_assert_int_eq(crl_spec_composite_set(f.obs, "is_init", is_init, &e), CRL_OK);
    ck_assert_int_eq(crl_spec_composite_set(f.obs, "recurrent_state", st, &e), CRL_OK);
    crl_spec_unref(is_init);
    crl_spec_unref(st);
    ck_assert_msg(crl_loss_from_config(f.h.host, f.h.cfg, "loss", f.obs, f.act, 7, &f.ops, &f.st, &e) == CRL_OK, "%s",
                  e.message);
    crl_rng rng;
    crl_rng_init(&rng, 22, 0);
    crl_td *b = rec_batch(&f, 2, 5, 4, true, &rng);
    check_gradients(&f, b, 1e-2, 3e-2);
    crl_td_unref(b);
    fx_close(&f);
}
END_TEST

START_TEST(pg_bad_input)
{
    loss_fx f;
    crl_error e = { 0 };
    ck_assert_int_eq(fx_open(&f, "[loss]\ntype = ppo\n" PG_NET, true, &e), CRL_OK);
    crl_rng rng;
    crl_rng_init(&rng, 13, 0);
    crl_td *b = pg_batch(&f, 4, 0, &rng);
    ck_assert_int_eq(crl_td_del(b, "advantage", &e), CRL_OK);
    forward_fails(&f, b, CRL_E_NOT_FOUND, "advantage");
    b = pg_batch(&f, 4, 0, &rng);
    crl_tensor_flat_set(crl_td_get(b, "value_target"), 2, INFINITY);
    forward_fails(&f, b, CRL_E_RUNTIME, "not finite");
    fx_close(&f);
}
END_TEST

/* The off-policy actor-critics train each network on its own term (the
 * actor's loss goes through the critics but does not train them, the
 * critics' target goes through SAC's actor but does not train it). */
static const char *const *terms_for(const char *group)
{
    static const char *const actor[] = { "loss_actor", NULL }, *const q[] = { "loss_qvalue", "loss_value", NULL },
                             *const alpha[] = { "loss_alpha", NULL };
    if (!strcmp(group, "actor"))
        return actor_terms_only ? actor : NULL;
    if (!strncmp(group, "qvalue", 6) && group[6] >= '0' && group[6] <= '9')  /* not DQN's "qvalue" */
        return q;
    if (!strcmp(group, "log_alpha"))
        return alpha;
    return NULL;
}

/* A random batch of continuous transitions (actions in [-2, 2]). */
static crl_td *cont_batch(int64_t B, crl_rng *rng)
{
    crl_error e = { 0 };
    crl_td *td = dqn_batch(B, rng);
    crl_tensor *a = t_rows(B, 1, NULL, rng);
    for (int64_t i = 0; i < B; i++)
        crl_tensor_flat_set(a, i, 2 * crl_tensor_flat_get(a, i));
    ck_assert_int_eq(crl_td_set(td, "action", a, &e), CRL_OK);
    crl_tensor_unref(a);
    return td;
}

/* The actor-critics' gradients, each network against its own term, on
 * continuous (DDPG, TD3, SAC) or discrete (discrete SAC) transitions. */
static void ac_gradients(const char *ini, bool discrete, size_t nparams)
{
    loss_fx f;
    crl_error e = { 0 };
    ck_assert_msg(fx_open(&f, ini, discrete, &e) == CRL_OK, "%s: %s", ini, e.message);
    ck_assert_uint_eq(f.ops->num_params(f.st), nparams);
    crl_rng rng;
    crl_rng_init(&rng, 21, 0);
    crl_td *b = discrete ? dqn_batch(10, &rng) : cont_batch(10, &rng);
    actor_terms_only = true;
    check_gradients(&f, b, 1e-2, 3e-2);
    actor_terms_only = false;
    ck_assert_ptr_nonnull(crl_td_get(b, "td_error"));
    crl_td_unref(b);
    fx_close(&f);
}

#define AC_NET "num_cells = 16\nactivation = tanh\n"
START_TEST(ddpg_grad) { ac_gradients("[loss]\ntype = ddpg\n" AC_NET, false, 2); }
END_TEST
START_TEST(td3_grad) { ac_gradients("[loss]\ntype = td3\n" AC_NET, false, 3); }
END_TEST
START_TEST(sac_grad) { ac_gradients("[loss]\ntype = sac\n" AC_NET, false, 4); }
END_TEST
START_TEST(sac_fixed_alpha_grad) { ac_gradients("[loss]\ntype = sac\nfixed_alpha = true\nalpha_init = 0.2\n" AC_NET, false, 3); }
END_TEST

/* TD3 steps its actor every policy_delay-th update, and the targets with it. */
START_TEST(td3_delay)
{
    loss_fx f;
    crl_error e = { 0 };
    ck_assert_int_eq(fx_open(&f, "[loss]\ntype = td3\npolicy_delay = 3\n" AC_NET, false, &e), CRL_OK);
    int active = 0;
    for (int step = 0; step < 9; step++) {
        active += f.ops->param_active(f.st, 0);
        ck_assert(f.ops->param_active(f.st, 1) && f.ops->param_active(f.st, 2));
        ck_assert_int_eq(f.ops->update(f.st, &e), CRL_OK);
    }
    ck_assert_int_eq(active, 3);
    fx_close(&f);
}
END_TEST

START_TEST(ac_bad_input)
{
    loss_fx f;
    crl_error e = { 0 };
    ck_assert_int_eq(fx_open(&f, "[loss]\ntype = sac\n", true, &e), CRL_E_INVALID);
    assert_msg_has(&e, "continuous action");
    fx_close(&f);
    ck_assert_int_eq(fx_open(&f, "[loss]\ntype = td3\n" AC_NET, false, &e), CRL_OK);
    crl_rng rng;
    crl_rng_init(&rng, 22, 0);
    crl_td *b = cont_batch(4, &rng);
    ck_assert_int_eq(crl_td_del(b, "next.observation", &e), CRL_OK);
    forward_fails(&f, b, CRL_E_NOT_FOUND, "next.observation");
    forward_fails(&f, with_rows(cont_batch(4, &rng), "action", 4, 2, &rng), CRL_E_SHAPE, "'action'");
    b = cont_batch(4, &rng);
    crl_tensor_flat_set(crl_td_get(b, "next.reward"), 0, NAN);
    forward_fails(&f, b, CRL_E_RUNTIME, "not finite");
    fx_close(&f);
}
END_TEST

START_TEST(dsac_grad) { ac_gradients("[loss]\ntype = discrete_sac\n" AC_NET, true, 4); }
END_TEST
START_TEST(dsac_fixed_alpha_grad) { ac_gradients("[loss]\ntype = discrete_sac\nfixed_alpha = true\n" AC_NET, true, 3); }
END_TEST

START_TEST(dsac_bad_input)
{
    loss_fx f;
    crl_error e = { 0 };
    ck_assert_int_eq(fx_open(&f, "[loss]\ntype = discrete_sac\n", false, &e), CRL_E_INVALID);
    assert_msg_has(&e, "discrete action");
    fx_close(&f);
    ck_assert_int_eq(fx_open(&f, "[loss]\ntype = discrete_sac\n" AC_NET, true, &e), CRL_OK);
    crl_rng rng;
    crl_rng_init(&rng, 32, 0);
    crl_td *b = dqn_batch(4, &rng);
    crl_tensor_flat_set(crl_td_get(b, "action"), 2, 7);
    forward_fails(&f, b, CRL_E_RANGE, "outside [0, 2)");
    fx_close(&f);
}
END_TEST

/* ---- discrete action encodings ---------------------------------------------------- */

/* fx_open with the 2-way action as OneHot int64 [1, 2] (categorical_action_encoding = false) instead of
 * Categorical. */
static int fx_open_onehot(loss_fx *f, const char *loss_ini, crl_error *e)
{
    memset(f, 0, sizeof *f);
    crl_test_host_open(&f->h, "losses", loss_ini);
    fx_specs(f, true);
    crl_spec_unref(f->act);
    f->act = crl_spec_composite_of(1, "action", crl_spec_onehot(2, CRL_I64, 2, SHAPE(1, 2), e), e);
    ck_assert_ptr_nonnull(f->act);
    return crl_loss_from_config(f->h.host, f->h.cfg, "loss", f->obs, f->act, 7, &f->ops, &f->st, e);
}

/* A copy of batch with its index actions as one-hot int64 [B, 2] rows. */
static crl_td *as_onehot(crl_td *batch)
{
    crl_error e = { 0 };
    crl_td *td = crl_td_clone(batch, &e);
    crl_tensor *idx = crl_td_get(batch, "action");
    int64_t B = crl_tensor_numel(idx);
    crl_tensor *oh = t_new(CRL_I64, 2, SHAPE(B, 2));
    crl_tensor_fill(oh, 0);
    for (int64_t i = 0; i < B; i++)
        crl_tensor_flat_set(oh, i * 2 + (int64_t)crl_tensor_flat_get(idx, i), 1);
    ck_assert_int_eq(crl_td_set(td, "action", oh, &e), CRL_OK);
    crl_tensor_unref(oh);
    return td;
}

/* Every loss term of a forward, in key order. */
static void forward_terms(loss_fx *f, crl_td *batch, double *out, size_t *n)
{
    crl_error e = { 0 };
    crl_td *losses = crl_td_new(0, NULL, &e);
    ck_assert_msg(f->ops->forward(f->st, batch, losses, &e) == CRL_OK, "forward: %s", e.message);
    *n = crl_td_len(losses);
    ck_assert_uint_le(*n, 8);
    for (size_t i = 0; i < *n; i++)
        out[i] = crl_tensor_flat_get(crl_td_tensor_at(losses, i), 0);
    crl_td_unref(losses);
}

/* DQN, discrete SAC, PPO and A2C give the same losses on one-hot actions as on their indices, and their
 * policies write the env's encoding; a one-hot row that is none is refused. */
START_TEST(discrete_encodings)
{
    static const char *const inis[] = {
        "[loss]\ntype = dqn\nnum_cells = 8\n",
        "[loss]\ntype = discrete_sac\n" AC_NET,
        "[loss]\ntype = ppo\n" PG_NET,
        "[loss]\ntype = a2c\n" PG_NET,
    };
    for (size_t k = 0; k < G_N_ELEMENTS(inis); k++) {
        loss_fx ci, oh;
        crl_error e = { 0 };
        ck_assert_msg(fx_open(&ci, inis[k], true, &e) == CRL_OK, "%s: %s", inis[k], e.message);
        ck_assert_msg(fx_open_onehot(&oh, inis[k], &e) == CRL_OK, "%s one-hot: %s", inis[k], e.message);
        crl_rng rng;
        crl_rng_init(&rng, 40 + k, 0);
        bool pg = k >= 2;
        /* only PPO's policy returns the log-probs it can shift */
        crl_td *b = pg ? pg_batch(&ci, 8, k == 2 ? 0.05 : 0.0, &rng) : dqn_batch(8, &rng);
        crl_td *bo = as_onehot(b);
        double lc[8], lo[8];
        size_t nc, no;
        forward_terms(&ci, b, lc, &nc);
        forward_terms(&oh, bo, lo, &no);
        ck_assert_uint_eq(nc, no);
        for (size_t i = 0; i < nc; i++)
            ck_assert_msg(lc[i] == lo[i], "%s term %zu: %.9g (indices) != %.9g (one-hot)", inis[k], i, lc[i], lo[i]);
        /* The policy writes the env's encoding. */
        crl_td *obs = crl_td_new(1, SHAPE(8), &e);
        ck_assert_int_eq(crl_td_set(obs, "observation", crl_td_get(b, "observation"), &e), CRL_OK);
        ck_assert_msg(oh.ops->act(oh.st, obs, CRL_EXPLORE_MODE, &rng, &e) == CRL_OK, "act: %s", e.message);
        crl_tensor *a = crl_td_get(obs, "action");
        ck_assert_int_eq(crl_tensor_ndim(a), 2);
        ck_assert_int_eq(crl_tensor_shape(a)[1], 2);
        for (int64_t r = 0; r < 8; r++)
            ck_assert(crl_tensor_flat_get(a, 2 * r) + crl_tensor_flat_get(a, 2 * r + 1) == 1);
        crl_td_unref(obs);
        /* A row with no one in it is no action. */
        crl_tensor_flat_set(crl_td_get(bo, "action"), 2 * 3 + (int64_t)crl_tensor_flat_get(crl_td_get(b, "action"), 3), 0);
        crl_td *losses = crl_td_new(0, NULL, &e);
        ck_assert_int_eq(oh.ops->forward(oh.st, bo, losses, &e), CRL_E_RANGE);
        ck_assert_msg(strstr(e.message, "row 3") || strstr(e.message, "action"), "%s", e.message);
        crl_td_unref(losses);
        crl_td_unref(b);
        crl_td_unref(bo);
        fx_close(&ci);
        fx_close(&oh);
    }
}
END_TEST

/* ---- losses over the user's own modules (crl_loss_from_modules) ------------------------------ */

/* What a user builds for a loss: the networks, the actor and the value module. */
typedef struct user_nets {
    crl_mlp *anet, *qnet;
    crl_spec *spec;
    crl_det_actor *det;
    crl_prob_actor *prob;
    crl_qvalue_actor *qa;
    crl_tdmodule *value;
    crl_loss_modules m;
} user_nets;

/* Networks over a 4-feature "observation" for loss `type`: a Bounded [-2, 2] action of 1 dim, or 2 classes. */
static void user_nets_build(user_nets *u, const char *type)
{
    crl_error e = { 0 };
    memset(u, 0, sizeof *u);
    u->m.struct_size = sizeof u->m;
    bool discrete = !strcmp(type, "dqn") || !strcmp(type, "discrete_sac") || !strcmp(type, "ppo") ||
                    !strcmp(type, "a2c") || !strcmp(type, "reinforce");
    bool qsa = !strcmp(type, "ddpg") || !strcmp(type, "td3") || !strcmp(type, "sac");
    const int64_t cells[] = { 8 };
    crl_rng rng;
    crl_rng_init(&rng, 5, 0);
    u->spec = discrete ? crl_spec_categorical(2, CRL_I64, 1, SHAPE(1), &e)
                       : crl_spec_bounded(CRL_F32, 1, SHAPE(1), -2, 2, &e);
    ck_assert_msg(u->spec != NULL, "%s", e.message);
    int64_t aout = discrete ? 2 : !strcmp(type, "sac") ? 2 : 1;
    u->anet = crl_mlp_new("policy", 4, aout, cells, 1, CRL_ACT_TANH, false, &rng, &e);
    u->qnet = crl_mlp_new("critic", qsa ? 5 : 4, !strcmp(type, "discrete_sac") || !strcmp(type, "dqn") ? 2 : 1, cells, 1, CRL_ACT_TANH, false,
                          &rng, &e);
    ck_assert(u->anet && u->qnet);
    const char *obs[] = { "observation", NULL }, *obs_act[] = { "observation", "action", NULL };
    if (!strcmp(type, "dqn")) {
        crl_mlp_unref(u->anet);
        u->anet = NULL;
        u->qa = u->m.qvalue_actor = crl_qvalue_actor_new(u->qnet, obs, u->spec, &e);
        ck_assert_msg(u->qa != NULL, "%s", e.message);
        return;
    }
    if (!strcmp(type, "ddpg") || !strcmp(type, "td3"))
        u->det = u->m.det_actor = crl_det_actor_new(u->anet, obs, u->spec, &e);
    else
        u->prob = u->m.prob_actor = crl_prob_actor_new(u->anet, obs,
                                                       discrete ? CRL_DIST_CATEGORICAL : CRL_DIST_TANH_NORMAL,
                                                       u->spec, &e);
    ck_assert_msg(u->det || u->prob, "%s", e.message);
    crl_prob_actor_set_return_log_prob(u->prob, !strcmp(type, "ppo"));
    u->value = u->m.value = crl_tdmodule_new(u->qnet, qsa ? obs_act : obs,
                                             qsa ? "state_action_value" : "state_value", &e);
    ck_assert_msg(u->value != NULL, "%s", e.message);
}

static void user_nets_free(user_nets *u)
{
    crl_det_actor_free(u->det);
    crl_prob_actor_free(u->prob);
    crl_qvalue_actor_free(u->qa);
    crl_tdmodule_free(u->value);
    crl_mlp_unref(u->anet);
    crl_mlp_unref(u->qnet);
    crl_spec_unref(u->spec);
}

static int fx_open_modules(loss_fx *f, const char *type, const char *const *kv, const crl_loss_modules *m,
                           crl_error *e)
{
    memset(f, 0, sizeof *f);
    crl_test_host_open(&f->h, "losses", "");
    return crl_loss_from_modules(f->h.host, type, kv, m, 7, &f->ops, &f->st, e);
}

/* TorchRL's "Objectives" demo: DDPGLoss(actor, value) on a batch with next.done and no next.terminated;
 * the output has loss_actor, loss_value, pred_value, target_value, their maxima and td_error. */
START_TEST(ddpg_user_modules)
{
    user_nets u;
    user_nets_build(&u, "ddpg");
    loss_fx f;
    crl_error e = { 0 };
    const char *kv[] = { "gamma = 0.99", NULL };
    ck_assert_msg(fx_open_modules(&f, "ddpg", kv, &u.m, &e) == CRL_OK, "%s", e.message);
    /* the loss trains the user's networks in place */
    const char *name;
    crl_tensor *p, *g;
    ck_assert_int_eq(f.ops->param(f.st, 0, &name, &p, &g, &e), CRL_OK);
    ck_assert_ptr_eq(p, crl_mlp_params_get(u.anet));
    ck_assert_int_eq(f.ops->param(f.st, 1, &name, &p, &g, &e), CRL_OK);
    ck_assert_ptr_eq(p, crl_mlp_params_get(u.qnet));
    int64_t B = 10;
    crl_rng rng;
    crl_rng_init(&rng, 40, 0);
    crl_td *b = cont_batch(B, &rng);
    crl_tensor *done = crl_tensor_clone(crl_td_get(b, "next.terminated"), &e);
    crl_tensor_fill(done, 0);
    crl_tensor_flat_set(done, 3, 1);
    ck_assert_int_eq(crl_td_del(b, "next.terminated", &e), CRL_OK);
    ck_assert_int_eq(crl_td_set(b, "next.done", done, &e), CRL_OK);
    crl_td *losses = crl_td_new(0, NULL, &e);
    ck_assert_msg(f.ops->forward(f.st, b, losses, &e) == CRL_OK, "forward: %s", e.message);
    static const char *const scalars[] = { "loss_actor", "loss_value", "pred_value_max", "target_value_max" },
                             *const vecs[] = { "pred_value", "target_value", "td_error" };
    for (int i = 0; i < 4; i++)
        ck_assert_msg(crl_td_get(losses, scalars[i]) && crl_tensor_ndim(crl_td_get(losses, scalars[i])) == 0, "%s",
                      scalars[i]);
    for (int i = 0; i < 3; i++) {
        crl_tensor *t = crl_td_get(losses, vecs[i]);
        ck_assert_msg(t && crl_tensor_ndim(t) == 1 && crl_tensor_shape(t)[0] == B, "%s", vecs[i]);
    }
    ck_assert_uint_eq(crl_td_len(losses), 7);
    ck_assert_ptr_nonnull(crl_td_get(b, "td_error"));
    /* against the user's own networks: pred = Q(s, a), target = r + 0.99 (1 - done) Q(s', mu(s')) */
    crl_tensor *pred = crl_td_get(losses, "pred_value"), *tgt = crl_td_get(losses, "target_value"),
               *tde = crl_td_get(losses, "td_error");
    crl_td *nx = crl_td_new(1, &B, &e);
    ck_assert_int_eq(crl_td_set(nx, "observation", crl_td_get(b, "next.observation"), &e), CRL_OK);
    ck_assert_int_eq(crl_det_actor_act(u.det, nx, CRL_EXPLORE_MODE, NULL, &e), CRL_OK);
    crl_tensor *x = t_new(CRL_F32, 2, SHAPE(B, 5)), *q = t_new(CRL_F32, 2, SHAPE(B, 1)),
               *nq = t_new(CRL_F32, 2, SHAPE(B, 1));
    for (int pass = 0; pass < 2; pass++) {
        crl_tensor *o = crl_td_get(b, pass ? "next.observation" : "observation"),
                   *a = pass ? crl_td_get(nx, "action") : crl_td_get(b, "action");
        for (int64_t r = 0; r < B; r++) {
            for (int j = 0; j < 4; j++)
                crl_tensor_flat_set(x, r * 5 + j, crl_tensor_flat_get(o, r * 4 + j));
            crl_tensor_flat_set(x, r * 5 + 4, crl_tensor_flat_get(a, r));
        }
        ck_assert_int_eq(crl_mlp_infer(u.qnet, x, pass ? nq : q, &e), CRL_OK);
    }
    double pmax = -INFINITY, tmax = -INFINITY;
    for (int64_t r = 0; r < B; r++) {
        double want = crl_tensor_flat_get(crl_td_get(b, "next.reward"), r) +
                      (r == 3 ? 0.0 : 0.99 * crl_tensor_flat_get(nq, r));
        assert_close(crl_tensor_flat_get(pred, r), crl_tensor_flat_get(q, r), 1e-6, 1e-6, "pred_value");
        assert_close(crl_tensor_flat_get(tgt, r), want, 1e-5, 1e-5, "target_value");
        assert_close(crl_tensor_flat_get(tde, r), fabs(crl_tensor_flat_get(q, r) - want), 1e-5, 1e-5, "td_error");
        pmax = fmax(pmax, crl_tensor_flat_get(pred, r));
        tmax = fmax(tmax, crl_tensor_flat_get(tgt, r));
    }
    assert_close(crl_tensor_flat_get(crl_td_get(losses, "pred_value_max"), 0), pmax, 0, 0, "pred_value_max");
    assert_close(crl_tensor_flat_get(crl_td_get(losses, "target_value_max"), 0), tmax, 0, 0, "target_value_max");
    /* act is the user's actor as it is */
    crl_td *obs = crl_td_new(1, &B, &e);
    ck_assert_int_eq(crl_td_set(obs, "observation", crl_td_get(b, "observation"), &e), CRL_OK);
    ck_assert_int_eq(f.ops->act(f.st, obs, CRL_EXPLORE_MODE, NULL, &e), CRL_OK);
    ck_assert_int_eq(crl_td_set(nx, "observation", crl_td_get(b, "observation"), &e), CRL_OK);
    ck_assert_int_eq(crl_det_actor_act(u.det, nx, CRL_EXPLORE_MODE, NULL, &e), CRL_OK);
    for (int64_t r = 0; r < B; r++)
        ck_assert(crl_tensor_flat_get(crl_td_get(obs, "action"), r) == crl_tensor_flat_get(crl_td_get(nx, "action"), r));
    /* neither next.terminated nor next.done: refused, naming both */
    ck_assert_int_eq(crl_td_del(b, "next.done", &e), CRL_OK);
    ck_assert_int_eq(f.ops->forward(f.st, b, losses, &e), CRL_E_NOT_FOUND);
    assert_msg_has(&e, "neither 'next.terminated' nor 'next.done'");
    UNREF_ALL(done, x, q, nq);
    crl_td_unref(nx);
    crl_td_unref(obs);
    crl_td_unref(losses);
    crl_td_unref(b);
    fx_close(&f);
    user_nets_free(&u);
}
END_TEST

/* Every loss that takes user modules: gradients of its loss terms against finite differences. */
START_TEST(user_modules_grad)
{
    static const char *const types[] = { "ddpg", "td3", "sac", "discrete_sac", "dqn", "ppo", "a2c", "reinforce" };
    static const size_t nparams[] = { 2, 3, 4, 4, 1, 2, 2, 2 };
    for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
        user_nets u;
        user_nets_build(&u, types[t]);
        loss_fx f;
        crl_error e = { 0 };
        ck_assert_msg(fx_open_modules(&f, types[t], NULL, &u.m, &e) == CRL_OK, "%s: %s", types[t], e.message);
        ck_assert_uint_eq(f.ops->num_params(f.st), nparams[t]);
        crl_rng rng;
        crl_rng_init(&rng, 41, 0);
        bool pg = !strcmp(types[t], "ppo") || !strcmp(types[t], "a2c") || !strcmp(types[t], "reinforce");
        crl_td *b = pg ? pg_batch(&f, 12, !strcmp(types[t], "ppo") ? 0.1 : 0, &rng)
                       : (u.det || (u.prob && crl_prob_actor_kind(u.prob) == CRL_DIST_TANH_NORMAL)) ? cont_batch(10, &rng)
                                                                                                  : dqn_batch(10, &rng);
        actor_terms_only = !pg;
        check_gradients(&f, b, 1e-2, 3e-2);
        actor_terms_only = false;
        ck_assert(pg || crl_td_get(b, "td_error"));
        if (!strcmp(types[t], "td3")) {   /* TD3Loss's extra outputs: batch means */
            crl_tensor_fill(crl_td_get(b, "next.terminated"), 0);
            crl_td *losses = crl_td_new(0, NULL, &e);
            ck_assert_int_eq(f.ops->forward(f.st, b, losses, &e), CRL_OK);
            static const char *const keys[] = { "pred_value", "target_value", "next_state_value",
                                                "state_action_value_actor" };
            double v[4];
            for (int k = 0; k < 4; k++) {
                crl_tensor *x = crl_td_get(losses, keys[k]);
                ck_assert_msg(x && crl_tensor_ndim(x) == 0, "%s", keys[k]);
                v[k] = crl_tensor_flat_get(x, 0);
            }
            /* nothing terminated: target_value = mean(r) + gamma next_state_value */
            double rsum = 0, qa = 0;
            for (int64_t r = 0; r < 10; r++)
                rsum += crl_tensor_flat_get(crl_td_get(b, "next.reward"), r);
            assert_close(v[1], rsum / 10 + 0.99 * v[2], 1e-5, 1e-5, "target_value");
            /* state_action_value_actor = mean Q_0(s, mu(s)) through the user's own networks */
            crl_td *cur = crl_td_new(1, (const int64_t[]){ 10 }, &e);
            ck_assert_int_eq(crl_td_set(cur, "observation", crl_td_get(b, "observation"), &e), CRL_OK);
            ck_assert_int_eq(crl_det_actor_act(u.det, cur, CRL_EXPLORE_MODE, NULL, &e), CRL_OK);
            ck_assert_int_eq(crl_tdmodule_infer(u.value, cur, &e), CRL_OK);
            for (int64_t r = 0; r < 10; r++)
                qa += crl_tensor_flat_get(crl_td_get(cur, "state_action_value"), r) / 10;
            assert_close(v[3], qa, 1e-5, 1e-5, "state_action_value_actor");
            crl_td_unref(cur);
            crl_td_unref(losses);
        }
        crl_td_unref(b);
        fx_close(&f);
        user_nets_free(&u);
    }
}
END_TEST

/* What crl_loss_from_modules refuses, each with what to do. */
START_TEST(user_modules_bad_input)
{
    user_nets u, v;
    user_nets_build(&u, "ddpg");
    loss_fx f;
    crl_error e = { 0 };
    crl_loss_modules m = u.m;
    m.value = NULL;
    ck_assert_int_eq(fx_open_modules(&f, "ddpg", NULL, &m, &e), CRL_E_INVALID);
    ck_assert_msg(!strncmp(e.message, "loss 'ddpg': give det_actor (a crl_det_actor) and value", 55), "%s", e.message);
    fx_close(&f);
    m = u.m;
    m.struct_size = 0;
    ck_assert_int_eq(fx_open_modules(&f, "ddpg", NULL, &m, &e), CRL_E_INVALID);
    assert_msg_has(&e, "set it to sizeof(crl_loss_modules)");
    fx_close(&f);
    ck_assert_int_eq(fx_open_modules(&f, "ddgp", NULL, &u.m, &e), CRL_E_NOT_FOUND);
    fx_close(&f);
    const char *cells[] = { "num_cells = 16", NULL }, *bad[] = { "gamma", NULL }, *typed[] = { "type=dqn", NULL },
               *unknown[] = { "gama = 0.9", NULL };
    ck_assert_int_eq(fx_open_modules(&f, "ddpg", cells, &u.m, &e), CRL_E_CONFIG);
    assert_msg_has(&e, "'num_cells' is decided by the modules the loss was given");
    fx_close(&f);
    ck_assert_int_eq(fx_open_modules(&f, "ddpg", bad, &u.m, &e), CRL_E_CONFIG);
    assert_msg_has(&e, "argument 1: 'gamma' is not key=value");
    fx_close(&f);
    ck_assert_int_eq(fx_open_modules(&f, "ddpg", typed, &u.m, &e), CRL_E_CONFIG);
    assert_msg_has(&e, "'type' is the loss argument");
    fx_close(&f);
    ck_assert_int_eq(fx_open_modules(&f, "ddpg", unknown, &u.m, &e), CRL_E_CONFIG);
    assert_msg_has(&e, "gama");
    assert_msg_has(&e, "loss 'ddpg': ");
    fx_close(&f);
    /* a value module reading other keys, or of the wrong size */
    crl_error e2 = { 0 };
    const char *obs_only[] = { "observation", NULL };
    crl_tdmodule *wrong = crl_tdmodule_new(u.qnet, obs_only, "state_action_value", &e2);
    m = u.m;
    m.value = wrong;
    ck_assert_int_eq(fx_open_modules(&f, "td3", NULL, &m, &e), CRL_E_INVALID);
    assert_msg_has(&e, "reads 1 key ('observation'); it must read the actor's 'observation', then 'action'");
    fx_close(&f);
    crl_tdmodule_free(wrong);
    user_nets_build(&v, "ppo");   /* its critic maps 4 features, not 5 */
    const char *obs_act[] = { "observation", "action", NULL };
    wrong = crl_tdmodule_new(v.qnet, obs_act, "state_action_value", &e2);
    m.value = wrong;
    ck_assert_int_eq(fx_open_modules(&f, "ddpg", NULL, &m, &e), CRL_E_SHAPE);
    assert_msg_has(&e, "maps 4 features to 1; Q(s, a) here maps 5 (observation 4 + action 1) to 1");
    fx_close(&f);
    crl_tdmodule_free(wrong);
    /* the wrong actor kinds */
    m = v.m;   /* a Categorical actor */
    ck_assert_int_eq(fx_open_modules(&f, "sac", NULL, &m, &e), CRL_E_INVALID);
    assert_msg_has(&e, "SAC needs a TanhNormal actor");
    fx_close(&f);
    ck_assert_int_eq(fx_open_modules(&f, "dqn", NULL, &m, &e), CRL_E_INVALID);
    assert_msg_has(&e, "give qvalue_actor");
    fx_close(&f);
    m.value = u.value;   /* Q(s, a) [5 -> 1] where discrete SAC wants Q(s, .) */
    ck_assert_int_eq(fx_open_modules(&f, "discrete_sac", NULL, &m, &e), CRL_E_INVALID);
    assert_msg_has(&e, "reads 2 keys");
    fx_close(&f);
    /* PPO without the collecting policy's log-probs: prepare says how to get them */
    crl_prob_actor_set_return_log_prob(v.prob, false);
    ck_assert_int_eq(fx_open_modules(&f, "ppo", NULL, &v.m, &e), CRL_OK);
    int64_t T = 4;
    crl_td *td = crl_td_new(1, &T, &e);
    crl_rng rng;
    crl_rng_init(&rng, 43, 0);
    crl_tensor *o = t_rows(T, 4, NULL, &rng);
    ck_assert_int_eq(crl_td_set(td, "observation", o, &e), CRL_OK);
    ck_assert_int_eq(f.ops->act(f.st, td, CRL_EXPLORE_RANDOM, &rng, &e), CRL_OK);
    ck_assert(!crl_td_has(td, "sample_log_prob"));
    ck_assert_int_eq(f.ops->prepare(f.st, td, &e), CRL_E_NOT_FOUND);
    assert_msg_has(&e, "an actor that has return_log_prob set");
    crl_tensor_unref(o);
    crl_td_unref(td);
    fx_close(&f);
    user_nets_free(&v);
    user_nets_free(&u);
}
END_TEST

/* A loss over user modules checkpoints what it trains: the user's networks, its targets and twin critic. */
START_TEST(user_modules_save_load)
{
    static const char *const types[] = { "ddpg", "td3", "sac", "discrete_sac", "dqn", "ppo" };
    char path[] = "/tmp/crl-test-loss-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
        user_nets u;
        user_nets_build(&u, types[t]);
        loss_fx f;
        crl_error e = { 0 };
        ck_assert_msg(fx_open_modules(&f, types[t], NULL, &u.m, &e) == CRL_OK, "%s: %s", types[t], e.message);
        crl_rng rng;
        crl_rng_init(&rng, 45, 0);
        crl_td *b = !strcmp(types[t], "ppo") ? pg_batch(&f, 12, 0.1, &rng)
                    : !strcmp(types[t], "dqn") || !strcmp(types[t], "discrete_sac") ? dqn_batch(8, &rng)
                                                                                    : cont_batch(8, &rng);
        double before = loss_of(&f, b);
        save_loss(&f, path);
        /* every trained vector changes (the user's networks among them), then the load restores them */
        size_t np = f.ops->num_params(f.st);
        for (size_t k = 0; k < np; k++) {
            const char *name;
            crl_tensor *p, *g;
            ck_assert_int_eq(f.ops->param(f.st, k, &name, &p, &g, &e), CRL_OK);
            crl_tensor_fill(p, 0.05);
        }
        ck_assert_msg(loss_of(&f, b) != before, "%s", types[t]);
        ck_assert_msg(load_loss(&f, path, &e) == CRL_OK, "%s: %s", types[t], e.message);
        ck_assert_msg(loss_of(&f, b) == before, "%s", types[t]);
        crl_td_unref(b);
        fx_close(&f);
        user_nets_free(&u);
    }
    /* the section names are those of the loss's own networks: a config-built discrete SAC of the same
     * sizes loads into one over user modules */
    loss_fx c, f;
    crl_error e = { 0 };
    ck_assert_int_eq(fx_open(&c, "[loss]\ntype = discrete_sac\nnum_cells = 8\nactivation = tanh\n", true, &e), CRL_OK);
    save_loss(&c, path);
    user_nets u;
    user_nets_build(&u, "discrete_sac");
    ck_assert_int_eq(fx_open_modules(&f, "discrete_sac", NULL, &u.m, &e), CRL_OK);
    ck_assert_msg(load_loss(&f, path, &e) == CRL_OK, "%s", e.message);
    crl_rng rng;
    crl_rng_init(&rng, 46, 0);
    crl_td *b = dqn_batch(8, &rng);
    ck_assert(loss_of(&f, b) == loss_of(&c, b));
    crl_td_unref(b);
    fx_close(&f);
    fx_close(&c);
    user_nets_free(&u);
    g_unlink(path);
}
END_TEST

/* The config path too: a batch without next.terminated reads next.done (TorchRL's fallback). */
START_TEST(done_fallback)
{
    loss_fx f;
    crl_error e = { 0 };
    ck_assert_int_eq(fx_open(&f, "[loss]\ntype = dqn\nnum_cells = 16\n", true, &e), CRL_OK);
    crl_rng rng;
    crl_rng_init(&rng, 44, 0);
    crl_td *b = dqn_batch(6, &rng);
    double with_term = loss_of(&f, b);
    crl_tensor *t = crl_td_get(b, "next.terminated");
    crl_tensor_ref(t);
    ck_assert_int_eq(crl_td_del(b, "next.terminated", &e), CRL_OK);
    ck_assert_int_eq(crl_td_set(b, "next.done", t, &e), CRL_OK);
    ck_assert(loss_of(&f, b) == with_term);
    crl_tensor_fill(crl_td_get(b, "next.done"), 0);
    ck_assert(loss_of(&f, b) != with_term);
    crl_tensor_unref(t);
    crl_td_unref(b);
    fx_close(&f);
}
END_TEST

/* ---- a conv encoder with MaxPool2d layers ([net.NAME] pool_kernel_sizes, ...) ------------------------ */

/* DQN on one env's [2, 9, 9] observation, [net.q] an MLP fed by the conv section `enc` (its keys given). */
static int fx_open_pool(loss_fx *f, const char *enc, crl_error *e)
{
    memset(f, 0, sizeof *f);
    char *ini = g_strdup_printf("[loss]\ntype = dqn\nactivation = tanh\n[net.q]\nencoder = enc\nnum_cells = 6\n"
                                "[net.enc]\ntype = conv\nactivation = tanh\n%s", enc);
    crl_test_host_open(&f->h, "losses", ini);
    g_free(ini);
    f->obs = crl_spec_composite_of(1, "observation", crl_spec_unbounded(CRL_F32, 4, SHAPE(1, 2, 9, 9), e), e);
    f->act = crl_spec_composite_of(1, "action", crl_spec_categorical(2, CRL_I64, 1, SHAPE(1), e), e);
    ck_assert_msg(f->obs && f->act, "specs: %s", e->message);
    return crl_loss_from_config(f->h.host, f->h.cfg, "loss", f->obs, f->act, 7, &f->ops, &f->st, e);
}

/* dqn_batch with [B, 2, 9, 9] observations. */
static crl_td *pool_batch(int64_t B, crl_rng *rng)
{
    crl_error e = { 0 };
    crl_td *td = dqn_batch(B, rng);
    for (const char *const *k = (const char *const[]){ "observation", "next.observation", NULL }; *k; k++) {
        crl_tensor *t = t_new(CRL_F32, 4, SHAPE(B, 2, 9, 9));
        for (int64_t i = 0; i < crl_tensor_numel(t); i++)
            crl_tensor_flat_set(t, i, crl_rng_range(rng, -1, 1));
        ck_assert_int_eq(crl_td_set(td, *k, t, &e), CRL_OK);
        crl_tensor_unref(t);
    }
    return td;
}

/* Conv 3x3/1 pad 1 (9x9), a 2x2 pool (stride = kernel: 4x4), conv 2x2/1 (3x3), a 3x3 pool stride 1 padding 1
 * (3x3): the config-built network's parameters are the convs' and the head's only (pools have none), its
 * gradients match finite differences of the loss, and one step down the gradient lowers the loss. */
START_TEST(dqn_conv_pools)
{
    loss_fx f;
    crl_error e = { 0 };
    ck_assert_msg(fx_open_pool(&f, "num_cells = 3, 4\nkernel_sizes = 3, 2\nstrides = 1\npaddings = 1, 0\n"
                                   "pool_kernel_sizes = 2, 3\npool_strides = 0, 1\npool_paddings = 0, 1\n", &e) == CRL_OK,
                  "%s", e.message);
    const char *name;
    crl_tensor *p, *g;
    ck_assert_int_eq(f.ops->param(f.st, 0, &name, &p, &g, &e), CRL_OK);
    /* conv1 3*2*3*3 + 3, conv2 4*3*2*2 + 4, head 36*6 + 6, output 6*2 + 2 (without the pools: 256*6 + 6) */
    ck_assert_int_eq(crl_tensor_numel(p), 57 + 52 + 222 + 14);
    crl_rng rng;
    crl_rng_init(&rng, 11, 0);
    crl_td *b = pool_batch(6, &rng);
    check_gradients(&f, b, 1e-3, 2e-2);
    /* one plain gradient step of length 1e-2 */
    crl_tensor_fill(g, 0);
    double before = loss_of(&f, b), norm = 0;
    float *pv = crl_tensor_data(p);
    const float *gv = crl_tensor_data(g);
    for (int64_t i = 0; i < crl_tensor_numel(p); i++)
        norm += (double)gv[i] * gv[i];
    ck_assert(norm > 0);
    for (int64_t i = 0; i < crl_tensor_numel(p); i++)
        pv[i] -= (float)(1e-2 * gv[i] / sqrt(norm));
    ck_assert_double_lt(loss_of(&f, b), before);
    crl_td_unref(b);
    fx_close(&f);
}
END_TEST

/* Pool keys refused with the key and the test.ini line named: list lengths, values, pool keys without a pool,
 * a value for a layer without one, the padding rule, a pool whose window no longer fits, another type's keys. */
START_TEST(dqn_conv_pool_errors)
{
    static const struct { const char *enc, *msg; } bad[] = {
        { "num_cells = 3, 4\nkernel_sizes = 3\nstrides = 1\npool_kernel_sizes = 2, 2, 2\n",
          "[net.enc] pool_kernel_sizes has 3 values for 2 layers" },
        { "num_cells = 3\nkernel_sizes = 3\nstrides = 1\npool_kernel_sizes = 1.5\n", "pool_kernel_sizes: 1.5 is not a whole number" },
        { "num_cells = 3\nkernel_sizes = 3\nstrides = 1\npool_strides = -1\n", "pool_strides: -1 is not a whole number in 0..1024" },
        { "num_cells = 3\nkernel_sizes = 3\nstrides = 1\npool_strides = 2\n", "pool_strides: no layer has a pool" },
        { "num_cells = 3, 4\nkernel_sizes = 3\nstrides = 1\npool_kernel_sizes = 2, 0\npool_paddings = 1, 1\n",
          "pool_paddings: layer 2 has no pool (pool_kernel_sizes is 0 there), so its value must be 0, not 1" },
        { "num_cells = 3\nkernel_sizes = 3\nstrides = 1\npool_kernel_sizes = 2\npool_paddings = 2\n",
          "pool_paddings: 2 on a 2x2 pool (layer 1) is more than half its kernel size; at most 1" },
        { "num_cells = 3, 4\nkernel_sizes = 3\nstrides = 2, 1\npool_kernel_sizes = 0, 3\n",
          "test.ini:15: [net.enc] pool_kernel_sizes: on the observation [2, 9, 9] of network 'qvalue', the pool "
          "after conv layer 2: a 3x3 window (padding 0) does not fit its 2x2 input" },
        { "num_cells = 3, 4\nkernel_sizes = 3\nstrides = 1\npool_kernel_sizes = 4\n",
          "[net.enc]: on the observation [2, 9, 9] of network 'qvalue', conv layer 2: a 3x3 kernel (padding 0) does "
          "not fit its 1x1 input" },
    };
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
        loss_fx f;
        crl_error e = { 0 };
        ck_assert_msg(fx_open_pool(&f, bad[i].enc, &e) == CRL_E_CONFIG, "case %zu: %s", i, e.message);
        ck_assert_msg(strstr(e.message, "test.ini:"), "case %zu: no FILE:LINE in %s", i, e.message);
        assert_msg_has(&e, bad[i].msg);
        ck_assert_ptr_null(f.st);
        fx_close(&f);
    }
    /* an MLP takes no pool */
    loss_fx f;
    crl_error e = { 0 };
    crl_test_host_open(&f.h, "losses", "[loss]\ntype = dqn\n[net.q]\npool_kernel_sizes = 2\n");
    fx_specs(&f, true);
    f.ops = NULL;
    f.st = NULL;
    ck_assert_int_eq(crl_loss_from_config(f.h.host, f.h.cfg, "loss", f.obs, f.act, 7, &f.ops, &f.st, &e), CRL_E_CONFIG);
    assert_msg_has(&e, "[net.q] pool_kernel_sizes: type = mlp does not read it");
    fx_close(&f);
}
END_TEST

int main(void)
{
    return RUN_TESTS("losses", ddpg_user_modules, user_modules_grad, user_modules_bad_input, user_modules_save_load, done_fallback, dqn_grad_l2, dqn_grad_smooth_l1_double, dqn_weights, dqn_loss_falls,
                     dqn_target_updates, dqn_save_load, dqn_counters_checked, ppo_rng_checked, dqn_uint8_frames, dqn_bad_input, ppo_grad_clip, ppo_grad_clip_outside,
                     ppo_grad_kl, ppo_grad_continuous, a2c_grad, reinforce_grad, pg_prepare_targets, ppo_recurrent_grad, a2c_recurrent_grad, pg_bad_input, ddpg_grad, td3_grad, sac_grad,
                     sac_fixed_alpha_grad, td3_delay, ac_bad_input, dsac_grad, dsac_fixed_alpha_grad,
                     dsac_bad_input, discrete_encodings, dqn_conv_pools, dqn_conv_pool_errors);
}
