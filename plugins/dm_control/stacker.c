/* The suite's stacker domain: stack_2, stack_4. */
#include "dmc_xml.h"

#include <math.h>
#include <stdio.h>

/* manipulator's planar arm and hand with four boxes on planar joints and a
 * ghost target box; elliptic cones, Euler at 1 ms driven every 10 ms.  The
 * edit removes the boxes past n, as the suite's make_model does. */
static const char stacker_xml[] =
    "<mujoco model='planar stacker'>"
    "<asset>"
    "<texture name='background' builtin='flat' type='2d' mark='random' markrgb='1 1 1' width='800' height='800' rgb1='.2 .3 .4'/>"
    "<material name='background' texture='background' texrepeat='1 1' texuniform='true'/>"
    "</asset>"
    "<visual>"
    "<map shadowclip='.5'/>"
    "<quality shadowsize='2048'/>"
    "</visual>>"
    "<option timestep='0.001' cone='elliptic'/>"
    "<default>"
    "<geom friction='.7' solimp='0.9 0.97 0.001' solref='.01 1'/>"
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
    "<body name='box0' pos='.5 0 .4' childclass='object'>"
    "<joint name='box0_x' type='slide' axis='1 0 0' ref='.5'/>"
    "<joint name='box0_z' type='slide' axis='0 0 1' ref='.4'/>"
    "<joint name='box0_y' type='hinge' axis='0 1 0'/>"
    "<geom name='box0' type='box' size='.022 .022 .022'/>"
    "<site name='box0' type='sphere'/>"
    "</body>"
    "<body name='box1' pos='.4 0 .4' childclass='object'>"
    "<joint name='box1_x' type='slide' axis='1 0 0' ref='.4'/>"
    "<joint name='box1_z' type='slide' axis='0 0 1' ref='.4'/>"
    "<joint name='box1_y' type='hinge' axis='0 1 0'/>"
    "<geom name='box1' type='box' size='.022 .022 .022'/>"
    "<site name='box1' type='sphere'/>"
    "</body>"
    "<body name='box2' pos='.3 0 .4' childclass='object'>"
    "<joint name='box2_x' type='slide' axis='1 0 0' ref='.3'/>"
    "<joint name='box2_z' type='slide' axis='0 0 1' ref='.4'/>"
    "<joint name='box2_y' type='hinge' axis='0 1 0'/>"
    "<geom name='box2' type='box' size='.022 .022 .022'/>"
    "<site name='box2' type='sphere'/>"
    "</body>"
    "<body name='box3' pos='.2 0 .4' childclass='object'>"
    "<joint name='box3_x' type='slide' axis='1 0 0' ref='.2'/>"
    "<joint name='box3_z' type='slide' axis='0 0 1' ref='.4'/>"
    "<joint name='box3_y' type='hinge' axis='0 1 0'/>"
    "<geom name='box3' type='box' size='.022 .022 .022'/>"
    "<site name='box3' type='sphere'/>"
    "</body>"
    "<body name='target' pos='0 .001 .022' childclass='ghost'>"
    "<geom name='target' type='box' size='.022 .022 .022'/>"
    "<site name='target' type='sphere'/>"
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


static int edit_boxes(const dmc_task *t, struct _xmlDoc *doc, crl_error *err, int n_boxes)
{
    xmlNode *root = xmlDocGetRootElement(doc);
    for (int b = n_boxes; b < 4; b++) {
        char name[16];
        snprintf(name, sizeof name, "box%d", b);
        xmlNode *n = dmc_xml_find(root, "body", name);
        if (!n) {
            char what[32];
            snprintf(what, sizeof what, "body '%s'", name);
            return dmc_xml_missing(t, what, err);
        }
        xmlUnlinkNode(n);
        xmlFreeNode(n);
    }
    return CRL_OK;
}

static int edit_2(const dmc_task *t, struct _xmlDoc *doc, crl_error *err)
{
    return edit_boxes(t, doc, err, 2);
}

static int edit_4(const dmc_task *t, struct _xmlDoc *doc, crl_error *err)
{
    return edit_boxes(t, doc, err, 4);
}

/* The suite's _ARM_JOINTS, in its order. */
static const char *const arm_joints[] = {"arm_root", "arm_shoulder", "arm_elbow", "arm_wrist",
                                         "finger",   "fingertip",    "thumb",     "thumbtip"};
enum { N_ARM = 8, N_TOUCH = 5 };
/* adr[k]: arm joint k's qpos (= joint id = dof) address; the boxes' joints follow the arm's eight,
 * three per box in the model's x, z, y order; param[0]: the box count, param[1]: the target's size. */
