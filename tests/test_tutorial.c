/* Check suite: the TorchRL envs tutorial walked with crl.  Every printed output of the tutorial (seed
 * 003_c3791376a030dc65.txt, kept verbatim in tests/tutorial/torchrl_envs.out) is reproduced from C and
 * compared line for line; tests/tutorial/torchrl_envs.diff documents each line that differs and each output
 * crl does not reproduce, with the reason.  An undocumented difference, a documented one that no longer
 * occurs, or an output neither reproduced nor documented fails the suite. */
#include "config.h"
#include "host-fixture.h"
#include "keep-cairo.h"

#include <crl/crl.h>
#include <crl/env.h>
#include <crl/transform.h>

#include <check.h>
#include <glib.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define EXPECT_OK(expr, e) ck_assert_msg((expr) == CRL_OK, "%s: %s", #expr, (e).message)

/* ---- what crl printed, per tutorial output block ---------------------------------------------- */

static GHashTable *got;   /* "L136" -> GString */

static GString *blk(const char *id)
{
    GString *s = g_hash_table_lookup(got, id);
    if (!s) {
        s = g_string_new(NULL);
        g_hash_table_insert(got, g_strdup(id), s);
    }
    return s;
}

/* Python's print(a, b): the two joined by one space, then a newline.  b NULL: print(a). */
static void print2(const char *id, const char *a, const char *b)
{
    GString *s = blk(id);
    g_string_append(s, a);
    if (b) {
        g_string_append_c(s, ' ');
        g_string_append(s, b);
    }
    g_string_append_c(s, '\n');
}

static void print_td(const char *id, const char *label, const crl_td *td)
{
    char *r = crl_td_repr(td);
    ck_assert_ptr_nonnull(r);
    print2(id, label ? label : r, label ? r : NULL);
    crl_free(r);
}

static void print_spec(const char *id, const char *label, const crl_spec *s)
{
    char *r = crl_spec_repr(s);
    ck_assert_ptr_nonnull(r);
    print2(id, label ? label : r, label ? r : NULL);
    crl_free(r);
}

/* PyTorch's print of a 1-d float tensor of integral values: tensor([2.]) */
static char *torch_floats(const crl_tensor *t)
{
    GString *s = g_string_new("tensor([");
    for (int64_t i = 0; i < crl_tensor_numel(t); i++) {
        double v = crl_tensor_flat_get(t, i);
        ck_assert_msg(v == floor(v), "%g: only integral values print as PyTorch does here", v);
        g_string_append_printf(s, "%s%.0f.", i ? ", " : "", v);
    }
    g_string_append(s, "])");
    return g_string_free(s, FALSE);
}

/* ---- the envs ----------------------------------------------------------------------------------- */

typedef struct tut {
    crl_test_host h;
} tut;

static crl_env *env_of(tut *t, const char *lines)
{
    crl_error e = { 0 };
    char *ini = g_strdup_printf("[env]\n%s\n", lines);
    crl_test_host_close(&t->h);
#ifdef CRL_HAVE_DM_CONTROL
    crl_test_host_open(&t->h, "classic, transforms, dm_control", ini);
#else
    crl_test_host_open(&t->h, "classic, transforms", ini);
#endif
    g_free(ini);
    crl_env *env = crl_env_from_config(t->h.host, t->h.cfg, "env", &e);
    ck_assert_msg(env != NULL, "env from\n%s\n: %s", lines, e.message);
    return env;
}

static crl_transform *tf(tut *t, const char *type, const char *const *kv)
{
    crl_error e = { 0 };
    crl_transform *x = crl_transform_new(t->h.host, type, kv, &e);
    ck_assert_msg(x != NULL, "%s: %s", type, e.message);
    return x;
}

static void append(crl_env *env, crl_transform *x)
{
    crl_error e = { 0 };
    EXPECT_OK(crl_env_append_transform(env, x, &e), e);
}

