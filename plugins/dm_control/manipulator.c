/* The suite's manipulator domain: bring_ball (the benchmarking task; the peg and insert variants are not here). */
#include "dmc_xml.h"

#include <math.h>
#include <stdio.h>

/* A planar four-link arm (unlimited root, shoulder and elbow +-160, wrist
 * +-140 degrees) with a two-finger hand coupled by an equality, five motors;
 * the props (ball, peg, cup, slot) and their ghost targets.  Elliptic cones,
 * Euler at 1 ms driven every 10 ms.  The edit keeps the props the task uses. */
static const char manipulator_xml[] =
    "<mujoco model='planar manipulator'>"
    "<asset>"
    "<texture name='background' builtin='flat' type='2d' mark='random' markrgb='1 1 1' width='800' height='800' rgb1='.2 .3 .4'/>"
    "<material name='background' texture='background' texrepeat='1 1' texuniform='true'/>"
    "</asset>"
    "<visual>"
    "<map shadowclip='.5'/>"
    "<quality shadowsize='2048'/>"
    "</visual>"
    "<option timestep='0.001' cone='elliptic'/>"
    "<default>"
    "<geom friction='.7' solimp='0.9 0.97 0.001' solref='.005 1'/>"
    "<joint solimplimit='0 0.99 0.01' solreflimit='.005 1'/>"
    "<general ctrllimited='true'/>"
    "<tendon width='0.01'/>"
    "<site size='.003 .003 .003' material='site' group='3'/>"
    "<default class='arm'>"
    "<geom type='capsule' material='self' density='500'/>"
    "<joint type='hinge' pos='0 0 0' axis='0 -1 0' limited='true'/>"
    "<default class='hand'>"
    "<joint damping='.5' range='-10 60'/>"
    "<geom size='.008'/>"
    "<site type='box' size='.018 .005 .005' pos='.022 0 -.002' euler='0 15 0' group='4'/>"
    "<default class='fingertip'>"
    "<geom type='sphere' size='.008' material='effector'/>"
    "<joint damping='.01' stiffness='.01' range='-40 20'/>"
    "<site size='.012 .005 .008' pos='.003 0 .003' group='4' euler='0 0 0'/>"
    "</default>"
    "</default>"
    "</default>"
    "<default class='object'>"
    "<geom material='self'/>"
    "</default>"
    "<default class='task'>"
    "<site rgba='0 0 0 0'/>"
    "</default>"
    "<default class='obstacle'>"
    "<geom material='decoration' friction='0'/>"
    "</default>"
    "<default class='ghost'>"
    "<geom material='target' contype='0' conaffinity='0'/>"
    "</default>"
    "</default>"
    "<worldbody>"
    "<light name='light' directional='true' diffuse='.6 .6 .6' pos='0 0 1' specular='.3 .3 .3'/>"
    "<geom name='floor' type='plane' pos='0 0 0' size='.4 .2 10' material='grid'/>"
    "<geom name='wall1' type='plane' pos='-.682843 0 .282843' size='.4 .2 10' material='grid' zaxis='1 0 1'/>"
    "<geom name='wall2' type='plane' pos='.682843 0 .282843' size='.4 .2 10' material='grid' zaxis='-1 0 1'/>"
    "<geom name='background' type='plane' pos='0 .2 .5' size='1 .5 10' material='background' zaxis='0 -1 0'/>"
    "<camera name='fixed' pos='0 -16 .4' xyaxes='1 0 0 0 0 1' fovy='4'/>"
    "<geom name='arm_root' type='cylinder' fromto='0 -.022 .4 0 .022 .4' size='.024' "
    "material='decoration' contype='0' conaffinity='0'/>"
    "<body name='upper_arm' pos='0 0 .4' childclass='arm'>"
    "<joint name='arm_root' damping='2' limited='false'/>"
    "<geom name='upper_arm' size='.02' fromto='0 0 0 0 0 .18'/>"
    "<body name='middle_arm' pos='0 0 .18' childclass='arm'>"
    "<joint name='arm_shoulder' damping='1.5' range='-160 160'/>"
    "<geom name='middle_arm' size='.017' fromto='0 0 0 0 0 .15'/>"
    "<body name='lower_arm' pos='0 0 .15'>"
    "<joint name='arm_elbow' damping='1' range='-160 160'/>"
    "<geom name='lower_arm' size='.014' fromto='0 0 0 0 0 .12'/>"
    "<body name='hand' pos='0 0 .12'>"
    "<joint name='arm_wrist' damping='.5' range='-140 140'/>"
    "<geom name='hand' size='.011' fromto='0 0 0 0 0 .03'/>"
    "<geom name='palm1' fromto='0 0 .03 .03 0 .045' class='hand'/>"
    "<geom name='palm2' fromto='0 0 .03 -.03 0 .045' class='hand'/>"
    "<site name='grasp' pos='0 0 .065'/>"
    "<body name='pinch site' pos='0 0 .090'>"
    "<site name='pinch'/>"
    "<inertial pos='0 0 0' mass='1e-6' diaginertia='1e-12 1e-12 1e-12'/>"
    "<camera name='hand' pos='0 -.3 0' xyaxes='1 0 0 0 0 1' mode='track'/>"
    "</body>"
    "<site name='palm_touch' type='box' group='4' size='.025 .005 .008' pos='0 0 .043'/>"
    "<body name='thumb' pos='.03 0 .045' euler='0 -90 0' childclass='hand'>"
    "<joint name='thumb'/>"
    "<geom name='thumb1' fromto='0 0 0 .02 0 -.01' size='.007'/>"
    "<geom name='thumb2' fromto='.02 0 -.01 .04 0 -.01' size='.007'/>"
    "<site name='thumb_touch' group='4'/>"
    "<body name='thumbtip' pos='.05 0 -.01' childclass='fingertip'>"
    "<joint name='thumbtip'/>"
    "<geom name='thumbtip1' pos='-.003 0 0'/>"
    "<geom name='thumbtip2' pos='.003 0 0'/>"
    "<site name='thumbtip_touch' group='4'/>"
    "</body>"
    "</body>"
    "<body name='finger' pos='-.03 0 .045' euler='0 90 180' childclass='hand'>"
    "<joint name='finger'/>"
    "<geom name='finger1' fromto='0 0 0 .02 0 -.01' size='.007'/>"
    "<geom name='finger2' fromto='.02 0 -.01 .04 0 -.01' size='.007'/>"
    "<site name='finger_touch'/>"
    "<body name='fingertip' pos='.05 0 -.01' childclass='fingertip'>"
    "<joint name='fingertip'/>"
    "<geom name='fingertip1' pos='-.003 0 0'/>"
    "<geom name='fingertip2' pos='.003 0 0'/>"
    "<site name='fingertip_touch'/>"
    "</body>"
    "</body>"
    "</body>"
    "</body>"
    "</body>"
    "</body>"
    "<body name='ball' pos='.4 0 .4' childclass='object'>"
    "<joint name='ball_x' type='slide' axis='1 0 0' ref='.4'/>"
    "<joint name='ball_z' type='slide' axis='0 0 1' ref='.4'/>"
    "<joint name='ball_y' type='hinge' axis='0 1 0'/>"
    "<geom name='ball' type='sphere' size='.022'/>"
    "<site name='ball' type='sphere'/>"
    "</body>"
    "<body name='peg' pos='-.4 0 .4' childclass='object'>"
    "<joint name='peg_x' type='slide' axis='1 0 0' ref='-.4'/>"
    "<joint name='peg_z' type='slide' axis='0 0 1' ref='.4'/>"
    "<joint name='peg_y' type='hinge' axis='0 1 0'/>"
    "<geom name='blade' type='capsule' size='.005' fromto='0 0 -.013 0 0 -.113'/>"
    "<geom name='guard' type='capsule' size='.005' fromto='-.017 0 -.043 .017 0 -.043'/>"
    "<body name='pommel' pos='0 0 -.013'>"
    "<geom name='pommel' type='sphere' size='.009'/>"
    "</body>"
    "<site name='peg' type='box' pos='0 0 -.063'/>"
    "<site name='peg_pinch' type='box' pos='0 0 -.025'/>"
    "<site name='peg_grasp' type='box' pos='0 0 0'/>"
    "<site name='peg_tip' type='box' pos='0 0 -.113'/>"
    "</body>"
    "<body name='slot' pos='-.405 0 .2' euler='0 20 0' childclass='obstacle'>"
    "<geom name='slot_0' type='box' pos='-.0252 0 -.083' size='.0198 .01 .035'/>"
    "<geom name='slot_1' type='box' pos=' .0252 0 -.083' size='.0198 .01 .035'/>"
    "<geom name='slot_2' type='box' pos=' 0 0 -.138' size='.045 .01 .02'/>"
    "<site name='slot' type='box' pos='0 0 0'/>"
    "<site name='slot_end' type='box' pos='0 0 -.05'/>"
    "</body>"
    "<body name='cup' pos='.3 0 .4' euler='0 -15 0' childclass='obstacle'>"
    "<geom name='cup_0' type='capsule' size='.008' fromto='-.03 0 .06 -.03 0 -.015'/>"
    "<geom name='cup_1' type='capsule' size='.008' fromto='-.03 0 -.015 0 0 -.04'/>"
    "<geom name='cup_2' type='capsule' size='.008' fromto='0 0 -.04 .03 0 -.015'/>"
    "<geom name='cup_3' type='capsule' size='.008' fromto='.03 0 -.015 .03 0 .06'/>"
    "<site name='cup' size='.005'/>"
    "</body>"
    "<body name='target_ball' pos='.4 .001 .4' childclass='ghost'>"
    "<geom name='target_ball' type='sphere' size='.02'/>"
    "<site name='target_ball' type='sphere'/>"
    "</body>"
    "<body name='target_peg' pos='-.2 .001 .4' childclass='ghost'>"
    "<geom name='target_blade' type='capsule' size='.005' fromto='0 0 -.013 0 0 -.113'/>"
    "<geom name='target_guard' type='capsule' size='.005' fromto='-.017 0 -.043 .017 0 -.043'/>"
    "<geom name='target_pommel' type='sphere' size='.009' pos='0 0 -.013'/>"
    "<site name='target_peg' type='box' pos='0 0 -.063'/>"
    "<site name='target_peg_pinch' type='box' pos='0 0 -.025'/>"
    "<site name='target_peg_grasp' type='box' pos='0 0 0'/>"
    "<site name='target_peg_tip' type='box' pos='0 0 -.113'/>"
    "</body>"
    "</worldbody>"
    "<tendon>"
    "<fixed name='grasp'>"
    "<joint joint='thumb' coef='.5'/>"
    "<joint joint='finger' coef='.5'/>"
    "</fixed>"
    "<fixed name='coupling'>"
    "<joint joint='thumb' coef='-.5'/>"
    "<joint joint='finger' coef='.5'/>"
    "</fixed>"
    "</tendon>"
    "<equality>"
    "<tendon name='coupling' tendon1='coupling' solimp='0.95 0.99 0.001' solref='.005 .5'/>"
    "</equality>"
    "<sensor>"
    "<touch name='palm_touch' site='palm_touch'/>"
    "<touch name='finger_touch' site='finger_touch'/>"
    "<touch name='thumb_touch' site='thumb_touch'/>"
    "<touch name='fingertip_touch' site='fingertip_touch'/>"
    "<touch name='thumbtip_touch' site='thumbtip_touch'/>"
    "</sensor>"
    "<actuator>"
    "<motor name='root' joint='arm_root' ctrlrange='-1 1' gear='12'/>"
    "<motor name='shoulder' joint='arm_shoulder' ctrlrange='-1 1' gear='8'/>"
    "<motor name='elbow' joint='arm_elbow' ctrlrange='-1 1' gear='4'/>"
    "<motor name='wrist' joint='arm_wrist' ctrlrange='-1 1' gear='2'/>"
    "<motor name='grasp' tendon='grasp' ctrlrange='-1 1' gear='2'/>"
    "</actuator>"
    "</mujoco>";


