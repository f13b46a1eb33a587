/* Check suite: recurrent DQN (loss 'dqn' with [net.q] type = lstm | gru).  The loss and its gradient against a
 * float64 reference of the whole loss (the LSTM/GRU from each slice's stored start state with resets at
 * is_init, the MLP head, the double-DQN target from the target network one step on from the state after
 * each step), central differences of that reference; resets inside a slice; a slice started from a stored
 * state equals running from the episode start; acting; the errors. */
#include "host-fixture.h"
#include "nn-test.h"
#include "rnn-ref.h"

#include <crl/trainer.h>

#include <unistd.h>

enum { F = 3, NA = 3, CELLS = 6 };

typedef struct fx {
    crl_test_host h;
    crl_spec *obs, *act;
    const crl_loss_ops *ops;
    void *st;
} fx;

/* The dtype of the image observations fx_open_ex makes. */
static crl_dtype fx_image_dtype = CRL_F32;

/* Specs of one env: observation [F] (or [obs_nd dims]), is_init and the primer's state (unless left out),
 * a Categorical of NA actions. */
static int fx_open_ex(fx *f, const char *ini, crl_rnn_kind kind, int64_t H, bool primer, bool init, bool image,
                      crl_error *e)
{
    memset(f, 0, sizeof *f);
    crl_test_host_open(&f->h, "losses", ini);
    f->obs = image ? crl_spec_composite_of(1, "observation",
                                           crl_spec_unbounded(fx_image_dtype, 4, SHAPE(1, 1, 4, 4), e), e)
                   : crl_spec_composite_of(1, "observation", crl_spec_unbounded(CRL_F32, 2, SHAPE(1, F), e), e);
    f->act = crl_spec_composite_of(1, "action", crl_spec_categorical(NA, CRL_I64, 1, SHAPE(1), e), e);
    ck_assert(f->obs && f->act);
    if (init) {
        crl_spec *s = crl_spec_categorical(2, CRL_BOOL, 2, SHAPE(1, 1), e);
        ck_assert_int_eq(crl_spec_composite_set(f->obs, "is_init", s, e), CRL_OK);
        crl_spec_unref(s);
    }
    for (int i = 0; primer && i < (kind == CRL_RNN_LSTM ? 2 : 1); i++) {
        crl_spec *s = crl_spec_unbounded(CRL_F32, 3, SHAPE(1, 1, H), e);
        const char *k = kind == CRL_RNN_GRU ? "recurrent_state" : i ? "recurrent_state_c" : "recurrent_state_h";
        ck_assert_int_eq(crl_spec_composite_set(f->obs, k, s, e), CRL_OK);
        crl_spec_unref(s);
    }
    return crl_loss_from_config(f->h.host, f->h.cfg, "loss", f->obs, f->act, 5, &f->ops, &f->st, e);
}

static void fx_open(fx *f, const char *ini, crl_rnn_kind kind, int64_t H)
{
    crl_error e = { 0 };
    ck_assert_msg(fx_open_ex(f, ini, kind, H, true, true, false, &e) == CRL_OK, "loss: %s", e.message);
}

static void fx_close(fx *f)
{
    if (f->st)
        f->ops->destroy(f->st);
    crl_spec_unref(f->obs);
    crl_spec_unref(f->act);
    crl_test_host_close(&f->h);
}

static void put(crl_td *td, const char *key, crl_tensor *t)
{
    crl_error e = { 0 };
    ck_assert_msg(crl_td_set(td, key, t, &e) == CRL_OK, "%s: %s", key, e.message);
    crl_tensor_unref(t);
}

static crl_tensor *rand_t(crl_dtype dt, int nd, const int64_t *shape, double lo, double hi, crl_rng *rng)
{
    crl_tensor *t = t_new(dt, nd, shape);
    for (int64_t i = 0; i < crl_tensor_numel(t); i++)
        crl_tensor_flat_set(t, i, crl_rng_range(rng, lo, hi));
    return t;
}

/* B slices of T steps: random observations and next observations, actions, rewards, stored states at every
 * step (only each slice's first is read), is_init where init[b * T + t], terminated where term[b * T + t]. */
static crl_td *slices(int64_t B, int64_t T, crl_rnn_kind kind, int64_t H, const bool *init, const bool *term,
                      crl_rng *rng)
{
    crl_error e = { 0 };
    crl_td *td = crl_td_new(2, SHAPE(B, T), &e);
    put(td, "observation", rand_t(CRL_F32, 3, SHAPE(B, T, F), -1, 1, rng));
    put(td, "next.observation", rand_t(CRL_F32, 3, SHAPE(B, T, F), -1, 1, rng));
    put(td, "next.reward", rand_t(CRL_F32, 3, SHAPE(B, T, 1), -1, 1, rng));
    crl_tensor *a = t_new(CRL_I64, 2, SHAPE(B, T)), *ii = t_new(CRL_BOOL, 3, SHAPE(B, T, 1));
    crl_tensor *tt = t_new(CRL_BOOL, 3, SHAPE(B, T, 1));
    for (int64_t i = 0; i < B * T; i++) {
        crl_tensor_flat_set(a, i, (double)crl_rng_below(rng, NA));
        crl_tensor_flat_set(ii, i, init && init[i]);
        crl_tensor_flat_set(tt, i, term && term[i]);
    }
    put(td, "action", a);
    put(td, "is_init", ii);
    put(td, "next.terminated", tt);
    put(td, kind == CRL_RNN_GRU ? "recurrent_state" : "recurrent_state_h",
        rand_t(CRL_F32, 4, SHAPE(B, T, 1, H), -0.5, 0.5, rng));
    if (kind == CRL_RNN_LSTM)
        put(td, "recurrent_state_c", rand_t(CRL_F32, 4, SHAPE(B, T, 1, H), -0.5, 0.5, rng));
    return td;
}

