/* The suite's quadruped domain: walk, run, escape, fetch. */
#include "dmc_xml.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A torso on a free joint with four three-hinge-plus-yaw legs coupled by
 * tendons and equalities, twelve filtered position-like actuators (so act
 * holds 12 states); Euler at 5 ms driven every 20 ms.  The full model: each
 * task's edit removes what the suite's make_model removes. */
static const char quadruped_xml[] =
    "<mujoco model='quadruped'>"
    "<visual>"
    "<rgba rangefinder='1 1 0.1 0.1'/>"
    "<map znear='.005' zfar='20'/>"
    "</visual>"
    "<asset>"
    "<hfield name='terrain' ncol='201' nrow='201' size='30 30 5 .1'/>"
    "</asset>"
    "<option timestep='.005'/>"
    "<default>"
    "<geom solimp='.9 .99 .003' solref='.01 1'/>"
    "<default class='body'>"
    "<geom type='capsule' size='.08' condim='1' material='self' density='500'/>"
    "<joint type='hinge' damping='30' armature='.01' "
    "limited='true' solimplimit='0 .99 .01'/>"
    "<default class='hip'>"
    "<default class='yaw'>"
    "<joint axis='0 0 1' range='-50 50'/>"
    "</default>"
    "<default class='pitch'>"
    "<joint axis='0 1 0' range='-20 60'/>"
    "</default>"
    "<geom fromto='0 0 0 .3 0 .11'/>"
    "</default>"
    "<default class='knee'>"
    "<joint axis='0 1 0' range='-60 50'/>"
    "<geom size='.065' fromto='0 0 0 .25 0 -.25'/>"
    "</default>"
    "<default class='ankle'>"
    "<joint axis='0 1 0' range='-45 55'/>"
    "<geom size='.055' fromto='0 0 0 0 0 -.25'/>"
    "</default>"
    "<default class='toe'>"
    "<geom type='sphere' size='.08' material='effector' friction='1.5'/>"
    "<site type='sphere' size='.084' material='site' group='4'/>"
    "</default>"
    "</default>"
    "<default class='rangefinder'>"
    "<site type='capsule' size='.005 .1' material='site' group='4'/>"
    "</default>"
    "<default class='wall'>"
    "<geom type='plane' material='decoration'/>"
    "</default>"
    "<default class='coupling'>"
    "<equality solimp='0.95 0.99 0.01' solref='.005 .5'/>"
    "</default>"
    "<general ctrllimited='true' gainprm='1000' biasprm='0 -1000' biastype='affine' dyntype='filter' dynprm='.1'/>"
    "<default class='yaw_act'>"
    "<general ctrlrange='-1 1'/>"
    "</default>"
    "<default class='lift_act'>"
    "<general ctrlrange='-1 1.1'/>"
    "</default>"
    "<default class='extend_act'>"
    "<general ctrlrange='-.8 .8'/>"
    "</default>"
    "</default>"
    "<asset>"
    "<texture name='ball' builtin='checker' mark='cross' width='151' height='151' "
    "rgb1='0.1 0.1 0.1' rgb2='0.9 0.9 0.9' markrgb='1 1 1'/>"
    "<material name='ball' texture='ball'/>"
    "</asset>"
    "<worldbody>"
    "<geom name='floor' type='plane' size='15 15 .5' material='grid'/>"
    "<geom name='wall_px' class='wall' pos='-15.7 0 .7' zaxis='1 0 1' size='1 15 .5'/>"
    "<geom name='wall_py' class='wall' pos='0 -15.7 .7' zaxis='0 1 1' size='15 1 .5'/>"
    "<geom name='wall_nx' class='wall' pos='15.7 0 .7' zaxis='-1 0 1' size='1 15 .5'/>"
    "<geom name='wall_ny' class='wall' pos='0 15.7 .7' zaxis='0 -1 1' size='15 1 .5'/>"
    "<site name='target' type='cylinder' size='.4 .06' pos='0 0 .05' material='target'/>"
    "<geom name='terrain' type='hfield' hfield='terrain' rgba='.2 .3 .4 1' pos='0 0 -.01'/>"
    "<camera name='global' pos='-10 10 10' xyaxes='-1 -1 0 1 0 1' mode='trackcom'/>"
    "<body name='torso' childclass='body' pos='0 0 .57'>"
    "<freejoint name='root'/>"
    "<camera name='x' pos='-1.7 0 1' xyaxes='0 -1 0 .75 0 1' mode='trackcom'/>"
    "<camera name='y' pos='0 4 2' xyaxes='-1 0 0 0 -.5 1' mode='trackcom'/>"
    "<camera name='egocentric' pos='.3 0 .11' xyaxes='0 -1 0 .4 0 1' fovy='60'/>"
    "<light name='light' pos='0 0 4' mode='trackcom'/>"
    "<geom name='eye_r' type='cylinder' size='.05' fromto='.1 -.07 .12 .31 -.07 .08' mass='0'/>"
    "<site name='pupil_r' type='sphere' size='.033' pos='.3 -.07 .08' zaxis='1 0 0' material='eye'/>"
    "<geom name='eye_l' type='cylinder' size='.05' fromto='.1 .07 .12 .31 .07 .08' mass='0'/>"
    "<site name='pupil_l' type='sphere' size='.033' pos='.3 .07 .08' zaxis='1 0 0' material='eye'/>"
    "<site name='workspace' type='sphere' size='.3 .3 .3' material='site' pos='.8 0 -.2' group='3'/>"
    "<site name='rf_00' class='rangefinder' fromto='.41 -.02 .11 .34 0 .115'/>"
    "<site name='rf_01' class='rangefinder' fromto='.41 -.01 .11 .34 0 .115'/>"
    "<site name='rf_02' class='rangefinder' fromto='.41 0 .11 .34 0 .115'/>"
    "<site name='rf_03' class='rangefinder' fromto='.41 .01 .11 .34 0 .115'/>"
    "<site name='rf_04' class='rangefinder' fromto='.41 .02 .11 .34 0 .115'/>"
    "<site name='rf_10' class='rangefinder' fromto='.41 -.02 .1 .36 0 .11'/>"
    "<site name='rf_11' class='rangefinder' fromto='.41 -.02 .1 .36 0 .11'/>"
    "<site name='rf_12' class='rangefinder' fromto='.41 0 .1 .36 0 .11'/>"
    "<site name='rf_13' class='rangefinder' fromto='.41 .01 .1 .36 0 .11'/>"
    "<site name='rf_14' class='rangefinder' fromto='.41 .02 .1 .36 0 .11'/>"
    "<site name='rf_20' class='rangefinder' fromto='.41 -.02 .09 .38 0 .105'/>"
    "<site name='rf_21' class='rangefinder' fromto='.41 -.01 .09 .38 0 .105'/>"
    "<site name='rf_22' class='rangefinder' fromto='.41 0 .09 .38 0 .105'/>"
    "<site name='rf_23' class='rangefinder' fromto='.41 .01 .09 .38 0 .105'/>"
    "<site name='rf_24' class='rangefinder' fromto='.41 .02 .09 .38 0 .105'/>"
    "<site name='rf_30' class='rangefinder' fromto='.41 -.02 .08 .4 0 .1'/>"
    "<site name='rf_31' class='rangefinder' fromto='.41 -.01 .08 .4 0 .1'/>"
    "<site name='rf_32' class='rangefinder' fromto='.41 0 .08 .4 0 .1'/>"
    "<site name='rf_33' class='rangefinder' fromto='.41 .01 .08 .4 0 .1'/>"
    "<site name='rf_34' class='rangefinder' fromto='.41 .02 .08 .4 0 .1'/>"
    "<geom name='torso' type='ellipsoid' size='.3 .27 .2' density='1000'/>"
    "<site name='torso_touch' type='box' size='.26 .26 .26' rgba='0 0 1 0'/>"
    "<site name='torso' size='.05' rgba='1 0 0 1'/>"
    "<body name='hip_front_left' pos='.2 .2 0' euler='0 0 45' childclass='hip'>"
    "<joint name='yaw_front_left' class='yaw'/>"
    "<joint name='pitch_front_left' class='pitch'/>"
    "<geom name='thigh_front_left'/>"
    "<body name='knee_front_left' pos='.3 0 .11' childclass='knee'>"
    "<joint name='knee_front_left'/>"
    "<geom name='shin_front_left'/>"
    "<body name='ankle_front_left' pos='.25 0 -.25' childclass='ankle'>"
    "<joint name='ankle_front_left'/>"
    "<geom name='foot_front_left'/>"
    "<body name='toe_front_left' pos='0 0 -.3' childclass='toe'>"
    "<geom name='toe_front_left'/>"
    "<site name='toe_front_left'/>"
    "</body>"
    "</body>"
    "</body>"
    "</body>"
    "<body name='hip_front_right' pos='.2 -.2 0' euler='0 0 -45' childclass='hip'>"
    "<joint name='yaw_front_right' class='yaw'/>"
    "<joint name='pitch_front_right' class='pitch'/>"
    "<geom name='thigh_front_right'/>"
    "<body name='knee_front_right' pos='.3 0 .11' childclass='knee'>"
    "<joint name='knee_front_right'/>"
    "<geom name='shin_front_right'/>"
    "<body name='ankle_front_right' pos='.25 0 -.25' childclass='ankle'>"
    "<joint name='ankle_front_right'/>"
    "<geom name='foot_front_right'/>"
    "<body name='toe_front_right' pos='0 0 -.3' childclass='toe'>"
    "<geom name='toe_front_right'/>"
    "<site name='toe_front_right'/>"
    "</body>"
    "</body>"
    "</body>"
    "</body>"
    "<body name='hip_back_right' pos='-.2 -.2 0' euler='0 0 -135' childclass='hip'>"
    "<joint name='yaw_back_right' class='yaw'/>"
    "<joint name='pitch_back_right' class='pitch'/>"
    "<geom name='thigh_back_right'/>"
    "<body name='knee_back_right' pos='.3 0 .11' childclass='knee'>"
    "<joint name='knee_back_right'/>"
    "<geom name='shin_back_right'/>"
    "<body name='ankle_back_right' pos='.25 0 -.25' childclass='ankle'>"
    "<joint name='ankle_back_right'/>"
    "<geom name='foot_back_right'/>"
    "<body name='toe_back_right' pos='0 0 -.3' childclass='toe'>"
    "<geom name='toe_back_right'/>"
    "<site name='toe_back_right'/>"
    "</body>"
    "</body>"
    "</body>"
    "</body>"
    "<body name='hip_back_left' pos='-.2 .2 0' euler='0 0 135' childclass='hip'>"
    "<joint name='yaw_back_left' class='yaw'/>"
    "<joint name='pitch_back_left' class='pitch'/>"
    "<geom name='thigh_back_left'/>"
    "<body name='knee_back_left' pos='.3 0 .11' childclass='knee'>"
    "<joint name='knee_back_left'/>"
    "<geom name='shin_back_left'/>"
    "<body name='ankle_back_left' pos='.25 0 -.25' childclass='ankle'>"
    "<joint name='ankle_back_left'/>"
    "<geom name='foot_back_left'/>"
    "<body name='toe_back_left' pos='0 0 -.3' childclass='toe'>"
    "<geom name='toe_back_left'/>"
    "<site name='toe_back_left'/>"
    "</body>"
    "</body>"
    "</body>"
    "</body>"
    "</body>"
    "<body name='ball' pos='0 0 3'>"
    "<freejoint name='ball_root'/>"
    "<geom name='ball' size='.15' material='ball' priority='1' condim='6' friction='.7 .005 .005' "
    "solref='-10000 -30'/>"
    "<light name='ball_light' pos='0 0 4' mode='trackcom'/>"
    "</body>"
    "</worldbody>"
    "<tendon>"
    "<fixed name='coupling_front_left'>"
    "<joint joint='pitch_front_left' coef='.333'/>"
    "<joint joint='knee_front_left' coef='.333'/>"
    "<joint joint='ankle_front_left' coef='.333'/>"
    "</fixed>"
    "<fixed name='coupling_front_right'>"
    "<joint joint='pitch_front_right' coef='.333'/>"
    "<joint joint='knee_front_right' coef='.333'/>"
    "<joint joint='ankle_front_right' coef='.333'/>"
    "</fixed>"
    "<fixed name='coupling_back_right'>"
    "<joint joint='pitch_back_right' coef='.333'/>"
    "<joint joint='knee_back_right' coef='.333'/>"
    "<joint joint='ankle_back_right' coef='.333'/>"
    "</fixed>"
    "<fixed name='coupling_back_left'>"
    "<joint joint='pitch_back_left' coef='.333'/>"
    "<joint joint='knee_back_left' coef='.333'/>"
    "<joint joint='ankle_back_left' coef='.333'/>"
    "</fixed>"
    "<fixed name='extend_front_left'>"
    "<joint joint='pitch_front_left' coef='.25'/>"
    "<joint joint='knee_front_left' coef='-.5'/>"
    "<joint joint='ankle_front_left' coef='.25'/>"
    "</fixed>"
    "<fixed name='lift_front_left'>"
    "<joint joint='pitch_front_left' coef='.5'/>"
    "<joint joint='ankle_front_left' coef='-.5'/>"
    "</fixed>"
    "<fixed name='extend_front_right'>"
    "<joint joint='pitch_front_right' coef='.25'/>"
    "<joint joint='knee_front_right' coef='-.5'/>"
    "<joint joint='ankle_front_right' coef='.25'/>"
    "</fixed>"
    "<fixed name='lift_front_right'>"
    "<joint joint='pitch_front_right' coef='.5'/>"
    "<joint joint='ankle_front_right' coef='-.5'/>"
    "</fixed>"
    "<fixed name='extend_back_right'>"
    "<joint joint='pitch_back_right' coef='.25'/>"
    "<joint joint='knee_back_right' coef='-.5'/>"
    "<joint joint='ankle_back_right' coef='.25'/>"
    "</fixed>"
    "<fixed name='lift_back_right'>"
    "<joint joint='pitch_back_right' coef='.5'/>"
    "<joint joint='ankle_back_right' coef='-.5'/>"
    "</fixed>"
    "<fixed name='extend_back_left'>"
    "<joint joint='pitch_back_left' coef='.25'/>"
    "<joint joint='knee_back_left' coef='-.5'/>"
    "<joint joint='ankle_back_left' coef='.25'/>"
    "</fixed>"
    "<fixed name='lift_back_left'>"
    "<joint joint='pitch_back_left' coef='.5'/>"
    "<joint joint='ankle_back_left' coef='-.5'/>"
    "</fixed>"
    "</tendon>"
    "<equality>"
    "<tendon name='coupling_front_left' tendon1='coupling_front_left' class='coupling'/>"
    "<tendon name='coupling_front_right' tendon1='coupling_front_right' class='coupling'/>"
    "<tendon name='coupling_back_right' tendon1='coupling_back_right' class='coupling'/>"
    "<tendon name='coupling_back_left' tendon1='coupling_back_left' class='coupling'/>"
    "</equality>"
    "<actuator>"
    "<general name='yaw_front_left' class='yaw_act' joint='yaw_front_left'/>"
    "<general name='lift_front_left' class='lift_act' tendon='lift_front_left'/>"
    "<general name='extend_front_left' class='extend_act' tendon='extend_front_left'/>"
    "<general name='yaw_front_right' class='yaw_act' joint='yaw_front_right'/>"
    "<general name='lift_front_right' class='lift_act' tendon='lift_front_right'/>"
    "<general name='extend_front_right' class='extend_act' tendon='extend_front_right'/>"
    "<general name='yaw_back_right' class='yaw_act' joint='yaw_back_right'/>"
    "<general name='lift_back_right' class='lift_act' tendon='lift_back_right'/>"
    "<general name='extend_back_right' class='extend_act' tendon='extend_back_right'/>"
    "<general name='yaw_back_left' class='yaw_act' joint='yaw_back_left'/>"
    "<general name='lift_back_left' class='lift_act' tendon='lift_back_left'/>"
    "<general name='extend_back_left' class='extend_act' tendon='extend_back_left'/>"
    "</actuator>"
    "<sensor>"
    "<accelerometer name='imu_accel' site='torso'/>"
    "<gyro name='imu_gyro' site='torso'/>"
    "<velocimeter name='velocimeter' site='torso'/>"
    "<force name='force_toe_front_left' site='toe_front_left'/>"
    "<force name='force_toe_front_right' site='toe_front_right'/>"
    "<force name='force_toe_back_right' site='toe_back_right'/>"
    "<force name='force_toe_back_left' site='toe_back_left'/>"
    "<torque name='torque_toe_front_left' site='toe_front_left'/>"
    "<torque name='torque_toe_front_right' site='toe_front_right'/>"
    "<torque name='torque_toe_back_right' site='toe_back_right'/>"
    "<torque name='torque_toe_back_left' site='toe_back_left'/>"
    "<subtreecom name='center_of_mass' body='torso'/>"
    "<rangefinder name='rf_00' site='rf_00'/>"
    "<rangefinder name='rf_01' site='rf_01'/>"
    "<rangefinder name='rf_02' site='rf_02'/>"
    "<rangefinder name='rf_03' site='rf_03'/>"
    "<rangefinder name='rf_04' site='rf_04'/>"
    "<rangefinder name='rf_10' site='rf_10'/>"
    "<rangefinder name='rf_11' site='rf_11'/>"
    "<rangefinder name='rf_12' site='rf_12'/>"
    "<rangefinder name='rf_13' site='rf_13'/>"
    "<rangefinder name='rf_14' site='rf_14'/>"
    "<rangefinder name='rf_20' site='rf_20'/>"
    "<rangefinder name='rf_21' site='rf_21'/>"
    "<rangefinder name='rf_22' site='rf_22'/>"
    "<rangefinder name='rf_23' site='rf_23'/>"
    "<rangefinder name='rf_24' site='rf_24'/>"
    "<rangefinder name='rf_30' site='rf_30'/>"
    "<rangefinder name='rf_31' site='rf_31'/>"
    "<rangefinder name='rf_32' site='rf_32'/>"
    "<rangefinder name='rf_33' site='rf_33'/>"
    "<rangefinder name='rf_34' site='rf_34'/>"
    "</sensor>"
    "</mujoco>";


