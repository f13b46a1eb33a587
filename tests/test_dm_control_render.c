/* Check suite for the dm_control plugin's pixels: MuJoCo's renderer in an offscreen OSMesa context. */
#include <check.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <crl/config.h>
#include <crl/env.h>
#include <crl/host.h>

#include "dmc-test.h"

/* A skip only where OSMesa is truly absent: with the library present, any
 * failure to render fails the test. */
static bool no_osmesa(const crl_error *e)
{
    void *lib = dlopen("libOSMesa.so.8", RTLD_NOW | RTLD_LOCAL);
    if (lib) {
        dlclose(lib);
        return false;
    }
    return e->code == CRL_E_UNSUPPORTED && strstr(e->message, "libosmesa6") != NULL;
}

/* How many distinct colours (of a coarse 4-bit-per-channel palette) a frame holds. */
static int colours(const uint8_t *rgb, size_t npix)
{
    static bool seen[4096];
    memset(seen, 0, sizeof seen);
    int n = 0;
    for (size_t p = 0; p < npix; p++) {
        int c = (rgb[3 * p] >> 4) << 8 | (rgb[3 * p + 1] >> 4) << 4 | rgb[3 * p + 2] >> 4;
        n += !seen[c];
        seen[c] = true;
    }
    return n;
}

/* Pixels where the body's colour ("self": .7 .5 .3) shows, roughly. */
static size_t body_pixels(const uint8_t *rgb, size_t npix)
{
    size_t n = 0;
    for (size_t p = 0; p < npix; p++) {
        int r = rgb[3 * p], g = rgb[3 * p + 1], b = rgb[3 * p + 2];
        n += r > 90 && r > g + 20 && g > b + 15;
    }
    return n;
}

static crl_td *step_zero(crl_env *env, crl_td *td, crl_error *e)
{
    EXPECT_OK(crl_env_rand_action(env, td, e), *e);
    double *a = crl_tensor_data(crl_td_get(td, "action"));
    a[0] = 1.0;
    EXPECT_OK(crl_env_step(env, td, e), *e);
    crl_td *next = crl_env_step_mdp(env, td, e);
    ck_assert_ptr_nonnull(next);
    return next;
}

/* The tutorial's env: acrobot frames of 240 x 320 from camera 0 that show
 * the arm and change as it moves. */
START_TEST(test_acrobot_pixels)
{
    crl_error e = {0};
    henv h;
    /* pixels_only is left out: it defaults to true with from_pixels, as DMControlEnv's does. */
    int rc = henv_open(&h, "[env]\nbackend = dm_control\nid = acrobot/swingup\nfrom_pixels = true\n"
                           "seed = 2\n", &e);
    if (rc != CRL_OK && no_osmesa(&e)) {
        henv_close(&h);
        printf("SKIP test_acrobot_pixels: %s\n", e.message);
        return;
    }
    EXPECT_OK(rc, e);
    crl_td *td = crl_env_reset(h.env, NULL, &e);
    ck_assert_msg(td != NULL, "%s", e.message);
    ck_assert_ptr_null(crl_td_get(td, "orientations")); /* pixels_only */
    crl_tensor *px = crl_td_get(td, "pixels");
    ck_assert_ptr_nonnull(px);
    ck_assert_int_eq(crl_tensor_dtype(px), CRL_U8);
    ck_assert_int_eq(crl_tensor_ndim(px), 3);
    ck_assert_int_eq(crl_tensor_shape(px)[0], 240);
    ck_assert_int_eq(crl_tensor_shape(px)[1], 320);
    ck_assert_int_eq(crl_tensor_shape(px)[2], 3);
    const size_t npix = 240 * 320;
    uint8_t *first = malloc(npix * 3);
    memcpy(first, crl_tensor_data(px), npix * 3);
    ck_assert_msg(colours(first, npix) > 50, "frame 0 is (nearly) blank: %d colours",
                  colours(first, npix));
    ck_assert_msg(body_pixels(first, npix) > 200, "the arm does not show: %zu pixels",
                  body_pixels(first, npix));
    /* The sky is above the floor: the top row is darker blue than bright. */
    ck_assert(first[2] >= first[0]);
    crl_td *cur = td;
    for (int k = 0; k < 5; k++) {
        crl_td *next = step_zero(h.env, cur, &e);
        crl_td_unref(cur);
        cur = next;
    }
    const uint8_t *later = crl_tensor_data(crl_td_get(cur, "pixels"));
    size_t changed = 0;
    for (size_t p = 0; p < npix * 3; p++)
        changed += later[p] != first[p];
    ck_assert_msg(changed > 100, "frames do not change between steps: %zu bytes", changed);
    free(first);
    crl_td_unref(cur);
    henv_close(&h);
}
END_TEST

