/* Internal header of the classic plugin: one classic_def per Gymnasium classic_control env id. */
#ifndef CRL_CLASSIC_H
#define CRL_CLASSIC_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cairo.h>
#include <crl/error.h>
#include <crl/options.h>
#include <crl/rng.h>

/* Bit-exact agreement with Gymnasium needs every product rounded before it
 * is added: no fused multiply-add, which GCC would otherwise emit on FMA
 * targets (-march=native) in GNU C mode. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

/* Largest sizes over all defs, for callers that keep per-env scratch on the stack. */
#define CLASSIC_MAX_STATE 4
#define CLASSIC_MAX_OBS 6
#define CLASSIC_MAX_ACTION 1
#define CLASSIC_MAX_PARAMS 16

/* Largest frame render_one accepts on either side. */
#define CLASSIC_RENDER_MAX_SIDE 8192

typedef enum classic_action_kind {
    CLASSIC_ACTION_DISCRETE = 0, /* [n] int64 indices in [0, action_n) */
    CLASSIC_ACTION_BOX = 1       /* [n, action_dim] float32 */
} classic_action_kind;

/* The parameter must be > 0 on top of its inclusive [min, max] range. */
#define CLASSIC_PARAM_POSITIVE 0x1u

/* One physics constant.  Values travel as doubles: a BOOL is 0 or 1, an ENUM
 * is the index of its choice in `choices`.  `type` uses crl_opt_type values
 * (CRL_OPT_DOUBLE, CRL_OPT_BOOL, CRL_OPT_ENUM) so the plugin glue can turn a
 * table straight into crl_option declarations. */
typedef struct classic_param {
    const char *name;
    int32_t type;
    uint32_t flags;         /* CLASSIC_PARAM_* */
    double default_value;
    double min, max;        /* inclusive */
    const char *choices;    /* ENUM: "a|b" */
    const char *doc;
} classic_param;

typedef struct classic_def classic_def;

/* Advance n envs by one step.  state [n, state_dim] float64 is updated in
 * place; action is [n] int64 (Discrete) or [n, action_dim] float32 (Box);
 * obs [n, obs_dim], reward [n] and terminated [n] (0/1) are written.
 * params [n_params] are shared by the batch.  rng [n] holds one stream per
 * env and is only read when def->step_needs_rng says so (else may be NULL).
 * Never allocates; preconditions (action range, rng) are checked once per
 * batch by classic_check_step, not here. */
typedef void (*classic_step_batch_fn)(const classic_def *d, double *state, const void *action,
                                      float *obs, float *reward, uint8_t *terminated, int64_t n,
                                      const double *params, crl_rng *rng);
/* Draw one env's initial state [state_dim] from its stream. */
typedef void (*classic_reset_one_fn)(const classic_def *d, double *state, crl_rng *rng,
                                     const double *params);
/* Observations [n, obs_dim] of states [n, state_dim] (after reset or a state load). */
typedef void (*classic_observe_batch_fn)(const classic_def *d, const double *state, float *obs,
                                         int64_t n, const double *params);
/* Draw one env into rgb [h, w, 3] (packed, row-major, top row first).
 * last_action is the env's previous action in the step_batch layout for one
 * env, or NULL right after a reset (Pendulum draws its torque arrow from it).
 * The picture is Gymnasium's, scaled when (w, h) differs from the def's
 * render size.  Returns CRL_OK, CRL_E_INVALID (bad size) or CRL_E_NOMEM. */
typedef int (*classic_render_one_fn)(const classic_def *d, const double *state,
                                     const void *last_action, uint8_t *rgb, int w, int h,
                                     const double *params, crl_error *err);
/* Elementwise observation bounds [obs_dim] and, for Box actions, action
 * bounds [action_dim] under `params` (act_low/act_high may be NULL). */
typedef void (*classic_bounds_fn)(const classic_def *d, const double *params, float *obs_low,
                                  float *obs_high, float *act_low, float *act_high);
/* Rules between parameters (ranges are checked from the table). */
typedef int (*classic_check_params_fn)(const classic_def *d, const double *params,
                                       crl_error *err);
/* Whether step_batch draws from the per-env streams under `params`. */
typedef bool (*classic_step_needs_rng_fn)(const classic_def *d, const double *params);