static const char *const walls[] = {"wall_px", "wall_py", "wall_nx", "wall_ny"};

/* quadruped.make_model: floor_size <= 0 keeps the floor, with_ball keeps the walls, ball and target,
 * terrain keeps the heightfield geom and the rangefinders. */
static int edit_quadruped(const dmc_task *t, xmlDoc *doc, crl_error *err, double floor_size, bool with_ball,
                          bool terrain)
{
    xmlNode *root = xmlDocGetRootElement(doc);
    if (floor_size > 0) {
        xmlNode *floor = dmc_xml_find(root, "geom", "floor");
        if (!floor)
            return dmc_xml_missing(t, "geom 'floor'", err);
        char size[64];
        snprintf(size, sizeof size, "%.17g %.17g .5", floor_size, floor_size);
        int rc = dmc_xml_set(floor, "size", size, t, err);
        if (rc != CRL_OK)
            return rc;
    }
    static const char *const tags[] = {"geom", "body", "site"};
    static const char *const names[] = {"ball", "target"};
    for (int k = 0; !with_ball && k < 6; k++) {
        const char *tag = k < 4 ? tags[0] : tags[k - 3];
        const char *name = k < 4 ? walls[k] : names[k - 4];
        xmlNode *n = dmc_xml_find(root, tag, name);
        if (!n) {
            char what[64];
            snprintf(what, sizeof what, "%s '%s'", tag, name);
            return dmc_xml_missing(t, what, err);
        }
        xmlUnlinkNode(n);
        xmlFreeNode(n);
    }
    xmlNode *hfield_geom = dmc_xml_find(root, "geom", "terrain");
    if (!hfield_geom)
        return dmc_xml_missing(t, "geom 'terrain'", err);
    if (!terrain) {
        xmlUnlinkNode(hfield_geom);
        xmlFreeNode(hfield_geom);
        dmc_xml_remove_all(root, "rangefinder");
    }
    return CRL_OK;
}