static crl_td *reset(crl_env *env)
{
    crl_error e = { 0 };
    crl_td *td = crl_env_reset(env, NULL, &e);
    ck_assert_msg(td != NULL, "reset: %s", e.message);
    return td;
}

/* (a[1:] == b[:-1]).all() over the time dim of two [T, ...] tensors. */
static bool shifted_equal(const crl_tensor *a, const crl_tensor *b)
{
    int64_t T = crl_tensor_shape(a)[0], row = crl_tensor_numel(a) / T;
    for (int64_t i = row; i < crl_tensor_numel(a); i++)
        if (crl_tensor_flat_get(a, i) != crl_tensor_flat_get(b, i - row))
            return false;
    return true;
}

/* GymEnv("Pendulum-v1"): specs, seeding, reset, step, step_mdp, rollout. */
static void walk_pendulum(tut *t)
{
    crl_error e = { 0 };
    crl_env *env = env_of(t, "backend = classic\nid = Pendulum-v1");
    print_spec("L136", "Env observation_spec: \n", crl_env_observation_spec(env));
    print_spec("L136", "Env action_spec: \n", crl_env_action_spec(env));
    print_spec("L136", "Env reward_spec: \n", crl_env_reward_spec(env));

    /* action = torch.ones(1) * 3: out of [-2, 2] */
    int64_t one = 1;
    crl_tensor *action = crl_tensor_new(CRL_F32, 1, &one, &e);
    ck_assert_ptr_nonnull(action);
    crl_tensor_flat_set(action, 0, 3.0);
    print2("L190", "action is in bounds?\n", crl_spec_is_in(crl_env_action_spec(env), action) ? "True" : "False");
    EXPECT_OK(crl_spec_project(crl_env_action_spec(env), action, &e), e);
    char *p = torch_floats(action);
    print2("L190", "projected action: \n", p);
    g_free(p);
    crl_tensor_unref(action);

    /* env.action_spec.rand(): the leaf draws directly (crl's stream, seeded 0 as torch.manual_seed(0)) */
    crl_rng rng;
    crl_rng_init(&rng, 0, 0);
    crl_tensor *ra = crl_spec_rand(crl_env_action_spec(env), &rng, &e);
    ck_assert_msg(ra != NULL, "%s", e.message);
    ck_assert(crl_spec_is_in(crl_env_action_spec(env), ra));
    char rs[64];
    snprintf(rs, sizeof rs, "tensor([%.4f])", crl_tensor_flat_get(ra, 0));
    print2("L213", "random action: \n", rs);
    crl_tensor_unref(ra);

    print_spec("L245", NULL, crl_env_done_spec(env));

    crl_env_set_seed(env, 0);
    crl_td *td = reset(env);
    print_td("L304", NULL, td);

    /* policy(tensordict): a random action; env.step(tensordict) adds "next" */
    EXPECT_OK(crl_env_rand_action(env, td, &e), e);
    EXPECT_OK(crl_env_step(env, td, &e), e);
    print_td("L380", NULL, td);

    /* env.rand_step() on an empty TensorDict */
    crl_td *r = crl_td_new(0, NULL, &e);
    EXPECT_OK(crl_env_rand_step(env, r, &e), e);
    print_td("L424", NULL, r);
    crl_td_unref(r);

    /* tensordict.set("some other key", torch.randn(1)); step_mdp */
    crl_tensor *other = crl_tensor_new(CRL_F32, 1, &one, &e);
    EXPECT_OK(crl_td_set(td, "some other key", other, &e), e);
    crl_tensor_unref(other);
    crl_td *tp = crl_env_step_mdp(env, td, &e);
    ck_assert_msg(tp != NULL, "%s", e.message);
    print_td("L478", NULL, tp);
    print2("L478", crl_tensor_equal(crl_td_get(tp, "observation"), crl_td_get(td, "next.observation"))
                       ? "tensor(True)" : "tensor(False)", NULL);
    crl_td_unref(tp);
    crl_td_unref(td);

    /* env.reset(TensorDict({}, [])) fills the given TensorDict */
    td = crl_td_new(0, NULL, &e);
    crl_td *same = crl_env_reset(env, td, &e);
    ck_assert_ptr_eq(same, td);
    crl_td_unref(same);
    print_td("L518", NULL, td);
    crl_td_unref(td);

    crl_td *ro = crl_env_rollout(env, 20, NULL, NULL, true, true, NULL, &e);
    ck_assert_msg(ro != NULL, "rollout: %s", e.message);
    print_td("L554", NULL, ro);
    print2("L603", shifted_equal(crl_td_get(ro, "observation"), crl_td_get(ro, "next.observation")) ? "tensor(True)"
                                                                                                    : "tensor(False)",
           NULL);
    crl_td_unref(ro);
    crl_env_free(env);

    /* GymEnv("Pendulum-v1", frame_skip=4).reset() */
    env = env_of(t, "backend = classic\nid = Pendulum-v1\nframe_skip = 4");
    td = reset(env);
    print_td("L637", NULL, td);
    crl_td_unref(td);
    crl_env_free(env);

    /* GymEnv("Pendulum-v1", from_pixels=True).reset() */
    env = env_of(t, "backend = classic\nid = Pendulum-v1\nfrom_pixels = true");
    td = reset(env);
    print_td("L731", NULL, td);
    crl_td_unref(td);
    crl_env_free(env);
}