struct classic_def {
    const char *id;                 /* Gymnasium env id, "CartPole-v1" */
    const char *description;        /* one line */
    int32_t state_dim;              /* float64 physics state, Gymnasium's env.state */
    int32_t obs_dim;                /* float32 observation */
    int32_t action_kind;            /* classic_action_kind */
    int32_t action_n;               /* Discrete: number of actions; Box: 0 */
    int32_t action_dim;             /* Box: action shape (action_dim,); Discrete: 0 (scalar) */
    int32_t max_episode_steps;      /* truncation, counted by the host */
    double reward_threshold;        /* Gymnasium's registered value; NAN when none */
    double reward_min, reward_max;  /* per-step reward range under default params */
    const char *reward_doc;         /* the per-step reward rule, one line */
    const float *obs_low;           /* [obs_dim], default params; +-INFINITY allowed */
    const float *obs_high;
    const float *action_low;        /* Box: [action_dim], default params; Discrete: NULL */
    const float *action_high;
    const char *const *state_names; /* [state_dim] */
    const char *const *obs_names;   /* [obs_dim] */
    int32_t render_width, render_height, render_fps;
    int32_t n_params;
    const classic_param *params;    /* [n_params] */
    classic_step_batch_fn step_batch;
    classic_reset_one_fn reset_one;
    classic_observe_batch_fn observe_batch;
    classic_render_one_fn render_one;
    classic_bounds_fn bounds;
    classic_check_params_fn check_params;       /* NULL: no cross-parameter rules */
    classic_step_needs_rng_fn step_needs_rng;   /* NULL: never */
};

/* ---- the envs (one file each) ---- */

extern const classic_def classic_cartpole;                /* CartPole-v1 */
extern const classic_def classic_pendulum;                /* Pendulum-v1 */
extern const classic_def classic_mountain_car;            /* MountainCar-v0 */
extern const classic_def classic_mountain_car_continuous; /* MountainCarContinuous-v0 */
extern const classic_def classic_acrobot;                 /* Acrobot-v1 */

/* Parameter indices, in table order. */
enum {
    CARTPOLE_GRAVITY, CARTPOLE_MASSCART, CARTPOLE_MASSPOLE, CARTPOLE_LENGTH,
    CARTPOLE_FORCE_MAG, CARTPOLE_TAU, CARTPOLE_KINEMATICS_INTEGRATOR, CARTPOLE_X_THRESHOLD,
    CARTPOLE_THETA_THRESHOLD_RADIANS, CARTPOLE_SUTTON_BARTO_REWARD, CARTPOLE_RESET_LOW,
    CARTPOLE_RESET_HIGH, CARTPOLE_N_PARAMS
};
enum { CARTPOLE_EULER = 0, CARTPOLE_SEMI_IMPLICIT_EULER = 1 };

enum {
    PENDULUM_G, PENDULUM_M, PENDULUM_L, PENDULUM_MAX_SPEED, PENDULUM_MAX_TORQUE, PENDULUM_DT,
    PENDULUM_X_INIT, PENDULUM_Y_INIT, PENDULUM_N_PARAMS
};

/* Shared by MountainCar-v0 (force) and MountainCarContinuous-v0 (power). */
enum {
    MOUNTAIN_CAR_FORCE, MOUNTAIN_CAR_GRAVITY, MOUNTAIN_CAR_MAX_SPEED, MOUNTAIN_CAR_MIN_POSITION,
    MOUNTAIN_CAR_MAX_POSITION, MOUNTAIN_CAR_GOAL_POSITION, MOUNTAIN_CAR_GOAL_VELOCITY,
    MOUNTAIN_CAR_RESET_LOW, MOUNTAIN_CAR_RESET_HIGH, MOUNTAIN_CAR_N_PARAMS
};
#define MOUNTAIN_CAR_POWER MOUNTAIN_CAR_FORCE

enum {
    ACROBOT_DT, ACROBOT_LINK_LENGTH_1, ACROBOT_LINK_LENGTH_2, ACROBOT_LINK_MASS_1,
    ACROBOT_LINK_MASS_2, ACROBOT_LINK_COM_POS_1, ACROBOT_LINK_COM_POS_2, ACROBOT_LINK_MOI,
    ACROBOT_MAX_VEL_1, ACROBOT_MAX_VEL_2, ACROBOT_GRAVITY, ACROBOT_TORQUE_NOISE_MAX,
    ACROBOT_BOOK_OR_NIPS, ACROBOT_RESET_LOW, ACROBOT_RESET_HIGH, ACROBOT_N_PARAMS
};
enum { ACROBOT_BOOK = 0, ACROBOT_NIPS = 1 };

/* mountain_car.c: the parts MountainCar-v0 and MountainCarContinuous-v0 share. */
void classic_mountain_car_reset_one(const classic_def *d, double *state, crl_rng *rng,
                                    const double *params);
void classic_mountain_car_observe_batch(const classic_def *d, const double *state, float *obs,
                                        int64_t n, const double *params);