static int edit_walk(const dmc_task *t, struct _xmlDoc *doc, crl_error *err)
{
    return edit_quadruped(t, doc, err, 20 * 0.5, false, false);
}

static int edit_run(const dmc_task *t, struct _xmlDoc *doc, crl_error *err)
{
    return edit_quadruped(t, doc, err, 20 * 5, false, false);
}

static int edit_escape(const dmc_task *t, struct _xmlDoc *doc, crl_error *err)
{
    return edit_quadruped(t, doc, err, 40, false, true);
}

static int edit_fetch(const dmc_task *t, struct _xmlDoc *doc, crl_error *err)
{
    return edit_quadruped(t, doc, err, 0, true, false);
}

enum { TORSO, VELO, ROOT, BALL, BALL_ROOT, TARGET, WORKSPACE, BALL_GEOM };

static int quadruped_setup(dmc_model *dm, crl_error *err)
{
    int rc = dmc_name(dm, mjOBJ_BODY, "torso", TORSO, err);
    if (rc == CRL_OK)
        rc = dmc_name(dm, mjOBJ_SENSOR, "velocimeter", VELO, err);
    if (rc == CRL_OK)
        dm->adr[VELO] = dm->m->sensor_adr[dm->id[VELO]];
    if (rc == CRL_OK)
        rc = dmc_joint(dm, "root", ROOT, err);
    const mjModel *m = dm->m;
    int hinges = 0, imu = 0, ft = 0;
    for (int j = 0; j < m->njnt; j++)
        hinges += m->jnt_type[j] == mjJNT_HINGE;
    for (int s = 0; s < m->nsensor; s++) {
        imu += m->sensor_type[s] == mjSENS_GYRO || m->sensor_type[s] == mjSENS_ACCELEROMETER;
        ft += m->sensor_type[s] == mjSENS_FORCE || m->sensor_type[s] == mjSENS_TORQUE;
    }
    if (rc == CRL_OK && (hinges != 16 || m->na != 12 || imu != 2 || ft != 8 ||
                         m->jnt_type[dm->id[ROOT]] != mjJNT_FREE))
        rc = crl_error_set(err, CRL_E_CONFIG,
                           "dm_control: %s: the model has %d hinges, %d actuator states, %d IMU and %d "
                           "force/torque sensors; the task's observations need the suite's 16, 12, 2 and 8 "
                           "and a free root",
                           dm->task->id, hinges, m->na, imu, ft);
    return rc;
}

