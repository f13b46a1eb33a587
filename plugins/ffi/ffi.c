/* The ffi plugin: env/ffi, any C simulator library as an env, described in INI and called through libffi.
 *
 * The description language is in plugins/ffi/README.md.  Everything is parsed, looked up (dlsym) and
 * prepared (ffi_prep_cif) in make, so a bad description fails there with the key's FILE:LINE and
 * `crl config check` exits 2; reset and step only fill argument slots and call. */
#include "config.h"

#include "ffi-sig.h"

#include <crl/crl.h>
#include <crl/env_backend.h>

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const crl_option ffi_options[] = {
    { "library", CRL_OPT_STRING, 0, NULL, 0, 0, NULL,
      "required: the simulator library, a path (checked like a plugin path) or a soname" },
    { "make", CRL_OPT_STRING, 0, NULL, 0, 0, NULL,
      "C signature of the function that creates one simulator, e.g. handle sm_make()" },
    { "seeding", CRL_OPT_STRING, 0, NULL, 0, 0, NULL,
      "C signature of the function called with each env's seed on a seeded reset, e.g. void sm_seed(handle, seed)" },
    { "reset", CRL_OPT_STRING, 0, NULL, 0, 0, NULL,
      "required: C signature of the reset function, e.g. void sm_reset(handle, double *observation)" },
    { "step", CRL_OPT_STRING, 0, NULL, 0, 0, NULL,
      "required: C signature of the step function, e.g. int32 sm_step(handle, const double *action, "
      "double *observation, double *reward, uint8 *terminated) ok=0" },
    { "free", CRL_OPT_STRING, 0, NULL, 0, 0, NULL, "C signature of the function that frees a handle" },
    { "render", CRL_OPT_STRING, 0, NULL, 0, 0, NULL,
      "C signature of the function that draws env i into an rgb uint8 [render_height, render_width, 3] frame, "
      "e.g. void sm_render(handle, rgb, int32=64, int32=128)" },
    { "render_height", CRL_OPT_INT, CRL_OPT_RANGE, "0", 0, 4096, NULL, "rows of the frame render draws" },
    { "render_width", CRL_OPT_INT, CRL_OPT_RANGE, "0", 0, 4096, NULL, "columns of the frame render draws" },
    { "observation_shape", CRL_OPT_LIST, 0, NULL, 0, 0, NULL, "required: per-env observation shape, e.g. 2" },
    { "observation_low", CRL_OPT_DOUBLE, 0, NULL, 0, 0, NULL, "observation lower bound (unset: unbounded)" },
    { "observation_high", CRL_OPT_DOUBLE, 0, NULL, 0, 0, NULL, "observation upper bound (unset: unbounded)" },
    { "action_shape", CRL_OPT_LIST, 0, "1", 0, 0, NULL, "per-env action shape (floating actions)" },
    { "action_low", CRL_OPT_DOUBLE, 0, "-1", 0, 0, NULL, "floating action lower bound" },
    { "action_high", CRL_OPT_DOUBLE, 0, "1", 0, 0, NULL, "floating action upper bound" },
    { "action_n", CRL_OPT_INT, CRL_OPT_RANGE, "2", 1, 1e9, NULL,
      "number of categories of an integer action (one category per env)" },
    { "categorical_action_encoding", CRL_OPT_BOOL, 0, "false", 0, 0, NULL,
      "an integer action as OneHot int64 [num, action_n] (false, TorchRL's wrappers' default; the library still "
      "gets the index) or Categorical int64 [num] (true); floating actions ignore it" },
    { "calls", CRL_OPT_ENUM, 0, "per_env", 0, 0, "per_env|batch",
      "per_env = each function is called once per env; batch = once for all envs, with pointers to whole buffers "
      "(count, mask and seeds arguments)" },
    { "check_nan", CRL_OPT_BOOL, 0, "true", 0, 0, NULL,
      "report a NaN written into a floating output as an error naming the function and env" },
    CRL_OPTIONS_END
};