/* camera_id, height and width reach the frame; another camera sees another picture. */
START_TEST(test_camera_and_size)
{
    crl_error e = {0};
    uint8_t *frames[3] = {NULL, NULL, NULL};
    for (int c = 0; c < 3; c++) {
        int cam = c < 2 ? c : -1; /* -1: MuJoCo's free camera */
        char ini[256];
        snprintf(ini, sizeof ini, "[env]\nbackend = dm_control\nid = cartpole/balance\nnum_envs = 2\n"
                                  "from_pixels = true\npixels_only = false\ncamera_id = %d\nheight = 48\nwidth = 64\n", cam);
        henv h;
        int rc = henv_open(&h, ini, &e);
        if (rc != CRL_OK && no_osmesa(&e)) {
            henv_close(&h);
            printf("SKIP test_camera_and_size: %s\n", e.message);
            return;
        }
        EXPECT_OK(rc, e);
        ck_assert_int_eq(crl_env_render_height(h.env), 48);
        ck_assert_int_eq(crl_env_render_width(h.env), 64);
        crl_td *td = crl_env_reset(h.env, NULL, &e);
        ck_assert_ptr_nonnull(td);
        crl_tensor *px = crl_td_get(td, "pixels");
        ck_assert_int_eq(crl_tensor_shape(px)[0], 2);
        ck_assert_int_eq(crl_tensor_shape(px)[1], 48);
        ck_assert_int_eq(crl_tensor_shape(px)[2], 64);
        ck_assert_ptr_nonnull(crl_td_get(td, "position")); /* kept with pixels_only = false */
        frames[c] = malloc(48 * 64 * 3);
        memcpy(frames[c], crl_tensor_data(px), 48 * 64 * 3);
        ck_assert(colours(frames[c], 48 * 64) > 8);
        crl_td_unref(td);
        henv_close(&h);
    }
    ck_assert(memcmp(frames[0], frames[1], 48 * 64 * 3) != 0);
    ck_assert(memcmp(frames[0], frames[2], 48 * 64 * 3) != 0);
    for (int c = 0; c < 3; c++)
        free(frames[c]);
}
END_TEST

/* Reacher's target moves per env: it is drawn where that env has it. */
START_TEST(test_reacher_target_drawn)
{
    crl_error e = {0};
    henv h;
    int rc = henv_open(&h, "[env]\nbackend = dm_control\nid = reacher/easy\nnum_envs = 2\n"
                           "from_pixels = true\nseed = 11\n", &e);
    if (rc != CRL_OK && no_osmesa(&e)) {
        henv_close(&h);
        printf("SKIP test_reacher_target_drawn: %s\n", e.message);
        return;
    }
    EXPECT_OK(rc, e);
    crl_td *td = crl_env_reset(h.env, NULL, &e);
    ck_assert_ptr_nonnull(td);
    const uint8_t *px = crl_tensor_data(crl_td_get(td, "pixels"));
    const size_t n = 240 * 320 * 3;
    ck_assert(memcmp(px, px + n, n) != 0);
    crl_td_unref(td);
    henv_close(&h);
}
END_TEST

