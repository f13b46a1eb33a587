/* Check suite for dmc_zoom2d (plugins/dm_control/spline_zoom.c), quadruped/escape's terrain smoothing,
 * against SciPy's own scipy.ndimage.zoom (Debian's python3-scipy) on random grids of the size escape
 * uses and of others (shrinking, single rows, single output samples, odd zooms); escape's whole
 * terrain after its init against the suite's own lines of Escape.initialize_episode run on the same
 * bumps; and, without SciPy, the properties the zoom must have: Python's half-to-even output lengths,
 * the interpolation of the samples at the knots, constants kept.
 *
 * Tolerance: the result is a 16-term weighted sum (nonnegative weights summing to 1) of spline
 * coefficients, and the cubic prefilter's inverse has an infinity norm of at most 3 per axis
 * (tridiag(1, 4, 1) / 6 is diagonally dominant by 1/3), so |coefficients| <= 9 max|in|.  Each
 * coefficient carries a few roundings per recursive pass (the pole's powers decay as 0.27^k, so
 * about 10 eps of 9 max|in| in all) and the 16-term sum 48 more: any two float64 evaluations of the
 * formula differ by less than 100 eps 9 max|in| = 2.0e-13 max|in|.  1e-12 max|in| is that bound with
 * room, not a fit to this
 * machine.  (With the same C library the results are SciPy's bits: the count is printed.) */
#include <check.h>
#include <float.h>
#include <glib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <crl/rng.h>

#include "dmc.h"
#include "scratch-dir.h"

typedef struct zcase {
    int rows, cols;
    double zoom;
    double lo, hi; /* uniform values */
} zcase;

static const zcase cases[] = {
    {30, 30, 201 / 30.0, 0.15, 1.0}, /* quadruped/escape: 30 x 30 bumps to the 201 x 201 heightfield */
    {30, 30, 6.7, 0.15, 1.0},
    {20, 20, 201 / 20.0, 0.15, 1.0}, /* a 40 m heightfield's bumps */
    {5, 7, 2.5, -3.0, 2.0},
    {12, 9, 0.5, -1.0, 1.0},        /* shrinking; 4.5 rounds to 4 */
    {1, 6, 3.0, 0.0, 5.0},          /* a single row: no filter along it */
    {6, 4, 0.2, -1.0, 1.0},         /* one output sample per axis */
    {3, 3, 2.5, -1.0, 1.0},         /* 7.5 rounds to 8 */
    {2, 2, 10.0, -1.0, 1.0},
    {17, 31, 1.3, -100.0, 100.0},
    {8, 8, 1.0, 0.0, 1.0},
    {40, 3, 0.77, -2.0, 2.0},
};
#define N_CASES (sizeof cases / sizeof cases[0])

static double *grid(const zcase *z, uint64_t seed)
{
    crl_rng rng;
    crl_rng_init(&rng, seed, 0);
    double *a = malloc(sizeof(double) * (size_t)z->rows * (size_t)z->cols);
    ck_assert_ptr_nonnull(a);
    for (int k = 0; k < z->rows * z->cols; k++)
        a[k] = crl_rng_range(&rng, z->lo, z->hi);
    return a;
}

static double *zoomed(const zcase *z, const double *a, int *orows, int *ocols)
{
    *orows = dmc_zoom_len(z->rows, z->zoom);
    *ocols = dmc_zoom_len(z->cols, z->zoom);
    ck_assert(*orows >= 1 && *ocols >= 1);
    double *coef = malloc(sizeof(double) * (size_t)z->rows * (size_t)z->cols);
    double *out = malloc(sizeof(double) * (size_t)*orows * (size_t)*ocols);
    ck_assert(coef && out);
    dmc_zoom2d(a, z->rows, z->cols, coef, out, *orows, *ocols);
    free(coef);
    return out;
}

static double max_abs(const double *a, size_t n)
{
    double m = 0;
    for (size_t k = 0; k < n; k++)
        m = fmax(m, fabs(a[k]));
    return m;
}

/* ---- without SciPy ---- */

