/* Acrobot-v1: Gymnasium 1.x's two-link acrobot (RK4 over the book's dynamics), reset and
 * picture. */
#include "classic.h"

#include <math.h>

/* Gymnasium's reset casts the state to float32; np.append with the Python
 * torque makes the step compute in float64, and the state stays float64.
 * `x ** 2` is classic_pow2 (the C library's pow, not x * x), as in Python. */

static const classic_param acrobot_params[ACROBOT_N_PARAMS] = {
    {"dt", CRL_OPT_DOUBLE, CLASSIC_PARAM_POSITIVE, 0.2, 0.0, 10.0, NULL,
     "seconds integrated per step (one RK4 step)"},
    {"link_length_1", CRL_OPT_DOUBLE, CLASSIC_PARAM_POSITIVE, 1.0, 0.0, 1e3, NULL,
     "length of link 1 (m)"},
    {"link_length_2", CRL_OPT_DOUBLE, CLASSIC_PARAM_POSITIVE, 1.0, 0.0, 1e3, NULL,
     "length of link 2 (m), drawing only"},
    {"link_mass_1", CRL_OPT_DOUBLE, CLASSIC_PARAM_POSITIVE, 1.0, 0.0, 1e6, NULL,
     "mass of link 1 (kg)"},
    {"link_mass_2", CRL_OPT_DOUBLE, CLASSIC_PARAM_POSITIVE, 1.0, 0.0, 1e6, NULL,
     "mass of link 2 (kg)"},
    {"link_com_pos_1", CRL_OPT_DOUBLE, 0, 0.5, 0.0, 1e3, NULL,
     "centre of mass of link 1 from its joint (m)"},
    {"link_com_pos_2", CRL_OPT_DOUBLE, 0, 0.5, 0.0, 1e3, NULL,
     "centre of mass of link 2 from its joint (m)"},
    {"link_moi", CRL_OPT_DOUBLE, CLASSIC_PARAM_POSITIVE, 1.0, 0.0, 1e6, NULL,
     "moment of inertia of both links"},
    {"max_vel_1", CRL_OPT_DOUBLE, 0, 4 * M_PI, 0.0, 1e6, NULL,
     "angular velocity clip of joint 1 (rad/s)"},
    {"max_vel_2", CRL_OPT_DOUBLE, 0, 9 * M_PI, 0.0, 1e6, NULL,
     "angular velocity clip of joint 2 (rad/s)"},
    {"gravity", CRL_OPT_DOUBLE, 0, 9.8, 0.0, 1000.0, NULL, "gravitational acceleration (m/s^2)"},
    {"torque_noise_max", CRL_OPT_DOUBLE, 0, 0.0, 0.0, 1e3, NULL,
     "uniform noise in [-max, max) added to the torque (draws from the env's stream)"},
    {"book_or_nips", CRL_OPT_ENUM, 0, ACROBOT_BOOK, 0, 1, "book|nips",
     "dynamics of Sutton & Barto's book or of the NIPS 1995 paper"},
    {"reset_low", CRL_OPT_DOUBLE, 0, -0.1, -1e3, 1e3, NULL,
     "lower bound of the uniform initial state"},
    {"reset_high", CRL_OPT_DOUBLE, 0, 0.1, -1e3, 1e3, NULL,
     "upper bound of the uniform initial state"},
};

static const float acrobot_obs_high[6] = {1.0f, 1.0f, 1.0f, 1.0f, (float)(4 * M_PI),
                                          (float)(9 * M_PI)};
static const float acrobot_obs_low[6] = {-1.0f, -1.0f, -1.0f, -1.0f, -(float)(4 * M_PI),
                                         -(float)(9 * M_PI)};
static const char *const acrobot_state_names[4] = {"theta1", "theta2", "dtheta1", "dtheta2"};
static const char *const acrobot_obs_names[6] = {"cos_theta1", "sin_theta1", "cos_theta2",
                                                 "sin_theta2", "dtheta1", "dtheta2"};

/* Constants of _dsdt, computed once per batch. */
typedef struct {
    double m1, m2, l1, lc1, lc2, I1, I2, g;
    bool nips;
} acrobot_k;

/* Time derivative of (theta1, theta2, dtheta1, dtheta2) under torque a. */
static inline void acrobot_dsdt(const acrobot_k *k, const double *s, double a, double *ds)
{
    const double m1 = k->m1, m2 = k->m2, l1 = k->l1, lc1 = k->lc1, lc2 = k->lc2;
    const double I1 = k->I1, I2 = k->I2, g = k->g;
    const double theta1 = s[0], theta2 = s[1], dtheta1 = s[2], dtheta2 = s[3];
    const double c2 = cos(theta2), s2 = sin(theta2);
    double d1 = m1 * classic_pow2(lc1) +
                m2 * (classic_pow2(l1) + classic_pow2(lc2) + 2 * l1 * lc2 * c2) + I1 + I2;
    double d2 = m2 * (classic_pow2(lc2) + l1 * lc2 * c2) + I2;
    double phi2 = m2 * lc2 * g * cos(theta1 + theta2 - M_PI / 2.0);
    double phi1 = -m2 * l1 * lc2 * classic_pow2(dtheta2) * s2 -
                  2 * m2 * l1 * lc2 * dtheta2 * dtheta1 * s2 +
                  (m1 * lc1 + m2 * l1) * g * cos(theta1 - M_PI / 2) + phi2;
    double den = m2 * classic_pow2(lc2) + I2 - classic_pow2(d2) / d1;
    double ddtheta2;
    if (k->nips)
        ddtheta2 = (a + d2 / d1 * phi1 - phi2) / den;
    else
        ddtheta2 = (a + d2 / d1 * phi1 - m2 * l1 * lc2 * classic_pow2(dtheta1) * s2 - phi2) / den;
    double ddtheta1 = -(d2 * ddtheta2 + phi1) / d1;
    ds[0] = dtheta1;
    ds[1] = dtheta2;
    ds[2] = ddtheta1;
    ds[3] = ddtheta2;
}

