/* The suite's fish domain: upright, swim. */
#include "dmc.h"

#include <math.h>

/* A fish on a free joint in a medium of density 5000 (no gravity, no
 * constraints): a two-joint tail, two fins on roll and pitch hinges tied by
 * fixed tendons, five position actuators; Euler at 4 ms driven every 40 ms.
 * The suite's own skybox is inline (it does not include common/skybox.xml),
 * so the shared asset block supplies it here and it is left out below. */
static const char fish_xml[] =
    "<mujoco model='fish'>"
    "<option timestep='0.004' density='5000'>"
    "<flag gravity='disable' constraint='disable'/>"
    "</option>"
    "<default>"
    "<general ctrllimited='true'/>"
    "<default class='fish'>"
    "<joint type='hinge' limited='false' range='-60 60' damping='2e-5' solreflimit='.1 1' solimplimit='0 .8 .1'/>"
    "<geom material='self'/>"
    "</default>"
    "</default>"
    "<worldbody>"
    "<camera name='tracking_top' pos='0 0 1' xyaxes='1 0 0 0 1 0' mode='trackcom'/>"
    "<camera name='tracking_x' pos='-.3 0 .2' xyaxes='0 -1 0 0.342 0 0.940' fovy='60' mode='trackcom'/>"
    "<camera name='tracking_y' pos='0 -.3 .2' xyaxes='1 0 0 0 0.342 0.940' fovy='60' mode='trackcom'/>"
    "<camera name='fixed_top' pos='0 0 5.5' fovy='10'/>"
    "<geom name='ground' type='plane' size='.5 .5 .1' material='grid'/>"
    "<geom name='target' type='sphere' pos='0 .4 .1' size='.04' material='target'/>"
    "<body name='torso' pos='0 0 .1' childclass='fish'>"
    "<light name='light' diffuse='.6 .6 .6' pos='0 0 0.5' dir='0 0 -1' specular='.3 .3 .3' mode='track'/>"
    "<joint name='root' type='free' damping='0' limited='false'/>"
    "<site name='torso' size='.01' rgba='0 0 0 0'/>"
    "<geom name='eye' type='ellipsoid' pos='0 .055 .015' size='.008 .012 .008' euler='-10 0 0' material='eye' mass='0'/>"
    "<camera name='eye' pos='0 .06 .02' xyaxes='1 0 0 0 0 1'/>"
    "<geom name='mouth' type='capsule' fromto='0 .079 0 0 .07 0' size='.005' material='effector' mass='0'/>"
    "<geom name='lower_mouth' type='capsule' fromto='0 .079 -.004 0 .07 -.003' size='.0045' material='effector' mass='0'/>"
    "<geom name='torso' type='ellipsoid' size='.01 .08 .04' mass='0'/>"
    "<geom name='back_fin' type='ellipsoid' size='.001 .03 .015' pos='0 -.03 .03' material='effector' mass='0'/>"
    "<geom name='torso_massive' type='box' size='.002 .06 .03' group='4'/>"
    "<body name='tail1' pos='0 -.09 0'>"
    "<joint name='tail1' axis='0 0 1' pos='0 .01 0'/>"
    "<joint name='tail_twist' axis='0 1 0' pos='0 .01 0' range='-30 30'/>"
    "<geom name='tail1' type='ellipsoid' size='.001 .008 .016'/>"
    "<body name='tail2' pos='0 -.028 0'>"
    "<joint name='tail2' axis='0 0 1' pos='0 .02 0' stiffness='8e-5'/>"
    "<geom name='tail2' type='ellipsoid' size='.001 .018 .035'/>"
    "</body>"
    "</body>"
    "<body name='finright' pos='.01 0 0'>"
    "<joint name='finright_roll' axis='0 1 0'/>"
    "<joint name='finright_pitch' axis='1 0 0' pos='0 .005 0'/>"
    "<geom name='finright' type='ellipsoid' pos='.015 0 0' size='.02 .015 .001'/>"
    "</body>"
    "<body name='finleft' pos='-.01 0 0'>"
    "<joint name='finleft_roll' axis='0 1 0'/>"
    "<joint name='finleft_pitch' axis='1 0 0' pos='0 .005 0'/>"
    "<geom name='finleft' type='ellipsoid' pos='-.015 0 0' size='.02 .015 .001'/>"
    "</body>"
    "</body>"
    "</worldbody>"
    "<tendon>"
    "<fixed name='fins_flap'>"
    "<joint joint='finleft_roll' coef='-.5'/>"
    "<joint joint='finright_roll' coef='.5'/>"
    "</fixed>"
    "<fixed name='fins_sym' stiffness='1e-4'>"
    "<joint joint='finleft_roll' coef='.5'/>"
    "<joint joint='finright_roll' coef='.5'/>"
    "</fixed>"
    "</tendon>"
    "<actuator>"
    "<position name='tail' joint='tail1' ctrlrange='-1 1' kp='5e-4'/>"
    "<position name='tail_twist' joint='tail_twist' ctrlrange='-1 1' kp='1e-4'/>"
    "<position name='fins_flap' tendon='fins_flap' ctrlrange='-1 1' kp='3e-4'/>"
    "<position name='finleft_pitch' joint='finleft_pitch' ctrlrange='-1 1' kp='1e-4'/>"
    "<position name='finright_pitch' joint='finright_pitch' ctrlrange='-1 1' kp='1e-4'/>"
    "</actuator>"
    "<sensor>"
    "<velocimeter name='velocimeter' site='torso'/>"
    "<gyro name='gyro' site='torso'/>"
    "</sensor>"
    "</mujoco>";


