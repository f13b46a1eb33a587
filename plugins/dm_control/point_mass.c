/* The suite's point_mass domain: easy, and hard (random actuation directions per episode). */
#include "dmc.h"

#include <math.h>

/* A 0.3 kg sphere on two slide joints limited to +-0.29 m (damping 1),
 * driven through two fixed tendons by motors of gear 0.1 with control in
 * [-1, 1]; Euler at 20 ms, contacts off.  The target sits at the centre. */
static const char point_mass_xml[] =
    "<mujoco model='planar point mass'>"
    "<option timestep='0.02'>"
    "<flag contact='disable'/>"
    "</option>"
    "<default>"
    "<joint type='hinge' axis='0 0 1' limited='true' range='-.29 .29' damping='1'/>"
    "<motor gear='.1' ctrlrange='-1 1' ctrllimited='true'/>"
    "</default>"
    "<worldbody>"
    "<light name='light' pos='0 0 1'/>"
    "<camera name='fixed' pos='0 0 .75' quat='1 0 0 0'/>"
    "<geom name='ground' type='plane' pos='0 0 0' size='.3 .3 .1' material='grid'/>"
    "<geom name='wall_x' type='plane' pos='-.3 0 .02' zaxis='1 0 0' size='.02 .3 .02' material='decoration'/>"
    "<geom name='wall_y' type='plane' pos='0 -.3 .02' zaxis='0 1 0' size='.3 .02 .02' material='decoration'/>"
    "<geom name='wall_neg_x' type='plane' pos='.3 0 .02' zaxis='-1 0 0' size='.02 .3 .02' material='decoration'/>"
    "<geom name='wall_neg_y' type='plane' pos='0 .3 .02' zaxis='0 -1 0' size='.3 .02 .02' material='decoration'/>"
    "<body name='pointmass' pos='0 0 .01'>"
    "<camera name='cam0' pos='0 -0.3 0.3' xyaxes='1 0 0 0 0.7 0.7'/>"
    "<joint name='root_x' type='slide' pos='0 0 0' axis='1 0 0'/>"
    "<joint name='root_y' type='slide' pos='0 0 0' axis='0 1 0'/>"
    "<geom name='pointmass' type='sphere' size='.01' material='self' mass='.3'/>"
    "</body>"
    "<geom name='target' pos='0 0 .01' material='target' type='sphere' size='.015'/>"
    "</worldbody>"
    "<tendon>"
    "<fixed name='t1'><joint joint='root_x' coef='1'/><joint joint='root_y' coef='0'/></fixed>"
    "<fixed name='t2'><joint joint='root_x' coef='0'/><joint joint='root_y' coef='1'/></fixed>"
    "</tendon>"
    "<actuator>"
    "<motor name='t1' tendon='t1'/>"
    "<motor name='t2' tendon='t2'/>"
    "</actuator>"
    "</mujoco>";

enum { MASS, TARGET };

static int point_mass_setup(dmc_model *dm, crl_error *err)
{
    int rc = dmc_name(dm, mjOBJ_GEOM, "pointmass", MASS, err);
    if (rc == CRL_OK)
        rc = dmc_name(dm, mjOBJ_GEOM, "target", TARGET, err);
    if (rc == CRL_OK)
        dm->param[0] = dm->m->geom_size[3 * dm->id[TARGET]];
    return rc;
}

static void point_mass_observe(const dmc_model *dm, const mjData *d, const double *extra,
                               double *const *out)
{
    (void)extra;
    (void)dm;
    out[0][0] = d->qpos[0];
    out[0][1] = d->qpos[1];
    out[1][0] = d->qvel[0];
    out[1][1] = d->qvel[1];
}

static double point_mass_reward(const dmc_model *dm, const mjData *d, const double *extra)
{
    (void)extra;
    const double *a = d->geom_xpos + 3 * dm->id[TARGET], *b = d->geom_xpos + 3 * dm->id[MASS];
    double dx = a[0] - b[0], dy = a[1] - b[1], dz = a[2] - b[2];
    double dist = sqrt(dx * dx + dy * dy + dz * dz);
    double size = dm->param[0];
    double near_target = dmc_tol(dist, 0, size, size);
    return near_target * (dmc_small_control(dm->m, d) + 4.0) / 5.0;
}

const dmc_task dmc_point_mass_easy = {
    .domain = "point_mass", .name = "easy", .id = "point_mass/easy", .xml = point_mass_xml,
    .time_limit = 20.0, .control_timestep = 0.0, .n_obs = 2,
    .obs = {{"position", 2}, {"velocity", 2}}, .setup = point_mass_setup,
    .init = dmc_init_randomized, .observe = point_mass_observe, .reward = point_mass_reward,
};

/* hard: each episode the two controls push along random unit directions of
 * the plane (at least ~26 degrees apart), the fixed tendons' coefficients
 * (wrap_prm) in the suite.  extra holds the two directions of each env. */
static void init_hard(const dmc_model *dm, mjData *d, double *extra, crl_rng *rng)
{
    dmc_randomize_joints(dm->m, d, rng);
    double n;
    do {
        extra[0] = dmc_randn(rng);
        extra[1] = dmc_randn(rng);
        n = hypot(extra[0], extra[1]);
    } while (n == 0);
    extra[0] /= n;
    extra[1] /= n;
    bool parallel = true;
    while (parallel) {
        extra[2] = dmc_randn(rng);
        extra[3] = dmc_randn(rng);
        n = hypot(extra[2], extra[3]);
        if (n == 0)
            continue;
        extra[2] /= n;
        extra[3] /= n;
        parallel = fabs(extra[0] * extra[2] + extra[1] * extra[3]) > 0.9;
    }
}

/* The env's directions into the shared model's tendons t1, t2. */
static void apply_hard(const dmc_model *dm, const double *extra)
{
    for (int k = 0; k < 4; k++)
        dm->m->wrap_prm[k] = extra[k];
}

static int point_mass_hard_setup(dmc_model *dm, crl_error *err)
{
    int rc = point_mass_setup(dm, err);
    if (rc == CRL_OK && (dm->m->nwrap != 4 || dm->m->ntendon != 2 || dm->m->wrap_type[0] != mjWRAP_JOINT))
        rc = crl_error_set(err, CRL_E_CONFIG,
                           "dm_control: %s: the model has %d tendons of %d joints in all; the task "
                           "randomizes the suite's two fixed tendons of two joints each",
                           dm->task->id, dm->m->ntendon, dm->m->nwrap);
    return rc;
}

const dmc_task dmc_point_mass_hard = {
    .domain = "point_mass", .name = "hard", .id = "point_mass/hard", .xml = point_mass_xml,
    .time_limit = 20.0, .control_timestep = 0.0, .n_obs = 2,
    .obs = {{"position", 2}, {"velocity", 2}}, .n_extra = 4, .setup = point_mass_hard_setup,
    .init = init_hard, .observe = point_mass_observe, .reward = point_mass_reward, .apply = apply_hard,
};