/* manipulator.make_model(use_peg=False, insert=False): only the ball and its target stay. */
static int edit_bring_ball(const dmc_task *t, struct _xmlDoc *doc, crl_error *err)
{
    static const char *const unused[] = {"peg", "target_peg", "cup", "slot"};
    xmlNode *root = xmlDocGetRootElement(doc);
    for (int k = 0; k < 4; k++) {
        xmlNode *n = dmc_xml_find(root, "body", unused[k]);
        if (!n) {
            char what[64];
            snprintf(what, sizeof what, "body '%s'", unused[k]);
            return dmc_xml_missing(t, what, err);
        }
        xmlUnlinkNode(n);
        xmlFreeNode(n);
    }
    return CRL_OK;
}

/* The suite's _ARM_JOINTS, in its order. */
static const char *const arm_joints[] = {"arm_root", "arm_shoulder", "arm_elbow", "arm_wrist",
                                         "finger",   "fingertip",    "thumb",     "thumbtip"};
static const char *const touch_sensors[] = {"palm_touch", "finger_touch", "thumb_touch", "fingertip_touch",
                                            "thumbtip_touch"};
enum { N_ARM = 8, N_TOUCH = 5 };
/* id[] slots; adr[k] is arm joint k's qpos (and dof: hinges and slides only) address; the ball's
 * joints follow the arm's eight in the model (ball_x, ball_z, ball_y at 8, 9, 10). */
