/* Pendulum-v1: Gymnasium 1.x's torque-limited pendulum swing-up, reset and picture. */
#include "classic.h"

#include <math.h>

/* The float32 action stays float32 inside Gymnasium's step under NumPy 2
 * promotion (a Python float meeting a float32 scalar takes float32), so
 * the clip, u**2 (powf), 0.001*u**2 and 3/(m l^2)*u round to float32 before
 * joining the float64 state.  `x ** 2` is classic_pow2/classic_powf2. */

static const classic_param pendulum_params[PENDULUM_N_PARAMS] = {
    {"g", CRL_OPT_DOUBLE, 0, 10.0, 0.0, 1000.0, NULL, "gravitational acceleration (m/s^2)"},
    {"m", CRL_OPT_DOUBLE, CLASSIC_PARAM_POSITIVE, 1.0, 0.0, 1e6, NULL, "pendulum mass (kg)"},
    {"l", CRL_OPT_DOUBLE, CLASSIC_PARAM_POSITIVE, 1.0, 0.0, 1e3, NULL, "pendulum length (m)"},
    {"max_speed", CRL_OPT_DOUBLE, 0, 8.0, 0.0, 1e6, NULL, "angular speed clip (rad/s)"},
    {"max_torque", CRL_OPT_DOUBLE, 0, 2.0, 0.0, 1e6, NULL, "torque clip and action bound (N m)"},
    {"dt", CRL_OPT_DOUBLE, CLASSIC_PARAM_POSITIVE, 0.05, 0.0, 10.0, NULL,
     "seconds between state updates"},
    {"x_init", CRL_OPT_DOUBLE, 0, M_PI, 0.0, 1e6, NULL,
     "initial angle is uniform in [-x_init, x_init)"},
    {"y_init", CRL_OPT_DOUBLE, 0, 1.0, 0.0, 1e6, NULL,
     "initial angular velocity is uniform in [-y_init, y_init)"},
};

static const float pendulum_obs_high[3] = {1.0f, 1.0f, 8.0f};
static const float pendulum_obs_low[3] = {-1.0f, -1.0f, -8.0f};
static const float pendulum_act_high[1] = {2.0f};
static const float pendulum_act_low[1] = {-2.0f};
static const char *const pendulum_state_names[2] = {"theta", "theta_dot"};
static const char *const pendulum_obs_names[3] = {"cos_theta", "sin_theta", "theta_dot"};

/* NumPy's float64 remainder: fmod, then moved to the divisor's sign. */
static inline double np_remainder(double a, double b)
{
    double mod = fmod(a, b);
    if (mod != 0.0) {
        if ((b < 0) != (mod < 0))
            mod += b;
    } else {
        mod = copysign(0.0, b);
    }
    return mod;
}

/* np.clip on a scalar: NaN passes through. */
static inline double clip_d(double x, double lo, double hi)
{
    return x < lo ? lo : (x > hi ? hi : x);
}

static inline float clip_f(float x, float lo, float hi)
{
    return x < lo ? lo : (x > hi ? hi : x);
}

static void pendulum_step_batch(const classic_def *d, double *state, const void *action,
                                float *obs, float *reward, uint8_t *terminated, int64_t n,
                                const double *p, crl_rng *rng)
{
    (void)d;
    (void)rng;
    const float *act = action;
    const double g = p[PENDULUM_G], m = p[PENDULUM_M], l = p[PENDULUM_L];
    const double dt = p[PENDULUM_DT];
    const double max_speed = p[PENDULUM_MAX_SPEED];
    const float max_torque = (float)p[PENDULUM_MAX_TORQUE];
    const double c_grav = 3 * g / (2 * l);
    const float c_torque = (float)(3.0 / (m * classic_pow2(l)));
    for (int64_t i = 0; i < n; i++) {
        double *s = state + 2 * i;
        double th = s[0], thdot = s[1];
        float u = clip_f(act[i], -max_torque, max_torque);
        double costs = classic_pow2(np_remainder(th + M_PI, 2 * M_PI) - M_PI) +
                       0.1 * classic_pow2(thdot) + (double)(0.001f * classic_powf2(u));
        double newthdot = thdot + (c_grav * sin(th) + (double)(c_torque * u)) * dt;
        newthdot = clip_d(newthdot, -max_speed, max_speed);
        double newth = th + newthdot * dt;
        s[0] = newth;
        s[1] = newthdot;
        reward[i] = (float)(-costs);
        terminated[i] = 0;
        float *o = obs + 3 * i;
        o[0] = (float)cos(newth);
        o[1] = (float)sin(newth);
        o[2] = (float)newthdot;
    }
}

