/* CartPole-v1: Gymnasium 1.x's cart-pole physics, reset and picture. */
#include "classic.h"

#include <math.h>

/* Gymnasium keeps the state as float64 and computes in float64
 * (np.cos/np.sin/np.square on float64 scalars); only the observation is
 * cast to float32. */

static const classic_param cartpole_params[CARTPOLE_N_PARAMS] = {
    {"gravity", CRL_OPT_DOUBLE, 0, 9.8, 0.0, 1000.0, NULL, "gravitational acceleration (m/s^2)"},
    {"masscart", CRL_OPT_DOUBLE, CLASSIC_PARAM_POSITIVE, 1.0, 0.0, 1e6, NULL, "cart mass (kg)"},
    {"masspole", CRL_OPT_DOUBLE, CLASSIC_PARAM_POSITIVE, 0.1, 0.0, 1e6, NULL, "pole mass (kg)"},
    {"length", CRL_OPT_DOUBLE, CLASSIC_PARAM_POSITIVE, 0.5, 0.0, 1e3, NULL,
     "half the pole's length (m)"},
    {"force_mag", CRL_OPT_DOUBLE, 0, 10.0, 0.0, 1e6, NULL, "force of a push (N)"},
    {"tau", CRL_OPT_DOUBLE, CLASSIC_PARAM_POSITIVE, 0.02, 0.0, 10.0, NULL,
     "seconds between state updates"},
    {"kinematics_integrator", CRL_OPT_ENUM, 0, CARTPOLE_EULER, 0, 1, "euler|semi-implicit",
     "euler, or semi-implicit euler (velocities first)"},
    {"x_threshold", CRL_OPT_DOUBLE, CLASSIC_PARAM_POSITIVE, 2.4, 0.0, 1e6, NULL,
     "terminate when |x| exceeds this (m)"},
    {"theta_threshold_radians", CRL_OPT_DOUBLE, CLASSIC_PARAM_POSITIVE, 12 * 2 * M_PI / 360,
     0.0, M_PI, NULL, "terminate when |theta| exceeds this (rad)"},
    {"sutton_barto_reward", CRL_OPT_BOOL, 0, 0, 0, 1, NULL,
     "reward 0 per step and -1 on termination instead of 1 per step"},
    {"reset_low", CRL_OPT_DOUBLE, 0, -0.05, -1e6, 1e6, NULL,
     "lower bound of the uniform initial state"},
    {"reset_high", CRL_OPT_DOUBLE, 0, 0.05, -1e6, 1e6, NULL,
     "upper bound of the uniform initial state"},
};

/* Observation bounds are float32 of (2 x_threshold, inf, 2 theta_threshold, inf). */
static const float cartpole_obs_high[4] = {(float)(2.4 * 2), INFINITY,
                                           (float)(12 * 2 * M_PI / 360 * 2), INFINITY};
static const float cartpole_obs_low[4] = {-(float)(2.4 * 2), -INFINITY,
                                          -(float)(12 * 2 * M_PI / 360 * 2), -INFINITY};
static const char *const cartpole_state_names[4] = {"x", "x_dot", "theta", "theta_dot"};
static const char *const cartpole_obs_names[4] = {"cart_position", "cart_velocity",
                                                  "pole_angle", "pole_angular_velocity"};

/* The physics of one env; `semi` picks the integrator (hoisted by the caller). */
static inline void cartpole_advance(double *s, double force, double gravity, double masspole,
                                    double total_mass, double length, double polemass_length,
                                    double tau, bool semi)
{
    double x = s[0], x_dot = s[1], theta = s[2], theta_dot = s[3];
    double costheta = cos(theta);
    double sintheta = sin(theta);
    double temp = (force + polemass_length * (theta_dot * theta_dot) * sintheta) / total_mass;
    double thetaacc = (gravity * sintheta - costheta * temp) /
                      (length * (4.0 / 3.0 - masspole * (costheta * costheta) / total_mass));
    double xacc = temp - polemass_length * thetaacc * costheta / total_mass;
    if (!semi) {
        x = x + tau * x_dot;
        x_dot = x_dot + tau * xacc;
        theta = theta + tau * theta_dot;
        theta_dot = theta_dot + tau * thetaacc;
    } else {
        x_dot = x_dot + tau * xacc;
        x = x + tau * x_dot;
        theta_dot = theta_dot + tau * thetaacc;
        theta = theta + tau * theta_dot;
    }
    s[0] = x;
    s[1] = x_dot;
    s[2] = theta;
    s[3] = theta_dot;
}

