/* The suite's acrobot domain (Coulom's model): swingup, swingup_sparse. */
#include "dmc.h"

#include <math.h>

/* Two 1 m, 1 kg capsule links hanging from a shoulder 2 m up, joint damping
 * 0.05, RK4 at 10 ms with constraints off; only the elbow is driven (gear 2,
 * control in [-1, 1]).  The target is a 0.2 m sphere 4 m up. */
static const char acrobot_xml[] =
    "<mujoco model='acrobot'>"
    "<default>"
    "<joint damping='.05'/>"
    "<geom type='capsule' mass='1'/>"
    "</default>"
    "<option timestep='0.01' integrator='RK4'>"
    "<flag constraint='disable' energy='enable'/>"
    "</option>"
    "<worldbody>"
    "<light name='light' pos='0 0 6'/>"
    "<geom name='floor' size='3 3 .2' type='plane' material='grid'/>"
    "<site name='target' type='sphere' pos='0 0 4' size='0.2' material='target' group='3'/>"
    "<camera name='fixed' pos='0 -6 2' zaxis='0 -1 0'/>"
    "<camera name='lookat' mode='targetbodycom' target='upper_arm' pos='0 -2 3'/>"
    "<body name='upper_arm' pos='0 0 2'>"
    "<joint name='shoulder' type='hinge' axis='0 1 0'/>"
    "<geom name='upper_arm_decoration' material='decoration' type='cylinder' fromto='0 -.06 0 0 .06 0' size='0.051' mass='0'/>"
    "<geom name='upper_arm' fromto='0 0 0 0 0 1' size='0.05' material='self'/>"
    "<body name='lower_arm' pos='0 0 1'>"
    "<joint name='elbow' type='hinge' axis='0 1 0'/>"
    "<geom name='lower_arm' fromto='0 0 0 0 0 1' size='0.049' material='self'/>"
    "<site name='tip' pos='0 0 1' size='0.01'/>"
    "</body>"
    "</body>"
    "</worldbody>"
    "<actuator>"
    "<motor name='elbow' joint='elbow' gear='2' ctrllimited='true' ctrlrange='-1 1'/>"
    "</actuator>"
    "</mujoco>";

enum { SHOULDER, ELBOW, UPPER, LOWER, TARGET, TIP };

static int acrobot_setup(dmc_model *dm, crl_error *err)
{
    int rc = dmc_joint(dm, "shoulder", SHOULDER, err);
    if (rc == CRL_OK)
        rc = dmc_joint(dm, "elbow", ELBOW, err);
    if (rc == CRL_OK)
        rc = dmc_name(dm, mjOBJ_BODY, "upper_arm", UPPER, err);
    if (rc == CRL_OK)
        rc = dmc_name(dm, mjOBJ_BODY, "lower_arm", LOWER, err);
    if (rc == CRL_OK)
        rc = dmc_name(dm, mjOBJ_SITE, "target", TARGET, err);
    if (rc == CRL_OK)
        rc = dmc_name(dm, mjOBJ_SITE, "tip", TIP, err);
    if (rc == CRL_OK)
        dm->param[0] = dm->m->site_size[3 * dm->id[TARGET]]; /* the target's radius */
    return rc;
}

static void acrobot_init(const dmc_model *dm, mjData *d, double *extra, crl_rng *rng)
{
    (void)extra;
    d->qpos[dm->adr[SHOULDER]] = crl_rng_range(rng, -M_PI, M_PI);
    d->qpos[dm->adr[ELBOW]] = crl_rng_range(rng, -M_PI, M_PI);
}

/* orientations: the links' xz then zz (sines, cosines); velocity: qvel. */
static void acrobot_observe(const dmc_model *dm, const mjData *d, const double *extra,
                            double *const *out)
{
    (void)extra;
    out[0][0] = dmc_xmat(d, dm->id[UPPER], 0, 2);
    out[0][1] = dmc_xmat(d, dm->id[LOWER], 0, 2);
    out[0][2] = dmc_xmat(d, dm->id[UPPER], 2, 2);
    out[0][3] = dmc_xmat(d, dm->id[LOWER], 2, 2);
    out[1][0] = d->qvel[0];
    out[1][1] = d->qvel[1];
}

static double to_target(const dmc_model *dm, const mjData *d)
{
    const double *a = d->site_xpos + 3 * dm->id[TARGET], *b = d->site_xpos + 3 * dm->id[TIP];
    double dx = a[0] - b[0], dy = a[1] - b[1], dz = a[2] - b[2];
    return sqrt(dx * dx + dy * dy + dz * dz);
}

static double reward_smooth(const dmc_model *dm, const mjData *d, const double *extra)
{
    (void)extra;
    return dmc_tol(to_target(dm, d), 0, dm->param[0], 1.0);
}

static double reward_sparse(const dmc_model *dm, const mjData *d, const double *extra)
{
    (void)extra;
    return dmc_tol(to_target(dm, d), 0, dm->param[0], 0);
}

#define ACROBOT_TASK(tname, reward_fn)                                                   \
    {                                                                                    \
        .domain = "acrobot", .name = #tname, .id = "acrobot/" #tname, .xml = acrobot_xml, \
        .time_limit = 10.0, .control_timestep = 0.0, .n_obs = 2,                         \
        .obs = {{"orientations", 4}, {"velocity", 2}}, .setup = acrobot_setup,           \
        .init = acrobot_init, .observe = acrobot_observe, .reward = reward_fn,           \
    }

const dmc_task dmc_acrobot_swingup = ACROBOT_TASK(swingup, reward_smooth);
const dmc_task dmc_acrobot_swingup_sparse = ACROBOT_TASK(swingup_sparse, reward_sparse);
