/* Internal header of the dm_control plugin: one dmc_task per suite task, the
 * model loader, the suite's reward shaping and the offscreen renderer. */
#ifndef CRL_DMC_H
#define CRL_DMC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mujoco/mujoco.h>

#include <crl/error.h>
#include <crl/rng.h>

#define DMC_MAX_OBS 8     /* observation leaves of one task */
#define DMC_MAX_IDS 8     /* names a task resolves in its model */
/* per-env task state beyond mjData (reacher's target, lqr's stiffnesses, quadruped/escape's 30 x 30
 * terrain bumps) */
#define DMC_MAX_EXTRA 900

/* ---- rewards.c: dm_control.utils.rewards ---- */

typedef enum dmc_sigmoid {
    DMC_GAUSSIAN, DMC_HYPERBOLIC, DMC_LONG_TAIL, DMC_RECIPROCAL, DMC_COSINE, DMC_LINEAR,
    DMC_QUADRATIC, DMC_TANH_SQUARED
} dmc_sigmoid;

/* 1 at x == 0, falling to value_at_1 at |x| == 1 along the named curve. */
double dmc_sigmoid_eval(double x, double value_at_1, dmc_sigmoid kind);
/* 1 inside [lower, upper]; outside, the sigmoid of the distance to the
 * nearest bound in units of margin (margin 0: a hard indicator). */
double dmc_tolerance(double x, double lower, double upper, double margin, dmc_sigmoid kind,
                     double value_at_margin);
/* The suite's common case: gaussian, value 0.1 at the margin. */
static inline double dmc_tol(double x, double lower, double upper, double margin)
{
    return dmc_tolerance(x, lower, upper, margin, DMC_GAUSSIAN, 0.1);
}

/* The suite's control cost: tolerance(ctrl, margin 1, value 0, quadratic),
 * averaged over the actuators (1 at zero control, 0 at full). */
double dmc_small_control(const mjModel *m, const mjData *d);

/* ---- tasks ---- */

typedef struct dmc_obs_def {
    const char *name;
    int dim;     /* values per env */
    int cols;    /* 0: a vector of dim; else a matrix [dim / cols, cols] (manipulator's arm_pos) */
} dmc_obs_def;

typedef struct dmc_task dmc_task;

/* One loaded model and the names its task resolved in it. */
typedef struct dmc_model {
    const dmc_task *task;
    mjModel *m;
    int id[DMC_MAX_IDS];      /* body/site/geom/joint ids, task-defined order */
    int adr[DMC_MAX_IDS];     /* qpos addresses of the joints among them */
    double param[4];          /* task constants read from the model (sizes) */
    /* Task-owned state its setup allocates (quadruped/escape's terrains, which envs sharing the
     * model differ in), freed by cache_free (NULL: free) in dmc_model_free; NULL for most tasks. */
    void *cache;
    void (*cache_free)(void *cache);
} dmc_model;

/* Writes one env's observation leaves: out[k] is leaf k's row. */
typedef void (*dmc_observe_fn)(const dmc_model *dm, const mjData *d, const double *extra,
                               double *const *out);
typedef double (*dmc_reward_fn)(const dmc_model *dm, const mjData *d, const double *extra);
/* Draws the episode's initial state into d (after mj_resetData) and extra. */
typedef void (*dmc_init_fn)(const dmc_model *dm, mjData *d, double *extra, crl_rng *rng);
/* Resolves names (dm->id, dm->adr) and applies the task's model edits. */
typedef int (*dmc_setup_fn)(dmc_model *dm, crl_error *err);
/* Edits the domain's parsed MJCF into the task's model, as the suite's
 * _make_model does (cartpole's extra poles); model_xml.c. */
struct _xmlDoc;
typedef int (*dmc_edit_fn)(const dmc_task *t, struct _xmlDoc *doc, crl_error *err);
/* Writes env-specific model parameters kept in extra into the shared model
 * (point_mass/hard's actuation directions) before that env's physics runs. */
typedef void (*dmc_apply_fn)(const dmc_model *dm, const double *extra);
/* Puts per-env task state the picture shows into d's geom poses (reacher's
 * target), which the next step recomputes from the shared model anyway. */
typedef void (*dmc_render_prep_fn)(const dmc_model *dm, mjData *d, const double *extra);
/* Draws the env's model parameters into extra when its random stream starts
 * (make, and a reset with a seed), as the suite draws them building the model
 * from its random state: they then hold over every episode (lqr's stiffnesses). */