/* The spec leaves a pointer argument can be bound to. */
typedef enum leaf { L_OBSERVATION, L_ACTION, L_REWARD, L_TERMINATED, L_TRUNCATED, L_COUNT } leaf;
static const char *const leaf_names[] = { "observation", "action", "reward", "terminated", "truncated", NULL };

enum { F_MAKE, F_SEED, F_RESET, F_STEP, F_FREE, F_RENDER, F_COUNT };
static const char *const fn_keys[F_COUNT] = { "make", "seeding", "reset", "step", "free", "render" };

typedef struct ffi_env {
    char id[128];
    int64_t num;
    void *lib;
    fn fns[F_COUNT];
    bool have[F_COUNT];
    void **handles;            /* one per env; batch: handles[0] only */
    bool batch;                /* calls = batch: one call for all envs, pointers to whole buffers */
    int64_t ncalls, span;      /* calls per operation and envs per call: (num, 1) or (1, num) */
    uint8_t *all;              /* num ones: the mask of a reset of every env */
    const uint8_t *mask;       /* the current reset's mask (batch) */
    const uint64_t *seeds;     /* the current reset's seeds */
    uint8_t *rgb;              /* the frame the current render call fills */
    int64_t render_h, render_w;
    bool check_nan;
    /* crl-side leaves */
    crl_dtype dt[L_COUNT];
    int64_t per_env[L_COUNT];  /* elements per env */
    void *buf[L_COUNT];
    /* categorical_action_encoding = false with an integer action: the host's one-hot rows [num, action_n],
     * decoded into index (what buf[L_ACTION] points at) before every step. */
    bool onehot;
    int64_t action_n;
    const int64_t *onehot_buf;
    int64_t *index;
    bool bound;
} ffi_env;

/* The crl dtype a leaf is stored in: floats as float32 (what losses and networks take), integer actions
 * as int64 (Categorical), flags as bool. */
static crl_dtype leaf_dtype(leaf l, ctype t)
{
    if (l == L_TERMINATED || l == L_TRUNCATED)
        return CRL_BOOL;
    if (l == L_ACTION && !ffi_ctypes[t].is_float)
        return CRL_I64;
    return CRL_F32;
}

/* What each function's signature may contain. */
static ffi_sig_rules env_rules(int j, const int64_t (*shape)[FFI_MAX_DIMS + 1])
{
    ffi_sig_rules r = { .leaves = leaf_names, .leaf_list = "observation, action, reward, terminated or truncated",
                        .shape = shape, .returns_handle = j == F_MAKE };
    if (j != F_SEED)
        r.word_only_in[A_SEED] = r.word_only_in[A_SEEDS] = "the seeding function";
    if (j != F_RESET && j != F_SEED)
        r.word_only_in[A_MASK] = "the reset and seeding functions";
    if (j != F_RENDER)
        r.word_only_in[A_RGB] = "the render function";
    return r;
}

/* ---- the backend ------------------------------------------------------------ */

static const char *const *ffi_list(void)
{
    return NULL; /* any id: the description names the env */
}

/* Call f for env i: point every argument at env i's data, stage converted inputs, call, convert outputs,
 * then check the return code and NaNs. */
