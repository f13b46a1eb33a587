/* The suite's pendulum domain: swingup. */
#include "dmc.h"

#include <math.h>

/* A 1 kg ball on a massless 0.5 m pole, hinge damping 0.1, Euler at 20 ms,
 * a unit-gear torque motor with control in [-1, 1]. */
static const char pendulum_xml[] =
    "<mujoco model='pendulum'>"
    "<option timestep='0.02'>"
    "<flag contact='disable' energy='enable'/>"
    "</option>"
    "<worldbody>"
    "<light name='light' pos='0 0 2'/>"
    "<geom name='floor' size='2.5 2.5 .2' type='plane' material='grid'/>"
    "<camera name='fixed' pos='0 -1.5 2' xyaxes='1 0 0 0 1 1'/>"
    "<camera name='lookat' mode='targetbodycom' target='pole' pos='0 -2 1'/>"
    "<body name='pole' pos='0 0 .6'>"
    "<joint name='hinge' type='hinge' axis='0 1 0' damping='0.1'/>"
    "<geom name='base' material='decoration' type='cylinder' fromto='0 -.03 0 0 .03 0' size='0.021' mass='0'/>"
    "<geom name='pole' material='self' type='capsule' fromto='0 0 0 0 0 0.5' size='0.02' mass='0'/>"
    "<geom name='mass' material='effector' type='sphere' pos='0 0 0.5' size='0.05' mass='1'/>"
    "</body>"
    "</worldbody>"
    "<actuator>"
    "<motor name='torque' joint='hinge' gear='1' ctrlrange='-1 1' ctrllimited='true'/>"
    "</actuator>"
    "</mujoco>";

enum { HINGE, POLE };

static int pendulum_setup(dmc_model *dm, crl_error *err)
{
    int rc = dmc_joint(dm, "hinge", HINGE, err);
    if (rc == CRL_OK)
        rc = dmc_name(dm, mjOBJ_BODY, "pole", POLE, err);
    /* Upright within 8 degrees earns the reward. */
    dm->param[0] = cos(8.0 * M_PI / 180.0);
    return rc;
}

static void pendulum_init(const dmc_model *dm, mjData *d, double *extra, crl_rng *rng)
{
    (void)extra;
    d->qpos[dm->adr[HINGE]] = crl_rng_range(rng, -M_PI, M_PI);
}

static void pendulum_observe(const dmc_model *dm, const mjData *d, const double *extra,
                             double *const *out)
{
    (void)extra;
    out[0][0] = dmc_xmat(d, dm->id[POLE], 2, 2);
    out[0][1] = dmc_xmat(d, dm->id[POLE], 0, 2);
    out[1][0] = d->qvel[dm->m->jnt_dofadr[dm->id[HINGE]]];
}

static double pendulum_reward(const dmc_model *dm, const mjData *d, const double *extra)
{
    (void)extra;
    return dmc_tol(dmc_xmat(d, dm->id[POLE], 2, 2), dm->param[0], 1.0, 0);
}

const dmc_task dmc_pendulum_swingup = {
    .domain = "pendulum", .name = "swingup", .id = "pendulum/swingup", .xml = pendulum_xml,
    .time_limit = 20.0, .control_timestep = 0.0, .n_obs = 2,
    .obs = {{"orientation", 2}, {"velocity", 1}}, .setup = pendulum_setup,
    .init = pendulum_init, .observe = pendulum_observe, .reward = pendulum_reward,
};
