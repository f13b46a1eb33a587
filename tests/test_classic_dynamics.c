/* Check suite for the classic plugin's cores: physics steps, resets, bounds, registry, pictures. */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "classic.h"

/* The literal expected values below come from a one-off python3 transcription
 * of Gymnasium 1.x's step() code (cartpole.py, pendulum.py, mountain_car.py,
 * continuous_mountain_car.py, acrobot.py), run with NumPy's NEP 50 ("weak")
 * scalar promotion, which is NumPy 2's, and printed with repr().  NumPy's
 * float64 sin/cos were pinned to the C library's (NPY_DISABLE_CPU_FEATURES
 * without AVX512): on AVX512 CPUs NumPy uses SVML, whose last bit differs, so
 * Gymnasium itself gives different trailing bits there.  The other
 * expectations are recomputed here from the published equations. */

/* ---- helpers ---- */

typedef struct {
    double state[CLASSIC_MAX_STATE];
    float obs[CLASSIC_MAX_OBS];
    float reward;
    uint8_t terminated;
} step_out;

/* One env, default parameters unless `params` is given. */
static step_out step_one(const classic_def *d, const double *state, const void *action,
                         const double *params)
{
    double defaults[CLASSIC_MAX_PARAMS];
    if (!params) {
        classic_params_default(d, defaults);
        params = defaults;
    }
    step_out o;
    memset(&o, 0, sizeof o);
    memcpy(o.state, state, sizeof(double) * (size_t)d->state_dim);
    d->step_batch(d, o.state, action, o.obs, &o.reward, &o.terminated, 1, params, NULL);
    return o;
}

static step_out step_discrete(const classic_def *d, const double *state, int64_t a,
                              const double *params)
{
    return step_one(d, state, &a, params);
}

static step_out step_box(const classic_def *d, const double *state, float a,
                         const double *params)
{
    return step_one(d, state, &a, params);
}

static void defaults_of(const classic_def *d, double *params)
{
    classic_params_default(d, params);
}

/* ---- CartPole-v1 ---- */

/* The equations of Florian (2007) as Gymnasium writes them, in plain form. */
static void cartpole_reference(const double *s, int action, bool semi, double *out)
{
    const double g = 9.8, mc = 1.0, mp = 0.1, l = 0.5, f = 10.0, tau = 0.02;
    double F = action == 1 ? f : -f;
    double th = s[2], thd = s[3];
    double temp = (F + mp * l * thd * thd * sin(th)) / (mc + mp);
    double thacc =
        (g * sin(th) - cos(th) * temp) / (l * (4.0 / 3.0 - mp * cos(th) * cos(th) / (mc + mp)));
    double xacc = temp - mp * l * thacc * cos(th) / (mc + mp);
    if (!semi) {
        out[0] = s[0] + tau * s[1];
        out[1] = s[1] + tau * xacc;
        out[2] = th + tau * thd;
        out[3] = thd + tau * thacc;
    } else {
        out[1] = s[1] + tau * xacc;
        out[0] = s[0] + tau * out[1];
        out[3] = thd + tau * thacc;
        out[2] = th + tau * out[3];
    }
}

START_TEST(test_cartpole_equations)
{
    const classic_def *d = &classic_cartpole;
    double p[CLASSIC_MAX_PARAMS];
    defaults_of(d, p);
    const double states[][4] = {{0.01, -0.02, 0.03, 0.04},
                                {-1.3, 0.7, -0.15, 1.1},
                                {2.0, -1.5, 0.2, -2.0},
                                {0.0, 0.0, 0.0, 0.0}};
    for (int semi = 0; semi < 2; semi++) {
        p[CARTPOLE_KINEMATICS_INTEGRATOR] = semi;
        for (size_t k = 0; k < sizeof states / sizeof states[0]; k++)
            for (int a = 0; a < 2; a++) {
                double want[4];
                cartpole_reference(states[k], a, semi, want);
                step_out o = step_discrete(d, states[k], a, p);
                for (int j = 0; j < 4; j++) {
                    ck_assert_double_eq_tol(o.state[j], want[j], 1e-13);
                    ck_assert_float_eq(o.obs[j], (float)o.state[j]);
                }
                ck_assert_float_eq(o.reward, 1.0f);
                ck_assert_uint_eq(o.terminated, 0);
            }
    }
}
END_TEST

START_TEST(test_cartpole_literals)
{
    const classic_def *d = &classic_cartpole;
    const double s[4] = {0.01, -0.02, 0.03, 0.04};
    /* Gymnasium: euler, action 1. */
    step_out o = step_discrete(d, s, 1, NULL);
    ck_assert_double_eq(o.state[0], 0.009600000000000001);
    ck_assert_double_eq(o.state[1], 0.17467919574755525);
    ck_assert_double_eq(o.state[2], 0.030799999999999998);
    ck_assert_double_eq(o.state[3], -0.2430687179600081);
    /* Gymnasium: euler, action 0. */
    o = step_discrete(d, s, 0, NULL);
    ck_assert_double_eq(o.state[1], -0.21553901710278936);
    ck_assert_double_eq(o.state[3], 0.34199522377603914);
    /* Gymnasium: semi-implicit euler, action 0 and 1. */
    double p[CLASSIC_MAX_PARAMS];
    defaults_of(d, p);
    p[CARTPOLE_KINEMATICS_INTEGRATOR] = CARTPOLE_SEMI_IMPLICIT_EULER;
    o = step_discrete(d, s, 0, p);
    ck_assert_double_eq(o.state[0], 0.005689219657944213);
    ck_assert_double_eq(o.state[1], -0.21553901710278936);
    ck_assert_double_eq(o.state[2], 0.03683990447552078);
    ck_assert_double_eq(o.state[3], 0.34199522377603914);
    o = step_discrete(d, s, 1, p);
    ck_assert_double_eq(o.state[0], 0.013493583914951104);
    ck_assert_double_eq(o.state[2], 0.025138625640799838);
}
END_TEST

/* With zero velocities euler leaves x and theta as they are, so the
 * termination test sees exactly the value we set. */
START_TEST(test_cartpole_termination_threshold)
{
    const classic_def *d = &classic_cartpole;
    const double thr = 12 * 2 * M_PI / 360;
    struct {
        double s[4];
        uint8_t term;
    } cases[] = {
        {{2.4, 0, 0, 0}, 0},
        {{nextafter(2.4, 3), 0, 0, 0}, 1},
        {{-2.4, 0, 0, 0}, 0},
        {{nextafter(-2.4, -3), 0, 0, 0}, 1},
        {{0, 0, thr, 0}, 0},
        {{0, 0, nextafter(thr, 1), 0}, 1},
        {{0, 0, -thr, 0}, 0},
        {{0, 0, nextafter(-thr, -1), 0}, 1},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        step_out o = step_discrete(d, cases[k].s, 1, NULL);
        ck_assert_double_eq(o.state[0], cases[k].s[0]);
        ck_assert_double_eq(o.state[2], cases[k].s[2]);
        ck_assert_uint_eq(o.terminated, cases[k].term);
        /* +1 on every step, the terminating one included. */
        ck_assert_float_eq(o.reward, 1.0f);
    }
    /* Sutton & Barto's reward: 0 per step, -1 on termination. */
    double p[CLASSIC_MAX_PARAMS];
    defaults_of(d, p);
    p[CARTPOLE_SUTTON_BARTO_REWARD] = 1;
    step_out o = step_discrete(d, cases[0].s, 0, p);
    ck_assert_uint_eq(o.terminated, 0);
    ck_assert_float_eq(o.reward, 0.0f);
    o = step_discrete(d, cases[1].s, 0, p);
    ck_assert_uint_eq(o.terminated, 1);
    ck_assert_float_eq(o.reward, -1.0f);
    /* A different x_threshold moves the line. */
    defaults_of(d, p);
    p[CARTPOLE_X_THRESHOLD] = 1.0;
    const double s[4] = {1.5, 0, 0, 0};
    ck_assert_uint_eq(step_discrete(d, s, 0, p).terminated, 1);
    ck_assert_uint_eq(step_discrete(d, s, 0, NULL).terminated, 0);
}
END_TEST

/* A batch gives each env the result it gets alone, and params such as
 * gravity change the physics. */