void classic_mountain_car_bounds(const classic_def *d, const double *params, float *obs_low,
                                 float *obs_high, float *act_low, float *act_high);
int classic_mountain_car_check_params(const classic_def *d, const double *params,
                                      crl_error *err);
int classic_mountain_car_render_one(const classic_def *d, const double *state,
                                    const void *last_action, uint8_t *rgb, int w, int h,
                                    const double *params, crl_error *err);

/* Python's `x ** 2` on floats, and NumPy's on float64 and float32 scalars,
 * call the C library's pow/powf, which is not always the correctly rounded
 * x * x; the volatile exponent keeps compilers from folding the call into a
 * multiplication so the result matches Gymnasium's bit for bit. */
static inline double classic_pow2(double x)
{
    volatile double two = 2.0;
    return pow(x, two);
}

static inline float classic_powf2(float x)
{
    volatile float two = 2.0f;
    return powf(x, two);
}

/* x rounded to float32 and back.  The volatile store keeps the round trip:
 * GCC 12's SLP vectorizer was seen dropping a plain (double)(float)x. */
static inline double classic_round_f32(double x)
{
    volatile float f = (float)x;
    return (double)f;
}

/* Acrobot's goal test on a state [4]: -cos(s0) - cos(s1 + s0) > 1. */
bool classic_acrobot_terminal(const double *s);

/* ---- registry.c ---- */

size_t classic_def_count(void);
const classic_def *classic_def_at(size_t i);
/* Exact id match, or NULL. */
const classic_def *classic_find(const char *id);
/* Up to `max` known ids close to `id` (case-insensitive edit distance, or a
 * prefix such as "cartpole"), best first.  Returns how many were written. */
size_t classic_suggest(const char *id, const char **out, size_t max);
/* classic_find, or NULL with CRL_E_NOT_FOUND naming the id, the close
 * matches and the known ids. */
const classic_def *classic_lookup(const char *id, crl_error *err);

/* Index of parameter `name` in d->params, or -1. */
int classic_param_index(const classic_def *d, const char *name);
/* Fill params [n_params] with the defaults. */
void classic_params_default(const classic_def *d, double *params);
/* Ranges from the table, then the def's own rules.  CRL_E_RANGE or
 * CRL_E_INVALID naming the env and parameter. */
int classic_params_check(const classic_def *d, const double *params, crl_error *err);
/* The reset_low <= reset_high rule several envs share (CRL_E_INVALID naming d's id). */
int classic_check_reset_range(const classic_def *d, double low, double high, crl_error *err);
/* The once-per-batch preconditions of step_batch: Discrete actions in
 * [0, action_n) (CRL_E_RANGE naming the env index and value) and per-env
 * streams present when the step draws randomness (CRL_E_INVALID). */
int classic_check_step(const classic_def *d, const void *action, int64_t n,
                       const double *params, const crl_rng *rng, crl_error *err);

/* ---- render.c: cairo helpers shared by the envs ----
 * Drawing happens in Gymnasium's pygame coordinates for the def's render
 * size: x right, y up (pygame draws y down, then flips the frame), integer
 * coordinates at pixel centres. */

typedef struct classic_canvas {
    cairo_surface_t *surface;
    cairo_t *cr;
    int width, height;
} classic_canvas;

/* White frame of w x h drawing d's picture (scaled from its render size). */
int classic_canvas_begin(classic_canvas *cv, const classic_def *d, int w, int h, crl_error *err);
/* Copy the frame to rgb [h, w, 3] and release the canvas (also on error). */
int classic_canvas_finish(classic_canvas *cv, const classic_def *d, uint8_t *rgb, crl_error *err);

/* pygame's Vector2.rotate_rad: counter-clockwise by `angle` radians. */
void classic_rotate(double x, double y, double angle, double *ox, double *oy);
/* Colours are 0xRRGGBB. */
void classic_fill_polygon(cairo_t *cr, const double *xy, int npoints, uint32_t rgb);
/* gfxdraw.filled_circle: pixels within `radius` of the centre pixel. */
void classic_fill_circle(cairo_t *cr, double cx, double cy, double radius, uint32_t rgb);
/* One-pixel-wide line through the centres of its end pixels. */
void classic_line(cairo_t *cr, double x0, double y0, double x1, double y1, uint32_t rgb);
void classic_polyline(cairo_t *cr, const double *xy, int npoints, uint32_t rgb);
/* A circular arrow of outer size `size` centred at (cx, cy), turning
 * counter-clockwise on screen when ccw is true. */
void classic_arrow_arc(cairo_t *cr, double cx, double cy, double size, bool ccw, uint32_t rgb);

#endif
