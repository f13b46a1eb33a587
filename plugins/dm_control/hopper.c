/* The suite's planar hopper domain: stand, hop. */
#include "dmc.h"

#include <math.h>

/* A one-legged planar hopper: torso and nose on a planar root, waist, hip,
 * knee and ankle hinges (damping .05, armature .2), touch sensors at toe
 * and heel, motors of gears 30/40/30/10, Euler at 5 ms driven every 20 ms. */
static const char hopper_xml[] =
    "<mujoco model='planar hopper'>"
    "<statistic extent='2' center='0 0 .5'/>"
    "<default>"
    "<default class='hopper'>"
    "<joint type='hinge' axis='0 1 0' limited='true' damping='.05' armature='.2'/>"
    "<geom type='capsule' material='self'/>"
    "<site type='sphere' size='0.05' group='3'/>"
    "</default>"
    "<default class='free'>"
    "<joint limited='false' damping='0' armature='0' stiffness='0'/>"
    "</default>"
    "<motor ctrlrange='-1 1' ctrllimited='true'/>"
    "</default>"
    "<option timestep='0.005'/>"
    "<worldbody>"
    "<camera name='cam0' pos='0 -2.8 0.8' euler='90 0 0' mode='trackcom'/>"
    "<camera name='back' pos='-2 -.2 1.2' xyaxes='0.2 -1 0 .5 0 2' mode='trackcom'/>"
    "<geom name='floor' type='plane' conaffinity='1' pos='48 0 0' size='50 1.25 .2' material='grid'/>"
    "<body name='torso' pos='0 0 1' childclass='hopper'>"
    "<light name='top' pos='0 0 2' mode='trackcom'/>"
    "<joint name='rootx' type='slide' axis='1 0 0' class='free'/>"
    "<joint name='rootz' type='slide' axis='0 0 1' class='free'/>"
    "<joint name='rooty' type='hinge' axis='0 1 0' class='free'/>"
    "<geom name='torso' fromto='0 0 -.05 0 0 .2' size='0.0653'/>"
    "<geom name='nose' fromto='.08 0 .13 .15 0 .14' size='0.03'/>"
    "<body name='pelvis' pos='0 0 -.05'>"
    "<joint name='waist' range='-30 30'/>"
    "<geom name='pelvis' fromto='0 0 0 0 0 -.15' size='0.065'/>"
    "<body name='thigh' pos='0 0 -.2'>"
    "<joint name='hip' range='-170 10'/>"
    "<geom name='thigh' fromto='0 0 0 0 0 -.33' size='0.04'/>"
    "<body name='calf' pos='0 0 -.33'>"
    "<joint name='knee' range='5 150'/>"
    "<geom name='calf' fromto='0 0 0 0 0 -.32' size='0.03'/>"
    "<body name='foot' pos='0 0 -.32'>"
    "<joint name='ankle' range='-45 45'/>"
    "<geom name='foot' fromto='-.08 0 0 .17 0 0' size='0.04'/>"
    "<site name='touch_toe' pos='.17 0 0'/>"
    "<site name='touch_heel' pos='-.08 0 0'/>"
    "</body>"
    "</body>"
    "</body>"
    "</body>"
    "</body>"
    "</worldbody>"
    "<sensor>"
    "<subtreelinvel name='torso_subtreelinvel' body='torso'/>"
    "<touch name='touch_toe' site='touch_toe'/>"
    "<touch name='touch_heel' site='touch_heel'/>"
    "</sensor>"
    "<actuator>"
    "<motor name='waist' joint='waist' gear='30'/>"
    "<motor name='hip' joint='hip' gear='40'/>"
    "<motor name='knee' joint='knee' gear='30'/>"
    "<motor name='ankle' joint='ankle' gear='10'/>"
    "</actuator>"
    "</mujoco>";

enum { TORSO, FOOT, SPEED, TOE, HEEL };

static int hopper_setup(dmc_model *dm, crl_error *err)
{
    int rc = dmc_name(dm, mjOBJ_BODY, "torso", TORSO, err);
    if (rc == CRL_OK)
        rc = dmc_name(dm, mjOBJ_BODY, "foot", FOOT, err);
    if (rc == CRL_OK)
        rc = dmc_name(dm, mjOBJ_SENSOR, "torso_subtreelinvel", SPEED, err);
    if (rc == CRL_OK)
        rc = dmc_name(dm, mjOBJ_SENSOR, "touch_toe", TOE, err);
    if (rc == CRL_OK)
        rc = dmc_name(dm, mjOBJ_SENSOR, "touch_heel", HEEL, err);
    if (rc != CRL_OK)
        return rc;
    for (int k = SPEED; k <= HEEL; k++)
        dm->adr[k] = dm->m->sensor_adr[dm->id[k]];
    if (dm->m->nq != 7 || dm->m->nv != 7)
        return crl_error_set(err, CRL_E_CONFIG,
                             "dm_control: %s: the model has nq %d, nv %d; the task's observations "
                             "need the suite's 7 and 7",
                             dm->task->id, dm->m->nq, dm->m->nv);
    return CRL_OK;
}

/* position: qpos without the horizontal root; velocity: qvel; touch:
 * log(1 + force) at toe and heel. */
static void hopper_observe(const dmc_model *dm, const mjData *d, const double *extra,
                           double *const *out)
{
    (void)extra;
    for (int k = 1; k < 7; k++)
        out[0][k - 1] = d->qpos[k];
    for (int k = 0; k < 7; k++)
        out[1][k] = d->qvel[k];
    out[2][0] = log1p(d->sensordata[dm->adr[TOE]]);
    out[2][1] = log1p(d->sensordata[dm->adr[HEEL]]);
}

/* The torso's centre of mass over the foot's. */
static double standing(const dmc_model *dm, const mjData *d)
{
    double height = d->xipos[3 * dm->id[TORSO] + 2] - d->xipos[3 * dm->id[FOOT] + 2];
    return dmc_tol(height, 0.6, 2.0, 0);
}

static double reward_stand(const dmc_model *dm, const mjData *d, const double *extra)
{
    (void)extra;
    return standing(dm, d) * (dmc_small_control(dm->m, d) + 4.0) / 5.0;
}

static double reward_hop(const dmc_model *dm, const mjData *d, const double *extra)
{
    (void)extra;
    double hopping =
        dmc_tolerance(d->sensordata[dm->adr[SPEED]], 2.0, INFINITY, 1.0, DMC_LINEAR, 0.5);
    return standing(dm, d) * hopping;
}

#define HOPPER_TASK(tname, reward_fn)                                                  \
    {                                                                                  \
        .domain = "hopper", .name = #tname, .id = "hopper/" #tname, .xml = hopper_xml, \
        .time_limit = 20.0, .control_timestep = 0.02, .n_obs = 3,                      \
        .obs = {{"position", 6}, {"velocity", 7}, {"touch", 2}}, .setup = hopper_setup, \
        .init = dmc_init_randomized, .observe = hopper_observe, .reward = reward_fn,           \
    }

const dmc_task dmc_hopper_stand = HOPPER_TASK(stand, reward_stand);
const dmc_task dmc_hopper_hop = HOPPER_TASK(hop, reward_hop);