/* The suite's _JOINTS, in its order. */
static const char *const fish_joints[] = {"tail1", "tail_twist", "tail2", "finright_roll", "finright_pitch",
                                          "finleft_roll", "finleft_pitch"};
enum { N_JOINTS = 7 };
/* id[] slots: torso body, mouth and target geoms, root joint (adr: its qpos address). */
enum { TORSO, MOUTH, TARGET, ROOT };

static int fish_setup(dmc_model *dm, crl_error *err)
{
    int rc = dmc_name(dm, mjOBJ_BODY, "torso", TORSO, err);
    if (rc == CRL_OK)
        rc = dmc_name(dm, mjOBJ_GEOM, "mouth", MOUTH, err);
    if (rc == CRL_OK)
        rc = dmc_name(dm, mjOBJ_GEOM, "target", TARGET, err);
    if (rc == CRL_OK)
        rc = dmc_joint(dm, "root", ROOT, err);
    /* The named joints' qpos addresses, after the free root's 7 entries, in _JOINTS order; their dof
     * addresses are the same minus one (one quaternion entry fewer). */
    for (int k = 0; rc == CRL_OK && k < N_JOINTS; k++) {
        int j = mj_name2id(dm->m, mjOBJ_JOINT, fish_joints[k]);
        if (j < 0)
            rc = crl_error_set(err, CRL_E_NOT_FOUND, "dm_control: %s: the model has no joint named '%s'",
                               dm->task->id, fish_joints[k]);
        else if (dm->m->jnt_qposadr[j] != 7 + k || dm->m->jnt_dofadr[j] != 6 + k)
            rc = crl_error_set(err, CRL_E_CONFIG,
                               "dm_control: %s: joint '%s' is not the suite's joint %d after the root",
                               dm->task->id, fish_joints[k], k + 1);
    }
    if (rc == CRL_OK && (dm->m->jnt_type[dm->id[ROOT]] != mjJNT_FREE || dm->adr[ROOT] != 0 ||
                         dm->m->nv != 13 || dm->m->nsensordata != 6))
        rc = crl_error_set(err, CRL_E_CONFIG,
                           "dm_control: %s: the model has nv %d and %d sensor values; the task needs the "
                           "suite's free root first, 13 dofs and 6 sensor values",
                           dm->task->id, dm->m->nv, dm->m->nsensordata);
    if (rc == CRL_OK)
        dm->param[0] = dm->m->geom_size[3 * dm->id[MOUTH]] + dm->m->geom_size[3 * dm->id[TARGET]];
    return rc;
}

/* upright hides the target, for every env alike. */
static int setup_upright(dmc_model *dm, crl_error *err)
{
    int rc = fish_setup(dm, err);
    if (rc == CRL_OK)
        dm->m->geom_rgba[4 * dm->id[TARGET] + 3] = 0;
    return rc;
}