enum { HAND, TARGET, GRASP, TARGET_SITE };

static int stacker_setup(dmc_model *dm, int n_boxes, crl_error *err)
{
    const mjModel *m = dm->m;
    int rc = CRL_OK;
    for (int k = 0; rc == CRL_OK && k < N_ARM; k++) {
        int j = mj_name2id(m, mjOBJ_JOINT, arm_joints[k]);
        if (j < 0 || m->jnt_qposadr[j] != j || m->jnt_dofadr[j] != j || j >= N_ARM)
            rc = crl_error_set(err, CRL_E_CONFIG, "dm_control: %s: joint '%s' is not where the suite's model has it",
                               dm->task->id, arm_joints[k]);
        else
            dm->adr[k] = j;
    }
    for (int b = 0; rc == CRL_OK && b < n_boxes; b++)
        for (int k = 0; rc == CRL_OK && k < 3; k++) {
            char name[16];
            snprintf(name, sizeof name, "box%d_%c", b, "xzy"[k]);
            int j = mj_name2id(m, mjOBJ_JOINT, name);
            if (j != N_ARM + 3 * b + k || m->jnt_qposadr[j] != j || m->jnt_dofadr[j] != j)
                rc = crl_error_set(err, CRL_E_CONFIG,
                                   "dm_control: %s: joint '%s' is not where the suite's model has it",
                                   dm->task->id, name);
        }
    if (rc == CRL_OK && (m->nq != N_ARM + 3 * n_boxes || m->nsensordata != N_TOUCH))
        rc = crl_error_set(err, CRL_E_CONFIG,
                           "dm_control: %s: the model has nq %d and %d sensor values; the task needs the "
                           "suite's %d and %d",
                           dm->task->id, m->nq, m->nsensordata, N_ARM + 3 * n_boxes, N_TOUCH);
    if (rc == CRL_OK)
        rc = dmc_name(dm, mjOBJ_BODY, "hand", HAND, err);
    if (rc == CRL_OK)
        rc = dmc_name(dm, mjOBJ_BODY, "target", TARGET, err);
    if (rc == CRL_OK)
        rc = dmc_name(dm, mjOBJ_SITE, "grasp", GRASP, err);
    if (rc == CRL_OK)
        rc = dmc_name(dm, mjOBJ_SITE, "target", TARGET_SITE, err);
    /* The boxes' bodies and sites follow each other in the model: box b is body box0 + b. */
    int box0 = rc == CRL_OK ? mj_name2id(m, mjOBJ_BODY, "box0") : -1;
    int site0 = rc == CRL_OK ? mj_name2id(m, mjOBJ_SITE, "box0") : -1;
    for (int b = 1; rc == CRL_OK && b < n_boxes; b++) {
        char name[16];
        snprintf(name, sizeof name, "box%d", b);
        if (box0 < 0 || site0 < 0 || mj_name2id(m, mjOBJ_BODY, name) != box0 + b ||
            mj_name2id(m, mjOBJ_SITE, name) != site0 + b)
            rc = crl_error_set(err, CRL_E_CONFIG, "dm_control: %s: box '%s' is not where the suite's model has it",
                               dm->task->id, name);
    }
    if (rc == CRL_OK) {
        dm->param[0] = n_boxes;
        dm->param[1] = m->geom_size[3 * mj_name2id(m, mjOBJ_GEOM, "target")];
        dm->param[2] = box0;
        dm->param[3] = site0;
    }
    return rc;
}

static int setup_2(dmc_model *dm, crl_error *err)
{
    return stacker_setup(dm, 2, err);
}

static int setup_4(dmc_model *dm, crl_error *err)
{
    return stacker_setup(dm, 4, err);
}

/* The env's target (x, z in extra) into the shared model's target body. */
static void stack_apply(const dmc_model *dm, const double *extra)
{
    dm->m->body_pos[3 * dm->id[TARGET]] = extra[0];
    dm->m->body_pos[3 * dm->id[TARGET] + 2] = extra[1];
}

/* Stack.initialize_episode: random arm angles (the hand symmetric), the target on the floor or at a
 * random height of the stack, the boxes anywhere to the right, redrawn until nothing touches (the
 * suite never gives up; we stop after 10000 draws, keeping the last). */