/* One loop per integrator so the inner loop has no mode branch. */
#define CARTPOLE_LOOP(SEMI)                                                                    \
    for (int64_t i = 0; i < n; i++) {                                                          \
        double *s = state + 4 * i;                                                             \
        double force = act[i] == 1 ? force_mag : -force_mag;                                   \
        cartpole_advance(s, force, gravity, masspole, total_mass, length, polemass_length, tau, \
                         SEMI);                                                                \
        double x = s[0], theta = s[2];                                                         \
        bool term = x < -x_thr || x > x_thr || theta < -th_thr || theta > th_thr;              \
        terminated[i] = (uint8_t)term;                                                         \
        reward[i] = term ? r_term : r_live;                                                    \
        float *o = obs + 4 * i;                                                                \
        o[0] = (float)s[0];                                                                    \
        o[1] = (float)s[1];                                                                    \
        o[2] = (float)s[2];                                                                    \
        o[3] = (float)s[3];                                                                    \
    }

static void cartpole_step_batch(const classic_def *d, double *state, const void *action,
                                float *obs, float *reward, uint8_t *terminated, int64_t n,
                                const double *p, crl_rng *rng)
{
    (void)d;
    (void)rng;
    const int64_t *act = action;
    const double gravity = p[CARTPOLE_GRAVITY];
    const double masscart = p[CARTPOLE_MASSCART];
    const double masspole = p[CARTPOLE_MASSPOLE];
    const double total_mass = masspole + masscart;
    const double length = p[CARTPOLE_LENGTH];
    const double polemass_length = masspole * length;
    const double force_mag = p[CARTPOLE_FORCE_MAG];
    const double tau = p[CARTPOLE_TAU];
    const double x_thr = p[CARTPOLE_X_THRESHOLD];
    const double th_thr = p[CARTPOLE_THETA_THRESHOLD_RADIANS];
    /* Stepping on after termination is undefined in Gymnasium (it warns and
     * pays 0); the host resets terminated envs, so every step pays this. */
    const bool sutton_barto = p[CARTPOLE_SUTTON_BARTO_REWARD] != 0.0;
    const float r_live = sutton_barto ? 0.0f : 1.0f;
    const float r_term = sutton_barto ? -1.0f : 1.0f;
    if (p[CARTPOLE_KINEMATICS_INTEGRATOR] == CARTPOLE_EULER) {
        CARTPOLE_LOOP(false)
    } else {
        CARTPOLE_LOOP(true)
    }
}

static void cartpole_reset_one(const classic_def *d, double *state, crl_rng *rng,
                               const double *p)
{
    (void)d;
    for (int k = 0; k < 4; k++)
        state[k] = crl_rng_range(rng, p[CARTPOLE_RESET_LOW], p[CARTPOLE_RESET_HIGH]);
}

static void cartpole_observe_batch(const classic_def *d, const double *state, float *obs,
                                   int64_t n, const double *p)
{
    (void)d;
    (void)p;
    for (int64_t i = 0; i < 4 * n; i++)
        obs[i] = (float)state[i];
}

static void cartpole_bounds(const classic_def *d, const double *p, float *obs_low,
                            float *obs_high, float *act_low, float *act_high)
{
    (void)d;
    (void)act_low;
    (void)act_high;
    float hx = (float)(p[CARTPOLE_X_THRESHOLD] * 2);
    float ht = (float)(p[CARTPOLE_THETA_THRESHOLD_RADIANS] * 2);
    const float high[4] = {hx, INFINITY, ht, INFINITY};
    for (int k = 0; k < 4; k++) {
        obs_high[k] = high[k];
        obs_low[k] = -high[k];
    }
}