enum { HAND, OBJECT, TARGET, GRASP, OBJECT_SITE, TARGET_SITE, TOUCH };

static int bring_ball_setup(dmc_model *dm, crl_error *err)
{
    const mjModel *m = dm->m;
    int rc = CRL_OK;
    static const char *const object_joints[] = {"ball_x", "ball_z", "ball_y"};
    for (int k = 0; rc == CRL_OK && k < N_ARM + 3; k++) {
        const char *name = k < N_ARM ? arm_joints[k] : object_joints[k - N_ARM];
        int j = mj_name2id(m, mjOBJ_JOINT, name);
        if (j < 0)
            rc = crl_error_set(err, CRL_E_NOT_FOUND, "dm_control: %s: the model has no joint named '%s'",
                               dm->task->id, name);
        else if (m->jnt_qposadr[j] != m->jnt_dofadr[j] || m->jnt_qposadr[j] != j ||
                 (k >= N_ARM && j != k) || j >= N_ARM + 3)
            rc = crl_error_set(err, CRL_E_CONFIG,
                               "dm_control: %s: joint '%s' is not where the suite's model has it", dm->task->id,
                               name);
        else if (k < N_ARM)
            dm->adr[k] = m->jnt_qposadr[j];
    }
    for (int k = 0; rc == CRL_OK && k < N_TOUCH; k++) {
        int s = mj_name2id(m, mjOBJ_SENSOR, touch_sensors[k]);
        if (s < 0 || m->sensor_adr[s] != k)
            rc = crl_error_set(err, CRL_E_CONFIG,
                               "dm_control: %s: the model's sensor %d is not the suite's touch sensor '%s'",
                               dm->task->id, k, touch_sensors[k]);
    }
    if (rc == CRL_OK)
        rc = dmc_name(dm, mjOBJ_BODY, "hand", HAND, err);
    if (rc == CRL_OK)
        rc = dmc_name(dm, mjOBJ_BODY, "ball", OBJECT, err);
    if (rc == CRL_OK)
        rc = dmc_name(dm, mjOBJ_BODY, "target_ball", TARGET, err);
    if (rc == CRL_OK)
        rc = dmc_name(dm, mjOBJ_SITE, "grasp", GRASP, err);
    if (rc == CRL_OK)
        rc = dmc_name(dm, mjOBJ_SITE, "ball", OBJECT_SITE, err);
    if (rc == CRL_OK)
        rc = dmc_name(dm, mjOBJ_SITE, "target_ball", TARGET_SITE, err);
    return rc;
}