START_TEST(test_cartpole_batch_and_params)
{
    const classic_def *d = &classic_cartpole;
    enum { N = 257 };
    double p[CLASSIC_MAX_PARAMS];
    defaults_of(d, p);
    double *state = malloc(sizeof(double) * 4 * N);
    int64_t *act = malloc(sizeof(int64_t) * N);
    float *obs = malloc(sizeof(float) * 4 * N);
    float *rew = malloc(sizeof(float) * N);
    uint8_t *term = malloc(N);
    crl_rng r;
    crl_rng_init(&r, 7, 0);
    for (int i = 0; i < N; i++) {
        d->reset_one(d, state + 4 * i, &r, p);
        act[i] = (int64_t)(crl_rng_u32(&r) & 1);
    }
    double *copy = malloc(sizeof(double) * 4 * N);
    memcpy(copy, state, sizeof(double) * 4 * N);
    ck_assert_int_eq(classic_check_step(d, act, N, p, NULL, NULL), CRL_OK);
    d->step_batch(d, state, act, obs, rew, term, N, p, NULL);
    for (int i = 0; i < N; i++) {
        step_out o = step_discrete(d, copy + 4 * i, act[i], p);
        for (int j = 0; j < 4; j++) {
            ck_assert_double_eq(state[4 * i + j], o.state[j]);
            ck_assert_float_eq(obs[4 * i + j], o.obs[j]);
        }
        ck_assert_float_eq(rew[i], o.reward);
        ck_assert_uint_eq(term[i], o.terminated);
    }
    /* observe_batch agrees with the observation step wrote. */
    float *obs2 = malloc(sizeof(float) * 4 * N);
    d->observe_batch(d, state, obs2, N, p);
    ck_assert_int_eq(memcmp(obs, obs2, sizeof(float) * 4 * N), 0);

    /* Stronger gravity pulls a tilted pole faster. */
    const double s[4] = {0, 0, 0.1, 0};
    double strong[CLASSIC_MAX_PARAMS];
    defaults_of(d, strong);
    strong[CARTPOLE_GRAVITY] = 20.0;
    step_out a = step_discrete(d, s, 1, NULL), b = step_discrete(d, s, 1, strong);
    ck_assert(b.state[3] > a.state[3]);
    double want[4];
    cartpole_reference(s, 1, false, want);
    ck_assert_double_eq_tol(a.state[3], want[3], 1e-13);
    free(state);
    free(act);
    free(obs);
    free(obs2);
    free(rew);
    free(term);
    free(copy);
}
END_TEST

START_TEST(test_cartpole_reset)
{
    const classic_def *d = &classic_cartpole;
    double p[CLASSIC_MAX_PARAMS];
    defaults_of(d, p);
    crl_rng a, b, c;
    crl_rng_init(&a, 42, 3);
    crl_rng_init(&b, 42, 3);
    crl_rng_init(&c, 42, 4);
    double lo[4] = {1, 1, 1, 1}, hi[4] = {-1, -1, -1, -1};
    bool differs = false;
    for (int i = 0; i < 2000; i++) {
        double sa[4], sb[4], sc[4];
        d->reset_one(d, sa, &a, p);
        d->reset_one(d, sb, &b, p);
        d->reset_one(d, sc, &c, p);
        for (int j = 0; j < 4; j++) {
            ck_assert(sa[j] >= -0.05 && sa[j] < 0.05);
            ck_assert_double_eq(sa[j], sb[j]);
            differs |= sa[j] != sc[j];
            lo[j] = fmin(lo[j], sa[j]);
            hi[j] = fmax(hi[j], sa[j]);
        }
    }
    ck_assert(differs);
    for (int j = 0; j < 4; j++) {
        ck_assert(lo[j] < -0.045);
        ck_assert(hi[j] > 0.045);
    }
    /* Reset bounds are parameters (Gymnasium's reset options low/high). */
    p[CARTPOLE_RESET_LOW] = 0.0;
    p[CARTPOLE_RESET_HIGH] = 1.0;
    double s[4];
    d->reset_one(d, s, &a, p);
    for (int j = 0; j < 4; j++)
        ck_assert(s[j] >= 0.0 && s[j] < 1.0);
}
END_TEST

/* ---- Pendulum-v1 ---- */

static double wrap_pi(double x)
{
    double r = fmod(x + M_PI, 2 * M_PI);
    if (r < 0)
        r += 2 * M_PI;
    return r - M_PI;
}

START_TEST(test_pendulum_equations)
{
    const classic_def *d = &classic_pendulum;
    const double states[][2] = {{0.5, -0.3}, {3.0, 1.0}, {-2.0, 0.4}, {4.0, 0.2}, {-7.0, -3.0}};
    const float actions[] = {0.7f, -1.3f, 0.0f, 0.1f, -2.0f};
    for (size_t k = 0; k < 5; k++) {
        const double g = 10.0, m = 1.0, l = 1.0, dt = 0.05;
        double th = states[k][0], thd = states[k][1];
        double u = actions[k];
        /* thdot' = thdot + (3g/(2l) sin th + 3/(m l^2) u) dt; th' = th + thdot' dt. */
        double nthd = thd + (3 * g / (2 * l) * sin(th) + 3.0 / (m * l * l) * u) * dt;
        nthd = fmax(-8.0, fmin(8.0, nthd));
        double nth = th + nthd * dt;
        double cost = wrap_pi(th) * wrap_pi(th) + 0.1 * thd * thd + 0.001 * u * u;
        step_out o = step_box(d, states[k], actions[k], NULL);
        ck_assert_double_eq_tol(o.state[0], nth, 1e-6);
        ck_assert_double_eq_tol(o.state[1], nthd, 1e-6);
        ck_assert_double_eq_tol(o.reward, -cost, 1e-5);
        ck_assert_float_eq_tol(o.obs[0], (float)cos(o.state[0]), 1e-7f);
        ck_assert_float_eq_tol(o.obs[1], (float)sin(o.state[0]), 1e-7f);
        ck_assert_float_eq(o.obs[2], (float)o.state[1]);
        ck_assert_uint_eq(o.terminated, 0);
    }
}
END_TEST

START_TEST(test_pendulum_literals)
{
    const classic_def *d = &classic_pendulum;
    struct {
        double s[2];
        float u;
        double want[2];
        float reward;
    } cases[] = {
        {{0.5, -0.3}, 0.7f, {0.5082284574592391, 0.16456914918478066}, -0.2594900131225586f},
        {{3.0, 1.0}, -1.3f, {3.045542000659873, 0.9108400131974578}, -9.101690292358398f},
        /* torque 5 is clipped to 2 and the speed to 8 */
        {{-2.5, 7.9}, 5.0f, {-2.1124427054038986, 7.751145891922033}, -12.494999885559082f},
        /* angle 4.0 normalises to 4 - 2 pi */
        {{4.0, 0.2}, 0.1f, {3.982369906455755, -0.35260187088489975}, -5.216945171356201f},
        /* u**2 is powf, which rounds this tie up where u * u rounds to even */
        {{0.0, 0.0}, 0x1.001p-1f, {0x1.eba3d70a3d70cp-9, 0x1.3346666666667p-4}, -0x1.0645a4p-12f},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        step_out o = step_box(d, cases[k].s, cases[k].u, NULL);
        ck_assert_double_eq(o.state[0], cases[k].want[0]);
        ck_assert_double_eq(o.state[1], cases[k].want[1]);
        ck_assert_float_eq(o.reward, cases[k].reward);
    }
}
END_TEST

