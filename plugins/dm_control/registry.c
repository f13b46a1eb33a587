/* The dm_control task table: lookup by "domain/task" with close-match suggestions. */
#include "dmc.h"

#include <crl/options.h>
#include <stdio.h>
#include <string.h>

static const dmc_task *const dmc_tasks[] = {
    &dmc_cartpole_balance, &dmc_cartpole_balance_sparse, &dmc_cartpole_swingup,
    &dmc_cartpole_swingup_sparse, &dmc_pendulum_swingup, &dmc_acrobot_swingup,
    &dmc_acrobot_swingup_sparse, &dmc_point_mass_easy, &dmc_reacher_easy, &dmc_reacher_hard,
    &dmc_cheetah_run, &dmc_walker_stand, &dmc_walker_walk, &dmc_walker_run, &dmc_hopper_stand,
    &dmc_hopper_hop, &dmc_finger_spin, &dmc_finger_turn_easy, &dmc_finger_turn_hard,
    &dmc_ball_in_cup_catch, &dmc_cartpole_two_poles, &dmc_cartpole_three_poles, &dmc_point_mass_hard,
    &dmc_humanoid_stand, &dmc_humanoid_walk, &dmc_humanoid_run, &dmc_swimmer_swimmer6,
    &dmc_swimmer_swimmer15, &dmc_fish_upright, &dmc_fish_swim, &dmc_quadruped_walk,
    &dmc_quadruped_run, &dmc_quadruped_fetch, &dmc_quadruped_escape, &dmc_manipulator_bring_ball, &dmc_stacker_stack_2,
    &dmc_stacker_stack_4, &dmc_lqr_lqr_2_1, &dmc_lqr_lqr_6_2,
};

#define N_TASKS (sizeof dmc_tasks / sizeof dmc_tasks[0])

size_t dmc_task_count(void)
{
    return N_TASKS;
}

const dmc_task *dmc_task_at(size_t i)
{
    return i < N_TASKS ? dmc_tasks[i] : NULL;
}

const dmc_task *dmc_task_lookup(const char *id, crl_error *err)
{
    const char *ids[sizeof dmc_tasks / sizeof dmc_tasks[0] + 1];
    for (size_t i = 0; i < N_TASKS; i++) {
        if (id && strcmp(dmc_tasks[i]->id, id) == 0)
            return dmc_tasks[i];
        ids[i] = dmc_tasks[i]->id;
    }
    ids[N_TASKS] = NULL;
    /* A close id, else the tasks of a domain named alone, else every id. */
    const char *close = id ? crl_did_you_mean(id, ids) : NULL;
    char domain_tasks[512] = "", all[1024] = "";
    size_t dlen = id ? strcspn(id, "/") : 0;
    for (size_t i = 0; i < N_TASKS; i++) {
        const dmc_task *t = dmc_tasks[i];
        if (id && strlen(t->domain) == dlen && strncmp(t->domain, id, dlen) == 0)
            snprintf(domain_tasks + strlen(domain_tasks), sizeof domain_tasks - strlen(domain_tasks),
                     "%s'%s'", *domain_tasks ? ", " : "", t->id);
        snprintf(all + strlen(all), sizeof all - strlen(all), "%s%s", *all ? ", " : "", t->id);
    }
    if (close)
        crl_error_set(err, CRL_E_NOT_FOUND, "dm_control: no task '%s'; did you mean '%s'? (ids are DOMAIN/TASK)",
                      id, close);
    else if (*domain_tasks)
        crl_error_set(err, CRL_E_NOT_FOUND, "dm_control: no task '%s'; ids are DOMAIN/TASK: did you mean %s?",
                      id, domain_tasks);
    else
        crl_error_set(err, CRL_E_NOT_FOUND, "dm_control: no task '%s'; ids are DOMAIN/TASK, one of: %s",
                      id ? id : "(null)", all);
    return NULL;
}