#ifdef CRL_HAVE_DM_CONTROL
/* DMControlEnv("acrobot", "swingup") and the transforms over it. */
static void walk_dm_control(tut *t)
{
    crl_error e = { 0 };
    const char *plain = "backend = dm_control\nid = acrobot/swingup";
    const char *pixels = "backend = dm_control\nid = acrobot/swingup\nfrom_pixels = true\npixels_only = true";
    crl_env *env = env_of(t, plain);
    crl_td *td = reset(env);
    print_td("L871", "result of reset: ", td);
    crl_td_unref(td);
    crl_env_free(env);

    env = env_of(t, pixels);
    td = reset(env);
    print_td("L913", "result of reset: ", td);
    crl_td_unref(td);
    crl_env_free(env);

    /* ToTensorImage */
    env = env_of(t, pixels);
    td = reset(env);
    print_td("L973", "reset before transform: ", td);
    crl_td_unref(td);
    append(env, tf(t, "ToTensorImage", NULL));
    td = reset(env);
    print_td("L973", "reset after transform: ", td);
    crl_td_unref(td);
    crl_env_free(env);

    /* Compose(ToTensorImage(), Resize(32, 32)), then append_transform(GrayScale()) */
    env = env_of(t, pixels);
    append(env, tf(t, "ToTensorImage", NULL));
    const char *resize[] = { "w=32", "h=32", NULL };
    append(env, tf(t, "Resize", resize));
    td = reset(env);
    print_td("L1018", NULL, td);
    crl_td_unref(td);
    append(env, tf(t, "GrayScale", NULL));
    td = reset(env);
    print_td("L1053", NULL, td);
    crl_td_unref(td);
    print_spec("L1086", "original obs spec: ", crl_env_base_observation_spec(env));
    print_spec("L1086", "current obs spec: ", crl_env_observation_spec(env));
    crl_env_free(env);

    /* CatTensors(in_keys=["orientations", "velocity"], out_key="observation") */
    env = env_of(t, plain);
    td = reset(env);
    print_td("L1136", "keys before concat: ", td);
    crl_td_unref(td);
    const char *cat[] = { "in_keys=orientations, velocity", "out_key=observation", NULL };
    append(env, tf(t, "CatTensors", cat));
    td = reset(env);
    print_td("L1136", "keys after concat: ", td);
    crl_td_unref(td);
    crl_env_free(env);

    /* print(env) and the transforms' parents (see torchrl_envs.diff for the ToTensorImage crl needs) */
    env = env_of(t, "backend = dm_control\nid = acrobot/swingup\nfrom_pixels = true\npixels_only = false");
    append(env, tf(t, "CatTensors", cat));
    append(env, tf(t, "ToTensorImage", NULL));
    append(env, tf(t, "GrayScale", NULL));
    char *r = crl_env_repr(env);
    print2("L1204", "env: \n", r);
    crl_free(r);
    size_t last = crl_env_transform_count(env) - 1;
    ck_assert_str_eq(crl_transform_type(crl_env_transform_at(env, last)), "GrayScale");
    r = crl_transform_parent_repr(crl_env_transform_at(env, last));
    print2("L1204", "GrayScale transform parent env: \n", r);
    crl_free(r);
    r = crl_transform_parent_repr(crl_env_transform_at(env, 0));
    print2("L1204", "CatTensors transform parent env: \n", r);
    crl_free(r);
    crl_env_free(env);
    (void)e;
}
#endif