/* A random orientation (normalized normal draws) and joint angles in +-0.2. */
static void init_pose(const dmc_model *dm, mjData *d, crl_rng *rng)
{
    double *quat = d->qpos + dm->adr[ROOT] + 3;
    double n = 0;
    for (int k = 0; k < 4; k++) {
        quat[k] = dmc_randn(rng);
        n += quat[k] * quat[k];
    }
    n = sqrt(n);
    for (int k = 0; k < 4; k++)
        quat[k] /= n;
    for (int k = 0; k < N_JOINTS; k++)
        d->qpos[7 + k] = crl_rng_range(rng, -0.2, 0.2);
}

static void init_upright(const dmc_model *dm, mjData *d, double *extra, crl_rng *rng)
{
    (void)extra;
    init_pose(dm, d, rng);
}

/* swim also places the target (x, y, z in extra) in the tank. */
static void init_swim(const dmc_model *dm, mjData *d, double *extra, crl_rng *rng)
{
    init_pose(dm, d, rng);
    extra[0] = crl_rng_range(rng, -0.4, 0.4);
    extra[1] = crl_rng_range(rng, -0.4, 0.4);
    extra[2] = crl_rng_range(rng, 0.1, 0.3);
}

static void apply_swim(const dmc_model *dm, const double *extra)
{
    for (int k = 0; k < 3; k++)
        dm->m->geom_pos[3 * dm->id[TARGET] + k] = extra[k];
}

/* The mouth-to-target vector in the mouth's frame. */
static void mouth_to_target(const dmc_model *dm, const mjData *d, double out[3])
{
    const double *t = d->geom_xpos + 3 * dm->id[TARGET], *mo = d->geom_xpos + 3 * dm->id[MOUTH];
    const double *r = d->geom_xmat + 9 * dm->id[MOUTH];
    double v[3] = {t[0] - mo[0], t[1] - mo[1], t[2] - mo[2]};
    for (int j = 0; j < 3; j++)
        out[j] = v[0] * r[j] + v[1] * r[3 + j] + v[2] * r[6 + j];
}

/* joint_angles (_JOINTS), upright (the torso's zz), then for swim the
 * target, and velocity (qvel). */
static void fish_observe(const dmc_model *dm, const mjData *d, const double *extra, double *const *out)
{
    (void)extra;
    bool swim = dm->task->n_obs == 4;
    for (int k = 0; k < N_JOINTS; k++)
        out[0][k] = d->qpos[7 + k];
    out[1][0] = dmc_xmat(d, dm->id[TORSO], 2, 2);
    if (swim)
        mouth_to_target(dm, d, out[2]);
    double *vel = out[swim ? 3 : 2];
    for (int k = 0; k < dm->m->nv; k++)
        vel[k] = d->qvel[k];
}

static double reward_upright(const dmc_model *dm, const mjData *d, const double *extra)
{
    (void)extra;
    return dmc_tol(dmc_xmat(d, dm->id[TORSO], 2, 2), 1, 1, 1);
}

static double reward_swim(const dmc_model *dm, const mjData *d, const double *extra)
{
    (void)extra;
    double v[3];
    mouth_to_target(dm, d, v);
    double radii = dm->param[0];
    double in_target = dmc_tol(sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]), 0, radii, 2 * radii);
    double is_upright = 0.5 * (dmc_xmat(d, dm->id[TORSO], 2, 2) + 1);
    return (7 * in_target + is_upright) / 8;
}

const dmc_task dmc_fish_upright = {
    .domain = "fish", .name = "upright", .id = "fish/upright", .xml = fish_xml, .time_limit = 40.0,
    .control_timestep = 0.04, .n_obs = 3, .obs = {{"joint_angles", 7}, {"upright", 1}, {"velocity", 13}},
    .setup = setup_upright, .init = init_upright, .observe = fish_observe, .reward = reward_upright,
};

const dmc_task dmc_fish_swim = {
    .domain = "fish", .name = "swim", .id = "fish/swim", .xml = fish_xml, .time_limit = 40.0,
    .control_timestep = 0.04, .n_obs = 4,
    .obs = {{"joint_angles", 7}, {"upright", 1}, {"target", 3}, {"velocity", 13}}, .n_extra = 3,
    .setup = fish_setup, .init = init_swim, .observe = fish_observe, .reward = reward_swim,
    .apply = apply_swim,
};