static int call_one(ffi_env *e, fn *f, int64_t i, uint64_t seed, void **made, crl_error *err)
{
    /* render is per env also with calls = batch: env i of the instance's one handle */
    const bool per_env = f == &e->fns[F_RENDER];
    const bool whole = e->batch && !per_env;
    const int64_t span = per_env ? 1 : e->span; /* envs i .. i + span - 1 */
    for (int k = 0; k < f->nargs; k++) {
        arg *a = &f->args[k];
        switch (a->kind) {
        case A_HANDLE: a->value.p = e->handles[e->batch ? 0 : i]; break;
        case A_RGB: a->value.p = e->rgb; break;
        case A_SEED: a->value.u64 = seed; break;
        case A_INDEX: a->value.i64 = i; break;
        case A_COUNT: a->value.i64 = span; break;
        case A_SEEDS: a->value.p = (void *)(uintptr_t)(e->seeds + i); break;
        case A_MASK: a->value.p = (void *)(uintptr_t)(e->mask + i); break;
        case A_CONST: case A_KINDS: break;
        case A_BUFFER: {
            int64_t cnt = e->per_env[a->leaf] * span;
            char *base = (char *)e->buf[a->leaf] + (size_t)(i * e->per_env[a->leaf]) * crl_dtype_size(e->dt[a->leaf]);
            if (a->staging) {
                ffi_to_c(e->dt[a->leaf], base, a->type, a->staging, cnt);
                a->value.p = a->staging;
            } else {
                a->value.p = base;
            }
            break;
        }
        }
    }
    ffi_retval rv;
    memset(&rv, 0, sizeof rv);
    ffi_call(&f->cif, f->addr, &rv, f->avalues);
    if (f->ret == R_HANDLE) {
        if (!rv.p)
            return crl_error_set(err, CRL_E_RUNTIME, "ffi: %s: %s returned a NULL handle for %s %lld", e->id, f->symbol,
                                 whole ? "the batch of envs 0 to" : "env", (long long)(whole ? e->num - 1 : i));
        *made = rv.p;
    }
    if (f->has_ok) {
        double got = ffi_sig_ret_double(f, &rv);
        if (got != f->ok)
            return crl_error_set(err, CRL_E_RUNTIME, "ffi: %s: %s returned %g for %s %lld (declared ok=%g): the "
                                 "library reported an error", e->id, f->symbol, got, whole ? "the batch of envs 0 to"
                                 : "env", (long long)(whole ? e->num - 1 : i), f->ok);
    }
    for (int k = 0; k < f->nargs; k++) {
        arg *a = &f->args[k];
        if (a->kind != A_BUFFER || a->is_const)
            continue;
        int64_t cnt = e->per_env[a->leaf] * span;
        char *base = (char *)e->buf[a->leaf] + (size_t)(i * e->per_env[a->leaf]) * crl_dtype_size(e->dt[a->leaf]);
        int64_t m = ffi_from_c(a->type, a->staging ? a->staging : base, e->dt[a->leaf], base, cnt, e->check_nan);
        if (m >= 0)
            return crl_error_set(err, CRL_E_RUNTIME, "ffi: %s: %s wrote NaN into %s[%lld] of env %lld", e->id,
                                 f->symbol, leaf_names[a->leaf], (long long)(m % e->per_env[a->leaf]),
                                 (long long)(i + m / e->per_env[a->leaf]));
    }
    return CRL_OK;
}

static void ffi_close(void *env)
{
    ffi_env *e = env;
    if (!e)
        return;
    /* free's return value, if it declares one, has no one to tell: call_one's error is dropped. */
    for (int64_t i = 0; e->handles && i < e->ncalls; i++)
        if (e->have[F_FREE] && e->handles[i])
            call_one(e, &e->fns[F_FREE], i, 0, NULL, NULL);
    for (int j = 0; j < F_COUNT; j++)
        for (int k = 0; k < e->fns[j].nargs; k++)
            free(e->fns[j].args[k].staging);
    free(e->handles);
    free(e->all);
    free(e->index);
    if (e->lib)
        dlclose(e->lib);
    free(e);
}

static int shape_of(const crl_opts *opts, const char *key, int64_t out[FFI_MAX_DIMS + 1], int64_t *count,
                    crl_error *err)
{
    size_t n;
    const char *const *items;
    int rc = crl_opts_list(opts, key, &n, &items, err);
    if (rc)
        return rc;
    if (n != 1)
        return ffi_sig_error(opts, key, err, "a per-env shape of one positive size is required (a vector leaf)%s%s", "",
                         "");
    out[0] = (int64_t)n;
    *count = 1;
    for (size_t k = 0; k < n; k++) {
        if (!crl_parse_int(items[k], &out[k + 1]) || out[k + 1] <= 0 || out[k + 1] > (1 << 24))
            return ffi_sig_error(opts, key, err, "'%s' is not a positive size%s", items[k], "");
        *count *= out[k + 1];
    }
    return CRL_OK;
}

