/* Fuzz target for the replay storages' dump loaders (storage/list and storage/tensor, whose format
 * storage/memmap shares): the input is a storage.ckpt, loaded by each storage's load op.  A refusal must
 * name the file and be CRL_E_CORRUPT (CRL_E_CONFIG for another capacity, CRL_E_NOMEM); a storage that
 * loaded must hand out every item it holds, dump and load again.
 *
 * The storages come from replay.so (CRL_FUZZ_REPLAY_PLUGIN, or the path compiled in).
 * FUZZ_STORAGE_WRITE_SEEDS=DIR writes a dump of each storage there: the seed corpus,
 * tests/fuzz/corpus/storage_load, holds them (list.ckpt, tensor.ckpt) and copies with a byte changed in one
 * section or cut short. */
#include "fuzz-crc.h"

#include <crl/checkpoint.h>
#include <crl/config.h>
#include <crl/host.h>
#include <crl/storage_backend.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


#ifndef FUZZ_REPLAY_PLUGIN
#define FUZZ_REPLAY_PLUGIN "replay.so"
#endif

#define CAPACITY 8
#define NSTORE 2
static const char *const names[NSTORE] = { "list", "tensor" };

static struct {
    crl_config *cfg;
    crl_host *host;
    const crl_storage_ops *ops[NSTORE];
    void *st[NSTORE];
    char root[64], in[96], again[96], file[128], again_file[128];
} F;

static void die(const char *what, const crl_error *err)
{
    fprintf(stderr, "fuzz_storage_load: %s: %s\n", what, err ? err->message : "failed");
    exit(1);
}

static void cleanup(void)
{
    for (int i = 0; i < NSTORE; i++)
        if (F.st[i])
            F.ops[i]->close(F.st[i]);
    crl_host_free(F.host);
    crl_config_free(F.cfg);
    if (F.root[0]) {
        unlink(F.file);
        unlink(F.again_file);
        rmdir(F.in);
        rmdir(F.again);
        rmdir(F.root);
    }
}

/* Three items: float32 observation [3], int64 action, float16 reward [1], bool done [1]. */
static crl_td *items(crl_error *err)
{
    int64_t n = 3, s3[2] = { 3, 3 }, s1[2] = { 3, 1 };
    crl_td *td = crl_td_new(1, &n, err);
    crl_tensor *obs = crl_tensor_new(CRL_F32, 2, s3, err), *act = crl_tensor_new(CRL_I64, 1, &n, err);
    crl_tensor *rew = crl_tensor_new(CRL_F16, 2, s1, err), *done = crl_tensor_new(CRL_BOOL, 2, s1, err);
    if (!td || !obs || !act || !rew || !done)
        die("items", err);
    for (int64_t i = 0; i < 9; i++)
        crl_tensor_flat_set(obs, i, 0.25 * (double)i - 1);
    for (int64_t i = 0; i < 3; i++) {
        crl_tensor_flat_set(act, i, (double)(i * 1000003));
        crl_tensor_flat_set(rew, i, -0.5 * (double)i);
        crl_tensor_flat_set(done, i, (double)(i == 2));
    }
    if (crl_td_set(td, "observation", obs, err) || crl_td_set(td, "action", act, err) ||
        crl_td_set(td, "next.reward", rew, err) || crl_td_set(td, "next.done", done, err))
        die("items", err);
    crl_tensor_unref(obs);
    crl_tensor_unref(act);
    crl_tensor_unref(rew);
    crl_tensor_unref(done);
    return td;
}