/* ParallelEnv(3, lambda: GymEnv("Pendulum-v1")): reset, rollout, seeding; the grayscale pipeline; VecNorm. */
static void walk_parallel(tut *t)
{
    crl_error e = { 0 };
    crl_env *env = env_of(t, "backend = classic\nid = Pendulum-v1\nnum_envs = 3\nexecutor = processes");
    crl_td *td = reset(env);
    print_td("L1326", NULL, td);
    crl_td_unref(td);
    crl_td *ro = crl_env_rollout(env, 20, NULL, NULL, true, true, NULL, &e);
    ck_assert_msg(ro != NULL, "rollout: %s", e.message);
    print_td("L1360", NULL, ro);
    crl_td_unref(ro);
    char seed[32];
    snprintf(seed, sizeof seed, "%" PRIu64, crl_env_set_seed(env, 10));
    print2("L1439", seed, NULL);
    crl_env_free(env);

    /* ToTensorImage and Resize(64, 64) in each worker, GrayScale on the batch (Pendulum's frames stand in
     * for ALE's, see torchrl_envs.diff) */
    env = env_of(t, "backend = classic\nid = Pendulum-v1\nfrom_pixels = true\nnum_envs = 2\nexecutor = processes\n"
                    "worker_transforms = tti, resize\ntransforms = gray\n[transform.tti]\ntype = ToTensorImage\n"
                    "[transform.resize]\ntype = Resize\nw = 64\nh = 64\n[transform.gray]\ntype = GrayScale");
    td = reset(env);
    print_td("L1735", "grayscale tensordict: ", td);
    crl_td_unref(td);
    crl_env_free(env);

    /* ParallelEnv(3, EnvCreator(TransformedEnv(GymEnv("CartPole-v1"), VecNorm(decay=1.0)))) */
    char *lines = g_strdup_printf("backend = classic\nid = CartPole-v1\nnum_envs = 3\nexecutor = processes\n"
                                  "worker_transforms = vn\n[transform.vn]\ntype = VecNorm\ndecay = 1.0\n"
                                  "shared = true\nshm_name = /crl-test-tutorial-%d", (int)getpid());
    env = env_of(t, lines);
    g_free(lines);
    ro = crl_env_rollout(env, 5, NULL, NULL, true, true, NULL, &e);
    ck_assert_msg(ro != NULL, "rollout: %s", e.message);
    print_td("L1837", "tensordict: ", ro);
    crl_td_unref(ro);
    crl_env_free(env);
}

/* ---- the comparison ----------------------------------------------------------------------------- */

static char **read_lines(const char *name)
{
    char *path = g_build_filename(TEST_SRCDIR, "tutorial", name, NULL), *text = NULL;
    GError *ge = NULL;
    ck_assert_msg(g_file_get_contents(path, &text, NULL, &ge), "%s: %s", path, ge ? ge->message : "?");
    g_free(path);
    char **lines = g_strsplit(text, "\n", -1);
    g_free(text);
    return lines;
}

/* The blocks of a file: "=== ID" starts one; '#' lines outside blocks' text are comments only before the
 * first block.  ID -> GPtrArray of lines (trailing empty lines dropped). */
