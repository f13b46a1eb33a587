/* MountainCarContinuous-v0: Gymnasium 1.x's continuous mountain car step. */
#include "classic.h"

#include <math.h>

/* Gymnasium stores this env's state as float32 after every step (but as
 * float64 right after reset) and mixes np.float32 scalars with Python floats,
 * which NumPy 2 promotion keeps in float32.  To step bit-for-bit like it, each
 * value below carries the type it would have in Python: np.float32, np.float64
 * or a (weak) Python float.  A state is taken as float32-typed when both of its
 * values are exactly float32 numbers: true for every state a step produced, and
 * false after a reset unless the drawn position happens to be one. */

typedef enum { NP_PY = 0, NP_F32 = 1, NP_F64 = 2 } np_kind;

typedef struct {
    double v;
    np_kind k;
} np_val;

static inline np_val np_of(double v, np_kind k)
{
    np_val r = {v, k};
    return r;
}

/* np.float64 wins, then np.float32; Python floats are weak. */
static inline np_kind np_promote(np_kind a, np_kind b)
{
    return a > b ? a : b;
}

static inline np_val np_add(np_val a, np_val b)
{
    np_kind k = np_promote(a.k, b.k);
    if (k == NP_F32)
        return np_of((double)((float)a.v + (float)b.v), k);
    return np_of(a.v + b.v, k);
}

static inline np_val np_sub(np_val a, np_val b)
{
    np_kind k = np_promote(a.k, b.k);
    if (k == NP_F32)
        return np_of((double)((float)a.v - (float)b.v), k);
    return np_of(a.v - b.v, k);
}

static inline np_val np_mul(np_val a, np_val b)
{
    np_kind k = np_promote(a.k, b.k);
    if (k == NP_F32)
        return np_of((double)((float)a.v * (float)b.v), k);
    return np_of(a.v * b.v, k);
}

/* Comparisons also happen in the promoted type. */
static inline bool np_gt(np_val a, np_val b)
{
    if (np_promote(a.k, b.k) == NP_F32)
        return (float)a.v > (float)b.v;
    return a.v > b.v;
}

static inline bool np_lt(np_val a, np_val b)
{
    return np_gt(b, a);
}

static inline bool np_ge(np_val a, np_val b)
{
    if (np_promote(a.k, b.k) == NP_F32)
        return (float)a.v >= (float)b.v;
    return a.v >= b.v;
}

static inline bool np_eq(np_val a, np_val b)
{
    if (np_promote(a.k, b.k) == NP_F32)
        return (float)a.v == (float)b.v;
    return a.v == b.v;
}

static inline bool is_f32_exact(double x)
{
    return classic_round_f32(x) == x;
}

static const classic_param mcc_params[MOUNTAIN_CAR_N_PARAMS] = {
    {"power", CRL_OPT_DOUBLE, 0, 0.0015, 0.0, 1.0, NULL, "acceleration per unit of action"},
    {"gravity", CRL_OPT_DOUBLE, 0, 0.0025, 0.0, 1.0, NULL, "pull of the slope"},
    {"max_speed", CRL_OPT_DOUBLE, 0, 0.07, 0.0, 1e3, NULL, "velocity clip"},
    {"min_position", CRL_OPT_DOUBLE, 0, -1.2, -1e3, 1e3, NULL, "left wall (inelastic)"},
    {"max_position", CRL_OPT_DOUBLE, 0, 0.6, -1e3, 1e3, NULL, "right position clip"},
    {"goal_position", CRL_OPT_DOUBLE, 0, 0.45, -1e3, 1e3, NULL,
     "terminate once position >= goal_position"},
    {"goal_velocity", CRL_OPT_DOUBLE, 0, 0.0, -1e3, 1e3, NULL,
     "... with velocity >= goal_velocity"},
    {"reset_low", CRL_OPT_DOUBLE, 0, -0.6, -1e3, 1e3, NULL,
     "initial position is uniform in [reset_low, reset_high)"},
    {"reset_high", CRL_OPT_DOUBLE, 0, -0.4, -1e3, 1e3, NULL,
     "initial position is uniform in [reset_low, reset_high)"},
};

static const float mcc_obs_low[2] = {-1.2f, -0.07f};
static const float mcc_obs_high[2] = {0.6f, 0.07f};
static const float mcc_act_low[1] = {-1.0f};
static const float mcc_act_high[1] = {1.0f};
static const char *const mcc_state_names[2] = {"position", "velocity"};
static const char *const mcc_obs_names[2] = {"position", "velocity"};

