/* The suite's reacher domain: easy (0.05 m target) and hard (0.015 m). */
#include "dmc.h"

#include <math.h>

/* A two-link planar arm (0.12 m links, free shoulder, wrist limited to
 * +-160 degrees, damping 0.01), motors of gear 0.05 with control in [-1, 1],
 * Euler at 20 ms, contacts off.  The target is a sphere the task moves. */
static const char reacher_xml[] =
    "<mujoco model='two-link planar reacher'>"
    "<option timestep='0.02'>"
    "<flag contact='disable'/>"
    "</option>"
    "<default>"
    "<joint type='hinge' axis='0 0 1' damping='0.01'/>"
    "<motor gear='.05' ctrlrange='-1 1' ctrllimited='true'/>"
    "</default>"
    "<worldbody>"
    "<light name='light' pos='0 0 1'/>"
    "<camera name='fixed' pos='0 0 .75' quat='1 0 0 0'/>"
    "<geom name='ground' type='plane' pos='0 0 0' size='.625 .625 10' material='grid'/>"
    "<geom name='wall_x' type='plane' pos='-.3 0 .02' zaxis='1 0 0' size='.02 .3 .02' material='decoration'/>"
    "<geom name='wall_y' type='plane' pos='0 -.3 .02' zaxis='0 1 0' size='.3 .02 .02' material='decoration'/>"
    "<geom name='wall_neg_x' type='plane' pos='.3 0 .02' zaxis='-1 0 0' size='.02 .3 .02' material='decoration'/>"
    "<geom name='wall_neg_y' type='plane' pos='0 .3 .02' zaxis='0 -1 0' size='.3 .02 .02' material='decoration'/>"
    "<geom name='root' type='cylinder' fromto='0 0 0 0 0 0.02' size='.011' material='decoration'/>"
    "<body name='arm' pos='0 0 .01'>"
    "<geom name='arm' type='capsule' fromto='0 0 0 0.12 0 0' size='.01' material='self'/>"
    "<joint name='shoulder'/>"
    "<body name='hand' pos='.12 0 0'>"
    "<geom name='hand' type='capsule' fromto='0 0 0 0.1 0 0' size='.01' material='self'/>"
    "<joint name='wrist' limited='true' range='-160 160'/>"
    "<body name='finger' pos='.12 0 0'>"
    "<camera name='hand' pos='0 0 .2' mode='track'/>"
    "<geom name='finger' type='sphere' size='.01' material='effector'/>"
    "</body>"
    "</body>"
    "</body>"
    "<geom name='target' pos='0 0 .01' material='target' type='sphere' size='.05'/>"
    "</worldbody>"
    "<actuator>"
    "<motor name='shoulder' joint='shoulder'/>"
    "<motor name='wrist' joint='wrist'/>"
    "</actuator>"
    "</mujoco>";

enum { TARGET, FINGER };

static int setup_size(dmc_model *dm, double target_size, crl_error *err)
{
    int rc = dmc_name(dm, mjOBJ_GEOM, "target", TARGET, err);
    if (rc == CRL_OK)
        rc = dmc_name(dm, mjOBJ_GEOM, "finger", FINGER, err);
    if (rc != CRL_OK)
        return rc;
    /* Every env of a task has the same target size, so the shared model holds it. */
    dm->m->geom_size[3 * dm->id[TARGET]] = target_size;
    dm->m->geom_rbound[dm->id[TARGET]] = target_size;
    dm->param[0] = target_size + dm->m->geom_size[3 * dm->id[FINGER]];
    return CRL_OK;
}

static int setup_easy(dmc_model *dm, crl_error *err)
{
    return setup_size(dm, 0.05, err);
}

static int setup_hard(dmc_model *dm, crl_error *err)
{
    return setup_size(dm, 0.015, err);
}

/* Joints as the suite's randomizer, then the target's angle and radius;
 * extra holds the target's (x, y), which differs per env. */
static void reacher_init(const dmc_model *dm, mjData *d, double *extra, crl_rng *rng)
{
    dmc_randomize_joints(dm->m, d, rng);
    double angle = crl_rng_range(rng, 0, 2 * M_PI);
    double radius = crl_rng_range(rng, 0.05, 0.20);
    extra[0] = radius * sin(angle);
    extra[1] = radius * cos(angle);
}

static void finger_to_target(const dmc_model *dm, const mjData *d, const double *extra,
                             double *v)
{
    const double *f = d->geom_xpos + 3 * dm->id[FINGER];
    v[0] = extra[0] - f[0];
    v[1] = extra[1] - f[1];
}

static void reacher_observe(const dmc_model *dm, const mjData *d, const double *extra,
                            double *const *out)
{
    out[0][0] = d->qpos[0];
    out[0][1] = d->qpos[1];
    finger_to_target(dm, d, extra, out[1]);
    out[2][0] = d->qvel[0];
    out[2][1] = d->qvel[1];
}

static double reacher_reward(const dmc_model *dm, const mjData *d, const double *extra)
{
    double v[2];
    finger_to_target(dm, d, extra, v);
    return dmc_tol(sqrt(v[0] * v[0] + v[1] * v[1]), 0, dm->param[0], 0);
}

static void reacher_render_prep(const dmc_model *dm, mjData *d, const double *extra)
{
    d->geom_xpos[3 * dm->id[TARGET]] = extra[0];
    d->geom_xpos[3 * dm->id[TARGET] + 1] = extra[1];
}

#define REACHER_TASK(tname, setup_fn)                                                     \
    {                                                                                     \
        .domain = "reacher", .name = #tname, .id = "reacher/" #tname, .xml = reacher_xml, \
        .time_limit = 20.0, .control_timestep = 0.0, .n_obs = 3,                          \
        .obs = {{"position", 2}, {"to_target", 2}, {"velocity", 2}}, .n_extra = 2,        \
        .setup = setup_fn, .init = reacher_init, .observe = reacher_observe,              \
        .reward = reacher_reward, .render_prep = reacher_render_prep,                     \
    }

const dmc_task dmc_reacher_easy = REACHER_TASK(easy, setup_easy);
const dmc_task dmc_reacher_hard = REACHER_TASK(hard, setup_hard);
