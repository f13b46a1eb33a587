/* The suite's planar walker domain: stand, walk, run. */
#include "dmc.h"

#include <math.h>

/* A torso on a planar root (z, x slides and a pitch hinge) with two
 * three-hinge legs (hips -20..100, knees -150..0, ankles -45..45 degrees),
 * motors of gears 100/50/20 per leg, Euler at 2.5 ms driven every 25 ms. */
static const char walker_xml[] =
    "<mujoco model='planar walker'>"
    "<option timestep='0.0025'/>"
    "<statistic extent='2' center='0 0 1'/>"
    "<default>"
    "<joint damping='.1' armature='0.01' limited='true' solimplimit='0 .99 .01'/>"
    "<geom contype='1' conaffinity='0' friction='.7 .1 .1'/>"
    "<motor ctrlrange='-1 1' ctrllimited='true'/>"
    "<site size='0.01'/>"
    "<default class='walker'>"
    "<geom material='self' type='capsule'/>"
    "<joint axis='0 -1 0'/>"
    "</default>"
    "</default>"
    "<worldbody>"
    "<geom name='floor' type='plane' conaffinity='1' pos='248 0 0' size='250 .8 .2' material='grid' zaxis='0 0 1'/>"
    "<body name='torso' pos='0 0 1.3' childclass='walker'>"
    "<light name='light' pos='0 0 2' mode='trackcom'/>"
    "<camera name='side' pos='0 -2 .7' euler='60 0 0' mode='trackcom'/>"
    "<camera name='back' pos='-2 0 .5' xyaxes='0 -1 0 1 0 3' mode='trackcom'/>"
    "<joint name='rootz' axis='0 0 1' type='slide' limited='false' armature='0' damping='0'/>"
    "<joint name='rootx' axis='1 0 0' type='slide' limited='false' armature='0' damping='0'/>"
    "<joint name='rooty' axis='0 1 0' type='hinge' limited='false' armature='0' damping='0'/>"
    "<geom name='torso' size='0.07 0.3'/>"
    "<body name='right_thigh' pos='0 -.05 -0.3'>"
    "<joint name='right_hip' range='-20 100'/>"
    "<geom name='right_thigh' pos='0 0 -0.225' size='0.05 0.225'/>"
    "<body name='right_leg' pos='0 0 -0.7'>"
    "<joint name='right_knee' pos='0 0 0.25' range='-150 0'/>"
    "<geom name='right_leg' size='0.04 0.25'/>"
    "<body name='right_foot' pos='0.06 0 -0.25'>"
    "<joint name='right_ankle' pos='-0.06 0 0' range='-45 45'/>"
    "<geom name='right_foot' zaxis='1 0 0' size='0.05 0.1'/>"
    "</body>"
    "</body>"
    "</body>"
    "<body name='left_thigh' pos='0 .05 -0.3'>"
    "<joint name='left_hip' range='-20 100'/>"
    "<geom name='left_thigh' pos='0 0 -0.225' size='0.05 0.225'/>"
    "<body name='left_leg' pos='0 0 -0.7'>"
    "<joint name='left_knee' pos='0 0 0.25' range='-150 0'/>"
    "<geom name='left_leg' size='0.04 0.25'/>"
    "<body name='left_foot' pos='0.06 0 -0.25'>"
    "<joint name='left_ankle' pos='-0.06 0 0' range='-45 45'/>"
    "<geom name='left_foot' zaxis='1 0 0' size='0.05 0.1'/>"
    "</body>"
    "</body>"
    "</body>"
    "</body>"
    "</worldbody>"
    "<sensor>"
    "<subtreelinvel name='torso_subtreelinvel' body='torso'/>"
    "</sensor>"
    "<actuator>"
    "<motor name='right_hip' joint='right_hip' gear='100'/>"
    "<motor name='right_knee' joint='right_knee' gear='50'/>"
    "<motor name='right_ankle' joint='right_ankle' gear='20'/>"
    "<motor name='left_hip' joint='left_hip' gear='100'/>"
    "<motor name='left_knee' joint='left_knee' gear='50'/>"
    "<motor name='left_ankle' joint='left_ankle' gear='20'/>"
    "</actuator>"
    "</mujoco>";