static double *f64_of(const crl_tensor *t)
{
    double *d = g_new(double, crl_tensor_numel(t) ? crl_tensor_numel(t) : 1);
    for (int64_t i = 0; i < crl_tensor_numel(t); i++)
        d[i] = crl_tensor_flat_get(t, i);
    return d;
}

/* ---- the float64 reference -------------------------------------------------------------------- */

typedef struct ref {
    crl_rnn_kind kind;
    int64_t B, T, H;
    double gamma;
    bool dbl, smooth;
    double *obs, *nobs, *r, *h0, *c0;   /* h0, c0: [B, H] each slice's stored start state */
    bool *init, *term;
    int64_t *a;
} ref;

static ref ref_of(const crl_td *b, crl_rnn_kind kind, int64_t H, double gamma, bool dbl, bool smooth)
{
    ref R = { kind, crl_td_batch_shape(b)[0], crl_td_batch_shape(b)[1], H, gamma, dbl, smooth, NULL, NULL, NULL,
              NULL, NULL, NULL, NULL, NULL };
    int64_t n = R.B * R.T;
    R.obs = f64_of(crl_td_get(b, "observation"));
    R.nobs = f64_of(crl_td_get(b, "next.observation"));
    R.r = f64_of(crl_td_get(b, "next.reward"));
    R.init = g_new(bool, n);
    R.term = g_new(bool, n);
    R.a = g_new(int64_t, n);
    for (int64_t i = 0; i < n; i++) {
        R.init[i] = crl_tensor_flat_get(crl_td_get(b, "is_init"), i) != 0;
        R.term[i] = crl_tensor_flat_get(crl_td_get(b, "next.terminated"), i) != 0;
        R.a[i] = (int64_t)crl_tensor_flat_get(crl_td_get(b, "action"), i);
    }
    R.h0 = g_new0(double, R.B * H);
    R.c0 = g_new0(double, R.B * H);
    const crl_tensor *hs = crl_td_get(b, kind == CRL_RNN_GRU ? "recurrent_state" : "recurrent_state_h"),
                     *cs = crl_td_get(b, "recurrent_state_c");
    for (int64_t s = 0; s < R.B; s++)
        for (int64_t j = 0; j < H; j++) {
            R.h0[s * H + j] = crl_tensor_flat_get(hs, s * R.T * H + j);
            R.c0[s * H + j] = cs ? crl_tensor_flat_get(cs, s * R.T * H + j) : 0;
        }
    return R;
}

static void ref_free(ref *R)
{
    g_free(R->obs);
    g_free(R->nobs);
    g_free(R->r);
    g_free(R->h0);
    g_free(R->c0);
    g_free(R->init);
    g_free(R->term);
    g_free(R->a);
}

/* Q-values [NA] of network (P rnn, Q head) after the steps x[0..len) of slice s from its stored state. */
static void ref_q(const ref *R, const double *P, const double *Q, int64_t s, const double *x, const bool *reset,
                  int64_t len, double *q)
{
    int64_t H = R->H;
    double *y = g_new(double, len * H), *hT = g_new(double, H), *cT = g_new(double, H);
    ref_rnn(R->kind, F, H, P, 1, len, x, R->h0 + s * H, R->c0 + s * H, reset, y, hT, cT);
    const int64_t dims[] = { H, CELLS, NA };
    ref_mlp(dims, 2, CRL_ACT_TANH, false, Q, y + (len - 1) * H, 1, q);
    g_free(y);
    g_free(hT);
    g_free(cT);
}

/* The loss of online (P, Q) with target (Pt, Qt); |TD error| per step into td (may be NULL). */
static double ref_loss(const ref *R, const double *P, const double *Q, const double *Pt, const double *Qt,
                       double *td)
{
    int64_t T = R->T;
    double *x = g_new(double, (T + 1) * F), loss = 0;
    bool *reset = g_new(bool, T + 1);
    for (int64_t s = 0; s < R->B; s++)
        for (int64_t t = 0; t < T; t++) {
            int64_t i = s * T + t;
            /* the slice's steps up to t, then (for s') its next observation */
            memcpy(x, R->obs + s * T * F, (size_t)((t + 1) * F) * sizeof *x);
            memcpy(reset, R->init + s * T, (size_t)(t + 1) * sizeof *reset);
            double q[NA], qt[NA], qo[NA];
            ref_q(R, P, Q, s, x, reset, t + 1, q);
            memcpy(x + (t + 1) * F, R->nobs + i * F, F * sizeof *x);
            reset[t + 1] = false;
            ref_q(R, Pt, Qt, s, x, reset, t + 2, qt);
            ref_q(R, P, Q, s, x, reset, t + 2, qo);
            const double *pick = R->dbl ? qo : qt;
            int64_t best = 0;
            for (int64_t j = 1; j < NA; j++)
                if (pick[j] > pick[best])
                    best = j;
            double target = R->r[i] + (R->term[i] ? 0 : R->gamma * qt[best]), d = q[R->a[i]] - target;
            loss += R->smooth ? (fabs(d) < 1 ? 0.5 * d * d : fabs(d) - 0.5) : d * d;   /* l2: TorchRL's MSE */
            if (td)
                td[i] = fabs(d);
        }
    g_free(x);
    g_free(reset);
    return loss / (double)(R->B * T);
}