START_TEST(test_pendulum_clipping)
{
    const classic_def *d = &classic_pendulum;
    /* Torque: anything beyond +-max_torque acts (and costs) like max_torque. */
    const double s[2] = {1.0, 0.5};
    step_out big = step_box(d, s, 50.0f, NULL), two = step_box(d, s, 2.0f, NULL);
    ck_assert_double_eq(big.state[0], two.state[0]);
    ck_assert_double_eq(big.state[1], two.state[1]);
    ck_assert_float_eq(big.reward, two.reward);
    step_out neg = step_box(d, s, -50.0f, NULL), mtwo = step_box(d, s, -2.0f, NULL);
    ck_assert_double_eq(neg.state[1], mtwo.state[1]);
    ck_assert(two.state[1] != mtwo.state[1]);
    /* Speed: theta_dot' is clipped to +-max_speed before theta integrates it. */
    const double fast[2] = {1.0, 7.9};
    step_out o = step_box(d, fast, 2.0f, NULL);
    ck_assert_double_eq(o.state[1], 8.0);
    ck_assert_double_eq(o.state[0], 1.0 + 8.0 * 0.05);
    const double fast_neg[2] = {-1.0, -7.9};
    o = step_box(d, fast_neg, -2.0f, NULL);
    ck_assert_double_eq(o.state[1], -8.0);
    /* A different max_speed clips there instead, and g is a parameter. */
    double p[CLASSIC_MAX_PARAMS];
    defaults_of(d, p);
    p[PENDULUM_MAX_SPEED] = 1.0;
    o = step_box(d, s, 2.0f, p);
    ck_assert_double_eq(o.state[1], 1.0);
    defaults_of(d, p);
    p[PENDULUM_G] = 9.81;
    o = step_box(d, s, 0.0f, p);
    ck_assert_double_eq_tol(o.state[1], 0.5 + (3 * 9.81 / 2 * sin(1.0)) * 0.05, 1e-12);
}
END_TEST

START_TEST(test_pendulum_never_terminates)
{
    const classic_def *d = &classic_pendulum;
    double p[CLASSIC_MAX_PARAMS];
    defaults_of(d, p);
    crl_rng r;
    crl_rng_init(&r, 1, 1);
    double s[2];
    d->reset_one(d, s, &r, p);
    for (int t = 0; t < 2000; t++) {
        float u = (float)crl_rng_range(&r, -3, 3);
        step_out o = step_box(d, s, u, p);
        ck_assert_uint_eq(o.terminated, 0);
        ck_assert(o.reward <= 0.0f && o.reward >= (float)d->reward_min);
        ck_assert(fabs(o.state[1]) <= 8.0);
        memcpy(s, o.state, sizeof s);
    }
}
END_TEST

START_TEST(test_pendulum_reset)
{
    const classic_def *d = &classic_pendulum;
    double p[CLASSIC_MAX_PARAMS];
    defaults_of(d, p);
    crl_rng a, b;
    crl_rng_init(&a, 5, 0);
    crl_rng_init(&b, 5, 0);
    double amax = 0, vmax = 0;
    for (int i = 0; i < 2000; i++) {
        double sa[2], sb[2];
        d->reset_one(d, sa, &a, p);
        d->reset_one(d, sb, &b, p);
        ck_assert(sa[0] >= -M_PI && sa[0] < M_PI);
        ck_assert(sa[1] >= -1.0 && sa[1] < 1.0);
        ck_assert_double_eq(sa[0], sb[0]);
        ck_assert_double_eq(sa[1], sb[1]);
        amax = fmax(amax, fabs(sa[0]));
        vmax = fmax(vmax, fabs(sa[1]));
    }
    ck_assert(amax > 3.0 && vmax > 0.95);
}
END_TEST

/* ---- MountainCar-v0 ---- */

START_TEST(test_mountain_car_equations)
{
    const classic_def *d = &classic_mountain_car;
    const double states[][2] = {{-0.5, 0.01}, {-0.9, -0.03}, {0.2, 0.04}, {-0.3, 0.0}};
    for (size_t k = 0; k < 4; k++)
        for (int a = 0; a < 3; a++) {
            /* v' = v + (a - 1) 0.001 - 0.0025 cos(3 x); x' = x + v'. */
            double v = states[k][1] + (a - 1) * 0.001 - 0.0025 * cos(3 * states[k][0]);
            double x = states[k][0] + v;
            step_out o = step_discrete(d, states[k], a, NULL);
            ck_assert_double_eq_tol(o.state[1], v, 1e-15);
            ck_assert_double_eq_tol(o.state[0], x, 1e-15);
            ck_assert_float_eq(o.obs[0], (float)o.state[0]);
            ck_assert_float_eq(o.obs[1], (float)o.state[1]);
            ck_assert_float_eq(o.reward, -1.0f);
            ck_assert_uint_eq(o.terminated, 0);
        }
    /* Gymnasium: two steps from (-0.5, 0.01), actions 2 then 0. */
    const double s0[2] = {-0.5, 0.01};
    step_out o = step_discrete(d, s0, 2, NULL);
    ck_assert_double_eq(o.state[0], -0.48917684300416925);
    ck_assert_double_eq(o.state[1], 0.010823156995830743);
    o = step_discrete(d, o.state, 0, NULL);
    ck_assert_double_eq(o.state[0], -0.47961139191054886);
    ck_assert_double_eq(o.state[1], 0.009565451093620416);
}
END_TEST

START_TEST(test_mountain_car_clipping)
{
    const classic_def *d = &classic_mountain_car;
    /* Velocity is clipped to +-0.07 before the position moves. */
    const double fast[2] = {-0.5, 0.0695};
    step_out o = step_discrete(d, fast, 2, NULL);
    ck_assert_double_eq(o.state[1], 0.07);
    ck_assert_double_eq(o.state[0], -0.5 + 0.07);
    const double fast_left[2] = {-0.5, -0.0699};
    o = step_discrete(d, fast_left, 0, NULL);
    ck_assert_double_eq(o.state[1], -0.07);
    /* The left wall is inelastic: position -1.2, velocity 0. */
    const double wall[2] = {-1.18, -0.05};
    o = step_discrete(d, wall, 0, NULL);
    ck_assert_double_eq(o.state[0], -1.2);
    ck_assert_double_eq(o.state[1], 0.0);
    /* The right end only clips the position. */
    const double right[2] = {0.59, 0.06};
    double p[CLASSIC_MAX_PARAMS];
    defaults_of(d, p);
    p[MOUNTAIN_CAR_GOAL_POSITION] = 0.65; /* keep it from terminating */
    o = step_discrete(d, right, 2, p);
    ck_assert_double_eq(o.state[0], 0.6);
    ck_assert(o.state[1] > 0);
    ck_assert_uint_eq(o.terminated, 0);
}
END_TEST

/* Pick the velocity that makes v' exactly 0, so x' = x. */
static double mc_zeroing_velocity(double x, int a)
{
    return -((a - 1) * 0.001 + cos(3 * x) * (-0.0025));
}

START_TEST(test_mountain_car_termination)
{
    const classic_def *d = &classic_mountain_car;
    double s[2] = {0.5, mc_zeroing_velocity(0.5, 1)};
    step_out o = step_discrete(d, s, 1, NULL);
    ck_assert_double_eq(o.state[1], 0.0);
    ck_assert_double_eq(o.state[0], 0.5);
    ck_assert_uint_eq(o.terminated, 1);
    ck_assert_float_eq(o.reward, -1.0f);
    double below = nextafter(0.5, 0);
    s[0] = below;
    s[1] = mc_zeroing_velocity(below, 1);
    o = step_discrete(d, s, 1, NULL);
    ck_assert_double_eq(o.state[0], below);
    ck_assert_uint_eq(o.terminated, 0);
    /* Past the goal but moving left: not done (goal_velocity 0). */
    const double back[2] = {0.58, -0.01};
    o = step_discrete(d, back, 0, NULL);
    ck_assert(o.state[0] >= 0.5 && o.state[1] < 0);
    ck_assert_uint_eq(o.terminated, 0);
    /* goal_velocity raises the bar. */
    double p[CLASSIC_MAX_PARAMS];
    defaults_of(d, p);
    const double fwd[2] = {0.55, 0.01};
    o = step_discrete(d, fwd, 2, p);
    ck_assert_uint_eq(o.terminated, 1);
    p[MOUNTAIN_CAR_GOAL_VELOCITY] = 0.05;
    o = step_discrete(d, fwd, 2, p);
    ck_assert_uint_eq(o.terminated, 0);
}
END_TEST

START_TEST(test_mountain_car_reset)
{
    const classic_def *d = &classic_mountain_car;
    double p[CLASSIC_MAX_PARAMS];
    defaults_of(d, p);
    crl_rng a, b;
    crl_rng_init(&a, 11, 2);
    crl_rng_init(&b, 11, 2);
    double lo = 0, hi = -1;
    for (int i = 0; i < 1000; i++) {
        double sa[2], sb[2];
        d->reset_one(d, sa, &a, p);
        d->reset_one(d, sb, &b, p);
        ck_assert(sa[0] >= -0.6 && sa[0] < -0.4);
        ck_assert_double_eq(sa[1], 0.0);
        ck_assert_double_eq(sa[0], sb[0]);
        lo = fmin(lo, sa[0]);
        hi = fmax(hi, sa[0]);
    }
    ck_assert(lo < -0.59 && hi > -0.41);
}
END_TEST