static int ffi_make(const char *id, int64_t num, const crl_opts *opts, crl_env_specs *specs, void **env,
                    crl_error *err)
{
    *env = NULL;
    if (num <= 0)
        return crl_error_set(err, CRL_E_INVALID, "ffi: %s: num must be positive", id);
    ffi_env *e = calloc(1, sizeof *e);
    if (!e)
        return crl_error_set(err, CRL_E_NOMEM, "ffi: out of memory");
    snprintf(e->id, sizeof e->id, "%s", id);
    e->num = num;
    int rc = crl_opts_bool(opts, "check_nan", &e->check_nan, err);
    const char *calls = "per_env";
    if (!rc)
        rc = crl_opts_string(opts, "calls", &calls, err);
    e->batch = !rc && !strcmp(calls, "batch");
    e->ncalls = e->batch ? 1 : num;
    e->span = e->batch ? num : 1;
    e->all = rc ? NULL : malloc((size_t)num);
    if (!rc && !e->all)
        rc = crl_error_set(err, CRL_E_NOMEM, "ffi: out of memory");
    if (!rc)
        memset(e->all, 1, (size_t)num);
    int64_t shape[L_COUNT][FFI_MAX_DIMS + 1] = { { 0 } };
    int64_t count = 0;
    if (!rc)
        rc = shape_of(opts, "observation_shape", shape[L_OBSERVATION], &e->per_env[L_OBSERVATION], err);
    if (!rc && !crl_opts_is_set(opts, "observation_shape"))
        rc = ffi_sig_error(opts, "observation_shape", err, "required: the per-env observation shape%s%s", "", "");
    if (!rc)
        rc = shape_of(opts, "action_shape", shape[L_ACTION], &count, err);
    e->per_env[L_ACTION] = count;
    for (int l = L_REWARD; l < L_COUNT; l++) {
        shape[l][0] = 1;
        shape[l][1] = 1;
        e->per_env[l] = 1;
    }
    const char *lib = NULL;
    if (!rc)
        rc = crl_opts_string(opts, "library", &lib, err);
    if (!rc && !crl_opts_is_set(opts, "library"))
        rc = ffi_sig_error(opts, "library", err, "required: the simulator library (a path or a soname)%s%s", "", "");
    for (int j = 0; j < F_COUNT && !rc; j++) {
        if (!crl_opts_is_set(opts, fn_keys[j])) {
            if (j == F_RESET || j == F_STEP)
                rc = ffi_sig_error(opts, fn_keys[j], err, "required: the C signature of the %s function%s", fn_keys[j], "");
            continue;
        }
        const char *sig;
        rc = crl_opts_string(opts, fn_keys[j], &sig, err);
        ffi_sig_rules rules = env_rules(j, (const int64_t (*)[FFI_MAX_DIMS + 1])shape);
        if (!rc)
            rc = ffi_sig_parse(opts, fn_keys[j], sig, &rules, &e->fns[j], err);
        e->have[j] = !rc;
    }
    /* Every leaf has one C type, the same in every function; reset and step write what they must. */
    ctype seen[L_COUNT];
    bool has[L_COUNT] = { false }, in_reset[L_COUNT] = { false }, in_step[L_COUNT] = { false };
    for (int j = 0; j < F_COUNT && !rc; j++) {
        for (int k = 0; k < e->fns[j].nargs && !rc; k++) {
            arg *a = &e->fns[j].args[k];
            if (a->kind == A_HANDLE && !e->have[F_MAKE])
                rc = ffi_sig_error(opts, fn_keys[j], err, "an argument is the handle, but no make function creates one%s%s",
                               "", "");
            if (a->kind != A_BUFFER || rc)
                continue;
            if ((a->leaf == L_TERMINATED || a->leaf == L_TRUNCATED) && ffi_ctypes[a->type].is_float)
                rc = ffi_sig_error(opts, fn_keys[j], err, "%s: a flag is an integer or bool buffer, not %s",
                                   leaf_names[a->leaf], ffi_ctypes[a->type].name);
            else if (a->leaf == L_ACTION && !a->is_const)
                rc = ffi_sig_error(opts, fn_keys[j], err, "the action is read only: declare it const (const %s "
                                   "*action)", ffi_ctypes[a->type].name);
            else if (j != F_RESET && j != F_STEP)
                rc = ffi_sig_error(opts, fn_keys[j], err, "the %s function takes no spec buffer (%s)", fn_keys[j],
                               leaf_names[a->leaf]);
            else if (has[a->leaf] && seen[a->leaf] != a->type)
                rc = ffi_sig_error(opts, fn_keys[j], err, "%s is %s here but another function declares it differently",
                               leaf_names[a->leaf], ffi_ctypes[a->type].name);
            else if (j == F_RESET && a->leaf != L_OBSERVATION)
                rc = ffi_sig_error(opts, "reset", err, "reset writes the observation only, not %s%s", leaf_names[a->leaf], "");
            has[a->leaf] = true;
            seen[a->leaf] = a->type;
            (j == F_RESET ? in_reset : in_step)[a->leaf] = true;
        }
    }
    if (e->batch && !rc) {
        for (int j = 0; j < F_COUNT && !rc; j++) {
            bool has_mask = false, has_seeds = false;
            for (int k = 0; k < e->fns[j].nargs; k++) {
                argkind kind = e->fns[j].args[k].kind;
                has_mask |= kind == A_MASK;
                has_seeds |= kind == A_SEEDS;
                if (kind == A_SEED || (kind == A_INDEX && j != F_RENDER))
                    rc = ffi_sig_error(opts, fn_keys[j], err, "with calls = batch one call serves every env: use %s, not %s",
                                   kind == A_SEED ? "seeds (a const uint64 array)" : "count", kind == A_SEED ? "seed"
                                   : "index");
            }
            if (!rc && e->have[j] && (j == F_RESET || j == F_SEED) && !has_mask)
                rc = ffi_sig_error(opts, fn_keys[j], err, "with calls = batch, %s takes the mask (the envs to %s)",
                               fn_keys[j], j == F_RESET ? "reset" : "seed");
            if (!rc && e->have[j] && j == F_SEED && !has_seeds)
                rc = ffi_sig_error(opts, "seeding", err, "with calls = batch, seeding takes seeds (one per env)%s", "");
        }
    }
    if (!rc)
        rc = crl_opts_int(opts, "render_height", &e->render_h, err);
    if (!rc)
        rc = crl_opts_int(opts, "render_width", &e->render_w, err);
    if (!rc && e->have[F_RENDER] && (!e->render_h || !e->render_w))
        rc = ffi_sig_error(opts, "render", err, "render needs the frame's size: set render_height and render_width%s%s",
                       "", "");
    if (!rc && !e->have[F_RENDER] && (e->render_h || e->render_w))
        rc = ffi_sig_error(opts, e->render_h ? "render_height" : "render_width", err, "a frame size without a render "
                       "function: set render (e.g. void sim_render(handle, rgb)) or remove the size%s%s", "", "");
    if (!rc && e->have[F_RENDER]) {
        bool has_rgb = false;
        for (int k = 0; k < e->fns[F_RENDER].nargs; k++)
            has_rgb |= e->fns[F_RENDER].args[k].kind == A_RGB;
        if (!has_rgb)
            rc = ffi_sig_error(opts, "render", err, "render must take rgb (the uint8 [render_height, render_width, 3] "
                           "frame it fills)%s%s", "", "");
    }
    if (!rc && !in_reset[L_OBSERVATION])
        rc = ffi_sig_error(opts, "reset", err, "reset must write the observation: add an argument such as double "
                       "*observation%s%s", "", "");
    /* terminated is optional: a plant without a notion of failure never terminates. */
    for (int l = 0; l < L_TERMINATED && !rc; l++)
        if (!in_step[l])
            rc = ffi_sig_error(opts, "step", err, "step must take the %s buffer (e.g. %s)", leaf_names[l],
                           l == L_ACTION ? "const double *action" : l == L_OBSERVATION ? "double *observation"
                           : "double *reward");
    if (!rc && has[L_ACTION] && !ffi_ctypes[seen[L_ACTION]].is_float && (shape[L_ACTION][0] != 1 || shape[L_ACTION][1] != 1))
        rc = ffi_sig_error(opts, "action_shape", err, "an integer action is one category per env: action_shape must be 1%s%s",
                       "", "");
    for (int l = 0; l < L_COUNT && !rc; l++)
        if (has[l])
            e->dt[l] = leaf_dtype((leaf)l, seen[l]);
    /* Staging for C types the crl buffer does not hold as is. */
    for (int j = 0; j < F_COUNT && !rc; j++)
        for (int k = 0; k < e->fns[j].nargs && !rc; k++) {
            arg *a = &e->fns[j].args[k];
            if (a->kind == A_BUFFER && !ffi_same_repr(e->dt[a->leaf], a->type)) {
                a->staging = calloc((size_t)(e->per_env[a->leaf] * e->span), ffi_ctypes[a->type].size);
                if (!a->staging)
                    rc = crl_error_set(err, CRL_E_NOMEM, "ffi: out of memory");
            }
        }
    if (!rc)
        rc = ffi_sig_open(opts, "library", lib, &e->lib, err);
    for (int j = 0; j < F_COUNT && !rc; j++)
        if (e->have[j])
            rc = ffi_sig_bind(opts, e->lib, lib, &e->fns[j], err);
    /* Specs. */
    crl_spec *obs = NULL, *act = NULL, *rew = NULL, *done = NULL;
    if (!rc) {
        int64_t full[FFI_MAX_DIMS + 1];
        full[0] = num;
        for (int k = 0; k < shape[L_OBSERVATION][0]; k++)
            full[k + 1] = shape[L_OBSERVATION][k + 1];
        double lo = -INFINITY, hi = INFINITY;
        if (crl_opts_is_set(opts, "observation_low"))
            crl_opts_double(opts, "observation_low", &lo, NULL);
        if (crl_opts_is_set(opts, "observation_high"))
            crl_opts_double(opts, "observation_high", &hi, NULL);
        int nd = 1 + (int)shape[L_OBSERVATION][0];
        obs = crl_spec_composite_of(num, "observation",
                                    isinf(lo) && isinf(hi) ? crl_spec_unbounded(CRL_F32, nd, full, err)
                                                           : crl_spec_bounded(CRL_F32, nd, full, lo, hi, err), err);
        if (e->dt[L_ACTION] == CRL_I64) {
            int64_t n;
            bool categorical = false;
            crl_opts_int(opts, "action_n", &n, NULL);
            crl_opts_bool(opts, "categorical_action_encoding", &categorical, NULL);
            e->action_n = n;
            e->onehot = !categorical;
            int64_t oh[2] = { num, n };
            if (e->onehot && !(e->index = calloc((size_t)num, sizeof *e->index)))
                rc = crl_error_set(err, CRL_E_NOMEM, "ffi: out of memory");
            else
                act = crl_spec_composite_of(num, "action", e->onehot ? crl_spec_onehot(n, CRL_I64, 2, oh, err)
                                                                     : crl_spec_categorical(n, CRL_I64, 1, &num, err),
                                            err);
        } else {
            full[0] = num;
            for (int k = 0; k < shape[L_ACTION][0]; k++)
                full[k + 1] = shape[L_ACTION][k + 1];
            double alo = -1, ahi = 1;
            crl_opts_double(opts, "action_low", &alo, NULL);
            crl_opts_double(opts, "action_high", &ahi, NULL);
            if (!(alo < ahi)) {
                rc = ffi_sig_error(opts, "action_high", err, "action_low must be below action_high%s%s", "", "");
            } else {
                act = crl_spec_composite_of(num, "action",
                                            crl_spec_bounded(CRL_F32, 1 + (int)shape[L_ACTION][0], full, alo, ahi, err),
                                            err);
            }
        }
        int64_t rs[2] = { num, 1 };
        rew = crl_spec_composite_of(num, "reward", crl_spec_unbounded(CRL_F32, 2, rs, err), err);
        done = crl_env_backend_done_spec(num, err);
        if (!rc && (!obs || !act || !rew || !done))
            rc = CRL_E_INVALID;
    }
    if (!rc) {
        e->handles = calloc((size_t)num, sizeof *e->handles);
        if (!e->handles)
            rc = crl_error_set(err, CRL_E_NOMEM, "ffi: out of memory");
    }
    for (int64_t i = 0; i < e->ncalls && !rc && e->have[F_MAKE]; i++)
        rc = call_one(e, &e->fns[F_MAKE], i, 0, &e->handles[i], err);
    specs->observation = obs;
    specs->action = act;
    specs->reward = rew;
    specs->done = done;
    if (!rc && e->have[F_RENDER]) {
        specs->render_height = (int32_t)e->render_h;
        specs->render_width = (int32_t)e->render_w;
    }
    if (rc) {
        ffi_close(e);
        return rc;
    }
    *env = e;
    return CRL_OK;
}