/* int(round(n * zoom)), Python's round: halves to even. */
START_TEST(test_zoom_len)
{
    ck_assert_int_eq(dmc_zoom_len(30, 201 / 30.0), 201);
    ck_assert_int_eq(dmc_zoom_len(5, 0.5), 2);  /* 2.5 */
    ck_assert_int_eq(dmc_zoom_len(7, 0.5), 4);  /* 3.5 */
    ck_assert_int_eq(dmc_zoom_len(3, 2.5), 8);  /* 7.5 */
    ck_assert_int_eq(dmc_zoom_len(1, 2.5), 2);  /* 2.5 */
    ck_assert_int_eq(dmc_zoom_len(6, 0.2), 1);  /* 1.2 */
    ck_assert_int_eq(dmc_zoom_len(4, 0.2), 1);  /* 0.8 */
    ck_assert_int_eq(dmc_zoom_len(4, 0.1), 0);  /* 0.4: SciPy makes an empty axis */
    ck_assert_int_eq(dmc_zoom_len(10, 1e300), -1);
}
END_TEST

/* An interpolating spline: where an output coordinate is a sample's (every other output of n -> 2n - 1),
 * the output is that sample; a constant grid stays constant everywhere. */
START_TEST(test_zoom_interpolates)
{
    zcase z = {9, 6, 0, -1.0, 1.0};
    double *a = grid(&z, 5);
    int rows = 2 * z.rows - 1, cols = 2 * z.cols - 1;
    double *coef = malloc(sizeof(double) * 54), *out = malloc(sizeof(double) * (size_t)rows * (size_t)cols);
    ck_assert(coef && out);
    dmc_zoom2d(a, z.rows, z.cols, coef, out, rows, cols);
    double tol = 1e-12 * max_abs(a, 54);
    for (int i = 0; i < z.rows; i++)
        for (int j = 0; j < z.cols; j++)
            ck_assert_msg(fabs(out[2 * i * cols + 2 * j] - a[i * z.cols + j]) <= tol,
                          "sample (%d, %d): %.17g, the grid's %.17g", i, j, out[2 * i * cols + 2 * j],
                          a[i * z.cols + j]);
    for (int k = 0; k < 54; k++)
        a[k] = 0.625;
    dmc_zoom2d(a, z.rows, z.cols, coef, out, rows, cols);
    for (int k = 0; k < rows * cols; k++)
        ck_assert_msg(fabs(out[k] - 0.625) <= 1e-12, "out[%d] = %.17g of a constant 0.625", k, out[k]);
    free(a);
    free(coef);
    free(out);
}
END_TEST

/* ---- against SciPy ---- */

static const char scipy_script[] =
    "import sys\n"
    "import numpy as np\n"
    "from scipy import ndimage\n"
    "d = sys.argv[1]\n"
    "for line in open(d + '/cases'):\n"
    "    name, rows, cols, zoom = line.split()\n"
    "    a = np.fromfile(d + '/' + name + '.in', dtype='<f8').reshape(int(rows), int(cols))\n"
    "    z = ndimage.zoom(a, float.fromhex(zoom))\n"
    "    open(d + '/' + name + '.shape', 'w').write('%d %d\\n' % z.shape)\n"
    "    np.ascontiguousarray(z, dtype='<f8').tofile(d + '/' + name + '.out')\n";

/* The first python3 that imports scipy.ndimage (Debian's python3-scipy is /usr/bin's), or NULL. */
static const char *python_with_scipy(void)
{
    static const char *const candidates[] = {"python3", "/usr/bin/python3"};
    for (size_t k = 0; k < sizeof candidates / sizeof candidates[0]; k++) {
        const char *argv[] = {candidates[k], "-c", "import scipy.ndimage", NULL};
        gint status = 1;
        if (g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_SEARCH_PATH | G_SPAWN_STDOUT_TO_DEV_NULL |
                         G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, NULL, NULL, &status, NULL) &&
            g_spawn_check_wait_status(status, NULL))
            return candidates[k];
    }
    return NULL;
}