static void pendulum_reset_one(const classic_def *d, double *state, crl_rng *rng,
                               const double *p)
{
    (void)d;
    state[0] = crl_rng_range(rng, -p[PENDULUM_X_INIT], p[PENDULUM_X_INIT]);
    state[1] = crl_rng_range(rng, -p[PENDULUM_Y_INIT], p[PENDULUM_Y_INIT]);
}

static void pendulum_observe_batch(const classic_def *d, const double *state, float *obs,
                                   int64_t n, const double *p)
{
    (void)d;
    (void)p;
    for (int64_t i = 0; i < n; i++) {
        obs[3 * i] = (float)cos(state[2 * i]);
        obs[3 * i + 1] = (float)sin(state[2 * i]);
        obs[3 * i + 2] = (float)state[2 * i + 1];
    }
}

static void pendulum_bounds(const classic_def *d, const double *p, float *obs_low,
                            float *obs_high, float *act_low, float *act_high)
{
    (void)d;
    const float high[3] = {1.0f, 1.0f, (float)p[PENDULUM_MAX_SPEED]};
    for (int k = 0; k < 3; k++) {
        obs_high[k] = high[k];
        obs_low[k] = -high[k];
    }
    if (act_low)
        act_low[0] = -(float)p[PENDULUM_MAX_TORQUE];
    if (act_high)
        act_high[0] = (float)p[PENDULUM_MAX_TORQUE];
}

static int pendulum_render_one(const classic_def *d, const double *s, const void *last_action,
                               uint8_t *rgb, int w, int h, const double *p, crl_error *err)
{
    classic_canvas cv;
    int rc = classic_canvas_begin(&cv, d, w, h, err);
    if (rc != CRL_OK)
        return rc;
    cairo_t *cr = cv.cr;
    const double bound = 2.2;
    const double scale = d->render_width / (bound * 2);
    const double offset = d->render_width / 2; /* integer division, as Gymnasium's // */
    const double rod_length = 1 * scale;
    const double rod_width = 0.2 * scale;
    const uint32_t red = 0xCC4D4D;
    const double l = 0, r = rod_length, t = rod_width / 2, b = -rod_width / 2;
    const double corners[8] = {l, b, l, t, r, t, r, b};
    double rod[8];
    for (int k = 0; k < 4; k++) {
        classic_rotate(corners[2 * k], corners[2 * k + 1], s[0] + M_PI / 2, &rod[2 * k],
                       &rod[2 * k + 1]);
        rod[2 * k] += offset;
        rod[2 * k + 1] += offset;
    }
    classic_fill_polygon(cr, rod, 4, red);
    classic_fill_circle(cr, offset, offset, (int)(rod_width / 2), red);
    double ex, ey;
    classic_rotate(rod_length, 0, s[0] + M_PI / 2, &ex, &ey);
    classic_fill_circle(cr, (int)(ex + offset), (int)(ey + offset), (int)(rod_width / 2), red);

    if (last_action) {
        /* Gymnasium blits its clockwise-arrow image at scale*|u|/2, mirrored
         * (counter-clockwise) for positive torque; u is the clipped action. */
        float max_torque = (float)p[PENDULUM_MAX_TORQUE];
        float u = clip_f(*(const float *)last_action, -max_torque, max_torque);
        double size = scale * fabs((double)u) / 2;
        if (size >= 1.0)
            classic_arrow_arc(cr, offset, offset, size, u > 0, 0x000000);
    }
    classic_fill_circle(cr, offset, offset, (int)(0.05 * scale), 0x000000);
    return classic_canvas_finish(&cv, d, rgb, err);
}

const classic_def classic_pendulum = {
    .id = "Pendulum-v1",
    .description = "swing a torque-limited pendulum up and keep it upright",
    .state_dim = 2,
    .obs_dim = 3,
    .action_kind = CLASSIC_ACTION_BOX,
    .action_n = 0,
    .action_dim = 1,
    .max_episode_steps = 200,
    .reward_threshold = NAN,
    .reward_min = -(M_PI * M_PI + 0.1 * 8 * 8 + 0.001 * 2 * 2),
    .reward_max = 0.0,
    .reward_doc = "-(angle_normalize(theta)^2 + 0.1 theta_dot^2 + 0.001 torque^2), torque "
                  "clipped; never terminates",
    .obs_low = pendulum_obs_low,
    .obs_high = pendulum_obs_high,
    .action_low = pendulum_act_low,
    .action_high = pendulum_act_high,
    .state_names = pendulum_state_names,
    .obs_names = pendulum_obs_names,
    .render_width = 500,
    .render_height = 500,
    .render_fps = 30,
    .n_params = PENDULUM_N_PARAMS,
    .params = pendulum_params,
    .step_batch = pendulum_step_batch,
    .reset_one = pendulum_reset_one,
    .observe_batch = pendulum_observe_batch,
    .render_one = pendulum_render_one,
    .bounds = pendulum_bounds,
    .check_params = NULL,
    .step_needs_rng = NULL,
};