typedef void (*dmc_seed_fn)(const dmc_model *dm, double *extra, crl_rng *rng);
/* Whether the step just taken ends the episode (terminated), as the suite's
 * get_termination returning a discount; checked after the reward. */
typedef bool (*dmc_terminate_fn)(const dmc_model *dm, const mjData *d, const double *extra);

struct dmc_task {
    const char *domain;         /* "cartpole" */
    const char *name;           /* "balance" */
    const char *id;             /* "cartpole/balance" */
    const char *xml;            /* the bundled MJCF, without the shared assets */
    double time_limit;          /* seconds; INFINITY: none (lqr) */
    double control_timestep;    /* seconds; 0: the physics timestep */
    int n_obs;
    dmc_obs_def obs[DMC_MAX_OBS];
    int n_extra;                /* per-env doubles in the state after qpos, qvel, act */
    dmc_setup_fn setup;
    dmc_init_fn init;
    dmc_observe_fn observe;
    dmc_reward_fn reward;
    dmc_render_prep_fn render_prep;   /* NULL: the model shows everything */
    dmc_edit_fn edit;                 /* NULL: the domain's model as it is */
    dmc_apply_fn apply;               /* NULL: every env runs the model as loaded */
    dmc_seed_fn seed;                 /* NULL: the model holds no per-env draws */
    dmc_terminate_fn terminate;       /* NULL: only the time limit ends an episode */
};

/* Shared setup helpers: the id of a named object, or CRL_E_NOT_FOUND naming
 * it, the task and the model file. */
int dmc_name(dmc_model *dm, int type, const char *name, int slot, crl_error *err);
/* A named joint: its id in id[slot] and qpos address in adr[slot]. */
int dmc_joint(dmc_model *dm, const char *name, int slot, crl_error *err);

/* physics.c: n physics steps as dm_control's Physics.step(n) takes them. */
void dmc_physics_step(const mjModel *m, mjData *d, int n);
/* mj_resetData without clearing the whole arena (megabytes: the constraint
 * arrays sized for njmax), which costs hundreds of light steps per episode:
 * the header and the arrays mj_forward does not recompute (MuJoCo 2.2's own
 * list in _resetData) are reset as it resets them; the rest is derived and
 * the caller's mj_forward rewrites what it reads.  Call mj_forward next. */
void dmc_reset_data(const mjModel *m, mjData *d);
/* Why d's simulation is no longer trustworthy (MuJoCo's bad qpos/qvel/qacc
 * warnings, non-finite state), or NULL. */
const char *dmc_divergence(const mjModel *m, const mjData *d);

/* An init that only randomizes the joints (walker, hopper, point_mass). */
void dmc_init_randomized(const dmc_model *dm, mjData *d, double *extra, crl_rng *rng);

/* dm_control's randomize_limited_and_rotational_joints: limited hinges and
 * slides uniform in their range, free hinges in [-pi, pi), free joints'
 * orientation a normalized uniform [0, 1)^4 (the suite's own choice), unlimited
 * balls uniform on the unit 3-sphere, limited balls a random axis turned by
 * up to the range's upper bound. */
void dmc_randomize_joints(const mjModel *m, mjData *d, crl_rng *rng);

/* Body b's rotation matrix entry (row, col), as dm_control's xmat['b', 'xz']. */
static inline double dmc_xmat(const mjData *d, int body, int row, int col)
{
    return d->xmat[9 * body + 3 * row + col];
}

/* Standard normal draw, as numpy's randn. */
static inline double dmc_randn(crl_rng *rng)
{
    return crl_rng_normal(rng);
}

/* The task table (registry.c). */
size_t dmc_task_count(void);
const dmc_task *dmc_task_at(size_t i);
/* Exact "domain/task" match, or NULL with CRL_E_NOT_FOUND naming close matches. */
const dmc_task *dmc_task_lookup(const char *id, crl_error *err);

extern const dmc_task dmc_cartpole_balance, dmc_cartpole_balance_sparse, dmc_cartpole_swingup,
    dmc_cartpole_swingup_sparse;