enum { TORSO, SPEED };

static int walker_setup(dmc_model *dm, crl_error *err)
{
    int rc = dmc_name(dm, mjOBJ_BODY, "torso", TORSO, err);
    if (rc == CRL_OK)
        rc = dmc_name(dm, mjOBJ_SENSOR, "torso_subtreelinvel", SPEED, err);
    if (rc == CRL_OK)
        dm->adr[SPEED] = dm->m->sensor_adr[dm->id[SPEED]];
    if (rc == CRL_OK && (dm->m->nbody != 8 || dm->m->nv != 9))
        rc = crl_error_set(err, CRL_E_CONFIG,
                           "dm_control: %s: the model has %d bodies and %d dofs; the task's "
                           "observations need the suite's 8 and 9",
                           dm->task->id, dm->m->nbody, dm->m->nv);
    return rc;
}

/* orientations: xx and xz of every body but the world's; height: the
 * torso's z; velocity: qvel. */
static void walker_observe(const dmc_model *dm, const mjData *d, const double *extra,
                           double *const *out)
{
    (void)extra;
    const mjModel *m = dm->m;
    for (int b = 1; b < m->nbody; b++) {
        out[0][2 * (b - 1)] = dmc_xmat(d, b, 0, 0);
        out[0][2 * (b - 1) + 1] = dmc_xmat(d, b, 0, 2);
    }
    out[1][0] = d->xpos[3 * dm->id[TORSO] + 2];
    for (int k = 0; k < m->nv; k++)
        out[2][k] = d->qvel[k];
}

static double stand_reward(const dmc_model *dm, const mjData *d)
{
    const double stand_height = 1.2;
    double standing = dmc_tol(d->xpos[3 * dm->id[TORSO] + 2], stand_height, INFINITY,
                              stand_height / 2);
    double upright = (1.0 + dmc_xmat(d, dm->id[TORSO], 2, 2)) / 2.0;
    return (3.0 * standing + upright) / 4.0;
}

static double move_reward(const dmc_model *dm, const mjData *d, double speed)
{
    double move = dmc_tolerance(d->sensordata[dm->adr[SPEED]], speed, INFINITY, speed / 2,
                                DMC_LINEAR, 0.5);
    return stand_reward(dm, d) * (5.0 * move + 1.0) / 6.0;
}

static double reward_stand(const dmc_model *dm, const mjData *d, const double *extra)
{
    (void)extra;
    return stand_reward(dm, d);
}

static double reward_walk(const dmc_model *dm, const mjData *d, const double *extra)
{
    (void)extra;
    return move_reward(dm, d, 1.0);
}

static double reward_run(const dmc_model *dm, const mjData *d, const double *extra)
{
    (void)extra;
    return move_reward(dm, d, 8.0);
}

#define WALKER_TASK(tname, reward_fn)                                                   \
    {                                                                                   \
        .domain = "walker", .name = #tname, .id = "walker/" #tname, .xml = walker_xml,  \
        .time_limit = 25.0, .control_timestep = 0.025, .n_obs = 3,                      \
        .obs = {{"orientations", 14}, {"height", 1}, {"velocity", 9}},                  \
        .setup = walker_setup, .init = dmc_init_randomized, .observe = walker_observe,          \
        .reward = reward_fn,                                                            \
    }

const dmc_task dmc_walker_stand = WALKER_TASK(stand, reward_stand);
const dmc_task dmc_walker_walk = WALKER_TASK(walk, reward_walk);
const dmc_task dmc_walker_run = WALKER_TASK(run, reward_run);