static int fetch_setup(dmc_model *dm, crl_error *err)
{
    int rc = quadruped_setup(dm, err);
    if (rc == CRL_OK)
        rc = dmc_name(dm, mjOBJ_BODY, "ball", BALL, err);
    if (rc == CRL_OK)
        rc = dmc_joint(dm, "ball_root", BALL_ROOT, err);
    if (rc == CRL_OK)
        rc = dmc_name(dm, mjOBJ_SITE, "target", TARGET, err);
    if (rc == CRL_OK)
        rc = dmc_name(dm, mjOBJ_SITE, "workspace", WORKSPACE, err);
    if (rc == CRL_OK)
        rc = dmc_name(dm, mjOBJ_GEOM, "ball", BALL_GEOM, err);
    int floor = rc == CRL_OK ? mj_name2id(dm->m, mjOBJ_GEOM, "floor") : -1;
    if (rc == CRL_OK && floor < 0)
        rc = crl_error_set(err, CRL_E_NOT_FOUND, "dm_control: %s: the model has no geom named 'floor'",
                           dm->task->id);
    if (rc == CRL_OK)
        dm->param[0] = dm->m->geom_size[3 * floor];
    return rc;
}

/* ---- escape's terrain ----
 * Escape.initialize_episode: bumps uniform in [_TERRAIN_SMOOTHNESS, 1) on a grid of one per
 * _TERRAIN_BUMP_SCALE metres of the heightfield, SciPy's cubic zoom of them to the heightfield's
 * res x res samples, times a sinusoidal bowl, into hfield_data (float32).  The bumps are the env's
 * extras (its state carries them); the model, which the envs share, holds one env's terrain at a time
 * and is rewritten when another env's runs. */
