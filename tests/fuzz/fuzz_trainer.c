/* Fuzz target for the trainer checkpoint reader (crl_trainer_load): the input is a trainer.ckpt, loaded into
 * a DQN trainer and a PPO trainer (the trainer's counters, stream and actions, the optimizers' state, the
 * losses' networks, counters and streams).  A refusal must be CRL_E_CORRUPT (or CRL_E_NOMEM) naming the file;
 * whatever loads must save and load again.
 *
 * The env is a small backend defined here (env/fuzzenv), so the target needs no env plugin; the losses and
 * the replay storages come from losses.so and replay.so (CRL_FUZZ_LOSSES_PLUGIN, CRL_FUZZ_REPLAY_PLUGIN, or
 * the paths compiled in).  FUZZ_TRAINER_WRITE_SEEDS=DIR writes the two trainers' checkpoints there: the seed
 * corpus, tests/fuzz/corpus/trainer, holds them (dqn.ckpt, ppo.ckpt) and copies with a byte changed in one
 * section (the target fixes the CRCs, so the change reaches that section's checks) or cut short. */
#include "fuzz-crc.h"

#include <crl/checkpoint.h>
#include <crl/config.h>
#include <crl/env_backend.h>
#include <crl/host.h>
#include <crl/trainer.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


#ifndef FUZZ_LOSSES_PLUGIN
#define FUZZ_LOSSES_PLUGIN "losses.so"
#endif
#ifndef FUZZ_REPLAY_PLUGIN
#define FUZZ_REPLAY_PLUGIN "replay.so"
#endif

/* ---- env/fuzzenv: observation float32 [num, 4], action Categorical(2) int64, episodes of 6 steps ---- */

static const char *const fz_ids[] = { "Fuzz-v0", NULL };

typedef struct fz_env {
    int64_t num;
    int64_t *t;
    float *obs, *reward;
    const int64_t *action;
    uint8_t *terminated, *truncated;
} fz_env;

static const char *const *fz_list(void)
{
    return fz_ids;
}

static void fz_close(void *env)
{
    fz_env *e = env;
    if (e)
        free(e->t);
    free(e);
}

static int fz_make(const char *id, int64_t num, const crl_opts *opts, crl_env_specs *specs, void **env,
                   crl_error *err)
{
    (void)opts;
    if (strcmp(id, "Fuzz-v0") != 0)
        return crl_error_set(err, CRL_E_NOT_FOUND, "fuzzenv: no env '%s' (Fuzz-v0)", id);
    int64_t obs[2] = { num, 4 }, col[2] = { num, 1 };
    specs->observation = crl_spec_composite_of(num, "observation", crl_spec_unbounded(CRL_F32, 2, obs, err), err);
    specs->action = crl_spec_composite_of(num, "action", crl_spec_categorical(2, CRL_I64, 1, &num, err), err);
    specs->reward = crl_spec_composite_of(num, "reward", crl_spec_unbounded(CRL_F32, 2, col, err), err);
    specs->done = crl_env_backend_done_spec(num, err);
    if (!specs->observation || !specs->action || !specs->reward || !specs->done)
        return err->code;
    fz_env *e = calloc(1, sizeof *e);
    if (!e || !(e->t = calloc((size_t)num, sizeof *e->t))) {
        fz_close(e);
        return crl_error_set(err, CRL_E_NOMEM, "fuzzenv: out of memory");
    }
    e->num = num;
    *env = e;
    return CRL_OK;
}

static int fz_bind(void *env, crl_td *buffers, crl_error *err)
{
    fz_env *e = env;
    int rc = CRL_OK;
    e->obs = crl_env_backend_buffer(buffers, "fuzzenv", "observation", CRL_F32, e->num, 4, &rc, err);
    e->action = crl_env_backend_buffer(buffers, "fuzzenv", "action", CRL_I64, e->num, 0, &rc, err);
    e->reward = crl_env_backend_buffer(buffers, "fuzzenv", "reward", CRL_F32, e->num, 1, &rc, err);
    e->terminated = crl_env_backend_buffer(buffers, "fuzzenv", "terminated", CRL_BOOL, e->num, 1, &rc, err);
    e->truncated = crl_env_backend_buffer(buffers, "fuzzenv", "truncated", CRL_BOOL, e->num, 1, &rc, err);
    return rc;
}

static void fz_write(fz_env *e, int64_t i)
{
    for (int k = 0; k < 4; k++)
        e->obs[4 * i + k] = (float)((e->t[i] + k) % 3) - 1.0f;
    e->terminated[i] = e->t[i] >= 6;
    e->truncated[i] = 0;
}

static int fz_reset(void *env, const bool *mask, const uint64_t *seeds, bool from_state, crl_error *err)
{
    (void)seeds;
    fz_env *e = env;
    if (from_state)
        return crl_error_set(err, CRL_E_UNSUPPORTED, "fuzzenv: no state");
    for (int64_t i = 0; i < e->num; i++)
        if (!mask || mask[i]) {
            e->t[i] = 0;
            fz_write(e, i);
        }
    return CRL_OK;
}

static int fz_step(void *env, crl_error *err)
{
    (void)err;
    fz_env *e = env;
    for (int64_t i = 0; i < e->num; i++) {
        e->reward[i] = e->action[i] == e->t[i] % 2 ? 1.0f : 0.0f;
        e->t[i]++;
        fz_write(e, i);
    }
    return CRL_OK;
}

static const crl_env_ops fz_ops = { sizeof(crl_env_ops), 0, fz_list, fz_make, fz_bind, fz_reset, fz_step, NULL,
                                    fz_close };
static const crl_component fz_component = { sizeof(crl_component), CRL_KIND_ENV, "fuzzenv",
                                            "the trainer fuzz target's env", NULL, &fz_ops };