/* ---- MountainCarContinuous-v0 ---- */

START_TEST(test_mcc_literals)
{
    const classic_def *d = &classic_mountain_car_continuous;
    /* A float64 state, as reset leaves it. */
    const double s0[2] = {-0.5123456789, 0.0};
    step_out o = step_box(d, s0, 0.3f, NULL);
    ck_assert_double_eq(o.state[0], -0.5119800567626953);
    ck_assert_double_eq(o.state[1], 0.0003656178305391222);
    ck_assert_float_eq(o.reward, (float)-0.009000000715255752);
    ck_assert_uint_eq(o.terminated, 0);
    /* The state is float32 from now on. */
    ck_assert_double_eq(o.state[0], (float)o.state[0]);
    ck_assert_float_eq(o.obs[0], (float)o.state[0]);
    ck_assert_float_eq(o.obs[1], (float)o.state[1]);
    double s1[2] = {o.state[0], o.state[1]};
    /* Action 1.7 pushes like 1.0 but pays 0.1 * 1.7^2. */
    o = step_box(d, s1, 1.7f, NULL);
    ck_assert_double_eq(o.state[0], -0.5102015733718872);
    ck_assert_double_eq(o.state[1], 0.0017784950323402882);
    ck_assert_float_eq(o.reward, (float)-0.28900001621246363);
    step_out one = step_box(d, s1, 1.0f, NULL);
    ck_assert_double_eq(one.state[0], o.state[0]);
    ck_assert_double_eq(one.state[1], o.state[1]);
    o = step_box(d, o.state, -0.45f, NULL);
    ck_assert_double_eq(o.state[0], -0.5091985464096069);
    ck_assert_double_eq(o.state[1], 0.0010030430275946856);
    ck_assert_float_eq(o.reward, (float)-0.02024999892711641);
    /* From a float32 state Gymnasium's velocity update runs in float32: the
     * float64 result would be -0.0003965049108956009. */
    o = step_box(d, s1, -0.45f, NULL);
    ck_assert_double_eq(o.state[0], -0.5123765468597412);
    ck_assert_double_eq(o.state[1], -0.00039650485268794);
}
END_TEST

START_TEST(test_mcc_equations_and_clipping)
{
    const classic_def *d = &classic_mountain_car_continuous;
    const double states[][2] = {{-0.5, 0.01}, {-0.9, -0.03}, {0.2, 0.04}};
    const float actions[] = {0.5f, -1.0f, 0.25f};
    for (int k = 0; k < 3; k++) {
        double s[2] = {(float)states[k][0], (float)states[k][1]};
        /* v' = v + a 0.0015 - 0.0025 cos(3 x); x' = x + v'. */
        double v = s[1] + actions[k] * 0.0015 - 0.0025 * cos(3 * s[0]);
        double x = s[0] + v;
        step_out o = step_box(d, s, actions[k], NULL);
        ck_assert_double_eq_tol(o.state[1], v, 1e-8);
        ck_assert_double_eq_tol(o.state[0], x, 1e-7);
        ck_assert_float_eq_tol(o.reward, (float)(-0.1 * actions[k] * actions[k]), 1e-7f);
    }
    /* Velocity clip at 0.07 and the inelastic left wall. */
    const double fast[2] = {(float)-0.5, (float)0.0699};
    step_out o = step_box(d, fast, 1.0f, NULL);
    ck_assert_float_eq((float)o.state[1], 0.07f);
    const double wall[2] = {(float)-1.18, (float)-0.05};
    o = step_box(d, wall, -1.0f, NULL);
    ck_assert_float_eq((float)o.state[0], -1.2f);
    ck_assert_double_eq(o.state[1], 0.0);
}
END_TEST

START_TEST(test_mcc_goal_reward_and_threshold)
{
    const classic_def *d = &classic_mountain_car_continuous;
    /* Reaching the goal pays 100 - 0.1 a^2 and terminates. */
    const double s[2] = {(float)0.44, (float)0.05};
    step_out o = step_box(d, s, 0.5f, NULL);
    ck_assert_uint_eq(o.terminated, 1);
    ck_assert_float_eq(o.reward, (float)(100.0 - 0.1 * 0.25));
    o = step_box(d, s, -2.0f, NULL);
    ck_assert_uint_eq(o.terminated, 1);
    ck_assert_float_eq(o.reward, (float)(100.0 - 0.1 * 4.0));
    /* Exactly at the goal with velocity 0: with action 0 the float32 update
     * is v' = v - (float)(0.0025 cos(3 x)), so v = that makes v' = 0, x' = x.
     * Gymnasium compares the float32 position with 0.45 in float32, so
     * x = (float)0.45 (which is below 0.45) already counts. */
    float gx = 0.45f;
    float c = (float)(0.0025 * cos((double)(3.0f * gx)));
    double at[2] = {gx, c};
    o = step_box(d, at, 0.0f, NULL);
    ck_assert_double_eq(o.state[1], 0.0);
    ck_assert_double_eq(o.state[0], (double)gx);
    ck_assert_uint_eq(o.terminated, 1);
    ck_assert_float_eq(o.reward, 100.0f);
    float below = nextafterf(gx, 0.0f);
    c = (float)(0.0025 * cos((double)(3.0f * below)));
    double under[2] = {below, c};
    o = step_box(d, under, 0.0f, NULL);
    ck_assert_double_eq(o.state[0], (double)below);
    ck_assert_uint_eq(o.terminated, 0);
    ck_assert_float_eq(o.reward, 0.0f);
}
END_TEST

/* ---- Acrobot-v1 ---- */

/* The book's equations of motion in plain form (Sutton & Barto). */
static void acrobot_deriv(const double *s, double a, bool nips, double *ds)
{
    const double m1 = 1, m2 = 1, l1 = 1, lc1 = 0.5, lc2 = 0.5, I1 = 1, I2 = 1, g = 9.8;
    double t1 = s[0], t2 = s[1], w1 = s[2], w2 = s[3];
    double d1 = m1 * lc1 * lc1 + m2 * (l1 * l1 + lc2 * lc2 + 2 * l1 * lc2 * cos(t2)) + I1 + I2;
    double d2 = m2 * (lc2 * lc2 + l1 * lc2 * cos(t2)) + I2;
    double phi2 = m2 * lc2 * g * cos(t1 + t2 - M_PI / 2);
    double phi1 = -m2 * l1 * lc2 * w2 * w2 * sin(t2) - 2 * m2 * l1 * lc2 * w2 * w1 * sin(t2) +
                  (m1 * lc1 + m2 * l1) * g * cos(t1 - M_PI / 2) + phi2;
    double extra = nips ? 0.0 : m2 * l1 * lc2 * w1 * w1 * sin(t2);
    double dd2 = (a + d2 / d1 * phi1 - extra - phi2) / (m2 * lc2 * lc2 + I2 - d2 * d2 / d1);
    double dd1 = -(d2 * dd2 + phi1) / d1;
    ds[0] = w1;
    ds[1] = w2;
    ds[2] = dd1;
    ds[3] = dd2;
}

static void acrobot_reference(const double *s, int action, bool nips, double *out)
{
    const double h = 0.2;
    double k1[4], k2[4], k3[4], k4[4], y[4];
    double a = action - 1.0;
    acrobot_deriv(s, a, nips, k1);
    for (int j = 0; j < 4; j++)
        y[j] = s[j] + h / 2 * k1[j];
    acrobot_deriv(y, a, nips, k2);
    for (int j = 0; j < 4; j++)
        y[j] = s[j] + h / 2 * k2[j];
    acrobot_deriv(y, a, nips, k3);
    for (int j = 0; j < 4; j++)
        y[j] = s[j] + h * k3[j];
    acrobot_deriv(y, a, nips, k4);
    for (int j = 0; j < 4; j++)
        out[j] = s[j] + h / 6 * (k1[j] + 2 * k2[j] + 2 * k3[j] + k4[j]);
    out[0] = wrap_pi(out[0]);
    out[1] = wrap_pi(out[1]);
    out[2] = fmax(-4 * M_PI, fmin(4 * M_PI, out[2]));
    out[3] = fmax(-9 * M_PI, fmin(9 * M_PI, out[3]));
}