static GHashTable *blocks_of(char **lines, GPtrArray *order)
{
    GHashTable *h = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)g_ptr_array_unref);
    GPtrArray *cur = NULL;
    for (char **l = lines; *l; l++) {
        if (g_str_has_prefix(*l, "=== ")) {
            cur = g_ptr_array_new_with_free_func(g_free);
            ck_assert_msg(!g_hash_table_contains(h, *l + 4), "block %s twice", *l + 4);
            g_hash_table_insert(h, g_strdup(*l + 4), cur);
            if (order)
                g_ptr_array_add(order, g_strdup(*l + 4));
        } else if (cur) {
            g_ptr_array_add(cur, g_strdup(*l));
        }
    }
    GHashTableIter it;
    gpointer k, v;
    g_hash_table_iter_init(&it, h);
    while (g_hash_table_iter_next(&it, &k, &v)) {
        GPtrArray *a = v;
        while (a->len && !*(char *)a->pdata[a->len - 1])
            g_ptr_array_remove_index(a, a->len - 1);
    }
    return h;
}

/* The line diff of want -> have as "- line" / "+ line" entries, removals first in each hunk (LCS). */
static GPtrArray *diff_lines(GPtrArray *want, char **have, guint nh)
{
    guint nw = want->len;
    guint *lcs = g_new0(guint, (nw + 1) * (nh + 1));
#define LCS(i, j) lcs[(i) * (nh + 1) + (j)]
    for (guint i = nw; i-- > 0;)
        for (guint j = nh; j-- > 0;)
            LCS(i, j) = !strcmp(want->pdata[i], have[j]) ? LCS(i + 1, j + 1) + 1
                        : MAX(LCS(i + 1, j), LCS(i, j + 1));
    GPtrArray *out = g_ptr_array_new_with_free_func(g_free);
    guint i = 0, j = 0;
    while (i < nw || j < nh) {
        if (i < nw && j < nh && !strcmp(want->pdata[i], have[j])) {
            i++;
            j++;
        } else if (j >= nh || (i < nw && LCS(i + 1, j) >= LCS(i, j + 1))) {
            g_ptr_array_add(out, g_strconcat("- ", (char *)want->pdata[i++], NULL));
        } else {
            g_ptr_array_add(out, g_strconcat("+ ", have[j++], NULL));
        }
    }
#undef LCS
    g_free(lcs);
    return out;
}

/* The blocks walk_dm_control prints: a build without the backend leaves them out (and says so). */
static bool needs_dm_control(const char *id)
{
#ifdef CRL_HAVE_DM_CONTROL
    (void)id;
    return false;
#else
    static const char *const ids[] = { "L871", "L913", "L973", "L1018", "L1053", "L1086", "L1136", "L1204" };
    for (size_t i = 0; i < G_N_ELEMENTS(ids); i++)
        if (!strcmp(ids[i], id))
            return true;
    return false;
#endif
}

static void string_free(gpointer s)
{
    g_string_free(s, TRUE);
}

START_TEST(test_tutorial_outputs)
{
    crl_test_keep_cairo();
    got = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, string_free);
    tut t;
    memset(&t, 0, sizeof t);
    walk_pendulum(&t);
#ifdef CRL_HAVE_DM_CONTROL
    walk_dm_control(&t);