static int cartpole_check_params(const classic_def *d, const double *p, crl_error *err)
{
    return classic_check_reset_range(d, p[CARTPOLE_RESET_LOW], p[CARTPOLE_RESET_HIGH], err);
}

static int cartpole_render_one(const classic_def *d, const double *s, const void *last_action,
                               uint8_t *rgb, int w, int h, const double *p, crl_error *err)
{
    (void)last_action;
    classic_canvas cv;
    int rc = classic_canvas_begin(&cv, d, w, h, err);
    if (rc != CRL_OK)
        return rc;
    cairo_t *cr = cv.cr;
    const double screen_width = d->render_width;
    const double world_width = p[CARTPOLE_X_THRESHOLD] * 2;
    const double scale = screen_width / world_width;
    const double polewidth = 10.0;
    const double polelen = scale * (2 * p[CARTPOLE_LENGTH]);
    const double cartwidth = 50.0, cartheight = 30.0;
    const double axleoffset = cartheight / 4.0;
    const double cartx = s[0] * scale + screen_width / 2.0; /* middle of the cart */
    const double carty = 100;                                /* top of the cart */

    double l = -cartwidth / 2, r = cartwidth / 2, t = cartheight / 2, b = -cartheight / 2;
    double cart[8] = {l + cartx, b + carty, l + cartx, t + carty,
                      r + cartx, t + carty, r + cartx, b + carty};
    classic_fill_polygon(cr, cart, 4, 0x000000);

    l = -polewidth / 2;
    r = polewidth / 2;
    t = polelen - polewidth / 2;
    b = -polewidth / 2;
    const double corners[8] = {l, b, l, t, r, t, r, b};
    double pole[8];
    for (int k = 0; k < 4; k++) {
        classic_rotate(corners[2 * k], corners[2 * k + 1], -s[2], &pole[2 * k],
                       &pole[2 * k + 1]);
        pole[2 * k] += cartx;
        pole[2 * k + 1] += carty + axleoffset;
    }
    classic_fill_polygon(cr, pole, 4, 0xCA9865);

    classic_fill_circle(cr, (int)cartx, (int)(carty + axleoffset), (int)(polewidth / 2),
                        0x8184CB);
    classic_line(cr, 0, carty, screen_width, carty, 0x000000);
    return classic_canvas_finish(&cv, d, rgb, err);
}

const classic_def classic_cartpole = {
    .id = "CartPole-v1",
    .description = "balance a pole on a cart pushed left or right (Barto, Sutton & Anderson)",
    .state_dim = 4,
    .obs_dim = 4,
    .action_kind = CLASSIC_ACTION_DISCRETE,
    .action_n = 2,
    .action_dim = 0,
    .max_episode_steps = 500,
    .reward_threshold = 475.0,
    .reward_min = 1.0,
    .reward_max = 1.0,
    .reward_doc = "+1 every step, the terminating one included (sutton_barto_reward: 0, and -1 "
                  "on termination)",
    .obs_low = cartpole_obs_low,
    .obs_high = cartpole_obs_high,
    .action_low = NULL,
    .action_high = NULL,
    .state_names = cartpole_state_names,
    .obs_names = cartpole_obs_names,
    .render_width = 600,
    .render_height = 400,
    .render_fps = 50,
    .n_params = CARTPOLE_N_PARAMS,
    .params = cartpole_params,
    .step_batch = cartpole_step_batch,
    .reset_one = cartpole_reset_one,
    .observe_batch = cartpole_observe_batch,
    .render_one = cartpole_render_one,
    .bounds = cartpole_bounds,
    .check_params = cartpole_check_params,
    .step_needs_rng = NULL,
};