START_TEST(test_acrobot_equations)
{
    const classic_def *d = &classic_acrobot;
    double p[CLASSIC_MAX_PARAMS];
    defaults_of(d, p);
    const double states[][4] = {
        {0.05, -0.03, 0.02, -0.01}, {1.0, -0.5, 2.0, -3.0}, {-2.8, 2.9, -5.0, 7.0}, {0, 0, 0, 0}};
    for (int nips = 0; nips < 2; nips++) {
        p[ACROBOT_BOOK_OR_NIPS] = nips;
        for (int k = 0; k < 4; k++)
            for (int a = 0; a < 3; a++) {
                double want[4];
                acrobot_reference(states[k], a, nips, want);
                step_out o = step_discrete(d, states[k], a, p);
                for (int j = 0; j < 4; j++)
                    ck_assert_double_eq_tol(o.state[j], want[j], 1e-12);
                ck_assert_float_eq(o.obs[0], (float)cos(o.state[0]));
                ck_assert_float_eq(o.obs[1], (float)sin(o.state[0]));
                ck_assert_float_eq(o.obs[2], (float)cos(o.state[1]));
                ck_assert_float_eq(o.obs[3], (float)sin(o.state[1]));
                ck_assert_float_eq(o.obs[4], (float)o.state[2]);
                ck_assert_float_eq(o.obs[5], (float)o.state[3]);
                bool term = -cos(o.state[0]) - cos(o.state[1] + o.state[0]) > 1.0;
                ck_assert_uint_eq(o.terminated, term);
                ck_assert_float_eq(o.reward, term ? 0.0f : -1.0f);
            }
    }
}
END_TEST

START_TEST(test_acrobot_literals)
{
    const classic_def *d = &classic_acrobot;
    /* Gymnasium's reset leaves a float32 state. */
    const double s[4] = {(float)0.05, (float)-0.03, (float)0.02, (float)-0.01};
    step_out o = step_discrete(d, s, 2, NULL);
    ck_assert_double_eq(o.state[0], 0.03393921221216201);
    ck_assert_double_eq(o.state[1], 0.010167791134685356);
    ck_assert_double_eq(o.state[2], -0.17583183195553032);
    ck_assert_double_eq(o.state[3], 0.40177497979625304);
    ck_assert_uint_eq(o.terminated, 0);
    ck_assert_float_eq(o.reward, -1.0f);
    double p[CLASSIC_MAX_PARAMS];
    defaults_of(d, p);
    p[ACROBOT_BOOK_OR_NIPS] = ACROBOT_NIPS;
    o = step_discrete(d, s, 2, p);
    ck_assert_double_eq(o.state[0], 0.03393986445331775);
    ck_assert_double_eq(o.state[1], 0.010166112844113992);
    ck_assert_double_eq(o.state[2], -0.17582960622364976);
    ck_assert_double_eq(o.state[3], 0.40176905399674445);
    /* A state where d2 ** 2 (pow) differs from d2 * d2 in the last bit. */
    const double s2[4] = {0x1.ebde0321c3098p-7, -0x1.79ceb9eee3631p-2, 0x1.a08ccae7f3f1cp-4,
                          -0x1.72ea1f8d11a14p-1};
    o = step_discrete(d, s2, 1, p);
    ck_assert_double_eq(o.state[0], 0x1.a0a8a43d30982p-6);
    ck_assert_double_eq(o.state[1], -0x1.e1c1dd4b86080p-2);
    ck_assert_double_eq(o.state[2], -0x1.5b1fb90232e80p-11);
    ck_assert_double_eq(o.state[3], -0x1.1a8bc6a7c0d06p-2);
    /* A swinging state that wraps, clips dtheta2 and reaches the goal. */
    const double big[4] = {(float)3.0, (float)0.5, (float)5.0, (float)-9.0};
    o = step_discrete(d, big, 0, NULL);
    ck_assert_double_eq(o.state[0], -2.2604048917550568);
    ck_assert_double_eq(o.state[1], -1.314101517290721);
    ck_assert_double_eq(o.state[2], 5.2372109182349185);
    ck_assert_double_eq(o.state[3], -8.731400613204462);
    ck_assert_uint_eq(o.terminated, 1);
    ck_assert_float_eq(o.reward, 0.0f);
}
END_TEST

START_TEST(test_acrobot_terminal_threshold)
{
    /* -cos(pi) - cos(pi/2) rounds to just below 1: not terminal. */
    const double below[4] = {M_PI, -M_PI_2, 0, 0};
    ck_assert(-cos(below[0]) - cos(below[1] + below[0]) < 1.0);
    ck_assert(!classic_acrobot_terminal(below));
    /* -cos(pi) - cos(3 pi/2) rounds to just above 1: terminal. */
    const double above[4] = {M_PI, M_PI_2, 0, 0};
    ck_assert(-cos(above[0]) - cos(above[1] + above[0]) > 1.0);
    ck_assert(classic_acrobot_terminal(above));
    /* A state whose height is exactly 1.0 is not terminal, one ulp-step of
     * theta2 beyond which it exceeds 1.0 is.  Found near a pair picked with
     * acos; the search keeps the test independent of the libm's last bits. */
    double s[4] = {0x1.93d1244a62237p+0, 0x1.72f8d542b0f53p+0, 0, 0};
    const double start = s[1];
    bool exact = false;
    for (int k = 0; k < 400 && !exact; k++) {
        s[1] = start + (k % 2 ? 1 : -1) * (k / 2) * 0x1p-52;
        exact = -cos(s[0]) - cos(s[1] + s[0]) == 1.0;
    }
    ck_assert_msg(exact, "no state with height exactly 1.0 near the seed");
    ck_assert(!classic_acrobot_terminal(s));
    int steps = 0;
    while (!(-cos(s[0]) - cos(s[1] + s[0]) > 1.0) && steps++ < 100000)
        s[1] = nextafter(s[1], 4); /* s0 + s1 < pi, so growing s1 raises the tip */
    ck_assert(-cos(s[0]) - cos(s[1] + s[0]) > 1.0);
    ck_assert(classic_acrobot_terminal(s));
    /* Hanging straight down is far from it, straight up is past it. */
    const double down[4] = {0, 0, 0, 0}, up[4] = {M_PI, 0, 0, 0};
    ck_assert(!classic_acrobot_terminal(down));
    ck_assert(classic_acrobot_terminal(up));
}
END_TEST

START_TEST(test_acrobot_wrap_and_bound)
{
    const classic_def *d = &classic_acrobot;
    /* Fast spins wrap the angles into [-pi, pi] and clip the velocities. */
    const double fast[4] = {3.0, -3.0, 40.0, -80.0};
    step_out o = step_discrete(d, fast, 2, NULL);
    ck_assert(o.state[0] >= -M_PI && o.state[0] <= M_PI);
    ck_assert(o.state[1] >= -M_PI && o.state[1] <= M_PI);
    ck_assert(fabs(o.state[2]) <= 4 * M_PI);
    ck_assert(fabs(o.state[3]) <= 9 * M_PI);
    double want[4];
    acrobot_reference(fast, 2, false, want);
    for (int j = 0; j < 4; j++)
        ck_assert_double_eq_tol(o.state[j], want[j], 1e-9);
    ck_assert(fabs(o.state[2]) == 4 * M_PI || fabs(o.state[3]) == 9 * M_PI);
    /* Non-finite loaded states neither hang nor crash. */
    const double inf[4] = {INFINITY, 0, 0, 0};
    o = step_discrete(d, inf, 1, NULL);
    ck_assert(!isfinite(o.state[0]) || fabs(o.state[0]) <= M_PI);
    const double huge[4] = {1e300, -1e300, 0, 0};
    o = step_discrete(d, huge, 1, NULL);
    ck_assert(fabs(o.state[0]) <= M_PI && fabs(o.state[1]) <= M_PI);
}
END_TEST