/* quadruped/escape's terrain is per env and rewritten into the model each episode: the render context
 * gets the heightfield each frame's env has (the suite's mjr_uploadHField).  Frames drawn with pixels
 * from the start (the context made before any terrain) equal those of an env of the same seed drawn
 * afterwards by crl_env_render, env 1 first (its context made with env 1's terrain in the model, so
 * env 0's frame needs env 0's uploaded). */
START_TEST(test_escape_terrain_drawn)
{
    crl_error e = {0};
    henv p, q;
    int rc = henv_open(&p, "[env]\nbackend = dm_control\nid = quadruped/escape\nnum_envs = 2\n"
                           "from_pixels = true\nseed = 3\nheight = 60\nwidth = 80\n", &e);
    if (rc != CRL_OK && no_osmesa(&e)) {
        henv_close(&p);
        printf("SKIP test_escape_terrain_drawn: %s\n", e.message);
        return;
    }
    EXPECT_OK(rc, e);
    EXPECT_OK(henv_open(&q, "[env]\nbackend = dm_control\nid = quadruped/escape\nnum_envs = 2\nseed = 3\n"
                            "height = 60\nwidth = 80\n", &e), e);
    crl_td *tp = crl_env_reset(p.env, NULL, &e), *tq = crl_env_reset(q.env, NULL, &e);
    ck_assert(tp && tq);
    const uint8_t *px = crl_tensor_data(crl_td_get(tp, "pixels"));
    const size_t n = 60 * 80 * 3;
    ck_assert(memcmp(px, px + n, n) != 0);
    crl_tensor *frame = crl_tensor_new(CRL_U8, 3, (int64_t[]){60, 80, 3}, &e);
    ck_assert_ptr_nonnull(frame);
    for (int i = 1; i >= 0; i--) {
        EXPECT_OK(crl_env_render(q.env, i, frame, &e), e);
        ck_assert_msg(memcmp(crl_tensor_data(frame), px + (size_t)i * n, n) == 0,
                      "env %d drawn afterwards differs from its pixels", i);
    }
    crl_tensor_unref(frame);
    crl_td_unref(tp);
    crl_td_unref(tq);
    henv_close(&q);
    henv_close(&p);
}
END_TEST

/* A missing GL library is a clear error naming the Debian package. */
START_TEST(test_missing_gl)
{
    crl_error e = {0};
    setenv("CRL_DM_CONTROL_GL_LIBRARY", "libcrl-no-such-osmesa.so.8", 1);
    henv h;
    int rc = henv_open(&h, "[env]\nbackend = dm_control\nid = pendulum/swingup\nfrom_pixels = true\n", &e);
    unsetenv("CRL_DM_CONTROL_GL_LIBRARY");
    ck_assert_int_eq(rc, CRL_E_UNSUPPORTED);
    ck_assert_msg(strstr(e.message, "libosmesa6") && strstr(e.message, "libcrl-no-such-osmesa.so.8") &&
                      strstr(e.message, "from_pixels = false"),
                  "%s", e.message);
    henv_close(&h);
    /* Without pixels the same env needs no GL. */
    setenv("CRL_DM_CONTROL_GL_LIBRARY", "libcrl-no-such-osmesa.so.8", 1);
    e = (crl_error){0};
    EXPECT_OK(henv_open(&h, "[env]\nbackend = dm_control\nid = pendulum/swingup\n", &e), e);
    unsetenv("CRL_DM_CONTROL_GL_LIBRARY");
    henv_close(&h);
}
END_TEST

static Suite *render_suite(void)
{
    Suite *s = suite_create("dm_control_render");
    TCase *tc = tcase_create("pixels");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_missing_gl);
    tcase_add_test(tc, test_acrobot_pixels);
    tcase_add_test(tc, test_camera_and_size);
    tcase_add_test(tc, test_reacher_target_drawn);
    tcase_add_test(tc, test_escape_terrain_drawn);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(render_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