START_TEST(test_zoom_matches_scipy)
{
    const char *py = python_with_scipy();
    if (!py) {
        printf("SKIP test_zoom_matches_scipy: no python3 imports scipy.ndimage (apt-get install python3-scipy)\n");
        return;
    }
    scratch_open("crl-zoom-XXXXXX");
    enum { SEEDS = 3 };
    GString *list = g_string_new(NULL);
    double *in[N_CASES][SEEDS];
    for (size_t c = 0; c < N_CASES; c++)
        for (int s = 0; s < SEEDS; s++) {
            in[c][s] = grid(&cases[c], 100 * c + (uint64_t)s);
            char name[32];
            snprintf(name, sizeof name, "c%zu_%d", c, s);
            g_string_append_printf(list, "%s %d %d %a\n", name, cases[c].rows, cases[c].cols, cases[c].zoom);
            char *file = g_strdup_printf("%s/%s.in", tmp_root, name);
            ck_assert(g_file_set_contents(file, (const char *)in[c][s],
                                          (gssize)(sizeof(double) * (size_t)cases[c].rows * (size_t)cases[c].cols),
                                          NULL));
            g_free(file);
        }
    char *cases_file = tpath("cases");
    ck_assert(g_file_set_contents(cases_file, list->str, (gssize)list->len, NULL));
    g_free(cases_file);
    g_string_free(list, TRUE);

    const char *argv[] = {py, "-c", scipy_script, tmp_root, NULL};
    gchar *errout = NULL;
    gint status = 1;
    GError *ge = NULL;
    ck_assert_msg(g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_SEARCH_PATH | G_SPAWN_STDOUT_TO_DEV_NULL, NULL,
                               NULL, NULL, &errout, &status, &ge),
                  "cannot run %s: %s", py, ge ? ge->message : "?");
    ck_assert_msg(g_spawn_check_wait_status(status, NULL), "scipy.ndimage.zoom failed: %s", errout);
    g_free(errout);

    size_t values = 0, identical = 0;
    double worst = 0;
    for (size_t c = 0; c < N_CASES; c++)
        for (int s = 0; s < SEEDS; s++) {
            const zcase *z = &cases[c];
            int orows, ocols;
            double *ours = zoomed(z, in[c][s], &orows, &ocols);
            char *shape_file = g_strdup_printf("%s/c%zu_%d.shape", tmp_root, c, s);
            char *out_file = g_strdup_printf("%s/c%zu_%d.out", tmp_root, c, s);
            gchar *shape = NULL, *theirs = NULL;
            gsize n_theirs = 0;
            ck_assert(g_file_get_contents(shape_file, &shape, NULL, NULL));
            ck_assert(g_file_get_contents(out_file, &theirs, &n_theirs, NULL));
            int srows = -1, scols = -1;
            ck_assert_int_eq(sscanf(shape, "%d %d", &srows, &scols), 2);
            ck_assert_msg(srows == orows && scols == ocols, "%d x %d zoomed by %.17g: SciPy's %d x %d, ours %d x %d",
                          z->rows, z->cols, z->zoom, srows, scols, orows, ocols);
            ck_assert_uint_eq(n_theirs, sizeof(double) * (size_t)orows * (size_t)ocols);
            double tol = 1e-12 * max_abs(in[c][s], (size_t)z->rows * (size_t)z->cols);
            for (int k = 0; k < orows * ocols; k++) {
                double want;
                memcpy(&want, theirs + sizeof(double) * (size_t)k, sizeof want);
                double d = fabs(ours[k] - want);
                ck_assert_msg(d <= tol, "%d x %d zoomed by %.17g (seed %d): out[%d, %d] = %.17g, SciPy's %.17g",
                              z->rows, z->cols, z->zoom, s, k / ocols, k % ocols, ours[k], want);
                worst = fmax(worst, d);
                identical += ours[k] == want;
                values++;
            }
            g_free(shape);
            g_free(theirs);
            g_free(shape_file);
            g_free(out_file);
            free(ours);
            free(in[c][s]);
        }
    printf("# dmc_zoom2d vs scipy.ndimage.zoom: %zu values, %zu bit-identical, largest gap %.3g\n", values,
           identical, worst);
    scratch_close();
}
END_TEST

/* Escape.initialize_episode's terrain lines, verbatim but for the bumps (read) and the float32
 * store (numpy's cast, as physics.model.hfield_data takes them). */
static const char terrain_script[] =
    "import sys\n"
    "import numpy as np\n"
    "from scipy import ndimage\n"
    "res = int(sys.argv[3])\n"
    "bump_res = int(sys.argv[4])\n"
    "bumps = np.fromfile(sys.argv[1], dtype='<f8').reshape(bump_res, bump_res)\n"
    "row_grid, col_grid = np.ogrid[-1:1:res*1j, -1:1:res*1j]\n"
    "radius = np.clip(np.sqrt(col_grid**2 + row_grid**2), .04, 1)\n"
    "bowl_shape = .5 - np.cos(2*np.pi*radius)/2\n"
    "smooth_bumps = ndimage.zoom(bumps, res / float(bump_res))\n"
    "terrain = bowl_shape * smooth_bumps\n"
    "terrain.ravel().astype('<f4').tofile(sys.argv[2])\n";