START_TEST(test_acrobot_reset_and_noise)
{
    const classic_def *d = &classic_acrobot;
    double p[CLASSIC_MAX_PARAMS];
    defaults_of(d, p);
    crl_rng a, b;
    crl_rng_init(&a, 99, 0);
    crl_rng_init(&b, 99, 0);
    for (int i = 0; i < 1000; i++) {
        double sa[4], sb[4];
        d->reset_one(d, sa, &a, p);
        d->reset_one(d, sb, &b, p);
        for (int j = 0; j < 4; j++) {
            ck_assert(sa[j] >= -0.1 && sa[j] <= 0.1);
            ck_assert_double_eq(sa[j], (float)sa[j]); /* Gymnasium casts to float32 */
            ck_assert_double_eq(sa[j], sb[j]);
        }
    }
    /* Torque noise draws from each env's stream, deterministically. */
    ck_assert(d->step_needs_rng == NULL || !d->step_needs_rng(d, p));
    p[ACROBOT_TORQUE_NOISE_MAX] = 0.5;
    ck_assert(d->step_needs_rng(d, p));
    int64_t act[2] = {1, 1};
    ck_assert_int_eq(classic_check_step(d, act, 2, p, NULL, NULL), CRL_E_INVALID);
    crl_rng r1[2], r2[2];
    for (int i = 0; i < 2; i++) {
        crl_rng_init(&r1[i], 3, (uint64_t)i);
        crl_rng_init(&r2[i], 3, (uint64_t)i);
    }
    ck_assert_int_eq(classic_check_step(d, act, 2, p, r1, NULL), CRL_OK);
    double s1[8] = {0}, s2[8] = {0};
    float obs[12], rew[2];
    uint8_t term[2];
    d->step_batch(d, s1, act, obs, rew, term, 2, p, r1);
    d->step_batch(d, s2, act, obs, rew, term, 2, p, r2);
    for (int j = 0; j < 8; j++)
        ck_assert_double_eq(s1[j], s2[j]);
    /* Zero torque from rest barely moves (cos(-pi/2) is 6e-17, not 0); the
     * noisy torques move the links, differently per stream. */
    const double rest[4] = {0, 0, 0, 0};
    step_out quiet = step_discrete(d, rest, 1, NULL);
    ck_assert(fabs(quiet.state[3]) < 1e-12);
    ck_assert(fabs(s1[3]) > 1e-3 && fabs(s1[7]) > 1e-3 && s1[3] != s1[7]);
}
END_TEST

/* ---- registry, parameters, bounds ---- */

START_TEST(test_registry_lookup)
{
    ck_assert_uint_eq(classic_def_count(), 5);
    const char *ids[] = {"CartPole-v1", "Pendulum-v1", "MountainCar-v0",
                         "MountainCarContinuous-v0", "Acrobot-v1"};
    const int steps[] = {500, 200, 200, 999, 500};
    const int sizes[][2] = {{600, 400}, {500, 500}, {600, 400}, {600, 400}, {500, 500}};
    for (int i = 0; i < 5; i++) {
        const classic_def *d = classic_find(ids[i]);
        ck_assert_ptr_nonnull(d);
        ck_assert_ptr_eq(classic_def_at((size_t)i), d);
        ck_assert_str_eq(d->id, ids[i]);
        ck_assert_int_eq(d->max_episode_steps, steps[i]);
        ck_assert_int_eq(d->render_width, sizes[i][0]);
        ck_assert_int_eq(d->render_height, sizes[i][1]);
        crl_error err = {0};
        ck_assert_ptr_eq(classic_lookup(ids[i], &err), d);
    }
    ck_assert_ptr_null(classic_def_at(5));
    ck_assert_ptr_null(classic_find("cartpole-v1"));
    ck_assert_ptr_null(classic_find(NULL));

    crl_error err = {0};
    ck_assert_ptr_null(classic_lookup("CartPole-v0", &err));
    ck_assert_int_eq(err.code, CRL_E_NOT_FOUND);
    ck_assert_ptr_nonnull(strstr(err.message, "'CartPole-v0'"));
    ck_assert_ptr_nonnull(strstr(err.message, "did you mean CartPole-v1?"));
    ck_assert_ptr_nonnull(strstr(err.message, "Acrobot-v1"));

    const char *near[5];
    size_t n = classic_suggest("cartpole", near, 5);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(near[0], "CartPole-v1");
    n = classic_suggest("MountainCar", near, 5);
    ck_assert_uint_eq(n, 2);
    ck_assert_str_eq(near[0], "MountainCar-v0");
    ck_assert_str_eq(near[1], "MountainCarContinuous-v0");
    n = classic_suggest("Pendulum-v0", near, 1);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(near[0], "Pendulum-v1");
    ck_assert_uint_eq(classic_suggest("HalfCheetah-v4", near, 5), 0);

    ck_assert_ptr_null(classic_lookup("HalfCheetah-v4", &err));
    ck_assert_int_eq(err.code, CRL_E_NOT_FOUND);
    ck_assert_ptr_null(strstr(err.message, "did you mean"));
    ck_assert_ptr_nonnull(strstr(err.message, "known ids: CartPole-v1, Pendulum-v1"));
    ck_assert_ptr_null(classic_lookup(NULL, NULL));
}
END_TEST

START_TEST(test_defs_consistent)
{
    for (size_t i = 0; i < classic_def_count(); i++) {
        const classic_def *d = classic_def_at(i);
        ck_assert(d->state_dim > 0 && d->state_dim <= CLASSIC_MAX_STATE);
        ck_assert(d->obs_dim > 0 && d->obs_dim <= CLASSIC_MAX_OBS);
        ck_assert(d->n_params > 0 && d->n_params <= CLASSIC_MAX_PARAMS);
        ck_assert_ptr_nonnull(d->step_batch);
        ck_assert_ptr_nonnull(d->reset_one);
        ck_assert_ptr_nonnull(d->observe_batch);
        ck_assert_ptr_nonnull(d->render_one);
        ck_assert_ptr_nonnull(d->bounds);
        ck_assert(d->reward_min <= d->reward_max);
        if (d->action_kind == CLASSIC_ACTION_DISCRETE) {
            ck_assert(d->action_n >= 2);
            ck_assert_ptr_null(d->action_low);
        } else {
            ck_assert_int_eq(d->action_kind, CLASSIC_ACTION_BOX);
            ck_assert(d->action_dim >= 1 && d->action_dim <= CLASSIC_MAX_ACTION);
            ck_assert_ptr_nonnull(d->action_low);
        }
        double p[CLASSIC_MAX_PARAMS];
        classic_params_default(d, p);
        crl_error err = {0};
        ck_assert_int_eq(classic_params_check(d, p, &err), CRL_OK);
        for (int k = 0; k < d->n_params; k++) {
            ck_assert_int_eq(classic_param_index(d, d->params[k].name), k);
            ck_assert_ptr_nonnull(d->params[k].doc);
        }
        ck_assert_int_eq(classic_param_index(d, "no_such_param"), -1);
        /* bounds() under the defaults reproduces the recorded arrays. */
        float lo[CLASSIC_MAX_OBS], hi[CLASSIC_MAX_OBS], alo[1] = {0}, ahi[1] = {0};
        d->bounds(d, p, lo, hi, alo, ahi);
        for (int k = 0; k < d->obs_dim; k++) {
            ck_assert_float_eq(lo[k], d->obs_low[k]);
            ck_assert_float_eq(hi[k], d->obs_high[k]);
            ck_assert(lo[k] < hi[k]);
        }
        if (d->action_kind == CLASSIC_ACTION_BOX) {
            ck_assert_float_eq(alo[0], d->action_low[0]);
            ck_assert_float_eq(ahi[0], d->action_high[0]);
        }
        /* A reset state observes inside the bounds. */
        crl_rng r;
        crl_rng_init(&r, 1, i);
        double s[CLASSIC_MAX_STATE];
        float o[CLASSIC_MAX_OBS];
        for (int t = 0; t < 100; t++) {
            d->reset_one(d, s, &r, p);
            d->observe_batch(d, s, o, 1, p);
            for (int k = 0; k < d->obs_dim; k++)
                ck_assert(o[k] >= lo[k] && o[k] <= hi[k]);
        }
    }
    /* The published spaces. */
    ck_assert_float_eq(classic_cartpole.obs_high[0], 4.8f);
    ck_assert(isinf(classic_cartpole.obs_high[1]) && classic_cartpole.obs_high[1] > 0);
    ck_assert_float_eq(classic_cartpole.obs_high[2], (float)(24 * M_PI / 180));
    ck_assert_float_eq(classic_pendulum.obs_high[2], 8.0f);
    ck_assert_float_eq(classic_pendulum.action_high[0], 2.0f);
    ck_assert_float_eq(classic_mountain_car.obs_low[1], -0.07f);
    ck_assert_float_eq(classic_mountain_car_continuous.action_low[0], -1.0f);
    ck_assert_float_eq(classic_acrobot.obs_high[5], (float)(9 * M_PI));
    ck_assert_int_eq(classic_mountain_car.action_n, 3);
    ck_assert_int_eq(classic_acrobot.action_n, 3);
    ck_assert_int_eq(classic_cartpole.action_n, 2);
    /* Parameters change bounds where Gymnasium derives them. */
    double p[CLASSIC_MAX_PARAMS];
    classic_params_default(&classic_pendulum, p);
    p[PENDULUM_MAX_TORQUE] = 3.0;
    float lo[3], hi[3], alo[1], ahi[1];
    classic_pendulum.bounds(&classic_pendulum, p, lo, hi, alo, ahi);
    ck_assert_float_eq(ahi[0], 3.0f);
    ck_assert_float_eq(alo[0], -3.0f);
}
END_TEST