/* The loss's value and every parameter's gradient against the reference and its central differences. */
static void check_against_ref(fx *f, crl_td *b, crl_rnn_kind kind, int64_t H, double gamma, bool dbl, bool smooth)
{
    crl_error e = { 0 };
    ck_assert_uint_eq(f->ops->num_params(f->st), 2);
    const char *names[2];
    crl_tensor *p[2], *g[2];
    for (size_t k = 0; k < 2; k++) {
        ck_assert_int_eq(f->ops->param(f->st, k, &names[k], &p[k], &g[k], &e), CRL_OK);
        crl_tensor_fill(g[k], 0);
    }
    ck_assert_str_eq(names[0], "qvalue");
    ck_assert_str_eq(names[1], kind == CRL_RNN_LSTM ? "lstm" : "gru");
    /* the target networks are the online ones' copies until an update */
    double *Q = f64_of(p[0]), *P = f64_of(p[1]), *Qt = f64_of(p[0]), *Pt = f64_of(p[1]);
    crl_td *losses = crl_td_new(0, NULL, &e);
    ck_assert_msg(f->ops->forward(f->st, b, losses, &e) == CRL_OK, "forward: %s", e.message);
    ref R = ref_of(b, kind, H, gamma, dbl, smooth);
    int64_t n = R.B * R.T;
    double *td = g_new(double, n);
    double want = ref_loss(&R, P, Q, Pt, Qt, td);
    assert_close(crl_tensor_flat_get(crl_td_get(losses, "loss"), 0), want, 1e-5, 1e-4, "loss vs float64 reference");
    const crl_tensor *tde = crl_td_get(b, "td_error");
    ck_assert_ptr_nonnull(tde);
    ck_assert_int_eq(crl_tensor_numel(tde), n);
    for (int64_t i = 0; i < n; i++)
        assert_close(crl_tensor_flat_get(tde, i), td[i], 1e-5, 1e-4, "td_error vs float64 reference");
    /* dLoss/dparams against central differences of the reference (the target held fixed) */
    int checked = 0;
    double gnorm[2] = { 0, 0 };
    for (int k = 0; k < 2; k++) {
        double *v = k ? P : Q;
        int64_t m = crl_tensor_numel(p[k]), stride = m > 60 ? m / 60 : 1;
        for (int64_t i = 0; i < m; i += stride) {
            const double h = 1e-6, keep = v[i];
            v[i] = keep + h;
            double lp = ref_loss(&R, P, Q, Pt, Qt, NULL);
            v[i] = keep - h;
            double lm = ref_loss(&R, P, Q, Pt, Qt, NULL);
            v[i] = keep;
            double fd = (lp - lm) / (2 * h), an = crl_tensor_flat_get(g[k], i);
            ck_assert_msg(fabs(fd - an) <= 1e-5 + 2e-3 * fabs(fd), "%s[%lld]: analytic %.8g, float64 reference %.8g",
                          names[k], (long long)i, an, fd);
            gnorm[k] += fabs(an);
            checked++;
        }
    }
    ck_assert_int_gt(checked, 60);
    ck_assert_msg(gnorm[0] > 0 && gnorm[1] > 0, "gradients reach both networks (%g, %g)", gnorm[0], gnorm[1]);
    ref_free(&R);
    g_free(td);
    g_free(P);
    g_free(Q);
    g_free(Pt);
    g_free(Qt);
    crl_td_unref(losses);
}

#define NET "num_cells = 6\nactivation = tanh\n"

START_TEST(test_lstm_double_vs_reference)
{
    enum { B = 3, T = 5, H = 4 };
    fx f;
    fx_open(&f, "[loss]\ntype = dqn\n" NET "gamma = 0.9\ndouble_dqn = true\n[net.q]\ntype = lstm\nhidden_size = 4\n",
            CRL_RNN_LSTM, H);
    crl_rng rng;
    crl_rng_init(&rng, 11, 0);
    bool init[B * T] = { 0 }, term[B * T] = { 0 };
    init[0] = true;           /* slice 0 starts an episode */
    init[T + 2] = true;       /* slice 1 starts one at its step 2 */
    term[T + 1] = true;       /* ... after its step 1 ended the previous one */
    term[2 * T + 4] = true;
    crl_td *b = slices(B, T, CRL_RNN_LSTM, H, init, term, &rng);
    check_against_ref(&f, b, CRL_RNN_LSTM, H, 0.9, true, false);
    crl_td_unref(b);
    fx_close(&f);
}
END_TEST

START_TEST(test_gru_smooth_l1_vs_reference)
{
    enum { B = 2, T = 6, H = 5 };
    fx f;
    fx_open(&f, "[loss]\ntype = dqn\n" NET "gamma = 0.7\nloss_function = smooth_l1\n[net.q]\ntype = gru\n"
            "hidden_size = 5\n", CRL_RNN_GRU, H);
    crl_rng rng;
    crl_rng_init(&rng, 12, 0);
    bool init[B * T] = { 0 };
    init[3] = true;
    crl_td *b = slices(B, T, CRL_RNN_GRU, H, init, NULL, &rng);
    /* rewards well inside and outside the quadratic zone of smooth L1 */
    for (int64_t i = 0; i < B * T; i++)
        crl_tensor_flat_set(crl_td_get(b, "next.reward"), i, i % 2 ? 3.0 : 0.2);
    check_against_ref(&f, b, CRL_RNN_GRU, H, 0.7, false, true);
    crl_td_unref(b);
    fx_close(&f);
}
END_TEST

/* A hard update copies both online networks into the targets: the loss then matches the reference with
 * target = online, after the online parameters moved. */