/* The env's target (x, z, angle about y in extra) into the shared model's target body. */
static void bring_apply(const dmc_model *dm, const double *extra)
{
    mjModel *m = dm->m;
    int b = dm->id[TARGET];
    m->body_pos[3 * b] = extra[0];
    m->body_pos[3 * b + 2] = extra[1];
    m->body_quat[4 * b] = cos(extra[2] / 2);
    m->body_quat[4 * b + 2] = sin(extra[2] / 2);
}

/* The suite's after_reset: forward with actuation off. */
static void forward_unactuated(const dmc_model *dm, mjData *d)
{
    int flags = dm->m->opt.disableflags;
    dm->m->opt.disableflags |= mjDSBL_ACTUATION;
    mj_forward(dm->m, d);
    dm->m->opt.disableflags = flags;
}

/* Bring.initialize_episode: random arm angles (the hand symmetric), a random target, the ball in the
 * hand (1 in 10), on the target (1 in 10) or anywhere thrown sideways, redrawn until nothing touches
 * (the suite never gives up; we stop after 10000 draws, keeping the last). */
static void bring_init(const dmc_model *dm, mjData *d, double *extra, crl_rng *rng)
{
    const mjModel *m = dm->m;
    for (int attempt = 0; attempt < 10000; attempt++) {
        for (int k = 0; k < N_ARM; k++) {
            /* hinges: joint id == qpos address in this model, checked at setup */
            int j = dm->adr[k];
            bool limited = m->jnt_limited[j];
            d->qpos[j] = crl_rng_range(rng, limited ? m->jnt_range[2 * j] : -M_PI,
                                       limited ? m->jnt_range[2 * j + 1] : M_PI);
        }
        d->qpos[dm->adr[4]] = d->qpos[dm->adr[6]]; /* finger = thumb */
        extra[0] = crl_rng_range(rng, -0.4, 0.4);
        extra[1] = crl_rng_range(rng, 0.1, 0.4);
        extra[2] = crl_rng_range(rng, -M_PI, M_PI);
        bring_apply(dm, extra);
        double u = crl_rng_uniform(rng), x, z, angle;
        if (u < 0.1) {
            forward_unactuated(dm, d);
            const double *g = d->site_xpos + 3 * dm->id[GRASP], *r = d->site_xmat + 9 * dm->id[GRASP];
            x = g[0];
            z = g[2];
            angle = M_PI - atan2(r[6], r[0]);
        } else if (u < 0.2) {
            x = extra[0];
            z = extra[1];
            angle = extra[2];
        } else {
            x = crl_rng_range(rng, -0.5, 0.5);
            z = crl_rng_range(rng, 0, 0.7);
            angle = crl_rng_range(rng, 0, 2 * M_PI);
            d->qvel[N_ARM] = crl_rng_range(rng, -5, 5);
        }
        d->qpos[N_ARM] = x;
        d->qpos[N_ARM + 1] = z;
        d->qpos[N_ARM + 2] = angle;
        forward_unactuated(dm, d);
        if (d->ncon == 0)
            break;
    }
}