/* Gymnasium's wrap: step by whole turns.  Huge or infinite angles (only from
 * a loaded state) would loop (nearly) forever, so they use fmod instead. */
static inline double wrap_angle(double x, double m, double M)
{
    double diff = M - m;
    if (!isfinite(x))
        return x;
    if (fabs(x) > 1e4)
        x = fmod(x, diff);
    while (x > M)
        x = x - diff;
    while (x < m)
        x = x + diff;
    return x;
}

/* Python's min(max(x, m), M). */
static inline double bound(double x, double m, double M)
{
    double r = m > x ? m : x;
    return M < r ? M : r;
}

bool classic_acrobot_terminal(const double *s)
{
    return -cos(s[0]) - cos(s[1] + s[0]) > 1.0;
}

static void acrobot_step_batch(const classic_def *d, double *state, const void *action,
                               float *obs, float *reward, uint8_t *terminated, int64_t n,
                               const double *p, crl_rng *rng)
{
    (void)d;
    const int64_t *act = action;
    const acrobot_k k = {
        .m1 = p[ACROBOT_LINK_MASS_1], .m2 = p[ACROBOT_LINK_MASS_2],
        .l1 = p[ACROBOT_LINK_LENGTH_1], .lc1 = p[ACROBOT_LINK_COM_POS_1],
        .lc2 = p[ACROBOT_LINK_COM_POS_2], .I1 = p[ACROBOT_LINK_MOI], .I2 = p[ACROBOT_LINK_MOI],
        .g = p[ACROBOT_GRAVITY], .nips = p[ACROBOT_BOOK_OR_NIPS] == ACROBOT_NIPS,
    };
    /* rk4 over t = [0, dt]: the step is t[1] - t[0]. */
    const double dt = p[ACROBOT_DT] - 0.0;
    const double dt2 = dt / 2.0;
    const double dt6 = dt / 6.0;
    const double noise = p[ACROBOT_TORQUE_NOISE_MAX];
    const double max_vel_1 = p[ACROBOT_MAX_VEL_1], max_vel_2 = p[ACROBOT_MAX_VEL_2];
    for (int64_t i = 0; i < n; i++) {
        double *s = state + 4 * i;
        double torque = (double)(act[i] - 1); /* AVAIL_TORQUE = [-1, 0, +1] */
        if (noise > 0 && rng)
            torque += crl_rng_range(&rng[i], -noise, noise);

        double k1[4], k2[4], k3[4], k4[4], y[4];
        acrobot_dsdt(&k, s, torque, k1);
        for (int j = 0; j < 4; j++)
            y[j] = s[j] + dt2 * k1[j];
        acrobot_dsdt(&k, y, torque, k2);
        for (int j = 0; j < 4; j++)
            y[j] = s[j] + dt2 * k2[j];
        acrobot_dsdt(&k, y, torque, k3);
        for (int j = 0; j < 4; j++)
            y[j] = s[j] + dt * k3[j];
        acrobot_dsdt(&k, y, torque, k4);
        double ns[4];
        for (int j = 0; j < 4; j++)
            ns[j] = s[j] + dt6 * (k1[j] + 2 * k2[j] + 2 * k3[j] + k4[j]);

        ns[0] = wrap_angle(ns[0], -M_PI, M_PI);
        ns[1] = wrap_angle(ns[1], -M_PI, M_PI);
        ns[2] = bound(ns[2], -max_vel_1, max_vel_1);
        ns[3] = bound(ns[3], -max_vel_2, max_vel_2);
        for (int j = 0; j < 4; j++)
            s[j] = ns[j];
        bool term = classic_acrobot_terminal(s);
        terminated[i] = (uint8_t)term;
        reward[i] = term ? 0.0f : -1.0f;
        float *o = obs + 6 * i;
        o[0] = (float)cos(s[0]);
        o[1] = (float)sin(s[0]);
        o[2] = (float)cos(s[1]);
        o[3] = (float)sin(s[1]);
        o[4] = (float)s[2];
        o[5] = (float)s[3];
    }
}

