/* The classic env table: lookup by id with close-match suggestions, parameter and step checks. */
#include "classic.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static const classic_def *const classic_defs[] = {
    &classic_cartpole,
    &classic_pendulum,
    &classic_mountain_car,
    &classic_mountain_car_continuous,
    &classic_acrobot,
};

#define N_DEFS (sizeof classic_defs / sizeof classic_defs[0])

size_t classic_def_count(void)
{
    return N_DEFS;
}

const classic_def *classic_def_at(size_t i)
{
    return i < N_DEFS ? classic_defs[i] : NULL;
}

const classic_def *classic_find(const char *id)
{
    if (!id)
        return NULL;
    for (size_t i = 0; i < N_DEFS; i++)
        if (strcmp(classic_defs[i]->id, id) == 0)
            return classic_defs[i];
    return NULL;
}

/* Case-insensitive Levenshtein distance; ids are short, so a bounded row suffices. */
#define MAX_ID 64

static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > MAX_ID || lb > MAX_ID)
        return (size_t)-1;
    size_t row[MAX_ID + 1];
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t cost = tolower((unsigned char)a[i - 1]) == tolower((unsigned char)b[j - 1])
                              ? 0
                              : 1;
            size_t best = diag + cost;
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

/* True when `word` (at least 3 characters) starts `id`, ignoring case:
 * "cartpole" and "Mountain" name their envs without a version. */
static bool is_prefix_ci(const char *word, const char *id)
{
    size_t n = strlen(word);
    if (n < 3 || n > strlen(id))
        return false;
    for (size_t i = 0; i < n; i++)
        if (tolower((unsigned char)word[i]) != tolower((unsigned char)id[i]))
            return false;
    return true;
}

size_t classic_suggest(const char *id, const char **out, size_t max)
{
    if (!id || !out || max == 0)
        return 0;
    size_t score[N_DEFS];
    /* Ids are 10 characters or more, so a third of the typed length is a
     * fair budget; shorter words get through as prefixes. */
    size_t limit = strlen(id) / 3;
    for (size_t i = 0; i < N_DEFS; i++) {
        size_t dist = edit_distance(id, classic_defs[i]->id);
        /* A prefix match ranks with the near misses, after exact-looking ones. */
        if (is_prefix_ci(id, classic_defs[i]->id) && dist > limit)
            dist = limit;
        score[i] = dist <= limit ? dist : (size_t)-1;
    }
    size_t count = 0;
    while (count < max) {
        size_t best = N_DEFS;
        for (size_t i = 0; i < N_DEFS; i++)
            if (score[i] != (size_t)-1 && (best == N_DEFS || score[i] < score[best]))
                best = i;
        if (best == N_DEFS)
            break;
        out[count++] = classic_defs[best]->id;
        score[best] = (size_t)-1;
    }
    return count;
}

const classic_def *classic_lookup(const char *id, crl_error *err)
{
    const classic_def *d = classic_find(id);
    if (d)
        return d;
    char known[256] = "";
    for (size_t i = 0; i < N_DEFS; i++) {
        if (i)
            strncat(known, ", ", sizeof known - strlen(known) - 1);
        strncat(known, classic_defs[i]->id, sizeof known - strlen(known) - 1);
    }
    const char *near[N_DEFS];
    size_t nn = classic_suggest(id, near, N_DEFS);
    char hint[192] = "";
    if (nn > 0) {
        strncat(hint, "; did you mean ", sizeof hint - strlen(hint) - 1);
        for (size_t i = 0; i < nn; i++) {
            if (i)
                strncat(hint, " or ", sizeof hint - strlen(hint) - 1);
            strncat(hint, near[i], sizeof hint - strlen(hint) - 1);
        }
        strncat(hint, "?", sizeof hint - strlen(hint) - 1);
    }
    crl_error_set(err, CRL_E_NOT_FOUND, "unknown classic env id '%s'%s (known ids: %s)",
                  id ? id : "(null)", hint, known);
    return NULL;
}

int classic_param_index(const classic_def *d, const char *name)
{
    if (!d || !name)
        return -1;
    for (int i = 0; i < d->n_params; i++)
        if (strcmp(d->params[i].name, name) == 0)
            return i;
    return -1;
}

void classic_params_default(const classic_def *d, double *params)
{
    for (int i = 0; i < d->n_params; i++)
        params[i] = d->params[i].default_value;
}

int classic_params_check(const classic_def *d, const double *params, crl_error *err)
{
    for (int i = 0; i < d->n_params; i++) {
        const classic_param *pp = &d->params[i];
        double v = params[i];
        if (!isfinite(v))
            return crl_error_set(err, CRL_E_RANGE, "%s: parameter %s is %g; give a finite value",
                                 d->id, pp->name, v);
        if (v < pp->min || v > pp->max)
            return crl_error_set(err, CRL_E_RANGE,
                                 "%s: parameter %s = %g is outside [%g, %g]; pick a value in "
                                 "that range",
                                 d->id, pp->name, v, pp->min, pp->max);
        if ((pp->flags & CLASSIC_PARAM_POSITIVE) && !(v > 0))
            return crl_error_set(err, CRL_E_RANGE,
                                 "%s: parameter %s = %g must be greater than 0", d->id,
                                 pp->name, v);
        if ((pp->type == CRL_OPT_BOOL || pp->type == CRL_OPT_ENUM) && v != floor(v))
            return crl_error_set(err, CRL_E_INVALID,
                                 "%s: parameter %s = %g is not a choice index; use one of %s",
                                 d->id, pp->name, v, pp->choices ? pp->choices : "0|1");
    }
    return d->check_params ? d->check_params(d, params, err) : CRL_OK;
}

int classic_check_step(const classic_def *d, const void *action, int64_t n,
                       const double *params, const crl_rng *rng, crl_error *err)
{
    if (n < 0)
        return crl_error_set(err, CRL_E_INVALID, "%s: negative batch size %lld", d->id,
                             (long long)n);
    if (n > 0 && !action)
        return crl_error_set(err, CRL_E_INVALID, "%s: no action buffer for %lld envs", d->id,
                             (long long)n);
    if (d->action_kind == CLASSIC_ACTION_DISCRETE) {
        const int64_t *a = action;
        for (int64_t i = 0; i < n; i++)
            if (a[i] < 0 || a[i] >= d->action_n)
                return crl_error_set(err, CRL_E_RANGE,
                                     "%s: action %lld of env %lld is outside Discrete(%d); "
                                     "give an integer in 0..%d",
                                     d->id, (long long)a[i], (long long)i, d->action_n,
                                     d->action_n - 1);
    }
    if (n > 0 && !rng && d->step_needs_rng && d->step_needs_rng(d, params))
        return crl_error_set(err, CRL_E_INVALID,
                             "%s: this step draws random numbers under these parameters (e.g. "
                             "torque_noise_max > 0) but no "
                             "per-env streams were given",
                             d->id);
    return CRL_OK;
}

int classic_check_reset_range(const classic_def *d, double low, double high, crl_error *err)
{
    if (low > high)
        return crl_error_set(err, CRL_E_INVALID,
                             "%s: reset_low (%g) is above reset_high (%g); make reset_low <= reset_high",
                             d->id, low, high);
    return CRL_OK;
}
