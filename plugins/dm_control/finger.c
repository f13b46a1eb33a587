/* The suite's finger domain: spin, turn_easy, turn_hard. */
#include "dmc.h"

#include <math.h>

/* A two-link planar finger (hinges of +-110 degrees, damping 2.5, motors of
 * gears 30 and 15) against a free-spinning two-capsule body (friction loss
 * .1); no gravity, elliptic cones, Euler at 10 ms driven every 20 ms.  Every
 * observation is a sensor reading, as in the suite. */
static const char finger_xml[] =
    "<mujoco model='finger'>"
    "<option timestep='0.01' cone='elliptic' iterations='200'>"
    "<flag gravity='disable'/>"
    "</option>"
    "<default>"
    "<geom solimp='0 0.9 0.01' solref='.02 1'/>"
    "<joint type='hinge' axis='0 -1 0'/>"
    "<motor ctrllimited='true' ctrlrange='-1 1'/>"
    "<default class='finger'>"
    "<joint damping='2.5' limited='true'/>"
    "<site type='ellipsoid' size='.025 .03 .025' material='site' group='3'/>"
    "</default>"
    "</default>"
    "<worldbody>"
    "<light name='light' directional='true' diffuse='.6 .6 .6' pos='0 0 2' specular='.3 .3 .3'/>"
    "<geom name='ground' type='plane' pos='0 0 0' size='.6 .2 10' material='grid'/>"
    "<camera name='cam0' pos='0 -1 .8' xyaxes='1 0 0 0 1 2'/>"
    "<camera name='cam1' pos='0 -1 .4' xyaxes='1 0 0 0 0 1'/>"
    "<body name='proximal' pos='-.2 0 .4' childclass='finger'>"
    "<geom name='proximal_decoration' type='cylinder' fromto='0 -.033 0 0 .033 0' size='.034' material='decoration'/>"
    "<joint name='proximal' range='-110 110' ref='-90'/>"
    "<geom name='proximal' type='capsule' material='self' size='.03' fromto='0 0 0 0 0 -.17'/>"
    "<body name='distal' pos='0 0 -.18' childclass='finger'>"
    "<joint name='distal' range='-110 110'/>"
    "<geom name='distal' type='capsule' size='.028' material='self' fromto='0 0 0 0 0 -.16' contype='0' conaffinity='0'/>"
    "<geom name='fingertip' type='capsule' size='.03' material='effector' fromto='0 0 -.13 0 0 -.161'/>"
    "<site name='touchtop' pos='.01 0 -.17'/>"
    "<site name='touchbottom' pos='-.01 0 -.17'/>"
    "</body>"
    "</body>"
    "<body name='spinner' pos='.2 0 .4'>"
    "<joint name='hinge' frictionloss='.1' damping='.5'/>"
    "<geom name='cap1' type='capsule' size='.04 .09' material='self' pos='.02 0 0'/>"
    "<geom name='cap2' type='capsule' size='.04 .09' material='self' pos='-.02 0 0'/>"
    "<site name='tip' type='sphere' size='.02' pos='0 0 .13' material='target'/>"
    "<geom name='spinner_decoration' type='cylinder' fromto='0 -.045 0 0 .045 0' size='.02' material='decoration'/>"
    "</body>"
    "<site name='target' type='sphere' size='.03' pos='0 0 .4' material='target'/>"
    "</worldbody>"
    "<actuator>"
    "<motor name='proximal' joint='proximal' gear='30'/>"
    "<motor name='distal' joint='distal' gear='15'/>"
    "</actuator>"
    "<sensor>"
    "<jointpos name='proximal' joint='proximal'/>"
    "<jointpos name='distal' joint='distal'/>"
    "<jointvel name='proximal_velocity' joint='proximal'/>"
    "<jointvel name='distal_velocity' joint='distal'/>"
    "<jointvel name='hinge_velocity' joint='hinge'/>"
    "<framepos name='tip' objtype='site' objname='tip'/>"
    "<framepos name='target' objtype='site' objname='target'/>"
    "<framepos name='spinner' objtype='xbody' objname='spinner'/>"
    "<touch name='touchtop' site='touchtop'/>"
    "<touch name='touchbottom' site='touchbottom'/>"
    "<framepos name='touchtop_pos' objtype='site' objname='touchtop'/>"
    "<framepos name='touchbottom_pos' objtype='site' objname='touchbottom'/>"
    "</sensor>"
    "</mujoco>";