static void stack_init(const dmc_model *dm, mjData *d, double *extra, crl_rng *rng)
{
    const mjModel *m = dm->m;
    int n_boxes = (int)dm->param[0];
    for (int attempt = 0; attempt < 10000; attempt++) {
        for (int k = 0; k < N_ARM; k++) {
            int j = dm->adr[k];
            bool limited = m->jnt_limited[j];
            d->qpos[j] = crl_rng_range(rng, limited ? m->jnt_range[2 * j] : -M_PI,
                                       limited ? m->jnt_range[2 * j + 1] : M_PI);
        }
        d->qpos[dm->adr[4]] = d->qpos[dm->adr[6]]; /* finger = thumb */
        double height = 2.0 * (double)crl_rng_below(rng, (uint64_t)n_boxes) + 1.0;
        extra[1] = dm->param[1] * height;
        extra[0] = crl_rng_range(rng, -0.37, 0.37);
        stack_apply(dm, extra);
        for (int b = 0; b < n_boxes; b++) {
            double *q = d->qpos + N_ARM + 3 * b; /* x, z, y */
            q[0] = crl_rng_range(rng, 0.1, 0.3);
            q[1] = crl_rng_range(rng, 0, 0.7);
            q[2] = crl_rng_range(rng, 0, 2 * M_PI);
        }
        int flags = m->opt.disableflags;
        dm->m->opt.disableflags |= mjDSBL_ACTUATION;
        mj_forward(m, d);
        dm->m->opt.disableflags = flags;
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

/* arm_pos [8, 2], arm_vel, touch (log1p of every sensor), hand_pos, box_pos [n, 4], box_vel (per box
 * its x, y (the hinge), z joints, the suite's order), target_pos (x, z). */
static void stack_observe(const dmc_model *dm, const mjData *d, const double *extra, double *const *out)
{
    (void)extra;
    int n_boxes = (int)dm->param[0], box0 = (int)dm->param[2];
    for (int k = 0; k < N_ARM; k++) {
        out[0][2 * k] = sin(d->qpos[dm->adr[k]]);
        out[0][2 * k + 1] = cos(d->qpos[dm->adr[k]]);
        out[1][k] = d->qvel[dm->adr[k]];
    }
    for (int k = 0; k < N_TOUCH; k++)
        out[2][k] = log1p(d->sensordata[k]);
    pose_2d(d, dm->id[HAND], out[3]);
    for (int b = 0; b < n_boxes; b++) {
        pose_2d(d, box0 + b, out[4] + 4 * b);
        const double *v = d->qvel + N_ARM + 3 * b; /* x, z, y */
        out[5][3 * b] = v[0];
        out[5][3 * b + 1] = v[2];
        out[5][3 * b + 2] = v[1];
    }
    const double *t = d->xpos + 3 * dm->id[TARGET];
    out[6][0] = t[0];
    out[6][1] = t[2];
}

static double site_distance(const mjData *d, int a, int b)
{
    const double *p = d->site_xpos + 3 * a, *q = d->site_xpos + 3 * b;
    double dx = p[0] - q[0], dy = p[1] - q[1], dz = p[2] - q[2];
    return sqrt(dx * dx + dy * dy + dz * dz);
}

/* A box on the target (the nearest one, gaussian over twice the box size) with the hand at least 10 cm
 * away from it. */
static double stack_reward(const dmc_model *dm, const mjData *d, const double *extra)
{
    (void)extra;
    int n_boxes = (int)dm->param[0], site0 = (int)dm->param[3];
    double nearest = INFINITY;
    for (int b = 0; b < n_boxes; b++)
        nearest = fmin(nearest, site_distance(d, site0 + b, dm->id[TARGET_SITE]));
    double box_is_close = dmc_tol(nearest, 0, 0, 2 * dm->param[1]);
    double hand_is_far = dmc_tol(site_distance(d, dm->id[GRASP], dm->id[TARGET_SITE]), 0.1, INFINITY, 0.01);
    return box_is_close * hand_is_far;
}

#define STACK_TASK(n, setup_fn, edit_fn)                                                                     \
    {                                                                                                        \
        .domain = "stacker", .name = "stack_" #n, .id = "stacker/stack_" #n, .xml = stacker_xml,             \
        .time_limit = 10.0, .control_timestep = 0.01, .n_obs = 7,                                            \
        .obs = {{"arm_pos", 16, 2}, {"arm_vel", 8}, {"touch", 5}, {"hand_pos", 4}, {"box_pos", 4 * (n), 4}, \
                {"box_vel", 3 * (n)}, {"target_pos", 2}},                                                    \
        .n_extra = 2, .setup = setup_fn, .init = stack_init, .observe = stack_observe,                       \
        .reward = stack_reward, .edit = edit_fn, .apply = stack_apply,                                       \
    }

const dmc_task dmc_stacker_stack_2 = STACK_TASK(2, setup_2, edit_2);
const dmc_task dmc_stacker_stack_4 = STACK_TASK(4, setup_4, edit_4);
