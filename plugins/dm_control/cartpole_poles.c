/* The suite's cartpole tasks with a chain of poles: two_poles, three_poles (swing-up, smooth reward). */
#include "dmc_xml.h"

#include <math.h>
#include <stdio.h>

/* cartpole._make_model: pole_2..pole_n hang 1 m up each pole's tip, the
 * floor drops below the chain and the cameras back away. */
static int edit_poles(const dmc_task *t, struct _xmlDoc *doc, crl_error *err, int n_poles)
{
    static const char *const pole_path[] = {"worldbody", "body", "body", NULL};
    static const char *const world_path[] = {"worldbody", NULL};
    xmlNode *parent = dmc_xml_path(doc, pole_path);
    if (!parent)
        return dmc_xml_missing(t, "first pole (worldbody/body/body)", err);
    for (int k = 2; k <= n_poles; k++) {
        char name[32], hinge[32];
        snprintf(name, sizeof name, "pole_%d", k);
        snprintf(hinge, sizeof hinge, "hinge_%d", k);
        const char *body_attrs[] = {"name", name, "pos", "0 0 1", "childclass", "pole", NULL};
        const char *joint_attrs[] = {"name", hinge, NULL};
        const char *geom_attrs[] = {"name", name, NULL};
        xmlNode *child = dmc_xml_add(parent, "body", body_attrs);
        if (!child || !dmc_xml_add(child, "joint", joint_attrs) || !dmc_xml_add(child, "geom", geom_attrs))
            return crl_error_set(err, CRL_E_NOMEM, "dm_control: %s: out of memory growing the poles", t->id);
        parent = child;
    }
    xmlNode *world = dmc_xml_path(doc, world_path);
    xmlNode *floor = dmc_xml_child(world, "geom");
    xmlNode *cams[2];
    if (!floor)
        return dmc_xml_missing(t, "floor (the first worldbody geom)", err);
    if (dmc_xml_children(world, "camera", cams, 2) < 2)
        return dmc_xml_missing(t, "two worldbody cameras", err);
    char pos[64];
    /* Python's str of the float 1 - n - .05 */
    snprintf(pos, sizeof pos, "0 0 %.17g", 1.0 - n_poles - .05);
    int rc = dmc_xml_set(floor, "pos", pos, t, err);
    snprintf(pos, sizeof pos, "0 %d 1", -1 - 2 * n_poles);
    if (rc == CRL_OK)
        rc = dmc_xml_set(cams[0], "pos", pos, t, err);
    snprintf(pos, sizeof pos, "0 %d 2", -2 * n_poles);
    if (rc == CRL_OK)
        rc = dmc_xml_set(cams[1], "pos", pos, t, err);
    return rc;
}

static int edit_two(const dmc_task *t, struct _xmlDoc *doc, crl_error *err)
{
    return edit_poles(t, doc, err, 2);
}

static int edit_three(const dmc_task *t, struct _xmlDoc *doc, crl_error *err)
{
    return edit_poles(t, doc, err, 3);
}

/* id[0] the slider, id[1] the first pole's body (the poles are bodies
 * id[1] .. id[1] + n - 1, as the suite's xmat[2:] reads them); param[0] n. */
static int setup_poles(dmc_model *dm, int n_poles, crl_error *err)
{
    int rc = dmc_joint(dm, "slider", 0, err);
    if (rc == CRL_OK)
        rc = dmc_name(dm, mjOBJ_BODY, "pole_1", 1, err);
    if (rc == CRL_OK && (dm->id[1] != 2 || dm->m->nbody != 2 + n_poles || dm->m->nv != 1 + n_poles ||
                         dm->adr[0] != 0 || dm->m->nu != 1))
        rc = crl_error_set(err, CRL_E_CONFIG,
                           "dm_control: %s: the model has %d bodies, %d dofs and %d actuators; the task "
                           "needs the cart, %d poles after it, the slider first and one actuator",
                           dm->task->id, dm->m->nbody, dm->m->nv, dm->m->nu, n_poles);
    dm->param[0] = n_poles;
    return rc;
}

static int setup_two(dmc_model *dm, crl_error *err)
{
    return setup_poles(dm, 2, err);
}

static int setup_three(dmc_model *dm, crl_error *err)
{
    return setup_poles(dm, 3, err);
}

/* Balance(swing_up=True): the cart near the centre, the first pole hanging
 * down, the others nearly straight on it, small velocities. */
static void init_poles(const dmc_model *dm, mjData *d, double *extra, crl_rng *rng)
{
    (void)extra;
    const mjModel *m = dm->m;
    d->qpos[0] = 0.01 * dmc_randn(rng);
    d->qpos[1] = M_PI + 0.01 * dmc_randn(rng);
    for (int k = 2; k < m->nq; k++)
        d->qpos[k] = 0.1 * dmc_randn(rng);
    for (int k = 0; k < m->nv; k++)
        d->qvel[k] = 0.01 * dmc_randn(rng);
}

/* position: cart x, then each pole's (zz, xz); velocity: qvel. */
static void observe_poles(const dmc_model *dm, const mjData *d, const double *extra, double *const *out)
{
    (void)extra;
    const mjModel *m = dm->m;
    out[0][0] = d->qpos[0];
    for (int b = 2; b < m->nbody; b++) {
        out[0][1 + 2 * (b - 2)] = dmc_xmat(d, b, 2, 2);
        out[0][2 + 2 * (b - 2)] = dmc_xmat(d, b, 0, 2);
    }
    for (int k = 0; k < m->nv; k++)
        out[1][k] = d->qvel[k];
}

/* The smooth reward: the poles' mean uprightness, the slowest-scoring pole's
 * angular velocity, the cart's centring and the control. */
static double reward_poles(const dmc_model *dm, const mjData *d, const double *extra)
{
    (void)extra;
    const mjModel *m = dm->m;
    double upright = 0;
    for (int b = 2; b < m->nbody; b++)
        upright += (dmc_xmat(d, b, 2, 2) + 1.0) / 2.0;
    upright /= m->nbody - 2;
    double small_velocity = 1.0;
    for (int k = 1; k < m->nv; k++)
        small_velocity = fmin(small_velocity, dmc_tol(d->qvel[k], 0, 0, 5.0));
    small_velocity = (1.0 + small_velocity) / 2.0;
    double centered = (1.0 + dmc_tol(d->qpos[0], 0, 0, 2.0)) / 2.0;
    double small_control = (4.0 + dmc_small_control(m, d)) / 5.0;
    return upright * small_control * small_velocity * centered;
}

#define CARTPOLE_POLES(tname, n, setup_fn, edit_fn)                                                          \
    {                                                                                                        \
        .domain = "cartpole", .name = #tname, .id = "cartpole/" #tname, .xml = dmc_cartpole_xml,             \
        .time_limit = 10.0, .control_timestep = 0.0, .n_obs = 2,                                             \
        .obs = {{"position", 1 + 2 * (n)}, {"velocity", 1 + (n)}}, .setup = setup_fn, .init = init_poles,    \
        .observe = observe_poles, .reward = reward_poles, .edit = edit_fn,                                   \
    }

const dmc_task dmc_cartpole_two_poles = CARTPOLE_POLES(two_poles, 2, setup_two, edit_two);
const dmc_task dmc_cartpole_three_poles = CARTPOLE_POLES(three_poles, 3, setup_three, edit_three);
