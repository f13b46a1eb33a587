/* MountainCar-v0: Gymnasium 1.x's discrete mountain car, plus the reset, bounds and picture
 * it shares with MountainCarContinuous-v0. */
#include "classic.h"

#include <math.h>

/* Everything is float64 here: the state is a float64 array after reset and
 * np.clip keeps float64 scalars after a step. */

static const classic_param mountain_car_params[MOUNTAIN_CAR_N_PARAMS] = {
    {"force", CRL_OPT_DOUBLE, 0, 0.001, 0.0, 1.0, NULL, "acceleration of a push"},
    {"gravity", CRL_OPT_DOUBLE, 0, 0.0025, 0.0, 1.0, NULL, "pull of the slope"},
    {"max_speed", CRL_OPT_DOUBLE, 0, 0.07, 0.0, 1e3, NULL, "velocity clip"},
    {"min_position", CRL_OPT_DOUBLE, 0, -1.2, -1e3, 1e3, NULL, "left wall (inelastic)"},
    {"max_position", CRL_OPT_DOUBLE, 0, 0.6, -1e3, 1e3, NULL, "right position clip"},
    {"goal_position", CRL_OPT_DOUBLE, 0, 0.5, -1e3, 1e3, NULL,
     "terminate once position >= goal_position"},
    {"goal_velocity", CRL_OPT_DOUBLE, 0, 0.0, -1e3, 1e3, NULL,
     "... with velocity >= goal_velocity"},
    {"reset_low", CRL_OPT_DOUBLE, 0, -0.6, -1e3, 1e3, NULL,
     "initial position is uniform in [reset_low, reset_high)"},
    {"reset_high", CRL_OPT_DOUBLE, 0, -0.4, -1e3, 1e3, NULL,
     "initial position is uniform in [reset_low, reset_high)"},
};

static const float mountain_car_obs_low[2] = {-1.2f, -0.07f};
static const float mountain_car_obs_high[2] = {0.6f, 0.07f};
static const char *const mountain_car_state_names[2] = {"position", "velocity"};
static const char *const mountain_car_obs_names[2] = {"position", "velocity"};

static inline double clip_d(double x, double lo, double hi)
{
    return x < lo ? lo : (x > hi ? hi : x);
}

static void mountain_car_step_batch(const classic_def *d, double *state, const void *action,
                                    float *obs, float *reward, uint8_t *terminated, int64_t n,
                                    const double *p, crl_rng *rng)
{
    (void)d;
    (void)rng;
    const int64_t *act = action;
    const double force = p[MOUNTAIN_CAR_FORCE], gravity = p[MOUNTAIN_CAR_GRAVITY];
    const double max_speed = p[MOUNTAIN_CAR_MAX_SPEED];
    const double min_position = p[MOUNTAIN_CAR_MIN_POSITION];
    const double max_position = p[MOUNTAIN_CAR_MAX_POSITION];
    const double goal_position = p[MOUNTAIN_CAR_GOAL_POSITION];
    const double goal_velocity = p[MOUNTAIN_CAR_GOAL_VELOCITY];
    for (int64_t i = 0; i < n; i++) {
        double *s = state + 2 * i;
        double position = s[0], velocity = s[1];
        /* `velocity += a + b` adds the right-hand sum in one go. */
        velocity += (double)(act[i] - 1) * force + cos(3 * position) * (-gravity);
        velocity = clip_d(velocity, -max_speed, max_speed);
        position += velocity;
        position = clip_d(position, min_position, max_position);
        if (position == min_position && velocity < 0)
            velocity = 0;
        s[0] = position;
        s[1] = velocity;
        terminated[i] = (uint8_t)(position >= goal_position && velocity >= goal_velocity);
        reward[i] = -1.0f;
        obs[2 * i] = (float)position;
        obs[2 * i + 1] = (float)velocity;
    }
}

void classic_mountain_car_reset_one(const classic_def *d, double *state, crl_rng *rng,
                                    const double *p)
{
    (void)d;
    state[0] = crl_rng_range(rng, p[MOUNTAIN_CAR_RESET_LOW], p[MOUNTAIN_CAR_RESET_HIGH]);
    state[1] = 0.0;
}

void classic_mountain_car_observe_batch(const classic_def *d, const double *state, float *obs,
                                        int64_t n, const double *p)
{
    (void)d;
    (void)p;
    for (int64_t i = 0; i < 2 * n; i++)
        obs[i] = (float)state[i];
}

void classic_mountain_car_bounds(const classic_def *d, const double *p, float *obs_low,
                                 float *obs_high, float *act_low, float *act_high)
{
    (void)d;
    obs_low[0] = (float)p[MOUNTAIN_CAR_MIN_POSITION];
    obs_low[1] = (float)-p[MOUNTAIN_CAR_MAX_SPEED];
    obs_high[0] = (float)p[MOUNTAIN_CAR_MAX_POSITION];
    obs_high[1] = (float)p[MOUNTAIN_CAR_MAX_SPEED];
    /* Only MountainCarContinuous has a Box action: [-1, 1]. */
    if (act_low && d->action_kind == CLASSIC_ACTION_BOX)
        act_low[0] = -1.0f;
    if (act_high && d->action_kind == CLASSIC_ACTION_BOX)
        act_high[0] = 1.0f;
}