#define TERRAIN_SMOOTHNESS 0.15
#define TERRAIN_BUMP_SCALE 2.0
#define BUMP_RES 30 /* the suite's 60 m heightfield */
#define N_BUMPS (BUMP_RES * BUMP_RES)

/* One env's terrain as hfield_data holds it, kept so envs taking turns on the shared model copy it
 * back instead of zooming again. */
typedef struct terrain_entry {
    const double *slot;      /* the extras it was made from (the env's own row) */
    double bumps[N_BUMPS];   /* their values then */
    float terrain[];         /* res * res */
} terrain_entry;

#define TERRAIN_CACHE 64     /* envs kept (10 MB); beyond that, entries are reused in turn */

typedef struct escape_cache {
    int res;                 /* the heightfield's rows (= columns) */
    int n, next, current;    /* entries made, the next to reuse when all are, the model's (-1: none) */
    terrain_entry *entry[TERRAIN_CACHE];
    double coef[N_BUMPS];    /* dmc_zoom2d's spline coefficients */
    double *bowl, *smooth;   /* [res * res] each, after the struct */
} escape_cache;

static void escape_cache_free(void *p)
{
    escape_cache *c = p;
    for (int k = 0; c && k < c->n; k++)
        free(c->entry[k]);
    free(c);
}