static int fz_init(crl_host *host, const crl_opts *section, crl_error *err)
{
    (void)section;
    return crl_host_register(host, &fz_component, err);
}

static const crl_plugin_desc *fz_entry(void)
{
    static const crl_plugin_desc d = { CRL_ABI_MAJOR, CRL_ABI_MINOR, "fuzzenv", "1.0", "MIT",
                                       "the trainer fuzz target's env", fz_init, NULL, NULL, { 0 } };
    return &d;
}

/* ---- the two trainers -------------------------------------------------------------------------- */

#define NTRAIN 2
static const char *const inis[NTRAIN] = {
    "[env]\nbackend = fuzzenv\nid = Fuzz-v0\nseed = 1\n"
    "[collector]\nframes_per_batch = 8\ntotal_frames = 64\ninit_random_frames = 16\n"
    "[replay]\nstorage = tensor\ncapacity = 64\nbatch_size = 8\n"
    "[loss]\ntype = dqn\nnum_cells = 8\nannealing_num_steps = 100\n"
    "[optim]\nlr = 0.01\n[train]\nnum_updates = 1\neval_episodes = 0\n",
    "[env]\nbackend = fuzzenv\nid = Fuzz-v0\nnum_envs = 2\nseed = 2\n"
    "[collector]\nframes_per_batch = 32\ntotal_frames = 64\n"
    "[loss]\ntype = ppo\nnum_cells = 8\n"
    "[optim]\nlr = 0.01\n[train]\nminibatch_size = 16\neval_episodes = 0\n",
};

static struct {
    crl_config *cfg[NTRAIN];
    crl_host *host[NTRAIN];
    crl_trainer *t[NTRAIN];
    char root[64];
    char input[128], again[128];
} F;

static void die(const char *what, const crl_error *err)
{
    fprintf(stderr, "fuzz_trainer: %s: %s\n", what, err ? err->message : "failed");
    exit(1);
}

static void cleanup(void)
{
    for (int i = 0; i < NTRAIN; i++) {
        crl_trainer_free(F.t[i]);
        crl_host_free(F.host[i]);
        crl_config_free(F.cfg[i]);
    }
    if (F.root[0]) {
        unlink(F.input);
        unlink(F.again);
        rmdir(F.root);
    }
}

static const char *plugin_path(const char *var, const char *dflt)
{
    const char *p = getenv(var);
    return p && *p ? p : dflt;
}

static void init(void)
{
    crl_error err;
    snprintf(F.root, sizeof F.root, "%s/crl-fuzz-trainer-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(F.root))
        die("mkdtemp", NULL);
    snprintf(F.input, sizeof F.input, "%s/input.ckpt", F.root);
    snprintf(F.again, sizeof F.again, "%s/again.ckpt", F.root);
    atexit(cleanup);
    const char *seeds = getenv("FUZZ_TRAINER_WRITE_SEEDS");
    for (int i = 0; i < NTRAIN; i++) {
        if (!(F.cfg[i] = crl_config_new(&err)) ||
            crl_config_load_buffer(F.cfg[i], "fuzz.ini", inis[i], strlen(inis[i]), CRL_LAYER_FILE, &err))
            die("config", &err);
        if (!(F.host[i] = crl_host_new(F.cfg[i], &err)) || crl_host_load_builtin(F.host[i], fz_entry, &err))
            die("host", &err);
        if (crl_host_load_path(F.host[i], plugin_path("CRL_FUZZ_LOSSES_PLUGIN", FUZZ_LOSSES_PLUGIN), &err))
            die("loading the losses plugin (set CRL_FUZZ_LOSSES_PLUGIN)", &err);
        if (crl_host_load_path(F.host[i], plugin_path("CRL_FUZZ_REPLAY_PLUGIN", FUZZ_REPLAY_PLUGIN), &err))
            die("loading the replay plugin (set CRL_FUZZ_REPLAY_PLUGIN)", &err);
        if (!(F.t[i] = crl_trainer_from_config(F.host[i], F.cfg[i], &err)))
            die("trainer", &err);
        /* Optimizer moments, counters and recorded actions that are not all zero. */
        if (crl_trainer_run(F.t[i], NULL, NULL, &err))
            die("run", &err);
        if (seeds) {
            char path[4200];
            snprintf(path, sizeof path, "%s/%s.ckpt", seeds, i ? "ppo" : "dqn");
            if (crl_trainer_save(F.t[i], path, &err))
                die("writing a seed", &err);
        }
    }
}

static void load_one(const uint8_t *data, size_t size)
{
    FILE *f = fopen(F.input, "wb");
    CHECK(f && fwrite(data, 1, size, f) == size && fclose(f) == 0);
    for (int i = 0; i < NTRAIN; i++) {
        crl_error err;
        int rc = crl_trainer_load(F.t[i], F.input, &err);
        if (getenv("FUZZ_TRAINER_VERBOSE"))
            fprintf(stderr, "trainer %d: %s\n", i, rc ? err.message : "loaded");
        if (rc) {
            CHECK(err.code == rc && (rc == CRL_E_CORRUPT || rc == CRL_E_NOMEM));
            CHECK(strncmp(err.message, F.input, strlen(F.input)) == 0);
            continue;
        }
        /* What loaded is a state this crl writes and reads back. */
        CHECK(crl_trainer_save(F.t[i], F.again, &err) == CRL_OK);
        CHECK(crl_trainer_load(F.t[i], F.again, &err) == CRL_OK);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!F.t[0])
        init();
    /* Also with the CRCs made right, so the sections' contents get validated. */
    fuzz_with_fixed_crcs(data, size, load_one);
    return 0;
}