static int ffi_bind(void *env, crl_td *buffers, crl_error *err)
{
    ffi_env *e = env;
    if (!e || !buffers)
        return crl_error_set(err, CRL_E_INVALID, "ffi: bind needs an env and a buffer TensorDict");
    char who[160];
    snprintf(who, sizeof who, "ffi: %s", e->id);
    int rc = CRL_OK;
    void *b[L_COUNT];
    b[L_OBSERVATION] = crl_env_backend_buffer(buffers, who, "observation", CRL_F32, e->num, e->per_env[L_OBSERVATION],
                                              &rc, err);
    b[L_ACTION] = crl_env_backend_buffer(buffers, who, "action", e->dt[L_ACTION], e->num,
                                         e->dt[L_ACTION] != CRL_I64 ? e->per_env[L_ACTION] : e->onehot ? e->action_n : 0,
                                         &rc, err);
    b[L_REWARD] = crl_env_backend_buffer(buffers, who, "reward", CRL_F32, e->num, 1, &rc, err);
    b[L_TERMINATED] = crl_env_backend_buffer(buffers, who, "terminated", CRL_BOOL, e->num, 1, &rc, err);
    b[L_TRUNCATED] = crl_env_backend_buffer(buffers, who, "truncated", CRL_BOOL, e->num, 1, &rc, err);
    if (rc)
        return rc;
    memcpy(e->buf, b, sizeof b);
    if (e->onehot) {
        e->onehot_buf = b[L_ACTION];
        e->buf[L_ACTION] = e->index;
    }
    e->dt[L_OBSERVATION] = CRL_F32;
    e->dt[L_REWARD] = CRL_F32;
    e->dt[L_TERMINATED] = e->dt[L_TRUNCATED] = CRL_BOOL;
    e->bound = true;
    return CRL_OK;
}