START_TEST(test_params_check_errors)
{
    const classic_def *d = &classic_cartpole;
    double p[CLASSIC_MAX_PARAMS];
    crl_error err = {0};

    classic_params_default(d, p);
    p[CARTPOLE_MASSCART] = 0.0;
    ck_assert_int_eq(classic_params_check(d, p, &err), CRL_E_RANGE);
    ck_assert_ptr_nonnull(strstr(err.message, "CartPole-v1"));
    ck_assert_ptr_nonnull(strstr(err.message, "masscart"));

    classic_params_default(d, p);
    p[CARTPOLE_GRAVITY] = 5000.0;
    ck_assert_int_eq(classic_params_check(d, p, &err), CRL_E_RANGE);
    ck_assert_ptr_nonnull(strstr(err.message, "gravity = 5000"));

    classic_params_default(d, p);
    p[CARTPOLE_TAU] = NAN;
    ck_assert_int_eq(classic_params_check(d, p, &err), CRL_E_RANGE);
    ck_assert_ptr_nonnull(strstr(err.message, "tau"));

    classic_params_default(d, p);
    p[CARTPOLE_KINEMATICS_INTEGRATOR] = 0.5;
    ck_assert_int_eq(classic_params_check(d, p, &err), CRL_E_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "euler|semi-implicit"));

    classic_params_default(d, p);
    p[CARTPOLE_RESET_LOW] = 0.1;
    ck_assert_int_eq(classic_params_check(d, p, &err), CRL_E_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "reset_low"));

    classic_params_default(&classic_mountain_car, p);
    p[MOUNTAIN_CAR_MIN_POSITION] = 1.0;
    ck_assert_int_eq(classic_params_check(&classic_mountain_car, p, &err), CRL_E_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "min_position"));

    classic_params_default(&classic_acrobot, p);
    p[ACROBOT_RESET_HIGH] = -0.2;
    ck_assert_int_eq(classic_params_check(&classic_acrobot, p, &err), CRL_E_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "Acrobot-v1"));

    classic_params_default(&classic_pendulum, p);
    p[PENDULUM_DT] = -0.05;
    ck_assert_int_eq(classic_params_check(&classic_pendulum, p, NULL), CRL_E_RANGE);
}
END_TEST

START_TEST(test_check_step_errors)
{
    double p[CLASSIC_MAX_PARAMS];
    crl_error err = {0};
    classic_params_default(&classic_cartpole, p);
    int64_t ok[4] = {0, 1, 1, 0}, bad[4] = {0, 1, 1, 2}, neg[2] = {0, -1};
    ck_assert_int_eq(classic_check_step(&classic_cartpole, ok, 4, p, NULL, &err), CRL_OK);
    ck_assert_int_eq(classic_check_step(&classic_cartpole, bad, 4, p, NULL, &err), CRL_E_RANGE);
    ck_assert_ptr_nonnull(strstr(err.message, "action 2 of env 3"));
    ck_assert_ptr_nonnull(strstr(err.message, "Discrete(2)"));
    ck_assert_ptr_nonnull(strstr(err.message, "CartPole-v1"));
    ck_assert_int_eq(classic_check_step(&classic_cartpole, neg, 2, p, NULL, &err), CRL_E_RANGE);
    ck_assert_ptr_nonnull(strstr(err.message, "action -1 of env 1"));
    ck_assert_int_eq(classic_check_step(&classic_cartpole, NULL, 4, p, NULL, &err),
                     CRL_E_INVALID);
    ck_assert_int_eq(classic_check_step(&classic_cartpole, ok, -1, p, NULL, &err),
                     CRL_E_INVALID);
    /* MountainCar and Acrobot take 0..2. */
    classic_params_default(&classic_mountain_car, p);
    ck_assert_int_eq(classic_check_step(&classic_mountain_car, bad, 4, p, NULL, &err), CRL_OK);
    int64_t three[1] = {3};
    ck_assert_int_eq(classic_check_step(&classic_mountain_car, three, 1, p, NULL, &err),
                     CRL_E_RANGE);
    /* Box actions are clipped by the physics, so any float passes. */
    classic_params_default(&classic_pendulum, p);
    float big[2] = {100.0f, -100.0f};
    ck_assert_int_eq(classic_check_step(&classic_pendulum, big, 2, p, NULL, &err), CRL_OK);
}
END_TEST

/* ---- pictures ---- */

typedef struct {
    uint8_t *px;
    int w, h;
} frame;

static frame render(const classic_def *d, const double *state, const void *last_action,
                    const double *params, int w, int h)
{
    double p[CLASSIC_MAX_PARAMS];
    if (!params) {
        classic_params_default(d, p);
        params = p;
    }
    frame f = {malloc((size_t)w * (size_t)h * 3), w, h};
    crl_error err = {0};
    ck_assert_int_eq(d->render_one(d, state, last_action, f.px, w, h, params, &err), CRL_OK);
    return f;
}

static frame render_default(const classic_def *d, const double *state, const void *last_action)
{
    return render(d, state, last_action, NULL, d->render_width, d->render_height);
}

/* Pixel at pygame's (x, y) before Gymnasium's vertical flip. */
static const uint8_t *pg_pixel(const frame *f, int x, int y)
{
    int row = f->h - 1 - y;
    return f->px + ((size_t)row * (size_t)f->w + (size_t)x) * 3;
}

static void assert_colour(const frame *f, int x, int y, uint8_t r, uint8_t g, uint8_t b)
{
    const uint8_t *px = pg_pixel(f, x, y);
    ck_assert_msg(px[0] == r && px[1] == g && px[2] == b,
                  "pixel (%d, %d) is (%d, %d, %d), expected (%d, %d, %d)", x, y, px[0], px[1],
                  px[2], r, g, b);
}

static size_t non_white(const frame *f)
{
    size_t n = 0;
    for (size_t i = 0; i < (size_t)f->w * (size_t)f->h; i++)
        n += f->px[3 * i] != 255 || f->px[3 * i + 1] != 255 || f->px[3 * i + 2] != 255;
    return n;
}

static bool same(const frame *a, const frame *b)
{
    return a->w == b->w && a->h == b->h && memcmp(a->px, b->px, (size_t)a->w * a->h * 3) == 0;
}