static int escape_setup(dmc_model *dm, crl_error *err)
{
    int rc = quadruped_setup(dm, err);
    if (rc == CRL_OK)
        rc = dmc_name(dm, mjOBJ_SITE, "workspace", WORKSPACE, err);
    if (rc != CRL_OK)
        return rc;
    const mjModel *m = dm->m;
    int rangefinders = 0;
    for (int s = 0; s < m->nsensor; s++)
        rangefinders += m->sensor_type[s] == mjSENS_RANGEFINDER && m->sensor_dim[s] == 1;
    int res = m->nhfield > 0 ? m->hfield_nrow[0] : 0;
    double terrain_size = m->nhfield > 0 ? 2 * m->hfield_size[0] : 0;
    int bump_res = (int)(terrain_size / TERRAIN_BUMP_SCALE);
    if (res < 2 || res != m->hfield_ncol[0] || bump_res != BUMP_RES ||
        dmc_zoom_len(bump_res, res / (double)bump_res) != res || rangefinders != 20)
        return crl_error_set(err, CRL_E_CONFIG,
                             "dm_control: %s: the model's first heightfield is %d x %d samples over %g m and "
                             "it has %d rangefinders; the task needs a square one over %g m (%d x %d bumps "
                             "of %g m) and the suite's 20 rangefinders",
                             dm->task->id, res, m->nhfield > 0 ? m->hfield_ncol[0] : 0, terrain_size,
                             rangefinders, BUMP_RES * TERRAIN_BUMP_SCALE, BUMP_RES, BUMP_RES,
                             TERRAIN_BUMP_SCALE);
    size_t cells = (size_t)res * (size_t)res;
    escape_cache *c = malloc(sizeof *c + 2 * cells * sizeof(double));
    if (!c)
        return crl_error_set(err, CRL_E_NOMEM, "dm_control: %s: out of memory for the terrain", dm->task->id);
    memset(c, 0, sizeof *c);
    c->res = res;
    c->current = -1;
    c->bowl = (double *)(c + 1);
    c->smooth = c->bowl + cells;
    /* numpy's ogrid[-1:1:res*1j]: i * (2 / (res - 1)) + -1; the radius clipped to [.04, 1] */
    double step = (1.0 - -1.0) / (double)(res - 1);
    for (int i = 0; i < res; i++)
        for (int j = 0; j < res; j++) {
            double row = (double)i * step + -1.0, col = (double)j * step + -1.0;
            double radius = fmin(fmax(sqrt(col * col + row * row), .04), 1.0);
            c->bowl[(size_t)i * (size_t)res + (size_t)j] = .5 - cos(2 * M_PI * radius) / 2;
        }
    dm->cache = c;
    dm->cache_free = escape_cache_free;
    dm->param[0] = m->hfield_size[0];
    /* _upright_reward(deviation_angle=20): np.cos(np.deg2rad(20)) */
    dm->param[1] = cos(20.0 * (M_PI / 180.0));
    return CRL_OK;
}

/* The terrain of the env whose bumps are `extra` into the shared model: nothing when it is there
 * already, a copy when it was made before, else SciPy's zoom times the bowl. */
static void apply_escape(const dmc_model *dm, const double *extra)
{
    escape_cache *c = dm->cache;
    size_t cells = (size_t)c->res * (size_t)c->res;
    float *h = dm->m->hfield_data + dm->m->hfield_adr[0];
    int k = 0;
    while (k < c->n && c->entry[k]->slot != extra)
        k++;
    if (k < c->n && memcmp(c->entry[k]->bumps, extra, sizeof c->entry[k]->bumps) == 0) {
        if (c->current != k)
            memcpy(h, c->entry[k]->terrain, cells * sizeof(float));
        c->current = k;
        return;
    }
    if (k == c->n && c->n < TERRAIN_CACHE) {
        terrain_entry *e = malloc(sizeof *e + cells * sizeof(float));
        if (e)
            c->entry[c->n++] = e;
    }
    if (k == c->n && c->n > 0) { /* all taken (or out of memory): reuse one in turn */
        k = c->next % c->n;
        c->next = (k + 1) % c->n;
    }
    dmc_zoom2d(extra, BUMP_RES, BUMP_RES, c->coef, c->smooth, c->res, c->res);
    if (k == c->n) { /* not even one entry: straight into the model */
        for (size_t i = 0; i < cells; i++)
            h[i] = (float)(c->bowl[i] * c->smooth[i]);
        c->current = -1;
        return;
    }
    terrain_entry *e = c->entry[k];
    for (size_t i = 0; i < cells; i++)
        e->terrain[i] = (float)(c->bowl[i] * c->smooth[i]);
    e->slot = extra;
    memcpy(e->bumps, extra, sizeof e->bumps);
    memcpy(h, e->terrain, cells * sizeof(float));
    c->current = k;
}

/* _find_non_contacting_height: from the model's reset state, the root at
 * (x, y, z) with the given orientation, z rising from 0 by 1 cm until
 * nothing touches (the suite gives up after 10000 tries; so do we, keeping
 * the last). */
static void non_contacting_height(const dmc_model *dm, mjData *d, const double quat[4], double x, double y)
{
    const mjModel *m = dm->m;
    double z = 0.0;
    for (int attempt = 0; attempt <= 10000; attempt++) {
        mj_resetData(m, d);
        double *q = d->qpos + dm->adr[ROOT];
        q[0] = x;
        q[1] = y;
        q[2] = z;
        for (int k = 0; k < 4; k++)
            q[3 + k] = quat[k];
        /* the suite's after_reset: forward with actuation disabled */
        int flags = m->opt.disableflags;
        dm->m->opt.disableflags |= mjDSBL_ACTUATION;
        mj_forward(m, d);
        dm->m->opt.disableflags = flags;
        if (d->ncon == 0)
            break;
        z += 0.01;
    }
}

/* Move: a random orientation (normalized normal draws) at the lowest height clear of the floor. */
static void init_move(const dmc_model *dm, mjData *d, double *extra, crl_rng *rng)
{
    (void)extra;
    double quat[4], n = 0;
    for (int k = 0; k < 4; k++) {
        quat[k] = dmc_randn(rng);
        n += quat[k] * quat[k];
    }
    n = sqrt(n);
    for (int k = 0; k < 4; k++)
        quat[k] /= n;
    non_contacting_height(dm, d, quat, 0.0, 0.0);
}