#endif
    walk_parallel(&t);
    crl_test_host_close(&t.h);

    char **ref_lines = read_lines("torchrl_envs.out"), **doc_lines = read_lines("torchrl_envs.diff");
    GPtrArray *order = g_ptr_array_new_with_free_func(g_free);
    GHashTable *ref = blocks_of(ref_lines, order), *doc = blocks_of(doc_lines, NULL);
    GString *fail = g_string_new(NULL);
    guint compared = 0;
    for (guint b = 0; b < order->len; b++) {
        const char *id = order->pdata[b];
        GPtrArray *want = g_hash_table_lookup(ref, id), *documented = g_hash_table_lookup(doc, id);
        GString *have = g_hash_table_lookup(got, id);
        /* The documentation of a block: "skip: why", or its diff entries each hunk followed by "why: ...". */
        GPtrArray *entries = g_ptr_array_new_with_free_func(g_free);
        bool skip = false, reasoned = true;
        for (guint k = 0; documented && k < documented->len; k++) {
            const char *l = documented->pdata[k];
            if (g_str_has_prefix(l, "skip: "))
                skip = true;
            else if (g_str_has_prefix(l, "- ") || g_str_has_prefix(l, "+ "))
                g_ptr_array_add(entries, g_strdup(l)), reasoned = false;
            else if (g_str_has_prefix(l, "why: "))
                reasoned = true;
            else if (*l && *l != '#')
                g_string_append_printf(fail, "%s: torchrl_envs.diff line '%s' is no '- ', '+ ', 'why: ' or "
                                       "'skip: ' entry\n", id, l);
        }
        if (!reasoned)
            g_string_append_printf(fail, "%s: the last difference documented has no 'why: '\n", id);
        if (!have) {
            if (!skip && !needs_dm_control(id))
                g_string_append_printf(fail, "%s: crl printed nothing and torchrl_envs.diff has no 'skip: why'\n",
                                       id);
            else if (!skip)
                fprintf(stderr, "%s: not compared: this build has no dm_control backend\n", id);
            g_ptr_array_unref(entries);
            continue;
        }
        if (skip)
            g_string_append_printf(fail, "%s: reproduced, but torchrl_envs.diff says skip\n", id);
        compared++;
        char **hl = g_strsplit(have->str, "\n", -1);
        guint nh = g_strv_length(hl);
        while (nh && !*hl[nh - 1])
            nh--;
        GPtrArray *d = diff_lines(want, hl, nh);
        bool same = d->len == entries->len;
        for (guint k = 0; same && k < d->len; k++)
            same = !strcmp(d->pdata[k], entries->pdata[k]);
        if (!same) {
            g_string_append_printf(fail, "%s: the differences from the tutorial are not the documented ones.\n"
                                   "  crl's diff (- tutorial, + crl):\n", id);
            for (guint k = 0; k < d->len; k++)
                g_string_append_printf(fail, "    %s\n", (char *)d->pdata[k]);
            g_string_append_printf(fail, "  documented:\n");
            for (guint k = 0; k < entries->len; k++)
                g_string_append_printf(fail, "    %s\n", (char *)entries->pdata[k]);
            g_string_append_printf(fail, "  crl printed:\n%s\n", have->str);
        }
        g_ptr_array_unref(d);
        g_strfreev(hl);
        g_ptr_array_unref(entries);
    }
    /* Nothing printed or documented for a block the tutorial does not have. */
    GHashTableIter it;
    gpointer k;
    g_hash_table_iter_init(&it, got);
    while (g_hash_table_iter_next(&it, &k, NULL))
        if (!g_hash_table_contains(ref, k))
            g_string_append_printf(fail, "%s: printed, but the tutorial has no such output\n", (char *)k);
    g_hash_table_iter_init(&it, doc);
    while (g_hash_table_iter_next(&it, &k, NULL))
        if (!g_hash_table_contains(ref, k))
            g_string_append_printf(fail, "%s: documented, but the tutorial has no such output\n", (char *)k);
    /* Check's messages are short: the details go to the log. */
    fputs(fail->str, stderr);
    ck_assert_msg(fail->len == 0, "the outputs differ from the tutorial's beyond torchrl_envs.diff (details above)");
#ifdef CRL_HAVE_DM_CONTROL
    ck_assert_uint_ge(compared, 25);
#else
    ck_assert_uint_ge(compared, 15);
#endif
    g_string_free(fail, TRUE);
    g_hash_table_unref(ref);
    g_hash_table_unref(doc);
    g_ptr_array_unref(order);
    g_strfreev(ref_lines);
    g_strfreev(doc_lines);
    g_hash_table_unref(got);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tutorial");
    TCase *tc = tcase_create("torchrl_envs");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_tutorial_outputs);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