START_TEST(test_render_cartpole)
{
    const classic_def *d = &classic_cartpole;
    const double upright[4] = {0, 0, 0, 0};
    frame f = render_default(d, upright, NULL);
    ck_assert(non_white(&f) > 2000);
    assert_colour(&f, 0, 399, 255, 255, 255);   /* background */
    assert_colour(&f, 599, 0, 255, 255, 255);
    assert_colour(&f, 300, 90, 0, 0, 0);        /* cart: x*scale + 300, y 85..115 */
    assert_colour(&f, 300, 200, 202, 152, 101); /* pole, up from the axle */
    assert_colour(&f, 300, 107, 129, 132, 203); /* axle at (300, 107) */
    assert_colour(&f, 10, 100, 0, 0, 0);        /* track line at y = 100 */

    /* Tilting the pole moves its pixels; the cart stays. */
    const double tilted[4] = {0, 0, 0.2, 0};
    frame g = render_default(d, tilted, NULL);
    ck_assert(!same(&f, &g));
    assert_colour(&g, 300, 200, 255, 255, 255);
    assert_colour(&g, 300 + (int)lround(92.5 * sin(0.2)), 107 + (int)lround(92.5 * cos(0.2)),
                  202, 152, 101);
    assert_colour(&g, 300, 90, 0, 0, 0);
    /* Moving the cart moves it by x * 125 pixels. */
    const double moved[4] = {1.0, 0, 0, 0};
    frame m = render_default(d, moved, NULL);
    assert_colour(&m, 300, 90, 255, 255, 255);
    assert_colour(&m, 425, 90, 0, 0, 0);
    free(f.px);
    free(g.px);
    free(m.px);
}
END_TEST

START_TEST(test_render_pendulum)
{
    const classic_def *d = &classic_pendulum;
    const double up[2] = {0, 0};
    frame f = render_default(d, up, NULL);
    ck_assert(non_white(&f) > 1000);
    assert_colour(&f, 0, 0, 255, 255, 255);
    assert_colour(&f, 250, 300, 204, 77, 77); /* rod points up at theta = 0 */
    assert_colour(&f, 250, 250, 0, 0, 0);     /* axle */
    assert_colour(&f, 250, 200, 255, 255, 255);
    const double down[2] = {M_PI, 0};
    frame g = render_default(d, down, NULL);
    assert_colour(&g, 250, 200, 204, 77, 77);
    assert_colour(&g, 250, 300, 255, 255, 255);
    /* The torque arrow appears with a last action, mirrored by its sign. */
    float u = 2.0f, v = -2.0f;
    frame a = render_default(d, up, &u);
    frame b = render_default(d, up, &v);
    ck_assert(!same(&f, &a));
    ck_assert(!same(&a, &b));
    ck_assert(non_white(&a) > non_white(&f));
    assert_colour(&a, 210, 250, 0, 0, 0);
    assert_colour(&f, 210, 250, 255, 255, 255);
    free(f.px);
    free(g.px);
    free(a.px);
    free(b.px);
}
END_TEST

START_TEST(test_render_mountain_car)
{
    const classic_def *d = &classic_mountain_car;
    const double s[2] = {-0.5, 0};
    frame f = render_default(d, s, NULL);
    ck_assert(non_white(&f) > 1000);
    assert_colour(&f, 0, 399, 255, 255, 255);
    assert_colour(&f, 233, 54, 0, 0, 0);      /* car body above (-0.5 + 1.2) * 333.3 */
    assert_colour(&f, 572, 377, 204, 204, 0); /* flag at 0.5 */
    assert_colour(&f, 566, 360, 0, 0, 0);     /* flag pole */
    const double s2[2] = {0.3, 0};
    frame g = render_default(d, s2, NULL);
    ck_assert(!same(&f, &g));
    assert_colour(&g, 233, 54, 255, 255, 255);
    /* The continuous variant puts its flag at 0.45. */
    frame c = render_default(&classic_mountain_car_continuous, s, NULL);
    assert_colour(&c, 556, 374, 204, 204, 0);
    assert_colour(&c, 572, 377, 255, 255, 255);
    free(f.px);
    free(g.px);
    free(c.px);
}
END_TEST

START_TEST(test_render_acrobot)
{
    const classic_def *d = &classic_acrobot;
    const double s[4] = {0, 0, 0, 0};
    frame f = render_default(d, s, NULL);
    ck_assert(non_white(&f) > 1000);
    assert_colour(&f, 0, 0, 255, 255, 255);
    assert_colour(&f, 250, 200, 0, 204, 204); /* link 1 hangs down */
    assert_colour(&f, 250, 250, 204, 204, 0); /* joint at the pivot */
    assert_colour(&f, 250, 136, 204, 204, 0); /* joint between the links */
    assert_colour(&f, 250, 80, 0, 204, 204);  /* link 2 */
    assert_colour(&f, 10, 363, 0, 0, 0);      /* goal line at y = 1 */
    const double s2[4] = {M_PI / 2, 0, 0, 0};
    frame g = render_default(d, s2, NULL);
    ck_assert(!same(&f, &g));
    assert_colour(&g, 250, 200, 255, 255, 255);
    assert_colour(&g, 300, 250, 0, 204, 204); /* link 1 now points right */
    free(f.px);
    free(g.px);
}
END_TEST

START_TEST(test_render_sizes)
{
    /* Other sizes scale the picture; absurd sizes are refused. */
    const double s[4] = {0, 0, 0, 0};
    frame small = render(&classic_cartpole, s, NULL, NULL, 300, 200);
    ck_assert(non_white(&small) > 500);
    const uint8_t *px = pg_pixel(&small, 150, 45);
    ck_assert(px[0] == 0 && px[1] == 0 && px[2] == 0);
    free(small.px);

    double p[CLASSIC_MAX_PARAMS];
    classic_params_default(&classic_cartpole, p);
    uint8_t one[3];
    crl_error err = {0};
    ck_assert_int_eq(classic_cartpole.render_one(&classic_cartpole, s, NULL, one, 0, 400, p, &err),
                     CRL_E_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "CartPole-v1"));
    ck_assert_ptr_nonnull(strstr(err.message, "0 x 400"));
    ck_assert_int_eq(
        classic_acrobot.render_one(&classic_acrobot, s, NULL, one, 100000, 10, p, NULL),
        CRL_E_INVALID);
    ck_assert_int_eq(classic_cartpole.render_one(&classic_cartpole, s, NULL, one, 1, 1, p, &err),
                     CRL_OK);
}
END_TEST

static Suite *classic_suite(void)
{
    Suite *s = suite_create("classic_dynamics");
    TCase *tc = tcase_create("cartpole");
    tcase_add_test(tc, test_cartpole_equations);
    tcase_add_test(tc, test_cartpole_literals);
    tcase_add_test(tc, test_cartpole_termination_threshold);
    tcase_add_test(tc, test_cartpole_batch_and_params);
    tcase_add_test(tc, test_cartpole_reset);
    suite_add_tcase(s, tc);

    tc = tcase_create("pendulum");
    tcase_add_test(tc, test_pendulum_equations);
    tcase_add_test(tc, test_pendulum_literals);
    tcase_add_test(tc, test_pendulum_clipping);
    tcase_add_test(tc, test_pendulum_never_terminates);
    tcase_add_test(tc, test_pendulum_reset);
    suite_add_tcase(s, tc);

    tc = tcase_create("mountain_car");
    tcase_add_test(tc, test_mountain_car_equations);
    tcase_add_test(tc, test_mountain_car_clipping);
    tcase_add_test(tc, test_mountain_car_termination);
    tcase_add_test(tc, test_mountain_car_reset);
    tcase_add_test(tc, test_mcc_literals);
    tcase_add_test(tc, test_mcc_equations_and_clipping);
    tcase_add_test(tc, test_mcc_goal_reward_and_threshold);
    suite_add_tcase(s, tc);

    tc = tcase_create("acrobot");
    tcase_add_test(tc, test_acrobot_equations);
    tcase_add_test(tc, test_acrobot_literals);
    tcase_add_test(tc, test_acrobot_terminal_threshold);
    tcase_add_test(tc, test_acrobot_wrap_and_bound);
    tcase_add_test(tc, test_acrobot_reset_and_noise);
    suite_add_tcase(s, tc);

    tc = tcase_create("registry");
    tcase_add_test(tc, test_registry_lookup);
    tcase_add_test(tc, test_defs_consistent);
    tcase_add_test(tc, test_params_check_errors);
    tcase_add_test(tc, test_check_step_errors);
    suite_add_tcase(s, tc);

    tc = tcase_create("render");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_render_cartpole);
    tcase_add_test(tc, test_render_pendulum);
    tcase_add_test(tc, test_render_mountain_car);
    tcase_add_test(tc, test_render_acrobot);
    tcase_add_test(tc, test_render_sizes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(classic_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