/* Sensor slots (their sensordata addresses land in adr[]), then objects. */
enum { S_PROXIMAL, S_DISTAL, S_PROXIMAL_VEL, S_DISTAL_VEL, S_HINGE_VEL, S_TIP, S_SPINNER, S_TOP };
enum { TARGET_SITE = 0, HINGE = 1, CAP1 = 2, TIP_SITE = 3 };

static const char *const sensor_names[] = {"proximal", "distal", "proximal_velocity",
                                           "distal_velocity", "hinge_velocity", "tip",
                                           "spinner", "touchtop"};

static int finger_setup_common(dmc_model *dm, crl_error *err)
{
    int ids[8];
    for (int k = 0; k < 8; k++) {
        int rc = dmc_name(dm, mjOBJ_SENSOR, sensor_names[k], 0, err);
        if (rc != CRL_OK)
            return rc;
        ids[k] = dm->id[0];
    }
    int rc = dmc_name(dm, mjOBJ_SENSOR, "touchbottom", 0, err);
    if (rc != CRL_OK)
        return rc;
    /* touchbottom follows touchtop in the suite's sensor list. */
    if (dm->m->sensor_adr[dm->id[0]] != dm->m->sensor_adr[ids[S_TOP]] + 1)
        return crl_error_set(err, CRL_E_CONFIG, "dm_control: %s: touchbottom must follow touchtop",
                             dm->task->id);
    for (int k = 0; k < 8; k++)
        dm->adr[k] = dm->m->sensor_adr[ids[k]];
    rc = dmc_name(dm, mjOBJ_SITE, "target", TARGET_SITE, err);
    /* The hinge's id only: dmc_joint would also write its qpos address into adr[HINGE], which is the
     * distal angle sensor's slot (S_DISTAL), and position[1] would read the spinner's velocity. */
    if (rc == CRL_OK)
        rc = dmc_name(dm, mjOBJ_JOINT, "hinge", HINGE, err);
    if (rc == CRL_OK)
        rc = dmc_name(dm, mjOBJ_GEOM, "cap1", CAP1, err);
    if (rc == CRL_OK)
        rc = dmc_name(dm, mjOBJ_SITE, "tip", TIP_SITE, err);
    return rc;
}

/* Spin hides the target and tip and lightens the hinge's damping; the
 * changes hold for every env, so the shared model takes them. */
static int setup_spin(dmc_model *dm, crl_error *err)
{
    int rc = finger_setup_common(dm, err);
    if (rc != CRL_OK)
        return rc;
    mjModel *m = dm->m;
    m->site_rgba[4 * dm->id[TARGET_SITE] + 3] = 0;
    m->site_rgba[4 * dm->id[TIP_SITE] + 3] = 0;
    m->dof_damping[m->jnt_dofadr[dm->id[HINGE]]] = 0.03;
    return CRL_OK;
}

static int setup_turn(dmc_model *dm, double radius, crl_error *err)
{
    int rc = finger_setup_common(dm, err);
    if (rc != CRL_OK)
        return rc;
    dm->m->site_size[3 * dm->id[TARGET_SITE]] = radius;
    dm->param[0] = radius;
    return CRL_OK;
}

static int setup_turn_easy(dmc_model *dm, crl_error *err)
{
    return setup_turn(dm, 0.07, err);
}

static int setup_turn_hard(dmc_model *dm, crl_error *err)
{
    return setup_turn(dm, 0.03, err);
}

/* Random joint angles until nothing touches (the suite gives up after 1000
 * draws; so do we, keeping the last). */
static void random_free_angles(const dmc_model *dm, mjData *d, crl_rng *rng)
{
    for (int attempt = 0; attempt < 1000; attempt++) {
        dmc_randomize_joints(dm->m, d, rng);
        mj_forward(dm->m, d);
        if (d->ncon == 0)
            break;
    }
}

static void init_spin(const dmc_model *dm, mjData *d, double *extra, crl_rng *rng)
{
    (void)extra;
    random_free_angles(dm, d, rng);
}

/* The target on the spinner's circle (radius: cap1's size summed) at a
 * random angle; extra holds its (x, z), which differs per env. */
