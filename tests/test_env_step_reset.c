/* Check suite: crl_env_step_and_maybe_reset against step + step_mdp_into + a masked reset by hand, over
 * classic (CartPole, Pendulum), the countenv fixture and the transforms plugin. */
#include "config.h"

#include <check.h>
#include <glib.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <crl/crl.h>
#include <crl/env.h>

/* The env's counters of the cached and general paths (smr_fast, ...). */
#include "env-private.h"

#include "alloc-count.h"
#include "host-fixture.h"
#include "keep-cairo.h"

#define PLUGINS "classic, countenv, transforms"

#define assert_ok(expr, e)                                                                                      \
    do {                                                                                                        \
        int rc_ = (expr);                                                                                       \
        ck_assert_msg(rc_ == CRL_OK, "%s failed: %s (%s)", #expr, (e).message, crl_status_name(rc_));          \
    } while (0)

#define assert_err(expr, e, want_code, needle)                                                                  \
    do {                                                                                                        \
        crl_error_clear(&(e));                                                                                  \
        int rc_ = (expr);                                                                                       \
        ck_assert_msg(rc_ == (want_code), "%s gave %s, want %s: %s", #expr, crl_status_name(rc_),               \
                      crl_status_name(want_code), (e).message);                                                 \
        ck_assert_int_eq((e).code, (want_code));                                                                \
        ck_assert_msg(strstr((e).message, (needle)) != NULL, "message '%s' lacks '%s'", (e).message, (needle)); \
    } while (0)

/* ---- fixtures ------------------------------------------------------------------------ */

/* Two envs from the same [env] lines (so the same seed): `a` takes the
 * fused call, `b` the reference. */
typedef struct pair {
    crl_test_host h;
    crl_env *a, *b;
} pair;

static void pair_open(pair *p, const char *env_lines)
{
    char *ini = g_strdup_printf("[env]\n%s\n[transform.sc]\ntype = StepCounter\nmax_steps = 4\n"
                                "[transform.rs]\ntype = RewardSum\n", env_lines);
    crl_test_host_open(&p->h, PLUGINS, ini);
    g_free(ini);
    crl_error e = { 0 };
    p->a = crl_env_from_config(p->h.host, p->h.cfg, "env", &e);
    ck_assert_msg(p->a != NULL, "env a (%s): %s", env_lines, e.message);
    p->b = crl_env_from_config(p->h.host, p->h.cfg, "env", &e);
    ck_assert_msg(p->b != NULL, "env b (%s): %s", env_lines, e.message);
}

static void pair_close(pair *p)
{
    crl_env_free(p->a);
    crl_env_free(p->b);
    crl_test_host_close(&p->h);
}

/* The reference: step, step_mdp_into, then the envs whose "next.done" is
 * set reset through a "_reset" entry of root (same_step resets them in the
 * step, and step_mdp brings the reset values). */
static void ref_step(crl_env *env, crl_td *td, crl_td *root)
{
    crl_error e = { 0 };
    assert_ok(crl_env_step(env, td, &e), e);
    assert_ok(crl_env_step_mdp_into(env, td, root, &e), e);
    if (crl_env_autoreset(env) == CRL_AUTORESET_SAME_STEP)
        return;
    crl_tensor *done = crl_td_get(td, "next.done");
    ck_assert_ptr_nonnull(done);
    bool any = false;
    for (int64_t i = 0; i < crl_tensor_numel(done); i++)
        any |= crl_tensor_flat_get(done, i) != 0.0;
    if (!any)
        return;
    crl_tensor *mask = crl_tensor_clone(done, &e);
    ck_assert_ptr_nonnull(mask);
    assert_ok(crl_td_set(root, "_reset", mask, &e), e);
    crl_tensor_unref(mask);
    crl_td *r = crl_env_reset(env, root, &e);
    ck_assert_msg(r != NULL, "reset: %s", e.message);
    crl_td_unref(r);
}

/* a and b hold the same keys with bit-identical tensors. */
static void assert_same(const crl_td *a, const crl_td *b, const char *what, int64_t t)
{
    char **ka = crl_td_leaf_keys(a, NULL), **kb = crl_td_leaf_keys(b, NULL);
    ck_assert_ptr_nonnull(ka);
    ck_assert_ptr_nonnull(kb);
    size_t na = g_strv_length(ka), nb = g_strv_length(kb);
    ck_assert_msg(na == nb, "%s, step %" G_GINT64_FORMAT ": %zu keys vs %zu in the reference", what, (gint64)t, na,
                  nb);
    for (size_t i = 0; i < na; i++) {
        crl_tensor *x = crl_td_get(a, ka[i]), *y = crl_td_get(b, ka[i]);
        ck_assert_msg(y != NULL, "%s, step %" G_GINT64_FORMAT ": the reference lacks '%s'", what, (gint64)t, ka[i]);
        ck_assert_msg(crl_tensor_dtype(x) == crl_tensor_dtype(y) && crl_tensor_same_shape(x, y),
                      "%s, step %" G_GINT64_FORMAT ": '%s' differs in dtype or shape", what, (gint64)t, ka[i]);
        crl_tensor *cx = crl_tensor_contiguous(x, NULL), *cy = crl_tensor_contiguous(y, NULL);
        ck_assert_msg(memcmp(crl_tensor_data(cx), crl_tensor_data(cy), crl_tensor_nbytes(cx)) == 0,
                      "%s, step %" G_GINT64_FORMAT ": '%s' differs from the reference", what, (gint64)t, ka[i]);
        crl_tensor_unref(cx);
        crl_tensor_unref(cy);
    }
    crl_free(ka);
    crl_free(kb);
}

/* No env of root is done. */
static void assert_none_done(const crl_td *root, int64_t t)
{
    crl_tensor *d = crl_td_get(root, "done");
    ck_assert_ptr_nonnull(d);
    for (int64_t i = 0; i < crl_tensor_numel(d); i++)
        ck_assert_msg(crl_tensor_flat_get(d, i) == 0.0, "step %" G_GINT64_FORMAT ": env %" G_GINT64_FORMAT
                      " of next_root is done", (gint64)t, (gint64)i);
}

enum { PINGPONG, INPLACE };

typedef struct run_opts {
    int layout;          /* PINGPONG: two tds in turn; INPLACE: next_root is td */
    bool fresh_action;   /* a new action tensor each step (else written in place) */
    int64_t steps;
} run_opts;

/* `steps` steps of the pair with the same random actions: a with the fused
 * call, b with the reference, compared after each.  Returns how many envs
 * ended. */
static int64_t run_pair(pair *p, run_opts o)
{
    crl_error e = { 0 };
    crl_env_set_seed(p->a, 7);
    crl_env_set_seed(p->b, 7);
    crl_td *ta[2], *tb[2];
    ta[0] = crl_env_reset(p->a, NULL, &e);
    tb[0] = crl_env_reset(p->b, NULL, &e);
    ck_assert_msg(ta[0] && tb[0], "reset: %s", e.message);
    ta[1] = crl_td_new(crl_env_batch_ndim(p->a), crl_env_batch_shape(p->a), &e);
    tb[1] = crl_td_new(crl_env_batch_ndim(p->b), crl_env_batch_shape(p->b), &e);
    int cur = 0;
    int64_t ended = 0;
    for (int64_t t = 0; t < o.steps; t++) {
        crl_td *a = ta[cur], *na = o.layout == INPLACE ? a : ta[cur ^ 1];
        crl_td *b = tb[cur], *nb = o.layout == INPLACE ? b : tb[cur ^ 1];
        crl_tensor *old = crl_td_get(a, "action");
        if (o.fresh_action && old) {
            /* another tensor at the same key: the td's stamp moves, not its layout */
            crl_tensor *fresh = crl_tensor_clone(old, &e);
            assert_ok(crl_td_set(a, "action", fresh, &e), e);
            crl_tensor_unref(fresh);
        }
        assert_ok(crl_env_rand_action(p->a, a, &e), e);
        crl_tensor *act = crl_td_get(a, "action");
        /* With project_actions, float actions reach past the bounds too. */
        if (p->a->project_actions && crl_tensor_dtype(act) == CRL_F32)
            for (int64_t i = 0; i < crl_tensor_numel(act); i++)
                crl_tensor_flat_set(act, i, 3.0 * crl_tensor_flat_get(act, i));
        act = crl_tensor_clone(act, &e);
        assert_ok(crl_td_set(b, "action", act, &e), e);
        crl_tensor_unref(act);
        assert_ok(crl_env_step_and_maybe_reset(p->a, a, na, &e), e);
        ref_step(p->b, b, nb);
        assert_same(a, b, "td", t);
        assert_same(na, nb, "next_root", t);
        assert_none_done(na, t);
        crl_tensor *d = crl_td_get(a, "next.done");
        for (int64_t i = 0; i < crl_tensor_numel(d); i++)
            ended += crl_tensor_flat_get(d, i) != 0.0;
        if (o.layout == PINGPONG)
            cur ^= 1;
    }
    for (int k = 0; k < 2; k++) {
        crl_td_unref(ta[k]);
        crl_td_unref(tb[k]);
    }
    return ended;
}

/* Every auto_reset mode and both layouts of `lines`; `fast`: whether the
 * cached path must have taken (almost) every call. */
static void equivalence_case(const char *lines, bool fast, bool with_same_step)
{
    static const char *const modes[] = { "off", "next_step", "same_step" };
    for (size_t m = 0; m < G_N_ELEMENTS(modes); m++) {
        if (!strcmp(modes[m], "same_step") && !with_same_step)
            continue;
        for (int layout = PINGPONG; layout <= INPLACE; layout++) {
            for (int fresh = 0; fresh < 2; fresh++) {
                char *text = g_strdup_printf("%s\nauto_reset = %s", lines, modes[m]);
                pair p;
                pair_open(&p, text);
                run_opts o = { layout, fresh != 0, 120 };
                int64_t ended = run_pair(&p, o);
                ck_assert_msg(ended > 0, "%s (%s): no episode ended in %" G_GINT64_FORMAT " steps; the case "
                              "tests nothing of the reset", text, layout == INPLACE ? "in place" : "in turn",
                              (gint64)o.steps);
                /* Each pair of tds needs a general call or two before its
                 * slot is made (the first fills the next root's keys). */
                if (fast)
                    ck_assert_msg(p.a->smr_fast >= (uint64_t)o.steps - 6 && p.a->smr_slow <= 6,
                                  "%s: %" G_GUINT64_FORMAT " cached and %" G_GUINT64_FORMAT " general calls", text,
                                  p.a->smr_fast, p.a->smr_slow);
                else
                    ck_assert_msg(p.a->smr_fast == 0 && p.a->smr_slow == (uint64_t)o.steps,
                                  "%s: %" G_GUINT64_FORMAT " cached calls; this env must take the general path",
                                  text, p.a->smr_fast);
                pair_close(&p);
                g_free(text);
            }
        }
    }
}

/* ---- equivalence with step + step_mdp_into + reset ----------------------------------- */

START_TEST(cartpole_single)
{
    equivalence_case("backend = classic\nid = CartPole-v1", true, true);
}
END_TEST

START_TEST(cartpole_batched)
{
    equivalence_case("backend = classic\nid = CartPole-v1\nnum_envs = 5", true, true);
}
END_TEST

START_TEST(pendulum_truncates)
{
    equivalence_case("backend = classic\nid = Pendulum-v1\nmax_episode_steps = 7", true, true);
    equivalence_case("backend = classic\nid = Pendulum-v1\nnum_envs = 3\nmax_episode_steps = 9", true, true);
}
END_TEST

START_TEST(executors)
{
    /* The backend behind an executor: the cached path steps it the same. */
    equivalence_case("backend = classic\nid = CartPole-v1\nnum_envs = 4\nexecutor = serial\nnum_workers = 2", true,
                     true);
    equivalence_case("backend = classic\nid = CartPole-v1\nnum_envs = 4\nexecutor = threads\nnum_workers = 2", true,
                     true);
    equivalence_case("backend = classic\nid = Pendulum-v1\nnum_envs = 3\nmax_episode_steps = 5\n"
                     "executor = processes\nnum_workers = 2", true, true);
}
END_TEST

START_TEST(frame_skip_general)
{
    equivalence_case("backend = classic\nid = CartPole-v1\nnum_envs = 4\nframe_skip = 3", false, true);
    equivalence_case("backend = countenv\nid = CountNoState-v0\nframe_skip = 2", false, true);
}
END_TEST

START_TEST(pixels_general)
{
    equivalence_case("backend = countenv\nid = Count-v0\nnum_envs = 3\nfrom_pixels = true\nreturn_state = true", false, true);
}
END_TEST

START_TEST(countenv_state_and_projection)
{
    equivalence_case("backend = countenv\nid = Count-v0\nnum_envs = 2\nreturn_state = true", true, true);
    equivalence_case("backend = countenv\nid = CountBox-v0\nproject_actions = true", true, true);
}
END_TEST

START_TEST(transforms_chain)
{
    /* StepCounter ends episodes of its own (its done goes through the
     * reset); transforms refuse same_step. */
    equivalence_case("backend = classic\nid = CartPole-v1\nnum_envs = 3\ntransforms = sc, rs", false, false);
    equivalence_case("backend = classic\nid = Pendulum-v1\ntransforms = sc", false, false);
}
END_TEST

/* ---- what the two tds hold ----------------------------------------------------------- */

START_TEST(final_and_reset_values)
{
    /* Count-v0: the counter starts in [0, offset_range) and grows by 1;
     * env 0 ends when it reaches 5. */
    static const char *const modes[] = { "off", "next_step", "same_step" };
    for (size_t m = 0; m < G_N_ELEMENTS(modes); m++) {
        crl_test_host h;
        char *ini = g_strdup_printf("[env]\nbackend = countenv\nid = Count-v0\nauto_reset = %s\nreturn_state = true\n", modes[m]);
        crl_test_host_open(&h, PLUGINS, ini);
        g_free(ini);
        crl_error e = { 0 };
        crl_env *env = crl_env_from_config(h.host, h.cfg, "env", &e);
        ck_assert_msg(env != NULL, "%s", e.message);
        crl_td *td = crl_env_reset(env, NULL, &e), *next = crl_td_new(0, NULL, &e);
        bool seen_end = false;
        for (int t = 0; t < 40; t++) {
            crl_td *cur = t % 2 ? next : td, *other = t % 2 ? td : next;
            assert_ok(crl_env_rand_action(env, cur, &e), e);
            double before = crl_tensor_flat_get(crl_td_get(cur, "observation"), 0);
            assert_ok(crl_env_step_and_maybe_reset(env, cur, other, &e), e);
            double after = crl_tensor_flat_get(crl_td_get(cur, "next.observation"), 0);
            /* Every step is a real one: the counter always moved on. */
            ck_assert_double_eq(after, before + 1);
            ck_assert_ptr_null(crl_td_get(other, "reward"));
            ck_assert_ptr_null(crl_td_get(other, "_reset"));
            ck_assert_ptr_null(crl_td_get(cur, "_reset"));
            bool ended = crl_tensor_flat_get(crl_td_get(cur, "next.done"), 0) != 0.0;
            double root_obs = crl_tensor_flat_get(crl_td_get(other, "observation"), 0);
            if (ended) {
                seen_end = true;
                ck_assert_double_ge(after, 5);
                ck_assert_double_lt(root_obs, 5);   /* the reset counter */
                ck_assert_double_eq(crl_tensor_flat_get(crl_td_get(other, "state"), 0), root_obs);
            } else {
                ck_assert_double_eq(root_obs, after);
            }
            ck_assert_double_eq(crl_tensor_flat_get(crl_td_get(other, "done"), 0), 0);
            ck_assert_double_eq(crl_tensor_flat_get(crl_td_get(other, "terminated"), 0), 0);
        }
        ck_assert_msg(seen_end, "%s: no episode ended", modes[m]);
        crl_td_unref(td);
        crl_td_unref(next);
        crl_env_free(env);
        crl_test_host_close(&h);
    }
}
END_TEST

START_TEST(extra_keys_follow_step_mdp)
{
    /* A root entry step_mdp keeps (a policy's output) goes along, on the
     * cached path too; an older "action" of next_root stays. */
    crl_test_host h;
    crl_test_host_open(&h, PLUGINS, "[env]\nbackend = classic\nid = CartPole-v1\nnum_envs = 2\n");
    crl_error e = { 0 };
    crl_env *env = crl_env_from_config(h.host, h.cfg, "env", &e);
    ck_assert_msg(env != NULL, "%s", e.message);
    crl_td *td[2] = { crl_env_reset(env, NULL, &e), crl_td_new(1, (int64_t[]){ 2 }, &e) };
    crl_tensor *mark[2];
    for (int k = 0; k < 2; k++) {
        mark[k] = crl_tensor_new(CRL_F32, 2, (int64_t[]){ 2, 3 }, &e);
        assert_ok(crl_td_set(td[k], "policy.hidden", mark[k], &e), e);
    }
    for (int t = 0; t < 60; t++) {
        crl_td *cur = td[t % 2], *other = td[(t + 1) % 2];
        crl_tensor_fill(mark[t % 2], (double)t);
        assert_ok(crl_env_rand_action(env, cur, &e), e);
        assert_ok(crl_env_step_and_maybe_reset(env, cur, other, &e), e);
        ck_assert_double_eq(crl_tensor_flat_get(crl_td_get(other, "policy.hidden"), 5), (double)t);
        ck_assert_ptr_eq(crl_td_get(other, "policy.hidden"), mark[(t + 1) % 2]);
    }
    ck_assert_uint_ge(env->smr_fast, 50);
    for (int k = 0; k < 2; k++) {
        crl_tensor_unref(mark[k]);
        crl_td_unref(td[k]);
    }
    crl_env_free(env);
    crl_test_host_close(&h);
}
END_TEST

START_TEST(layout_changes_between_calls)
{
    /* Tensors replaced, keys added and dtypes changed between calls: the
     * slot follows or is dropped, and the results stay the reference's. */
    pair p;
    pair_open(&p, "backend = classic\nid = CartPole-v1\nnum_envs = 3");
    crl_error e = { 0 };
    crl_td *a = crl_env_reset(p.a, NULL, &e), *b = crl_env_reset(p.b, NULL, &e);
    crl_td *na = crl_td_new(1, (int64_t[]){ 3 }, &e), *nb = crl_td_new(1, (int64_t[]){ 3 }, &e);
    for (int t = 0; t < 90; t++) {
        assert_ok(crl_env_rand_action(p.a, a, &e), e);
        crl_tensor *act = crl_tensor_clone(crl_td_get(a, "action"), &e);
        assert_ok(crl_td_set(b, "action", act, &e), e);
        crl_tensor_unref(act);
        if (t == 20) {
            /* next_root's observation replaced by another of the same kind */
            crl_tensor *o = crl_tensor_new(CRL_F32, 2, (int64_t[]){ 3, 4 }, &e);
            assert_ok(crl_td_set(na, "observation", o, &e), e);
            crl_tensor_unref(o);
        }
        if (t == 21) {
            /* and td's, by a copy */
            crl_tensor *o = crl_tensor_clone(crl_td_get(a, "observation"), &e);
            assert_ok(crl_td_set(a, "observation", o, &e), e);
            crl_tensor_unref(o);
        }
        if (t == 40) {
            /* a float64 observation: step_mdp stores a copy of its own */
            crl_tensor *o = crl_tensor_new(CRL_F64, 2, (int64_t[]){ 3, 4 }, &e);
            assert_ok(crl_td_set(na, "observation", o, &e), e);
            crl_tensor_unref(o);
        }
        if (t == 60) {
            crl_tensor *x = crl_tensor_new(CRL_I64, 1, (int64_t[]){ 3 }, &e);
            crl_tensor_fill(x, 9);
            assert_ok(crl_td_set(a, "extra", x, &e), e);
            assert_ok(crl_td_set(b, "extra", x, &e), e);
            crl_tensor_unref(x);
        }
        if (t == 70) {
            /* a non-contiguous next.observation in td */
            crl_tensor *big = crl_tensor_new(CRL_F32, 2, (int64_t[]){ 3, 8 }, &e);
            crl_tensor *v = crl_tensor_slice(big, 1, 0, 8, 2, &e);
            assert_ok(crl_td_set(a, "next.observation", v, &e), e);
            crl_tensor_unref(v);
            crl_tensor_unref(big);
        }
        assert_ok(crl_env_step_and_maybe_reset(p.a, a, na, &e), e);
        ref_step(p.b, b, nb);
        assert_same(na, nb, "next_root", t);
        /* td itself: the same values (a may hold other tensors for them) */
        char **keys = crl_td_leaf_keys(b, NULL);
        for (size_t i = 0; keys[i]; i++) {
            crl_tensor *x = crl_td_get(a, keys[i]), *y = crl_td_get(b, keys[i]);
            ck_assert_msg(x && crl_tensor_equal(x, y), "step %d: td's '%s' differs", t, keys[i]);
        }
        crl_free(keys);
        /* swap the pairs' roles, as a loop does */
        crl_td *s = a;
        a = na;
        na = s;
        s = b;
        b = nb;
        nb = s;
    }
    ck_assert_uint_ge(p.a->smr_fast, 60);
    crl_td_unref(a);
    crl_td_unref(b);
    crl_td_unref(na);
    crl_td_unref(nb);
    pair_close(&p);
}
END_TEST

START_TEST(pending_env_takes_the_general_path)
{
    /* next_step: an env ended by a plain step is reset by the next call's
     * step (its action ignored), as crl_env_step would. */
    pair p;
    pair_open(&p, "backend = countenv\nid = Count-v0\nauto_reset = next_step");
    crl_error e = { 0 };
    crl_td *a = crl_env_reset(p.a, NULL, &e), *b = crl_env_reset(p.b, NULL, &e);
    crl_td *na = crl_td_new(0, NULL, &e), *nb = crl_td_new(0, NULL, &e);
    for (int t = 0; t < 30; t++) {
        assert_ok(crl_env_rand_action(p.a, a, &e), e);
        crl_tensor *act = crl_tensor_clone(crl_td_get(a, "action"), &e);
        assert_ok(crl_td_set(b, "action", act, &e), e);
        crl_tensor_unref(act);
        if (t % 7 == 6) {
            /* plain steps until the env is done */
            while (!p.a->needs_reset[0]) {
                assert_ok(crl_env_step(p.a, a, &e), e);
                assert_ok(crl_env_step(p.b, b, &e), e);
            }
            assert_ok(crl_env_step_mdp_into(p.a, a, a, &e), e);
            assert_ok(crl_env_step_mdp_into(p.b, b, b, &e), e);
            uint64_t slow = p.a->smr_slow;
            assert_ok(crl_env_step_and_maybe_reset(p.a, a, na, &e), e);
            ck_assert_uint_eq(p.a->smr_slow, slow + 1);
            /* the reset step: reward 0, not done */
            ck_assert_double_eq(crl_tensor_flat_get(crl_td_get(a, "next.reward"), 0), 0);
        } else {
            assert_ok(crl_env_step_and_maybe_reset(p.a, a, na, &e), e);
        }
        ref_step(p.b, b, nb);
        assert_same(a, b, "td", t);
        assert_same(na, nb, "next_root", t);
        crl_td *s = a;
        a = na;
        na = s;
        s = b;
        b = nb;
        nb = s;
    }
    crl_td_unref(a);
    crl_td_unref(b);
    crl_td_unref(na);
    crl_td_unref(nb);
    pair_close(&p);
}
END_TEST

/* ---- wrong inputs -------------------------------------------------------------------- */

START_TEST(bad_arguments)
{
    crl_test_host h;
    crl_test_host_open(&h, PLUGINS, "[env]\nbackend = classic\nid = CartPole-v1\nnum_envs = 2\n");
    crl_error e = { 0 };
    crl_env *env = crl_env_from_config(h.host, h.cfg, "env", &e);
    ck_assert_msg(env != NULL, "%s", e.message);
    crl_td *td = crl_td_new(1, (int64_t[]){ 2 }, &e), *next = crl_td_new(1, (int64_t[]){ 2 }, &e);
    crl_td *one = crl_td_new(0, NULL, &e), *three = crl_td_new(1, (int64_t[]){ 3 }, &e);

    assert_err(crl_env_step_and_maybe_reset(NULL, td, next, &e), e, CRL_E_INVALID, "step_and_maybe_reset: env is NULL");
    assert_err(crl_env_step_and_maybe_reset(env, NULL, next, &e), e, CRL_E_INVALID, "the TensorDict is NULL");
    assert_err(crl_env_step_and_maybe_reset(env, td, NULL, &e), e, CRL_E_INVALID, "next_root is NULL");
    ck_assert_int_eq(crl_env_step_and_maybe_reset(env, td, NULL, NULL), CRL_E_INVALID);

    /* before the first reset */
    assert_ok(crl_env_rand_action(env, td, &e), e);
    assert_err(crl_env_step_and_maybe_reset(env, td, next, &e), e, CRL_E_INVALID, "was never reset");
    crl_td *r = crl_env_reset(env, td, &e);
    crl_td_unref(r);

    /* batch shapes: td's, then next_root's (checked before the step) */
    assert_err(crl_env_step_and_maybe_reset(env, one, next, &e), e, CRL_E_SHAPE, "batch shape [] but");
    assert_err(crl_env_step_and_maybe_reset(env, td, three, &e), e, CRL_E_SHAPE,
               "step_and_maybe_reset: next_root: the TensorDict has batch shape [3]");
    ck_assert_int_eq(env->steps[0], 0);
    ck_assert_ptr_null(crl_td_get_td(td, "next"));

    /* a td the env never wrote: no action */
    crl_td *empty = crl_td_new(1, (int64_t[]){ 2 }, &e);
    assert_err(crl_env_step_and_maybe_reset(env, empty, next, &e), e, CRL_E_NOT_FOUND,
               "step_and_maybe_reset: step: the TensorDict has no 'action'");
    crl_td_unref(empty);

    /* actions out of the spec, on the general path and on the cached one */
    for (int t = 0; t < 6; t++) {
        assert_ok(crl_env_rand_action(env, td, &e), e);
        assert_ok(crl_env_step_and_maybe_reset(env, td, td, &e), e);
    }
    uint64_t fast = env->smr_fast;
    /* the last element belongs to env 1 with index or one-hot actions alike */
    crl_tensor *act = crl_td_get(td, "action");
    crl_tensor_flat_set(act, crl_tensor_numel(act) - 1, 2.0);
    assert_err(crl_env_step_and_maybe_reset(env, td, td, &e), e, CRL_E_RANGE,
               "step_and_maybe_reset: step: env 1: ");
    ck_assert_uint_eq(env->smr_fast, fast + 1);
    crl_tensor *f = crl_tensor_new(CRL_F32, 1, (int64_t[]){ 2 }, &e);
    assert_ok(crl_td_set(td, "action", f, &e), e);
    crl_tensor_unref(f);
    assert_err(crl_env_step_and_maybe_reset(env, td, td, &e), e, CRL_E_DTYPE, "expected dtype int64 but got float32");

    crl_td_unref(td);
    crl_td_unref(next);
    crl_td_unref(one);
    crl_td_unref(three);
    crl_env_free(env);
    crl_test_host_close(&h);
}
END_TEST

START_TEST(nan_action_and_done_env)
{
    crl_test_host h;
    crl_test_host_open(&h, PLUGINS, "[env]\nbackend = classic\nid = Pendulum-v1\n");
    crl_error e = { 0 };
    crl_env *env = crl_env_from_config(h.host, h.cfg, "env", &e);
    ck_assert_msg(env != NULL, "%s", e.message);
    crl_td *td = crl_env_reset(env, NULL, &e);
    for (int t = 0; t < 5; t++) {
        assert_ok(crl_env_rand_action(env, td, &e), e);
        assert_ok(crl_env_step_and_maybe_reset(env, td, td, &e), e);
    }
    crl_tensor_flat_set(crl_td_get(td, "action"), 0, NAN);
    assert_err(crl_env_step_and_maybe_reset(env, td, td, &e), e, CRL_E_INVALID, "holds NaN");
    crl_tensor_flat_set(crl_td_get(td, "action"), 0, 9.0);
    assert_err(crl_env_step_and_maybe_reset(env, td, td, &e), e, CRL_E_RANGE, "env 0");
    crl_td_unref(td);
    crl_env_free(env);
    crl_test_host_close(&h);

    /* auto_reset = off: an env a plain step left done must be reset first */
    crl_test_host_open(&h, PLUGINS, "[env]\nbackend = countenv\nid = Count-v0\n");
    env = crl_env_from_config(h.host, h.cfg, "env", &e);
    ck_assert_msg(env != NULL, "%s", e.message);
    td = crl_env_reset(env, NULL, &e);
    assert_ok(crl_env_rand_action(env, td, &e), e);
    while (!env->needs_reset[0])
        assert_ok(crl_env_step(env, td, &e), e);
    assert_err(crl_env_step_and_maybe_reset(env, td, td, &e), e, CRL_E_INVALID, "env 0 is done; reset it first");
    crl_td_unref(td);
    crl_env_free(env);
    crl_test_host_close(&h);
}
END_TEST

/* ---- the steady state allocates nothing ---------------------------------------------- */

static long count_calls(crl_env *env, crl_td **td, bool inplace, int n)
{
    crl_error e = { 0 };
    int rc = CRL_OK, cur = 0;
    alloc_count_start();
    for (int i = 0; i < n && !rc; i++) {
        crl_td *a = td[cur], *b = inplace ? a : td[cur ^ 1];
        rc = crl_env_rand_action(env, a, &e);
        if (!rc)
            rc = crl_env_step_and_maybe_reset(env, a, b, &e);
        cur ^= inplace ? 0 : 1;
    }
    long calls = alloc_count_stop();
    ck_assert_msg(rc == CRL_OK, "%s", e.message);
    return calls;
}

static void zero_alloc_case(const char *lines)
{
    for (int inplace = 0; inplace < 2; inplace++) {
        crl_test_host h;
        char *ini = g_strdup_printf("[env]\n%s\n", lines);
        crl_test_host_open(&h, PLUGINS, ini);
        g_free(ini);
        crl_error e = { 0 };
        crl_env *env = crl_env_from_config(h.host, h.cfg, "env", &e);
        ck_assert_msg(env != NULL, "%s", e.message);
        crl_td *td[2] = { crl_env_reset(env, NULL, &e), crl_td_new(crl_env_batch_ndim(env), crl_env_batch_shape(env),
                                                                   &e) };
        count_calls(env, td, inplace, 50); /* every key exists, every slot made */
        long calls = count_calls(env, td, inplace, 5000);
        ck_assert_msg(calls == 0, "%s (%s): %ld heap calls in 5000 steps", lines, inplace ? "in place" : "in turn",
                      calls);
        /* Episodes ended and were reset meanwhile (a counter below the
         * steps made counts from a reset). */
        bool reset_seen = false;
        for (int64_t i = 0; i < env->num; i++)
            reset_seen |= env->steps[i] < 5000;
        ck_assert(reset_seen);
        crl_td_unref(td[0]);
        crl_td_unref(td[1]);
        crl_env_free(env);
        crl_test_host_close(&h);
    }
}

START_TEST(zero_alloc_steady_state)
{
    if (!alloc_count_works())
        return;
    zero_alloc_case("backend = classic\nid = CartPole-v1");
    zero_alloc_case("backend = classic\nid = CartPole-v1\nnum_envs = 8\nauto_reset = same_step");
    zero_alloc_case("backend = classic\nid = Pendulum-v1\nmax_episode_steps = 11\nauto_reset = next_step");
    /* the general path too */
    zero_alloc_case("backend = countenv\nid = Count-v0\nnum_envs = 3\nfrom_pixels = true");
    zero_alloc_case("backend = classic\nid = CartPole-v1\nnum_envs = 2\nframe_skip = 2");
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("env_step_reset");
    TCase *tc = tcase_create("equivalence");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, cartpole_single);
    tcase_add_test(tc, cartpole_batched);
    tcase_add_test(tc, pendulum_truncates);
    tcase_add_test(tc, executors);
    tcase_add_test(tc, frame_skip_general);
    tcase_add_test(tc, pixels_general);
    tcase_add_test(tc, countenv_state_and_projection);
    tcase_add_test(tc, transforms_chain);
    suite_add_tcase(s, tc);

    tc = tcase_create("semantics");
    tcase_add_test(tc, final_and_reset_values);
    tcase_add_test(tc, extra_keys_follow_step_mdp);
    tcase_add_test(tc, layout_changes_between_calls);
    tcase_add_test(tc, pending_env_takes_the_general_path);
    suite_add_tcase(s, tc);

    tc = tcase_create("errors");
    tcase_add_test(tc, bad_arguments);
    tcase_add_test(tc, nan_action_and_done_env);
    suite_add_tcase(s, tc);

    tc = tcase_create("alloc");
    tcase_add_test(tc, zero_alloc_steady_state);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    crl_test_keep_cairo();
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