static int ffi_reset(void *env, const bool *mask, const uint64_t *seeds, bool from_state, crl_error *err)
{
    ffi_env *e = env;
    if (!e)
        return crl_error_set(err, CRL_E_INVALID, "ffi: reset needs an env");
    if (!e->bound)
        return crl_error_set(err, CRL_E_INVALID, "ffi: %s: reset before bind", e->id);
    if (from_state)
        return crl_error_set(err, CRL_E_UNSUPPORTED, "ffi: %s: the described library has no state spec to reset from",
                             e->id);
    /* bool is one byte holding 0 or 1 here, as the library's uint8/bool mask. */
    e->mask = mask ? (const uint8_t *)mask : e->all;
    e->seeds = seeds;
    for (int64_t c = 0; c < e->ncalls; c++) {
        if (!e->batch && mask && !mask[c])
            continue;
        int rc = CRL_OK;
        if (seeds && e->have[F_SEED])
            rc = call_one(e, &e->fns[F_SEED], c, seeds[c], NULL, err);
        if (!rc)
            rc = call_one(e, &e->fns[F_RESET], c, 0, NULL, err);
        if (rc)
            return rc;
    }
    for (int64_t i = 0; i < e->num; i++)
        if (!mask || mask[i]) {
            ((uint8_t *)e->buf[L_TERMINATED])[i] = 0;
            ((uint8_t *)e->buf[L_TRUNCATED])[i] = 0;
        }
    return CRL_OK;
}