/* Escape: a new terrain (drawn first, as the suite does), then walk's random orientation above it. */
static void init_escape(const dmc_model *dm, mjData *d, double *extra, crl_rng *rng)
{
    for (int k = 0; k < N_BUMPS; k++)
        extra[k] = crl_rng_range(rng, TERRAIN_SMOOTHNESS, 1.0);
    apply_escape(dm, extra);
    init_move(dm, d, NULL, rng);
}

/* Fetch: upright at a random heading and place within 0.9 of the floor's half-size; the ball dropped
 * from 2 m somewhere in that square, thrown at 5 randn m/s horizontally. */
static void init_fetch(const dmc_model *dm, mjData *d, double *extra, crl_rng *rng)
{
    (void)extra;
    double azimuth = crl_rng_range(rng, 0, 2 * M_PI);
    double quat[4] = {cos(azimuth / 2), 0, 0, sin(azimuth / 2)};
    double r = 0.9 * dm->param[0];
    double x = crl_rng_range(rng, -r, r), y = crl_rng_range(rng, -r, r);
    non_contacting_height(dm, d, quat, x, y);
    double *ball = d->qpos + dm->adr[BALL_ROOT];
    ball[0] = crl_rng_range(rng, -r, r);
    ball[1] = crl_rng_range(rng, -r, r);
    ball[2] = 2;
    double *ball_vel = d->qvel + dm->m->jnt_dofadr[dm->id[BALL_ROOT]];
    ball_vel[0] = 5 * dmc_randn(rng);
    ball_vel[1] = 5 * dmc_randn(rng);
}

/* v (world) in the torso's frame: v . R. */
static void to_torso(const mjData *d, int torso, const double v[3], double *out)
{
    const double *r = d->xmat + 9 * torso;
    for (int j = 0; j < 3; j++)
        out[j] = v[0] * r[j] + v[1] * r[3 + j] + v[2] * r[6 + j];
}

/* egocentric_state (hinge angles, hinge velocities, actuator states), torso_velocity (velocimeter),
 * torso_upright, imu (accelerometer and gyro readings in model order), force_torque (asinh of the toe
 * force and torque readings in model order). */
static void observe_common(const dmc_model *dm, const mjData *d, double *const *out)
{
    const mjModel *m = dm->m;
    int k = 0;
    for (int j = 0; j < m->njnt; j++)
        if (m->jnt_type[j] == mjJNT_HINGE)
            out[0][k++] = d->qpos[m->jnt_qposadr[j]];
    for (int j = 0; j < m->njnt; j++)
        if (m->jnt_type[j] == mjJNT_HINGE)
            out[0][k++] = d->qvel[m->jnt_dofadr[j]];
    for (int a = 0; a < m->na; a++)
        out[0][k++] = d->act[a];
    for (int j = 0; j < 3; j++)
        out[1][j] = d->sensordata[dm->adr[VELO] + j];
    out[2][0] = dmc_xmat(d, dm->id[TORSO], 2, 2);
    int ni = 0, nf = 0;
    for (int s = 0; s < m->nsensor; s++) {
        int type = m->sensor_type[s];
        const double *v = d->sensordata + m->sensor_adr[s];
        if (type == mjSENS_GYRO || type == mjSENS_ACCELEROMETER)
            for (int j = 0; j < m->sensor_dim[s]; j++)
                out[3][ni++] = v[j];
        else if (type == mjSENS_FORCE || type == mjSENS_TORQUE)
            for (int j = 0; j < m->sensor_dim[s]; j++)
                out[4][nf++] = asinh(v[j]);
    }
}

static void observe_move(const dmc_model *dm, const mjData *d, const double *extra, double *const *out)
{
    (void)extra;
    observe_common(dm, d, out);
}

/* fetch adds ball_state (the ball's position and velocity relative to the torso, and its angular
 * velocity, each in the torso's frame) and target_position (in the torso's frame). */
static void observe_fetch(const dmc_model *dm, const mjData *d, const double *extra, double *const *out)
{
    (void)extra;
    observe_common(dm, d, out);
    const mjModel *m = dm->m;
    int torso = dm->id[TORSO];
    const double *tp = d->xpos + 3 * torso, *bp = d->xpos + 3 * dm->id[BALL];
    const double *bv = d->qvel + m->jnt_dofadr[dm->id[BALL_ROOT]], *rv = d->qvel + m->jnt_dofadr[dm->id[ROOT]];
    double rel_pos[3] = {bp[0] - tp[0], bp[1] - tp[1], bp[2] - tp[2]};
    double rel_vel[3] = {bv[0] - rv[0], bv[1] - rv[1], bv[2] - rv[2]};
    to_torso(d, torso, rel_pos, out[5]);
    to_torso(d, torso, rel_vel, out[5] + 3);
    to_torso(d, torso, bv + 3, out[5] + 6);
    const double *sp = d->site_xpos + 3 * dm->id[TARGET];
    double to_target[3] = {sp[0] - tp[0], sp[1] - tp[1], sp[2] - tp[2]};
    to_torso(d, torso, to_target, out[6]);
}

/* escape adds origin (the world origin in the torso's frame) and rangefinder (tanh of each reading,
 * 1 where the ray hits nothing). */