START_TEST(test_update_copies_the_recurrent_target)
{
    enum { B = 2, T = 4, H = 3 };
    fx f;
    fx_open(&f, "[loss]\ntype = dqn\n" NET "gamma = 0.9\nhard_update_interval = 1\n[net.q]\ntype = lstm\n"
            "hidden_size = 3\n", CRL_RNN_LSTM, H);
    crl_rng rng;
    crl_rng_init(&rng, 13, 0);
    crl_td *b = slices(B, T, CRL_RNN_LSTM, H, NULL, NULL, &rng);
    crl_error e = { 0 };
    const char *name;
    crl_tensor *p[2], *g;
    for (size_t k = 0; k < 2; k++) {
        ck_assert_int_eq(f.ops->param(f.st, k, &name, &p[k], &g, &e), CRL_OK);
        for (int64_t i = 0; i < crl_tensor_numel(p[k]); i++)
            crl_tensor_flat_set(p[k], i, crl_tensor_flat_get(p[k], i) + crl_rng_range(&rng, -0.3, 0.3));
    }
    double *Q = f64_of(p[0]), *P = f64_of(p[1]);
    crl_td *losses = crl_td_new(0, NULL, &e);
    ck_assert_int_eq(f.ops->forward(f.st, b, losses, &e), CRL_OK);
    ref R = ref_of(b, CRL_RNN_LSTM, H, 0.9, false, false);
    /* before the update the targets are the first parameters: the loss differs from target = online */
    double same = ref_loss(&R, P, Q, P, Q, NULL);
    ck_assert(fabs(crl_tensor_flat_get(crl_td_get(losses, "loss"), 0) - same) > 1e-4);
    ck_assert_int_eq(f.ops->update(f.st, &e), CRL_OK);
    ck_assert_int_eq(f.ops->forward(f.st, b, losses, &e), CRL_OK);
    assert_close(crl_tensor_flat_get(crl_td_get(losses, "loss"), 0), same, 1e-5, 1e-4, "after a hard update");
    ref_free(&R);
    g_free(P);
    g_free(Q);
    crl_td_unref(losses);
    crl_td_unref(b);
    fx_close(&f);
}
END_TEST

/* |TD error| with gamma = 0 and no reward is |Q(s_t, a_t)|: after an is_init inside a slice, Q no longer
 * depends on the steps before it nor on the slice's stored state; without the is_init it does. */
START_TEST(test_reset_inside_a_slice)
{
    enum { B = 2, T = 6, H = 4, AT = 3 };
    fx f;
    fx_open(&f, "[loss]\ntype = dqn\n" NET "gamma = 0\n[net.q]\ntype = lstm\nhidden_size = 4\n", CRL_RNN_LSTM, H);
    crl_rng rng;
    crl_rng_init(&rng, 14, 0);
    bool init[B * T] = { 0 };
    init[T + AT] = true;
    for (int with_init = 1; with_init >= 0; with_init--) {
        init[T + AT] = with_init;
        crl_rng r2 = rng;
        crl_td *b = slices(B, T, CRL_RNN_LSTM, H, init, NULL, &r2);
        crl_tensor_fill(crl_td_get(b, "next.reward"), 0);
        crl_error e = { 0 };
        crl_td *losses = crl_td_new(0, NULL, &e);
        ck_assert_int_eq(f.ops->forward(f.st, b, losses, &e), CRL_OK);
        double *q0 = f64_of(crl_td_get(b, "td_error"));
        /* other observations before the reset and another stored state for slice 1 */
        crl_tensor *obs = crl_td_get(b, "observation"), *hs = crl_td_get(b, "recurrent_state_h");
        for (int64_t t = 0; t < AT; t++)
            for (int64_t j = 0; j < F; j++)
                crl_tensor_flat_set(obs, (T + t) * F + j, crl_tensor_flat_get(obs, (T + t) * F + j) + 0.7);
        for (int64_t j = 0; j < H; j++)
            crl_tensor_flat_set(hs, T * H + j, 0.9);
        ck_assert_int_eq(f.ops->forward(f.st, b, losses, &e), CRL_OK);
        const crl_tensor *q1 = crl_td_get(b, "td_error");
        double before = 0, after = 0, other = 0;
        for (int64_t t = 0; t < T; t++) {
            double d = fabs(crl_tensor_flat_get(q1, T + t) - q0[T + t]);
            if (t < AT)
                before = fmax(before, d);
            else
                after = fmax(after, d);
            other = fmax(other, fabs(crl_tensor_flat_get(q1, t) - q0[t]));
        }
        ck_assert_msg(before > 1e-4, "the changed steps change their own Q (%g)", before);
        ck_assert_msg(other <= 1e-6, "slice 0 is untouched (%g)", other);
        if (with_init)
            ck_assert_msg(after <= 1e-6, "after is_init, Q is the reset state's (%g)", after);
        else
            ck_assert_msg(after > 1e-4, "without is_init, the state carries on (%g)", after);
        g_free(q0);
        crl_td_unref(losses);
        crl_td_unref(b);
    }
    fx_close(&f);
}
END_TEST

/* Acting step by step stores each step's state (as the collector does); a slice from step K with the state
 * stored there gives the Q-values of running the network from the episode start. */