static void mcc_step_batch(const classic_def *d, double *state, const void *action, float *obs,
                           float *reward, uint8_t *terminated, int64_t n, const double *p,
                           crl_rng *rng)
{
    (void)d;
    (void)rng;
    const float *act = action;
    const np_val power = np_of(p[MOUNTAIN_CAR_POWER], NP_PY);
    const double gravity = p[MOUNTAIN_CAR_GRAVITY];
    const np_val max_speed = np_of(p[MOUNTAIN_CAR_MAX_SPEED], NP_PY);
    const np_val neg_max_speed = np_of(-p[MOUNTAIN_CAR_MAX_SPEED], NP_PY);
    const np_val min_position = np_of(p[MOUNTAIN_CAR_MIN_POSITION], NP_PY);
    const np_val max_position = np_of(p[MOUNTAIN_CAR_MAX_POSITION], NP_PY);
    const np_val goal_position = np_of(p[MOUNTAIN_CAR_GOAL_POSITION], NP_PY);
    const np_val goal_velocity = np_of(p[MOUNTAIN_CAR_GOAL_VELOCITY], NP_PY);
    const np_val zero = np_of(0.0, NP_PY), three = np_of(3.0, NP_PY);
    const np_val min_action = np_of(-1.0, NP_PY), max_action = np_of(1.0, NP_PY);
    for (int64_t i = 0; i < n; i++) {
        double *s = state + 2 * i;
        np_kind k0 = is_f32_exact(s[0]) && is_f32_exact(s[1]) ? NP_F32 : NP_F64;
        np_val position = np_of(s[0], k0), velocity = np_of(s[1], k0);
        np_val a = np_of(act[i], NP_F32);

        /* Python's min(max(a, -1.0), 1.0) keeps `a` itself unless a bound wins. */
        np_val force = np_gt(min_action, a) ? min_action : a;
        force = np_lt(max_action, force) ? max_action : force;

        np_val slope = np_of(gravity * cos(np_mul(three, position).v), NP_PY);
        velocity = np_add(velocity, np_sub(np_mul(force, power), slope));
        if (np_gt(velocity, max_speed))
            velocity = max_speed;
        if (np_lt(velocity, neg_max_speed))
            velocity = neg_max_speed;
        position = np_add(position, velocity);
        if (np_gt(position, max_position))
            position = max_position;
        if (np_lt(position, min_position))
            position = min_position;
        if (np_eq(position, min_position) && np_lt(velocity, zero))
            velocity = zero;

        bool term = np_ge(position, goal_position) && np_ge(velocity, goal_velocity);
        /* The reward uses the unclipped action: 0 - a^2 * 0.1, or 100 - a^2 * 0.1. */
        double r = (term ? 100.0 : 0.0) - classic_pow2((double)act[i]) * 0.1;

        /* Gymnasium keeps np.array([position, velocity], dtype=np.float32). */
        s[0] = classic_round_f32(position.v);
        s[1] = classic_round_f32(velocity.v);
        obs[2 * i] = (float)s[0];
        obs[2 * i + 1] = (float)s[1];
        reward[i] = (float)r;
        terminated[i] = (uint8_t)term;
    }
}

const classic_def classic_mountain_car_continuous = {
    .id = "MountainCarContinuous-v0",
    .description = "drive an underpowered car up a hill by rocking it (continuous force)",
    .state_dim = 2,
    .obs_dim = 2,
    .action_kind = CLASSIC_ACTION_BOX,
    .action_n = 0,
    .action_dim = 1,
    .max_episode_steps = 999,
    .reward_threshold = 90.0,
    .reward_min = -0.1,
    .reward_max = 100.0,
    .reward_doc = "-0.1 action^2 every step (unclipped action), +100 on reaching the goal",
    .obs_low = mcc_obs_low,
    .obs_high = mcc_obs_high,
    .action_low = mcc_act_low,
    .action_high = mcc_act_high,
    .state_names = mcc_state_names,
    .obs_names = mcc_obs_names,
    .render_width = 600,
    .render_height = 400,
    .render_fps = 30,
    .n_params = MOUNTAIN_CAR_N_PARAMS,
    .params = mcc_params,
    .step_batch = mcc_step_batch,
    .reset_one = classic_mountain_car_reset_one,
    .observe_batch = classic_mountain_car_observe_batch,
    .render_one = classic_mountain_car_render_one,
    .bounds = classic_mountain_car_bounds,
    .check_params = classic_mountain_car_check_params,
    .step_needs_rng = NULL,
};