int classic_mountain_car_check_params(const classic_def *d, const double *p, crl_error *err)
{
    if (!(p[MOUNTAIN_CAR_MIN_POSITION] < p[MOUNTAIN_CAR_MAX_POSITION]))
        return crl_error_set(err, CRL_E_INVALID,
                             "%s: min_position (%g) must be below max_position (%g)", d->id,
                             p[MOUNTAIN_CAR_MIN_POSITION], p[MOUNTAIN_CAR_MAX_POSITION]);
    return classic_check_reset_range(d, p[MOUNTAIN_CAR_RESET_LOW], p[MOUNTAIN_CAR_RESET_HIGH], err);
}

static double hill_height(double x)
{
    return sin(3 * x) * 0.45 + 0.55;
}

int classic_mountain_car_render_one(const classic_def *d, const double *s,
                                    const void *last_action, uint8_t *rgb, int w, int h,
                                    const double *p, crl_error *err)
{
    (void)last_action;
    classic_canvas cv;
    int rc = classic_canvas_begin(&cv, d, w, h, err);
    if (rc != CRL_OK)
        return rc;
    cairo_t *cr = cv.cr;
    const double min_position = p[MOUNTAIN_CAR_MIN_POSITION];
    const double max_position = p[MOUNTAIN_CAR_MAX_POSITION];
    const double world_width = max_position - min_position;
    const double scale = d->render_width / world_width;
    const double carwidth = 40, carheight = 20, clearance = 10;
    const double pos = s[0];

    enum { N_CURVE = 100 };
    double curve[2 * N_CURVE];
    for (int k = 0; k < N_CURVE; k++) {
        double x = min_position + (max_position - min_position) * k / (N_CURVE - 1);
        curve[2 * k] = (x - min_position) * scale;
        curve[2 * k + 1] = hill_height(x) * scale;
    }
    classic_polyline(cr, curve, N_CURVE, 0x000000);

    const double l = -carwidth / 2, r = carwidth / 2, t = carheight, b = 0;
    const double corners[8] = {l, b, l, t, r, t, r, b};
    const double angle = cos(3 * pos);
    const double base_x = (pos - min_position) * scale;
    const double base_y = clearance + hill_height(pos) * scale;
    double car[8];
    for (int k = 0; k < 4; k++) {
        classic_rotate(corners[2 * k], corners[2 * k + 1], angle, &car[2 * k], &car[2 * k + 1]);
        car[2 * k] += base_x;
        car[2 * k + 1] += base_y;
    }
    classic_fill_polygon(cr, car, 4, 0x000000);

    const double wheels[4] = {carwidth / 4, 0, -carwidth / 4, 0};
    for (int k = 0; k < 2; k++) {
        double wx, wy;
        classic_rotate(wheels[2 * k], wheels[2 * k + 1], angle, &wx, &wy);
        classic_fill_circle(cr, (int)(wx + base_x), (int)(wy + base_y), (int)(carheight / 2.5),
                            0x808080);
    }

    const double goal = p[MOUNTAIN_CAR_GOAL_POSITION];
    const int flagx = (int)((goal - min_position) * scale);
    const int flagy1 = (int)(hill_height(goal) * scale);
    const int flagy2 = flagy1 + 50;
    classic_line(cr, flagx, flagy1, flagx, flagy2, 0x000000);
    const double flag[6] = {flagx, flagy2, flagx, flagy2 - 10, flagx + 25, flagy2 - 5};
    classic_fill_polygon(cr, flag, 3, 0xCCCC00);
    return classic_canvas_finish(&cv, d, rgb, err);
}

const classic_def classic_mountain_car = {
    .id = "MountainCar-v0",
    .description = "drive an underpowered car up a hill by rocking it (discrete pushes)",
    .state_dim = 2,
    .obs_dim = 2,
    .action_kind = CLASSIC_ACTION_DISCRETE,
    .action_n = 3,
    .action_dim = 0,
    .max_episode_steps = 200,
    .reward_threshold = -110.0,
    .reward_min = -1.0,
    .reward_max = -1.0,
    .reward_doc = "-1 every step",
    .obs_low = mountain_car_obs_low,
    .obs_high = mountain_car_obs_high,
    .action_low = NULL,
    .action_high = NULL,
    .state_names = mountain_car_state_names,
    .obs_names = mountain_car_obs_names,
    .render_width = 600,
    .render_height = 400,
    .render_fps = 30,
    .n_params = MOUNTAIN_CAR_N_PARAMS,
    .params = mountain_car_params,
    .step_batch = mountain_car_step_batch,
    .reset_one = classic_mountain_car_reset_one,
    .observe_batch = classic_mountain_car_observe_batch,
    .render_one = classic_mountain_car_render_one,
    .bounds = classic_mountain_car_bounds,
    .check_params = classic_mountain_car_check_params,
    .step_needs_rng = NULL,
};