START_TEST(test_stored_state_start)
{
    enum { N = 2, T = 9, K = 4, H = 5 };
    fx f;
    fx_open(&f, "[loss]\ntype = dqn\n" NET "gamma = 0\n[net.q]\ntype = lstm\nhidden_size = 5\n", CRL_RNN_LSTM, H);
    crl_rng rng;
    crl_rng_init(&rng, 15, 0);
    crl_error e = { 0 };
    /* the whole episode as one [N, T] slice from the zero state */
    bool init[N * T] = { 0 };
    init[0] = init[T] = true;
    crl_td *whole = slices(N, T, CRL_RNN_LSTM, H, init, NULL, &rng);
    crl_tensor_fill(crl_td_get(whole, "next.reward"), 0);
    crl_tensor *hs = crl_td_get(whole, "recurrent_state_h"), *cs = crl_td_get(whole, "recurrent_state_c");
    /* act through it one step at a time, the states carried as step_mdp carries them */
    int64_t n = N;
    crl_tensor *h = t_new(CRL_F32, 3, SHAPE(N, 1, H)), *c = t_new(CRL_F32, 3, SHAPE(N, 1, H));
    for (int64_t t = 0; t < T; t++) {
        crl_td *td = crl_td_new(1, &n, &e);
        crl_tensor *o = t_new(CRL_F32, 2, SHAPE(N, F)), *ii = t_new(CRL_BOOL, 2, SHAPE(N, 1));
        for (int64_t s = 0; s < N; s++) {
            for (int64_t j = 0; j < F; j++)
                crl_tensor_flat_set(o, s * F + j, crl_tensor_flat_get(crl_td_get(whole, "observation"),
                                                                     (s * T + t) * F + j));
            crl_tensor_flat_set(ii, s, t == 0);
            for (int64_t j = 0; j < H; j++) {   /* what the collector stores for step t */
                crl_tensor_flat_set(hs, (s * T + t) * H + j, crl_tensor_flat_get(h, s * H + j));
                crl_tensor_flat_set(cs, (s * T + t) * H + j, crl_tensor_flat_get(c, s * H + j));
            }
        }
        put(td, "observation", o);
        put(td, "is_init", ii);
        ck_assert_int_eq(crl_td_set(td, "recurrent_state_h", h, &e), CRL_OK);
        ck_assert_int_eq(crl_td_set(td, "recurrent_state_c", c, &e), CRL_OK);
        ck_assert_msg(f.ops->act(f.st, td, CRL_EXPLORE_MODE, &rng, &e) == CRL_OK, "act: %s", e.message);
        ck_assert_ptr_nonnull(crl_td_get(td, "action"));
        ck_assert_msg(!crl_td_has(td, "embed") && !crl_td_has(td, "action_value"), "act leaves only its action");
        crl_tensor *nh = crl_td_get(td, "next.recurrent_state_h"), *nc = crl_td_get(td, "next.recurrent_state_c");
        ck_assert(nh && nc);
        crl_tensor_unref(h);
        crl_tensor_unref(c);
        h = crl_tensor_clone(nh, &e);
        c = crl_tensor_clone(nc, &e);
        crl_td_unref(td);
    }
    UNREF_ALL(h, c);
    crl_td *losses = crl_td_new(0, NULL, &e);
    ck_assert_int_eq(f.ops->forward(f.st, whole, losses, &e), CRL_OK);
    double *qw = f64_of(crl_td_get(whole, "td_error"));
    /* steps K..T-1 as a slice of their own: its first step's stored state stands for the history */
    crl_td *part = crl_td_new(2, SHAPE(N, T - K), &e);
    static const char *const keys[] = { "observation", "next.observation", "next.reward", "action", "is_init",
                                        "next.terminated", "recurrent_state_h", "recurrent_state_c" };
    for (size_t k = 0; k < G_N_ELEMENTS(keys); k++) {
        const crl_tensor *x = crl_td_get(whole, keys[k]);
        int64_t shape[CRL_MAX_DIMS], per = crl_tensor_numel(x) / (N * T);
        memcpy(shape, crl_tensor_shape(x), sizeof(int64_t) * (size_t)crl_tensor_ndim(x));
        shape[1] = T - K;
        crl_tensor *y = t_new(crl_tensor_dtype(x), crl_tensor_ndim(x), shape);
        for (int64_t s = 0; s < N; s++)
            for (int64_t i = 0; i < (T - K) * per; i++)
                crl_tensor_flat_set(y, s * (T - K) * per + i, crl_tensor_flat_get(x, (s * T + K) * per + i));
        put(part, keys[k], y);
    }
    ck_assert_int_eq(f.ops->forward(f.st, part, losses, &e), CRL_OK);
    const crl_tensor *qp = crl_td_get(part, "td_error");
    for (int64_t s = 0; s < N; s++)
        for (int64_t t = K; t < T; t++)
            assert_close(crl_tensor_flat_get(qp, s * (T - K) + t - K), qw[s * T + t], 1e-5, 1e-4,
                         "Q from the stored state vs from the episode start");
    g_free(qw);
    crl_td_unref(losses);
    crl_td_unref(part);
    crl_td_unref(whole);
    fx_close(&f);
}
END_TEST