static void init_turn(const dmc_model *dm, mjData *d, double *extra, crl_rng *rng)
{
    const mjModel *m = dm->m;
    double angle = crl_rng_range(rng, -M_PI, M_PI);
    const double *anchor = d->xanchor + 3 * dm->id[HINGE];
    const double *size = m->geom_size + 3 * dm->id[CAP1];
    double radius = size[0] + size[1] + size[2];
    extra[0] = anchor[0] + radius * sin(angle);
    extra[1] = anchor[2] + radius * cos(angle);
    random_free_angles(dm, d, rng);
}

static void observe_common(const dmc_model *dm, const mjData *d, double *const *out)
{
    const double *s = d->sensordata;
    out[0][0] = s[dm->adr[S_PROXIMAL]];
    out[0][1] = s[dm->adr[S_DISTAL]];
    out[0][2] = s[dm->adr[S_TIP]] - s[dm->adr[S_SPINNER]];
    out[0][3] = s[dm->adr[S_TIP] + 2] - s[dm->adr[S_SPINNER] + 2];
    out[1][0] = s[dm->adr[S_PROXIMAL_VEL]];
    out[1][1] = s[dm->adr[S_DISTAL_VEL]];
    out[1][2] = s[dm->adr[S_HINGE_VEL]];
    out[2][0] = log1p(s[dm->adr[S_TOP]]);
    out[2][1] = log1p(s[dm->adr[S_TOP] + 1]);
}

static void observe_spin(const dmc_model *dm, const mjData *d, const double *extra,
                         double *const *out)
{
    (void)extra;
    observe_common(dm, d, out);
}

/* The tip's distance to the target's surface; negative inside.  As the suite:
 * target_position - tip_position, both relative to the spinner. */
static double dist_to_target(const dmc_model *dm, const mjData *d, const double *extra)
{
    const double *tip = d->sensordata + dm->adr[S_TIP];
    const double *spinner = d->sensordata + dm->adr[S_SPINNER];
    double dx = (extra[0] - spinner[0]) - (tip[0] - spinner[0]);
    double dz = (extra[1] - spinner[2]) - (tip[2] - spinner[2]);
    return sqrt(dx * dx + dz * dz) - dm->param[0];
}

static void observe_turn(const dmc_model *dm, const mjData *d, const double *extra,
                         double *const *out)
{
    observe_common(dm, d, out);
    const double *spinner = d->sensordata + dm->adr[S_SPINNER];
    out[3][0] = extra[0] - spinner[0];
    out[3][1] = extra[1] - spinner[2];
    out[4][0] = dist_to_target(dm, d, extra);
}

static double reward_spin(const dmc_model *dm, const mjData *d, const double *extra)
{
    (void)extra;
    return d->sensordata[dm->adr[S_HINGE_VEL]] <= -15.0 ? 1.0 : 0.0;
}

static double reward_turn(const dmc_model *dm, const mjData *d, const double *extra)
{
    return dist_to_target(dm, d, extra) <= 0 ? 1.0 : 0.0;
}

static void render_prep_turn(const dmc_model *dm, mjData *d, const double *extra)
{
    double *p = d->site_xpos + 3 * dm->id[TARGET_SITE];
    p[0] = extra[0];
    p[2] = extra[1];
}

const dmc_task dmc_finger_spin = {
    .domain = "finger", .name = "spin", .id = "finger/spin", .xml = finger_xml,
    .time_limit = 20.0, .control_timestep = 0.02, .n_obs = 3,
    .obs = {{"position", 4}, {"velocity", 3}, {"touch", 2}}, .setup = setup_spin,
    .init = init_spin, .observe = observe_spin, .reward = reward_spin,
};

#define FINGER_TURN(tname, setup_fn)                                                          \
    {                                                                                         \
        .domain = "finger", .name = #tname, .id = "finger/" #tname, .xml = finger_xml,        \
        .time_limit = 20.0, .control_timestep = 0.02, .n_obs = 5,                             \
        .obs = {{"position", 4}, {"velocity", 3}, {"touch", 2}, {"target_position", 2},       \
                {"dist_to_target", 1}},                                                       \
        .n_extra = 2, .setup = setup_fn, .init = init_turn, .observe = observe_turn,          \
        .reward = reward_turn, .render_prep = render_prep_turn,                               \
    }

const dmc_task dmc_finger_turn_easy = FINGER_TURN(turn_easy, setup_turn_easy);
const dmc_task dmc_finger_turn_hard = FINGER_TURN(turn_hard, setup_turn_hard);