static void init(void)
{
    crl_error err;
    if (!(F.cfg = crl_config_new(&err)) || !(F.host = crl_host_new(F.cfg, &err)))
        die("host", &err);
    const char *plugin = getenv("CRL_FUZZ_REPLAY_PLUGIN");
    if (crl_host_load_path(F.host, plugin && *plugin ? plugin : FUZZ_REPLAY_PLUGIN, &err))
        die("loading the replay plugin (set CRL_FUZZ_REPLAY_PLUGIN)", &err);
    snprintf(F.root, sizeof F.root, "%s/crl-fuzz-storage-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(F.root))
        die("mkdtemp", NULL);
    snprintf(F.in, sizeof F.in, "%s/in", F.root);
    snprintf(F.again, sizeof F.again, "%s/again", F.root);
    snprintf(F.file, sizeof F.file, "%s/storage.ckpt", F.in);
    snprintf(F.again_file, sizeof F.again_file, "%s/storage.ckpt", F.again);
    if (mkdir(F.in, 0755) || mkdir(F.again, 0755))
        die(F.root, NULL);
    atexit(cleanup);
    const char *seeds = getenv("FUZZ_STORAGE_WRITE_SEEDS");
    for (int i = 0; i < NSTORE; i++) {
        const crl_component *c = crl_host_find(F.host, CRL_KIND_STORAGE, names[i]);
        if (!c)
            die(names[i], NULL);
        F.ops[i] = c->ops;
        const crl_option *tables[1] = { c->options };
        crl_opts *o = crl_config_opts(F.cfg, "storage", tables, c->options ? 1 : 0, &err);
        if (!o || F.ops[i]->open(o, CAPACITY, &F.st[i], &err))
            die(names[i], &err);
        crl_opts_free(o);
        if (seeds) {
            /* Slots 1, 2 and 5 filled, so the dump has holes. */
            crl_td *td = items(&err);
            const int64_t idx[3] = { 1, 2, 5 };
            char dir[4200], from[4300], to[4300];
            snprintf(dir, sizeof dir, "%s/%s", seeds, names[i]);
            snprintf(from, sizeof from, "%s/storage.ckpt", dir);
            snprintf(to, sizeof to, "%s/%s.ckpt", seeds, names[i]);
            if (F.ops[i]->set(F.st[i], idx, 3, td, &err) || mkdir(dir, 0755) || F.ops[i]->dump(F.st[i], dir, &err) ||
                rename(from, to) || rmdir(dir))
                die("writing a seed", &err);
            crl_td_unref(td);
        }
    }
}

static void load_one(const uint8_t *data, size_t size)
{
    FILE *f = fopen(F.file, "wb");
    CHECK(f && fwrite(data, 1, size, f) == size && fclose(f) == 0);
    for (int i = 0; i < NSTORE; i++) {
        const crl_storage_ops *ops = F.ops[i];
        crl_error err;
        int rc = ops->load(F.st[i], F.in, &err);
        if (getenv("FUZZ_STORAGE_VERBOSE"))
            fprintf(stderr, "%s: %s\n", names[i], rc ? err.message : "loaded");
        int64_t len = ops->len(F.st[i]);
        CHECK(len >= 0 && len <= CAPACITY);
        if (rc) {
            CHECK(err.code == rc && (rc == CRL_E_CORRUPT || rc == CRL_E_CONFIG || rc == CRL_E_NOMEM));
            CHECK(strstr(err.message, F.file) != NULL);
            continue;
        }
        /* Every item it claims can be had, and what loaded dumps and loads again. */
        for (int64_t s = 0; s < len; s++) {
            if (ops->has && !ops->has(F.st[i], s))
                continue;
            crl_td *item = ops->get(F.st[i], &s, 1, &err);
            CHECK(item != NULL);
            char *repr = crl_td_repr(item);
            crl_free(repr);
            crl_td_unref(item);
        }
        unlink(F.again_file);
        CHECK(ops->dump(F.st[i], F.again, &err) == CRL_OK);
        CHECK(ops->load(F.st[i], F.again, &err) == CRL_OK);
        CHECK(ops->len(F.st[i]) == len);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!F.host)
        init();
    /* Also with the CRCs made right, so the sections' contents get validated. */
    fuzz_with_fixed_crcs(data, size, load_one);
    return 0;
}