static void observe_escape(const dmc_model *dm, const mjData *d, const double *extra, double *const *out)
{
    (void)extra;
    observe_common(dm, d, out);
    const mjModel *m = dm->m;
    int torso = dm->id[TORSO];
    double o[3];
    to_torso(d, torso, d->xpos + 3 * torso, o);
    for (int j = 0; j < 3; j++)
        out[5][j] = -o[j];
    int k = 0;
    for (int s = 0; s < m->nsensor; s++)
        if (m->sensor_type[s] == mjSENS_RANGEFINDER) {
            double v = d->sensordata[m->sensor_adr[s]];
            out[6][k++] = v == -1.0 ? 1.0 : tanh(v);
        }
}

/* 1 with the torso's z axis up, falling linearly to 0 upside down. */
static double upright_reward(const dmc_model *dm, const mjData *d)
{
    return dmc_tolerance(dmc_xmat(d, dm->id[TORSO], 2, 2), 1.0, INFINITY, 2.0, DMC_LINEAR, 0.0);
}

static double move_reward(const dmc_model *dm, const mjData *d, double speed)
{
    double move = dmc_tolerance(d->sensordata[dm->adr[VELO]], speed, INFINITY, speed, DMC_LINEAR, 0.5);
    return upright_reward(dm, d) * move;
}

static double reward_walk(const dmc_model *dm, const mjData *d, const double *extra)
{
    (void)extra;
    return move_reward(dm, d, 0.5);
}

static double reward_run(const dmc_model *dm, const mjData *d, const double *extra)
{
    (void)extra;
    return move_reward(dm, d, 5.0);
}

/* Get the workspace out of the bowl (its distance from the origin up to the terrain's half-size),
 * upright within 20 degrees. */
static double reward_escape(const dmc_model *dm, const mjData *d, const double *extra)
{
    (void)extra;
    const double *ws = d->site_xpos + 3 * dm->id[WORKSPACE];
    double size = dm->param[0], deviation = dm->param[1];
    double escape = dmc_tolerance(sqrt(ws[0] * ws[0] + ws[1] * ws[1] + ws[2] * ws[2]), size, INFINITY, size,
                                  DMC_LINEAR, 0.0);
    double upright = dmc_tolerance(dmc_xmat(d, dm->id[TORSO], 2, 2), deviation, INFINITY, 1 + deviation,
                                   DMC_LINEAR, 0.0);
    return upright * escape;
}

/* Reach the ball with the workspace, then bring it to the target (horizontal distances). */
static double reward_fetch(const dmc_model *dm, const mjData *d, const double *extra)
{
    (void)extra;
    const mjModel *m = dm->m;
    double arena = dm->param[0] * sqrt(2.0);
    double workspace = m->site_size[3 * dm->id[WORKSPACE]], ball_r = m->geom_size[3 * dm->id[BALL_GEOM]];
    double target_r = m->site_size[3 * dm->id[TARGET]];
    const double *ws = d->site_xpos + 3 * dm->id[WORKSPACE], *bp = d->xpos + 3 * dm->id[BALL];
    const double *tg = d->site_xpos + 3 * dm->id[TARGET];
    double reach = dmc_tolerance(hypot(ws[0] - bp[0], ws[1] - bp[1]), 0, workspace + ball_r, arena,
                                 DMC_LINEAR, 0.0);
    double fetch = dmc_tolerance(hypot(tg[0] - bp[0], tg[1] - bp[1]), 0, target_r, arena, DMC_LINEAR, 0.0);
    return upright_reward(dm, d) * reach * (0.5 + 0.5 * fetch);
}

#define QUADRUPED_COMMON_OBS                                                                        \
    {"egocentric_state", 44}, {"torso_velocity", 3}, {"torso_upright", 1}, {"imu", 6}, {"force_torque", 24}

const dmc_task dmc_quadruped_walk = {
    .domain = "quadruped", .name = "walk", .id = "quadruped/walk", .xml = quadruped_xml, .time_limit = 20.0,
    .control_timestep = 0.02, .n_obs = 5, .obs = {QUADRUPED_COMMON_OBS}, .setup = quadruped_setup,
    .init = init_move, .observe = observe_move, .reward = reward_walk, .edit = edit_walk,
};

const dmc_task dmc_quadruped_run = {
    .domain = "quadruped", .name = "run", .id = "quadruped/run", .xml = quadruped_xml, .time_limit = 20.0,
    .control_timestep = 0.02, .n_obs = 5, .obs = {QUADRUPED_COMMON_OBS}, .setup = quadruped_setup,
    .init = init_move, .observe = observe_move, .reward = reward_run, .edit = edit_run,
};

const dmc_task dmc_quadruped_fetch = {
    .domain = "quadruped", .name = "fetch", .id = "quadruped/fetch", .xml = quadruped_xml, .time_limit = 20.0,
    .control_timestep = 0.02, .n_obs = 7,
    .obs = {QUADRUPED_COMMON_OBS, {"ball_state", 9}, {"target_position", 3}}, .setup = fetch_setup,
    .init = init_fetch, .observe = observe_fetch, .reward = reward_fetch, .edit = edit_fetch,
};

const dmc_task dmc_quadruped_escape = {
    .domain = "quadruped", .name = "escape", .id = "quadruped/escape", .xml = quadruped_xml, .time_limit = 20.0,
    .control_timestep = 0.02, .n_obs = 7, .obs = {QUADRUPED_COMMON_OBS, {"origin", 3}, {"rangefinder", 20}},
    .n_extra = N_BUMPS, .setup = escape_setup, .init = init_escape, .observe = observe_escape,
    .reward = reward_escape, .edit = edit_escape, .apply = apply_escape,
};
