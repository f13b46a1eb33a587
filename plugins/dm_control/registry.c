/* The dm_control task table: lookup by "domain/task" with close-match suggestions. */
#include "dmc.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

static const dmc_task *const dmc_tasks[] = {
    &dmc_cartpole_balance, &dmc_cartpole_balance_sparse, &dmc_cartpole_swingup,
    &dmc_cartpole_swingup_sparse, &dmc_pendulum_swingup, &dmc_acrobot_swingup,
    &dmc_acrobot_swingup_sparse, &dmc_point_mass_easy, &dmc_reacher_easy, &dmc_reacher_hard,
    &dmc_cheetah_run, &dmc_walker_stand, &dmc_walker_walk, &dmc_walker_run, &dmc_hopper_stand,
    &dmc_hopper_hop, &dmc_finger_spin, &dmc_finger_turn_easy, &dmc_finger_turn_hard,
    &dmc_ball_in_cup_catch,
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

/* Case-insensitive Levenshtein distance over short ids. */
#define MAX_ID 64
static size_t distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la >= MAX_ID || lb >= MAX_ID)
        return (size_t)-1;
    size_t row[MAX_ID + 1];
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t cost = tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
            size_t best = diag + cost;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            if (up + 1 < best)
                best = up + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

const dmc_task *dmc_task_lookup(const char *id, crl_error *err)
{
    for (size_t i = 0; id && i < N_TASKS; i++)
        if (strcmp(dmc_tasks[i]->id, id) == 0)
            return dmc_tasks[i];
    /* Suggest the tasks of a named domain, else the ids within a few edits. */
    char hint[512] = "", all[1024] = "";
    size_t dlen = id ? strcspn(id, "/") : 0;
    for (size_t i = 0; i < N_TASKS; i++) {
        const dmc_task *t = dmc_tasks[i];
        bool same_domain = id && strlen(t->domain) == dlen && strncmp(t->domain, id, dlen) == 0;
        bool close = id && distance(id, t->id) <= 3;
        if (same_domain || close)
            snprintf(hint + strlen(hint), sizeof hint - strlen(hint), "%s'%s'", *hint ? ", " : "",
                     t->id);
        snprintf(all + strlen(all), sizeof all - strlen(all), "%s%s", *all ? ", " : "", t->id);
    }
    crl_error_set(err, CRL_E_NOT_FOUND,
                  "dm_control: no task '%s'; ids are DOMAIN/TASK%s%s%s; the tasks: %s",
                  id ? id : "(null)", *hint ? " (did you mean " : "", hint, *hint ? "?)" : "", all);
    return NULL;
}