/* One float32 step apart at most: numpy's cos may be a SIMD one whose last double bit differs from
 * the C library's, which can move the float32 rounding of a product by one step. */
static bool within_one_float(float a, float b)
{
    return a == b || nextafterf(a, INFINITY) == b || nextafterf(a, -INFINITY) == b;
}

START_TEST(test_escape_terrain_matches_suite)
{
    const char *py = python_with_scipy();
    if (!py) {
        printf("SKIP test_escape_terrain_matches_suite: no python3 imports scipy.ndimage\n");
        return;
    }
    crl_error e = {0};
    dmc_model dm;
    ck_assert_msg(dmc_model_load(&dm, &dmc_quadruped_escape, NULL, &e) == CRL_OK, "%s", e.message);
    mjData *d = mj_makeData(dm.m);
    ck_assert_ptr_nonnull(d);
    const int n_extra = dmc_quadruped_escape.n_extra, res = dm.m->hfield_nrow[0];
    const int bump_res = (int)lround(sqrt(n_extra));
    ck_assert_int_eq(bump_res * bump_res, n_extra);
    double *extra = calloc((size_t)n_extra, sizeof(double));
    ck_assert_ptr_nonnull(extra);
    scratch_open("crl-terrain-XXXXXX");
    char *in = tpath("bumps"), *out = tpath("terrain");
    char res_s[16], bump_s[16];
    snprintf(res_s, sizeof res_s, "%d", res);
    snprintf(bump_s, sizeof bump_s, "%d", bump_res);
    size_t cells = (size_t)res * (size_t)res, same = 0;
    for (uint64_t seed = 1; seed <= 3; seed++) {
        crl_rng rng;
        crl_rng_init(&rng, seed, 0);
        mj_resetData(dm.m, d);
        dmc_quadruped_escape.init(&dm, d, extra, &rng);
        ck_assert(g_file_set_contents(in, (const char *)extra, (gssize)(sizeof(double) * (size_t)n_extra), NULL));
        const char *argv[] = {py, "-c", terrain_script, in, out, res_s, bump_s, NULL};
        gchar *errout = NULL, *theirs = NULL;
        gsize n_theirs = 0;
        gint status = 1;
        ck_assert(g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_SEARCH_PATH | G_SPAWN_STDOUT_TO_DEV_NULL, NULL,
                               NULL, NULL, &errout, &status, NULL));
        ck_assert_msg(g_spawn_check_wait_status(status, NULL), "the suite's terrain lines failed: %s", errout);
        g_free(errout);
        ck_assert(g_file_get_contents(out, &theirs, &n_theirs, NULL));
        ck_assert_uint_eq(n_theirs, cells * sizeof(float));
        const float *ours = dm.m->hfield_data + dm.m->hfield_adr[0];
        for (size_t k = 0; k < cells; k++) {
            float want;
            memcpy(&want, theirs + k * sizeof(float), sizeof want);
            ck_assert_msg(within_one_float(ours[k], want), "seed %d: terrain[%zu, %zu] = %.9g, the suite's %.9g",
                          (int)seed, k / (size_t)res, k % (size_t)res, ours[k], want);
            same += ours[k] == want;
        }
        g_free(theirs);
    }
    printf("# escape's terrain vs the suite's lines: %zu of %zu float32 samples identical\n", same, 3 * cells);
    g_free(in);
    g_free(out);
    scratch_close();
    free(extra);
    mj_deleteData(d);
    dmc_model_free(&dm);
}
END_TEST

static Suite *zoom_suite(void)
{
    Suite *s = suite_create("dm_control spline zoom");
    TCase *tc = tcase_create("zoom");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_zoom_len);
    tcase_add_test(tc, test_zoom_interpolates);
    tcase_add_test(tc, test_zoom_matches_scipy);
    tcase_add_test(tc, test_escape_terrain_matches_suite);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    dmc_install_error_hooks();
    SRunner *sr = srunner_create(zoom_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