static int ffi_step(void *env, crl_error *err)
{
    ffi_env *e = env;
    if (!e)
        return crl_error_set(err, CRL_E_INVALID, "ffi: step needs an env");
    if (!e->bound)
        return crl_error_set(err, CRL_E_INVALID, "ffi: %s: step before bind", e->id);
    for (int64_t i = 0; e->onehot && i < e->num; i++) {
        /* The host checks actions against the OneHot spec unless they are projected; a backend driven
         * directly gets the same rule here. */
        const int64_t *row = e->onehot_buf + i * e->action_n;
        int64_t hot = -1, ones = 0;
        bool binary = true;
        for (int64_t j = 0; j < e->action_n; j++) {
            binary &= row[j] == 0 || row[j] == 1;
            if (row[j] == 1) {
                hot = j;
                ones++;
            }
        }
        if (!binary || ones != 1)
            return crl_error_set(err, CRL_E_RANGE, "ffi: %s: the action of env %lld is not one-hot (%lld ones among "
                                 "%lld values%s); give exactly one 1, or set categorical_action_encoding = true for "
                                 "int64 indices", e->id, (long long)i, (long long)ones, (long long)e->action_n,
                                 binary ? "" : ", and values other than 0 and 1");
        e->index[i] = hot;
    }
    for (int64_t i = 0; i < e->ncalls; i++) {
        int rc = call_one(e, &e->fns[F_STEP], i, 0, NULL, err);
        if (rc)
            return rc;
    }
    return CRL_OK;
}

