/* Fuzz target for crl_replay_load: the input is the replay manifest (replay.ckpt) of a checkpoint directory whose storage part is valid. */
#include "fuzz-crc.h"

#include <crl/checkpoint.h>
#include <crl/config.h>
#include <crl/host.h>
#include <crl/replay.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


#ifndef FUZZ_REPLAY_PLUGIN
#define FUZZ_REPLAY_PLUGIN "replay.so"
#endif

/* Two buffers (prioritized, without replacement) over the tensor storage,
 * each with a template checkpoint whose storage/ the work dirs link to. */
#define NBUF 2
static const char *const *const configs[NBUF] = {
    (const char *const[]){"storage=tensor", "capacity=16", "sampler=prioritized", "alpha=0.7", "beta=0.5",
                          "seed=1", NULL},
    (const char *const[]){"storage=tensor", "capacity=16", "sampler=without_replacement", "batch_size=4",
                          "seed=2", NULL},
};

static struct {
    crl_config *cfg;
    crl_host *host;
    crl_replay *rb[NBUF];
    char root[64];
    char manifest[NBUF][160];
    char work[NBUF][160];
} F;

static void die(const char *what, const crl_error *err)
{
    fprintf(stderr, "fuzz_replay_load: %s: %s\n", what, err ? err->message : "failed");
    exit(1);
}

static void rm_rf(const char *path)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    if (system(cmd) != 0)
        fprintf(stderr, "fuzz_replay_load: cannot remove %s\n", path);
}

static void cleanup(void)
{
    for (int i = 0; i < NBUF; i++)
        crl_replay_free(F.rb[i]);
    crl_host_free(F.host);
    crl_config_free(F.cfg);
    if (F.root[0])
        rm_rf(F.root);
}

static crl_td *items(int64_t n, int64_t first)
{
    crl_error err;
    int64_t b[1] = {n}, s[2] = {n, 3}, s1[2] = {n, 1};
    crl_td *td = crl_td_new(1, b, &err);
    crl_tensor *obs = crl_tensor_new(CRL_F32, 2, s, &err), *rew = crl_tensor_new(CRL_F32, 2, s1, &err);
    for (int64_t i = 0; i < 3 * n; i++)
        crl_tensor_flat_set(obs, i, (double)(first * 3 + i));
    for (int64_t i = 0; i < n; i++)
        crl_tensor_flat_set(rew, i, (double)(first + i) * 0.5);
    if (crl_td_set(td, "observation", obs, &err) || crl_td_set(td, "next.reward", rew, &err))
        die("items", &err);
    crl_tensor_unref(obs);
    crl_tensor_unref(rew);
    return td;
}

static void copy_file(const char *from, const char *to)
{
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    char buf[4096];
    size_t n;
    if (!a || !b)
        die(to, NULL);
    while ((n = fread(buf, 1, sizeof buf, a)) > 0)
        if (fwrite(buf, 1, n, b) != n)
            die(to, NULL);
    fclose(a);
    if (fclose(b))
        die(to, NULL);
}

static void init(void)
{
    crl_error err;
    F.cfg = crl_config_new(&err);
    F.host = F.cfg ? crl_host_new(F.cfg, &err) : NULL;
    if (!F.host)
        die("host", &err);
    const char *plugin = getenv("CRL_FUZZ_REPLAY_PLUGIN");
    if (crl_host_load_path(F.host, plugin && *plugin ? plugin : FUZZ_REPLAY_PLUGIN, &err))
        die("loading the replay plugin (set CRL_FUZZ_REPLAY_PLUGIN)", &err);
    snprintf(F.root, sizeof F.root, "%s/crl-fuzz-replay-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(F.root))
        die("mkdtemp", NULL);
    atexit(cleanup);
    const char *seeds = getenv("FUZZ_REPLAY_WRITE_SEEDS");
    for (int i = 0; i < NBUF; i++) {
        F.rb[i] = crl_replay_new(F.host, configs[i], &err);
        if (!F.rb[i])
            die("crl_replay_new", &err);
        /* Wrap around once, touch priorities and sampler state, then dump. */
        crl_td *a = items(12, 0), *b = items(7, 12);
        if (crl_replay_extend(F.rb[i], a, NULL, &err) || crl_replay_extend(F.rb[i], b, NULL, &err))
            die("extend", &err);
        crl_td_unref(a);
        crl_td_unref(b);
        crl_td *s = crl_replay_sample(F.rb[i], 4, &err);
        if (!s)
            die("sample", &err);
        if (i == 0) {
            int64_t idx[3] = {0, 5, 9};
            double pr[3] = {2.0, 0.25, 7.5};
            if (crl_replay_update_priority(F.rb[i], idx, pr, 3, &err))
                die("update_priority", &err);
        }
        crl_td_unref(s);
        char tpl[160], link_to[200], from[200];
        snprintf(tpl, sizeof tpl, "%s/tpl%d", F.root, i);
        if (crl_replay_dump(F.rb[i], tpl, &err))
            die("dump", &err);
        snprintf(F.work[i], sizeof F.work[i], "%s/work%d", F.root, i);
        snprintf(F.manifest[i], sizeof F.manifest[i], "%s/replay.ckpt", F.work[i]);
        snprintf(link_to, sizeof link_to, "%s/storage", tpl);
        snprintf(from, sizeof from, "%s/storage", F.work[i]);
        if (mkdir(F.work[i], 0755) || symlink(link_to, from))
            die(F.work[i], NULL);
        if (seeds) {
            char src[200], dst[300];
            snprintf(src, sizeof src, "%s/replay.ckpt", tpl);
            snprintf(dst, sizeof dst, "%s/manifest-%d.ckpt", seeds, i);
            copy_file(src, dst);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!F.host)
        init();
    /* With the CRCs made right, so the manifest's contents get validated
     * (the checkpoint target covers the checksums themselves). */
    uint8_t *fixed = malloc(size ? size : 1);
    CHECK(fixed);
    memcpy(fixed, data, size);
    fix_crcs(fixed, size);
    for (int i = 0; i < NBUF; i++) {
        FILE *f = fopen(F.manifest[i], "wb");
        CHECK(f && fwrite(fixed, 1, size, f) == size && fclose(f) == 0);
        size_t before = crl_replay_len(F.rb[i]);
        crl_error err;
        int rc = crl_replay_load(F.rb[i], F.work[i], &err);
        size_t len = crl_replay_len(F.rb[i]);
        if (getenv("FUZZ_REPLAY_VERBOSE"))
            fprintf(stderr, "buffer %d: %s\n", i, rc ? err.message : "loaded");
        CHECK(len <= (size_t)crl_replay_capacity(F.rb[i]));
        if (rc) {
            CHECK(err.code == rc && err.message[0]);
            CHECK(len == before);
        }
        /* Whatever happened, sampling must not crash; it may refuse
         * cleanly (a loaded state the sampler cannot use is reported, not
         * hidden: see FUZZ_REPLAY_VERBOSE). */
        if (len > 0) {
            crl_td *s = crl_replay_sample(F.rb[i], 4, &err);
            if (!s && getenv("FUZZ_REPLAY_VERBOSE"))
                fprintf(stderr, "buffer %d: sample after load: %s\n", i, err.message);
            CHECK(s || (err.code != CRL_OK && err.message[0]));
            /* A prioritized state that loaded must be usable: load validates
             * every priority against eps^alpha. */
            CHECK(s || rc || i != 0);
            if (s) {
                char *repr = crl_td_repr(s);
                crl_free(repr);
                crl_td_unref(s);
            }
        }
    }
    free(fixed);
    return 0;
}