extern const dmc_task dmc_pendulum_swingup;
extern const dmc_task dmc_acrobot_swingup, dmc_acrobot_swingup_sparse;
extern const dmc_task dmc_point_mass_easy;
extern const dmc_task dmc_reacher_easy, dmc_reacher_hard;
extern const dmc_task dmc_cheetah_run;
extern const dmc_task dmc_walker_stand, dmc_walker_walk, dmc_walker_run;
extern const dmc_task dmc_hopper_stand, dmc_hopper_hop;
extern const dmc_task dmc_finger_spin, dmc_finger_turn_easy, dmc_finger_turn_hard;
extern const dmc_task dmc_ball_in_cup_catch;
extern const dmc_task dmc_cartpole_two_poles, dmc_cartpole_three_poles;
extern const dmc_task dmc_point_mass_hard;
extern const dmc_task dmc_humanoid_stand, dmc_humanoid_walk, dmc_humanoid_run;
extern const dmc_task dmc_swimmer_swimmer6, dmc_swimmer_swimmer15;
extern const dmc_task dmc_fish_upright, dmc_fish_swim;
extern const dmc_task dmc_quadruped_walk, dmc_quadruped_run, dmc_quadruped_fetch, dmc_quadruped_escape;
extern const dmc_task dmc_manipulator_bring_ball;
extern const dmc_task dmc_stacker_stack_2, dmc_stacker_stack_4;
extern const dmc_task dmc_lqr_lqr_2_1, dmc_lqr_lqr_6_2;
/* The single-pole cart-pole MJCF the n-pole tasks grow (cartpole.c). */
extern const char dmc_cartpole_xml[];

/* The suite's "pole_N"-style generated models: the domain's MJCF text
 * (bundled, or the suite's file with its <include>s read from dir when dir
 * is not NULL) parsed, t->edit applied, written back into *out (malloc'd,
 * NUL-terminated, *out_len bytes).  CRL_E_CONFIG naming the file or element
 * on a malformed model; *out NULL on failure. */
int dmc_xml_generate(const dmc_task *t, const char *text, size_t len, const char *dir, char **out,
                     size_t *out_len, crl_error *err);

/* ---- spline_zoom.c: scipy.ndimage.zoom ---- */

/* The length scipy.ndimage.zoom gives an axis of n samples zoomed by `zoom`: int(round(n * zoom)) with
 * Python's round (half to even); -1 beyond int. */
int dmc_zoom_len(int n, double zoom);
/* scipy.ndimage.zoom(in, zoom) with its defaults (order 3, mode 'constant', cval 0, prefilter True,
 * grid_mode False) of a row-major rows x cols float64 grid into out [orows, ocols] (the shape of
 * dmc_zoom_len): in's cubic B-spline coefficients into coef [rows * cols] (SciPy's mirror-boundary
 * prefilter, axis 0 then 1), then out[r, c] the spline at (r (rows - 1) / (orows - 1),
 * c (cols - 1) / (ocols - 1)), 0 where rounding puts that past the last sample (SciPy's constant
 * mode).  All sizes >= 1; allocates nothing, cannot fail. */
void dmc_zoom2d(const double *in, int rows, int cols, double *coef, double *out, int orows, int ocols);

/* ---- model_loader.c ---- */

/* Route MuJoCo's errors and warnings to crl (MuJoCo's defaults exit the
 * process and write MUJOCO_LOG.TXT into the working directory).  Idempotent. */
void dmc_install_error_hooks(void);

/* Runs fn(arg) with MuJoCo's error handler armed: an mju_error inside comes
 * back as CRL_E_RUNTIME naming `what` and MuJoCo's message. */
int dmc_guarded(void (*fn)(void *), void *arg, const char *what, crl_error *err);

/* Load task t's model: the bundled MJCF, or `suite_dir`/DOMAIN.xml (with
 * its common/ includes) when suite_dir is non-NULL and non-empty.  Then the
 * task's setup.  dm is the caller's to free with dmc_model_free. */
int dmc_model_load(dmc_model *dm, const dmc_task *t, const char *suite_dir, crl_error *err);
/* Frees dm's model and the task's cache (either may be NULL) and clears them. */
void dmc_model_free(dmc_model *dm);

/* ---- render_osmesa.c ---- */

typedef struct dmc_renderer dmc_renderer;

/* An offscreen OSMesa context of width x height for model m.  A missing GL
 * library is CRL_E_UNSUPPORTED naming the Debian package. */
dmc_renderer *dmc_renderer_new(mjModel *m, int width, int height, crl_error *err);
/* Draw d from fixed camera `camera` (-1: the free camera) into rgb [h, w, 3], top row first. */
int dmc_renderer_draw(dmc_renderer *r, mjModel *m, mjData *d, int camera, uint8_t *rgb,
                      crl_error *err);
void dmc_renderer_free(dmc_renderer *r);

#endif