static int ffi_render(void *env, int64_t i, uint8_t *rgb, crl_error *err)
{
    ffi_env *e = env;
    if (!e || !rgb)
        return crl_error_set(err, CRL_E_INVALID, "ffi: render needs an env and a frame");
    if (!e->have[F_RENDER])
        return crl_error_set(err, CRL_E_UNSUPPORTED, "ffi: %s: no render function is described: set render",
                             e->id);
    if (i < 0 || i >= e->num)
        return crl_error_set(err, CRL_E_INVALID, "ffi: %s: render of env %lld, which is not in 0..%lld", e->id,
                             (long long)i, (long long)(e->num - 1));
    e->rgb = rgb;
    int rc = call_one(e, &e->fns[F_RENDER], i, 0, NULL, err);
    e->rgb = NULL;
    return rc;
}

static const crl_env_ops ffi_ops = {
    .struct_size = sizeof(crl_env_ops),
    .list = ffi_list,
    .make = ffi_make,
    .bind = ffi_bind,
    .reset = ffi_reset,
    .step = ffi_step,
    .render = ffi_render,
    .close = ffi_close,
};

static const crl_component ffi_component = {
    sizeof(crl_component),
    CRL_KIND_ENV,
    "ffi",
    "any C simulator library as an env: functions and buffers described in INI, called through libffi",
    ffi_options,
    &ffi_ops,
};

static int ffi_init(crl_host *host, const crl_opts *section, crl_error *err)
{
    (void)section;
    return crl_host_register(host, &ffi_component, err);
}

CRL_PLUGIN_DEFINE(ffi, "ffi", PACKAGE_VERSION, "MIT", "C simulator libraries as envs through libffi", NULL, ffi_init,
                  NULL)