/* A dueling head after the LSTM: gradients against float32 central differences of the loss itself. */
START_TEST(test_dueling_head)
{
    enum { B = 2, T = 4, H = 4 };
    fx f;
    fx_open(&f, "[loss]\ntype = dqn\n" NET "gamma = 0.8\n[net.q]\ntype = lstm\nhidden_size = 4\ndueling = true\n",
            CRL_RNN_LSTM, H);
    crl_rng rng;
    crl_rng_init(&rng, 16, 0);
    crl_td *b = slices(B, T, CRL_RNN_LSTM, H, NULL, NULL, &rng);
    crl_error e = { 0 };
    crl_td *losses = crl_td_new(0, NULL, &e);
    const char *name;
    crl_tensor *p[2], *g[2];
    for (size_t k = 0; k < 2; k++) {
        ck_assert_int_eq(f.ops->param(f.st, k, &name, &p[k], &g[k], &e), CRL_OK);
        crl_tensor_fill(g[k], 0);
    }
    ck_assert_int_eq(f.ops->forward(f.st, b, losses, &e), CRL_OK);
    crl_tensor *g0[2] = { crl_tensor_clone(g[0], &e), crl_tensor_clone(g[1], &e) };
    int checked = 0;
    for (int k = 0; k < 2; k++) {
        float *v = crl_tensor_data(p[k]);
        int64_t m = crl_tensor_numel(p[k]), stride = m > 30 ? m / 30 : 1;
        for (int64_t i = 0; i < m; i += stride, checked++) {
            const float h = 1e-2f, keep = v[i];
            v[i] = keep + h;
            ck_assert_int_eq(f.ops->forward(f.st, b, losses, &e), CRL_OK);
            double lp = crl_tensor_flat_get(crl_td_get(losses, "loss"), 0);
            v[i] = keep - h;
            ck_assert_int_eq(f.ops->forward(f.st, b, losses, &e), CRL_OK);
            double lm = crl_tensor_flat_get(crl_td_get(losses, "loss"), 0);
            v[i] = keep;
            double fd = (lp - lm) / (2 * h), an = crl_tensor_flat_get(g0[k], i);
            ck_assert_msg(fabs(fd - an) <= 2e-2 * (1 + fabs(fd)), "param %d[%lld]: analytic %.6g, differences %.6g",
                          k, (long long)i, an, fd);
        }
    }
    ck_assert_int_gt(checked, 30);
    UNREF_ALL(g0[0], g0[1]);
    crl_td_unref(losses);
    crl_td_unref(b);
    fx_close(&f);
}
END_TEST

START_TEST(test_errors)
{
    enum { H = 4 };
    fx f;
    crl_error e = { 0 };
    const char *ini = "[loss]\ntype = dqn\n[net.q]\ntype = lstm\nhidden_size = 4\n";
    /* the env must carry the state and is_init, and give vectors */
    ck_assert_int_eq(fx_open_ex(&f, ini, CRL_RNN_LSTM, H, false, true, false, &e), CRL_E_CONFIG);
    assert_msg_has(&e, "[net.q] type = lstm carries its state in 'recurrent_state_h' [1, 4], which the env does not "
                       "have: add a transform with type = TensorDictPrimer");
    fx_close(&f);
    ck_assert_int_eq(fx_open_ex(&f, ini, CRL_RNN_LSTM, H, true, false, false, &e), CRL_E_CONFIG);
    assert_msg_has(&e, "add a transform with type = InitTracker");
    fx_close(&f);
    ck_assert_int_eq(fx_open_ex(&f, ini, CRL_RNN_LSTM, 5, true, true, false, &e), CRL_E_CONFIG);
    assert_msg_has(&e, "which the env has with another shape or dtype");
    fx_close(&f);
    ck_assert_int_ne(fx_open_ex(&f, ini, CRL_RNN_LSTM, H, true, true, true, &e), CRL_OK);
    assert_msg_has(&e, "[net.q] type = lstm reads vectors, but observation 'observation' has 3 dims per env: give "
                       "[net.q] a conv encoder");
    fx_close(&f);
    /* a conv encoder reads frames, not vectors; only dqn builds one in front of a recurrent network */
    ck_assert_int_eq(fx_open_ex(&f, "[loss]\ntype = dqn\n[net.q]\ntype = lstm\nhidden_size = 4\nencoder = enc\n"
                                    "[net.enc]\ntype = conv\n", CRL_RNN_LSTM, H, true, true, false, &e), CRL_E_CONFIG);
    assert_msg_has(&e, "a conv stack reads images [C, H, W] per row, but network 'encoder' reads [3] (a vector: drop "
                       "the encoder)");
    fx_close(&f);
    ck_assert_int_eq(fx_open_ex(&f, "[loss]\ntype = ppo\n[net.actor]\ntype = lstm\nhidden_size = 4\nencoder = enc\n"
                                    "[net.enc]\ntype = conv\n", CRL_RNN_LSTM, H, true, true, false, &e), CRL_E_CONFIG);
    assert_msg_has(&e, "[net.actor] encoder = enc: loss 'ppo' feeds its recurrent network the observation vector; a "
                       "conv encoder in front of a recurrent network is supported for dqn's [net.q] only");
    fx_close(&f);
    /* dueling is a Q-network's */
    ck_assert_int_eq(fx_open_ex(&f, "[loss]\ntype = ppo\n[net.actor]\ntype = lstm\nhidden_size = 4\ndueling = true\n",
                                CRL_RNN_LSTM, H, true, true, false, &e), CRL_E_CONFIG);
    assert_msg_has(&e, "only a Q-network ([net.q]) has a value and advantages");
    fx_close(&f);
    /* batches: [slices, steps] with the stored state */
    fx_open(&f, ini, CRL_RNN_LSTM, H);
    crl_rng rng;
    crl_rng_init(&rng, 17, 0);
    crl_td *b = slices(2, 3, CRL_RNN_LSTM, H, NULL, NULL, &rng);
    crl_td *losses = crl_td_new(0, NULL, &e);
    crl_td *flat = crl_td_reshape(b, 1, SHAPE(6), &e);
    ck_assert_int_eq(f.ops->forward(f.st, flat, losses, &e), CRL_E_CONFIG);
    assert_msg_has(&e, "set [train] sequence_length and [replay] sampler = slice");
    ck_assert_int_eq(crl_td_del(b, "recurrent_state_c", &e), CRL_OK);
    ck_assert_int_eq(f.ops->forward(f.st, b, losses, &e), CRL_E_NOT_FOUND);
    assert_msg_has(&e, "the batch has no 'recurrent_state_c' (the recurrent state stored with each step");
    crl_td_unref(flat);
    crl_td_unref(b);
    b = slices(2, 3, CRL_RNN_LSTM, H, NULL, NULL, &rng);
    ck_assert_int_eq(crl_td_del(b, "is_init", &e), CRL_OK);
    ck_assert_int_eq(f.ops->forward(f.st, b, losses, &e), CRL_E_NOT_FOUND);
    assert_msg_has(&e, "the batch has no 'is_init'");
    crl_td_unref(b);
    crl_td_unref(losses);
    fx_close(&f);
}
END_TEST