/* A body's (x, z, qw, qy). */
static void pose_2d(const mjData *d, int b, double *out)
{
    out[0] = d->xpos[3 * b];
    out[1] = d->xpos[3 * b + 2];
    out[2] = d->xquat[4 * b];
    out[3] = d->xquat[4 * b + 2];
}

/* arm_pos [8, 2] (sin, cos of each arm joint), arm_vel, touch (log1p), hand_pos, object_pos,
 * object_vel (ball_x, ball_z, ball_y velocities), target_pos. */
static void bring_observe(const dmc_model *dm, const mjData *d, const double *extra, double *const *out)
{
    (void)extra;
    for (int k = 0; k < N_ARM; k++) {
        out[0][2 * k] = sin(d->qpos[dm->adr[k]]);
        out[0][2 * k + 1] = cos(d->qpos[dm->adr[k]]);
        out[1][k] = d->qvel[dm->adr[k]];
    }
    for (int k = 0; k < N_TOUCH; k++)
        out[2][k] = log1p(d->sensordata[k]);
    pose_2d(d, dm->id[HAND], out[3]);
    pose_2d(d, dm->id[OBJECT], out[4]);
    for (int k = 0; k < 3; k++)
        out[5][k] = d->qvel[N_ARM + k];
    pose_2d(d, dm->id[TARGET], out[6]);
}

/* Close: the ball's site within 1 cm of the target's, a gaussian margin of 2 cm. */
static double bring_reward(const dmc_model *dm, const mjData *d, const double *extra)
{
    (void)extra;
    const double *a = d->site_xpos + 3 * dm->id[OBJECT_SITE], *b = d->site_xpos + 3 * dm->id[TARGET_SITE];
    double dx = a[0] - b[0], dy = a[1] - b[1], dz = a[2] - b[2];
    double dist = sqrt(dx * dx + dy * dy + dz * dz);
    return dmc_tol(dist, 0, 0.01, 0.02);
}

const dmc_task dmc_manipulator_bring_ball = {
    .domain = "manipulator", .name = "bring_ball", .id = "manipulator/bring_ball", .xml = manipulator_xml,
    .time_limit = 10.0, .control_timestep = 0.01, .n_obs = 7,
    .obs = {{"arm_pos", 16, 2}, {"arm_vel", 8}, {"touch", 5}, {"hand_pos", 4}, {"object_pos", 4},
            {"object_vel", 3}, {"target_pos", 4}},
    .n_extra = 3, .setup = bring_ball_setup, .init = bring_init, .observe = bring_observe,
    .reward = bring_reward, .edit = edit_bring_ball, .apply = bring_apply,
};
