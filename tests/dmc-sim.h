/* The task-level harness the dm_control suites that link the plugin's task code share: a task's model
 * (bundled, or from a suite directory) with one mjData and room for its observations, and a float64
 * leaf of a TensorDict. */
#ifndef CRL_DMC_SIM_H
#define CRL_DMC_SIM_H

#include "dmc-test.h"
#include "dmc.h"

#include <crl/td.h>

typedef struct sim {
    dmc_model dm;
    mjData *d;
    double extra[DMC_MAX_EXTRA];
    double obs[DMC_MAX_OBS][64];
    double *out[DMC_MAX_OBS]; /* out[k] = obs[k], as a task's observe takes them */
} sim;

/* The task's model from `dir` (NULL: the bundled one); fails the test when it does not load. */
static inline void sim_open_dir(sim *s, const dmc_task *t, const char *dir)
{
    crl_error e = {0};
    memset(s, 0, sizeof *s);
    EXPECT_OK(dmc_model_load(&s->dm, t, dir, &e), e);
    s->d = mj_makeData(s->dm.m);
    ck_assert_ptr_nonnull(s->d);
    for (int k = 0; k < DMC_MAX_OBS; k++)
        s->out[k] = s->obs[k];
}

static inline void sim_open(sim *s, const dmc_task *t)
{
    sim_open_dir(s, t, NULL);
}

static inline void sim_close(sim *s)
{
    mj_deleteData(s->d);
    dmc_model_free(&s->dm);
}

/* The float64 data of td's `key`; fails the test when it is missing or of another dtype. */
static inline const double *leaf_f64(crl_td *td, const char *key)
{
    crl_tensor *t = crl_td_get(td, key);
    ck_assert_msg(t != NULL, "no '%s'", key);
    ck_assert_int_eq(crl_tensor_dtype(t), CRL_F64);
    return crl_tensor_data(t);
}

#endif