/* ---- a conv encoder in front of the recurrent network ---------------------------------------------- */

#define CONV_INI "[loss]\ntype = dqn\n" NET "gamma = 0.9\n%s[net.q]\ntype = %s\nhidden_size = 4\nencoder = enc\n" \
                 "[net.enc]\ntype = conv\nnum_cells = 2, 3\nkernel_sizes = 2\nstrides = 1\nactivation = tanh\n"

/* slices() with frames [1, 4, 4] for the observations, values in [lo, hi]. */
static crl_td *frame_slices(int64_t B, int64_t T, crl_rnn_kind kind, int64_t H, const bool *init, crl_dtype dt,
                            double lo, double hi, crl_rng *rng)
{
    crl_td *b = slices(B, T, kind, H, init, NULL, rng);
    put(b, "observation", rand_t(dt, 5, SHAPE(B, T, 1, 4, 4), lo, hi, rng));
    put(b, "next.observation", rand_t(dt, 5, SHAPE(B, T, 1, 4, 4), lo, hi, rng));
    return b;
}

static double loss_of(fx *f, crl_td *b)
{
    crl_error e = { 0 };
    crl_td *losses = crl_td_new(0, NULL, &e);
    ck_assert_msg(f->ops->forward(f->st, b, losses, &e) == CRL_OK, "forward: %s", e.message);
    double l = crl_tensor_flat_get(crl_td_get(losses, "loss"), 0);
    crl_td_unref(losses);
    return l;
}

/* dLoss/d(conv, recurrent and head parameters) through slices with a reset inside against central
 * differences of the loss itself.  The loss runs in float32: with tanh everywhere it is smooth, and a step
 * of h = 1e-2 on parameters of size ~0.5 leaves a truncation error ~h^2 |L'''| / 6 ~ 1e-5 and a rounding
 * error ~|L| 1e-7 / h ~ 1e-5, ten times below the 1e-4 + 1% allowed; the conv gradients checked reach
 * 1e-2 and more, so one that misses the encoder (zero) or a step (the wrong one) is off by far more. */
static void conv_grad_check(crl_rnn_kind kind)
{
    enum { B = 2, T = 4, H = 4 };
    char ini[512];
    snprintf(ini, sizeof ini, CONV_INI, "", crl_rnn_kind_name(kind));
    fx f;
    crl_error e = { 0 };
    ck_assert_msg(fx_open_ex(&f, ini, kind, H, true, true, true, &e) == CRL_OK, "loss: %s", e.message);
    ck_assert_uint_eq(f.ops->num_params(f.st), 3);
    const char *names[3];
    crl_tensor *p[3], *g[3];
    for (size_t k = 0; k < 3; k++) {
        ck_assert_int_eq(f.ops->param(f.st, k, &names[k], &p[k], &g[k], &e), CRL_OK);
        crl_tensor_fill(g[k], 0);
    }
    ck_assert_str_eq(names[0], "qvalue");
    ck_assert_str_eq(names[1], crl_rnn_kind_name(kind));
    ck_assert_str_eq(names[2], "encoder");
    /* conv 1 -> 2 channels (2x2 kernels), conv 2 -> 3 channels: 2*1*4 + 2 + 3*2*4 + 3 parameters */
    ck_assert_int_eq(crl_tensor_numel(p[2]), 37);
    crl_rng rng;
    crl_rng_init(&rng, 21, 0);
    bool init[B * T] = { 0 };
    init[T + 2] = true;
    crl_td *b = frame_slices(B, T, kind, H, init, CRL_F32, 0, 1, &rng);
    loss_of(&f, b);
    double *an[3];
    for (int k = 0; k < 3; k++)
        an[k] = f64_of(g[k]);
    int checked = 0, large = 0;
    for (int k = 0; k < 3; k++) {
        int64_t m = crl_tensor_numel(p[k]), stride = m > 40 ? m / 40 : 1;
        float *v = crl_tensor_data(p[k]);
        for (int64_t i = 0; i < m; i += stride) {
            const float h = 1e-2f, keep = v[i];
            v[i] = keep + h;
            double lp = loss_of(&f, b);
            v[i] = keep - h;
            double lm = loss_of(&f, b);
            v[i] = keep;
            double fd = (lp - lm) / (double)(2 * h);
            ck_assert_msg(fabs(fd - an[k][i]) <= 1e-4 + 1e-2 * fabs(fd), "%s[%lld]: analytic %.8g, central "
                          "differences %.8g", names[k], (long long)i, an[k][i], fd);
            large += k == 2 && fabs(fd) > 1e-2;
            checked++;
        }
    }
    ck_assert_int_gt(checked, 80);
    ck_assert_msg(large > 0, "the conv parameters move the loss well above the tolerance");
    for (int k = 0; k < 3; k++)
        g_free(an[k]);
    crl_td_unref(b);
    fx_close(&f);
}

START_TEST(test_conv_lstm_gradients)
{
    conv_grad_check(CRL_RNN_LSTM);
}
END_TEST

START_TEST(test_conv_gru_gradients)
{
    conv_grad_check(CRL_RNN_GRU);
}
END_TEST