static void acrobot_reset_one(const classic_def *d, double *state, crl_rng *rng,
                              const double *p)
{
    (void)d;
    for (int k = 0; k < 4; k++) {
        double v = crl_rng_range(rng, p[ACROBOT_RESET_LOW], p[ACROBOT_RESET_HIGH]);
        state[k] = classic_round_f32(v); /* Gymnasium casts the reset state to float32 */
    }
}

static void acrobot_observe_batch(const classic_def *d, const double *state, float *obs,
                                  int64_t n, const double *p)
{
    (void)d;
    (void)p;
    for (int64_t i = 0; i < n; i++) {
        const double *s = state + 4 * i;
        float *o = obs + 6 * i;
        o[0] = (float)cos(s[0]);
        o[1] = (float)sin(s[0]);
        o[2] = (float)cos(s[1]);
        o[3] = (float)sin(s[1]);
        o[4] = (float)s[2];
        o[5] = (float)s[3];
    }
}

static void acrobot_bounds(const classic_def *d, const double *p, float *obs_low,
                           float *obs_high, float *act_low, float *act_high)
{
    (void)d;
    (void)act_low;
    (void)act_high;
    const float high[6] = {1.0f, 1.0f, 1.0f, 1.0f, (float)p[ACROBOT_MAX_VEL_1],
                           (float)p[ACROBOT_MAX_VEL_2]};
    for (int k = 0; k < 6; k++) {
        obs_high[k] = high[k];
        obs_low[k] = -high[k];
    }
}

static int acrobot_check_params(const classic_def *d, const double *p, crl_error *err)
{
    return classic_check_reset_range(d, p[ACROBOT_RESET_LOW], p[ACROBOT_RESET_HIGH], err);
}

static bool acrobot_step_needs_rng(const classic_def *d, const double *p)
{
    (void)d;
    return p[ACROBOT_TORQUE_NOISE_MAX] > 0;
}

static int acrobot_render_one(const classic_def *d, const double *s, const void *last_action,
                              uint8_t *rgb, int w, int h, const double *p, crl_error *err)
{
    (void)last_action;
    classic_canvas cv;
    int rc = classic_canvas_begin(&cv, d, w, h, err);
    if (rc != CRL_OK)
        return rc;
    cairo_t *cr = cv.cr;
    const double L1 = p[ACROBOT_LINK_LENGTH_1], L2 = p[ACROBOT_LINK_LENGTH_2];
    const double bound_ = L1 + L2 + 0.2;
    const double scale = d->render_width / (bound_ * 2);
    const double offset = d->render_width / 2.0;

    /* Gymnasium lists (row, column) pairs and reverses them: x = p[1], y = p[0]. */
    const double p1_0 = -L1 * cos(s[0]) * scale, p1_1 = L1 * sin(s[0]) * scale;
    const double joints[4] = {0, 0, p1_1, p1_0};
    const double thetas[2] = {s[0] - M_PI / 2, s[0] + s[1] - M_PI / 2};
    const double lengths[2] = {L1 * scale, L2 * scale};

    classic_line(cr, -2.2 * scale + offset, 1 * scale + offset, 2.2 * scale + offset,
                 1 * scale + offset, 0x000000);
    for (int j = 0; j < 2; j++) {
        double x = joints[2 * j] + offset, y = joints[2 * j + 1] + offset;
        const double l = 0, r = lengths[j], t = 0.1 * scale, b = -0.1 * scale;
        const double corners[8] = {l, b, l, t, r, t, r, b};
        double link[8];
        for (int c = 0; c < 4; c++) {
            classic_rotate(corners[2 * c], corners[2 * c + 1], thetas[j], &link[2 * c],
                           &link[2 * c + 1]);
            link[2 * c] += x;
            link[2 * c + 1] += y;
        }
        classic_fill_polygon(cr, link, 4, 0x00CCCC);
        classic_fill_circle(cr, (int)x, (int)y, (int)(0.1 * scale), 0xCCCC00);
    }
    return classic_canvas_finish(&cv, d, rgb, err);
}

const classic_def classic_acrobot = {
    .id = "Acrobot-v1",
    .description = "swing the tip of a two-link chain above a line by torquing the middle joint",
    .state_dim = 4,
    .obs_dim = 6,
    .action_kind = CLASSIC_ACTION_DISCRETE,
    .action_n = 3,
    .action_dim = 0,
    .max_episode_steps = 500,
    .reward_threshold = -100.0,
    .reward_min = -1.0,
    .reward_max = 0.0,
    .reward_doc = "-1 every step that does not reach the goal height, 0 on the one that does",
    .obs_low = acrobot_obs_low,
    .obs_high = acrobot_obs_high,
    .action_low = NULL,
    .action_high = NULL,
    .state_names = acrobot_state_names,
    .obs_names = acrobot_obs_names,
    .render_width = 500,
    .render_height = 500,
    .render_fps = 15,
    .n_params = ACROBOT_N_PARAMS,
    .params = acrobot_params,
    .step_batch = acrobot_step_batch,
    .reset_one = acrobot_reset_one,
    .observe_batch = acrobot_observe_batch,
    .render_one = acrobot_render_one,
    .bounds = acrobot_bounds,
    .check_params = acrobot_check_params,
    .step_needs_rng = acrobot_step_needs_rng,
};