/* uint8 frames are divided by 255 in the encoder: the loss equals that of the same frames as floats / 255;
 * acting steps the encoder and the recurrent network and leaves neither features nor embed behind; the
 * target encoder follows the online one on an update; the encoder is in the checkpoint. */
START_TEST(test_conv_uint8_act_update_checkpoint)
{
    enum { B = 2, T = 3, H = 4 };
    char ini[512];
    snprintf(ini, sizeof ini, CONV_INI, "tau = 0.5\n", "lstm");
    fx f;
    crl_error e = { 0 };
    fx_image_dtype = CRL_U8;
    int rc = fx_open_ex(&f, ini, CRL_RNN_LSTM, H, true, true, true, &e);
    fx_image_dtype = CRL_F32;
    ck_assert_msg(rc == CRL_OK, "loss: %s", e.message);
    crl_rng rng;
    crl_rng_init(&rng, 22, 0);
    crl_td *u = frame_slices(B, T, CRL_RNN_LSTM, H, NULL, CRL_U8, 0, 255.99, &rng);
    crl_td *fl = crl_td_clone(u, &e);
    ck_assert_ptr_nonnull(fl);
    for (int i = 0; i < 2; i++) {
        const char *k = i ? "next.observation" : "observation";
        crl_tensor *src = crl_td_get(u, k), *dst = t_new(CRL_F32, 5, SHAPE(B, T, 1, 4, 4));
        for (int64_t j = 0; j < crl_tensor_numel(src); j++)
            crl_tensor_flat_set(dst, j, (float)crl_tensor_flat_get(src, j) / 255.0f);
        put(fl, k, dst);
    }
    /* the same network fed floats: a second loss from the same seed, without normalization */
    fx g;
    ck_assert_msg(fx_open_ex(&g, ini, CRL_RNN_LSTM, H, true, true, true, &e) == CRL_OK, "loss: %s", e.message);
    double lu = loss_of(&f, u), lf = loss_of(&g, fl);
    ck_assert_msg(fabs(lu - lf) <= 1e-6 * (1 + fabs(lf)), "uint8 frames %.9g, float frames / 255 %.9g", lu, lf);
    fx_close(&g);
    /* acting on one env's uint8 frame */
    crl_td *td = crl_td_new(1, SHAPE(1), &e);
    put(td, "observation", rand_t(CRL_U8, 4, SHAPE(1, 1, 4, 4), 0, 255.99, &rng));
    ck_assert_int_eq(f.ops->act(f.st, td, CRL_EXPLORE_MODE, &rng, &e), CRL_OK);
    ck_assert_ptr_nonnull(crl_td_get(td, "action"));
    ck_assert_ptr_nonnull(crl_td_get(td, "next.recurrent_state_h"));
    ck_assert_ptr_null(crl_td_get(td, "features"));
    ck_assert_ptr_null(crl_td_get(td, "embed"));
    double hn = 0;
    for (int64_t j = 0; j < H; j++)
        hn += fabs(crl_tensor_flat_get(crl_td_get(td, "next.recurrent_state_h"), j));
    ck_assert_msg(hn > 0, "the state moved");
    crl_td_unref(td);
    /* a soft update moves the target encoder halfway to the online one */
    const char *name;
    crl_tensor *p, *gr;
    ck_assert_int_eq(f.ops->param(f.st, 2, &name, &p, &gr, &e), CRL_OK);
    double *before = f64_of(p);
    float *v = crl_tensor_data(p);
    for (int64_t j = 0; j < crl_tensor_numel(p); j++)
        v[j] += 1.0f;
    ck_assert_int_eq(f.ops->update(f.st, &e), CRL_OK);
    /* the target moved by 0.5: the loss's target values change with it */
    for (int64_t j = 0; j < crl_tensor_numel(p); j++)
        v[j] = (float)before[j];
    double l_after = loss_of(&f, u);
    ck_assert_msg(fabs(l_after - lu) > 1e-6, "the target encoder followed the update (%.9g vs %.9g)", l_after, lu);
    g_free(before);
    /* the encoder and its target go into the checkpoint and come back */
    char path[] = "/tmp/crl-test-convrnn-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    crl_ckpt_writer *w = crl_ckpt_writer_new(path, "test", 1, &e);
    ck_assert_int_eq(f.ops->save(f.st, w, "loss", &e), CRL_OK);
    ck_assert_int_eq(crl_ckpt_writer_close(w, &e), CRL_OK);
    for (int64_t j = 0; j < crl_tensor_numel(p); j++)
        v[j] *= 0.5f;
    ck_assert_int_eq(f.ops->update(f.st, &e), CRL_OK);
    ck_assert(loss_of(&f, u) != l_after);
    crl_ckpt_reader *r = crl_ckpt_reader_open(path, "test", 1, &e);
    ck_assert_ptr_nonnull(r);
    ck_assert_msg(f.ops->load(f.st, r, "loss", &e) == CRL_OK, "load: %s", e.message);
    crl_ckpt_reader_free(r);
    unlink(path);
    ck_assert(loss_of(&f, u) == l_after);
    crl_td_unref(u);
    crl_td_unref(fl);
    fx_close(&f);
}
END_TEST

int main(void)
{
    const TTest *tests[] = { test_lstm_double_vs_reference, test_gru_smooth_l1_vs_reference,
                             test_update_copies_the_recurrent_target, test_reset_inside_a_slice, test_stored_state_start,
                             test_dueling_head, test_errors, test_conv_lstm_gradients, test_conv_gru_gradients,
                             test_conv_uint8_act_update_checkpoint };
    return run_tests("dqn_recurrent", tests, G_N_ELEMENTS(tests));
}
