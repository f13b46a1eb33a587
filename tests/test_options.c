/* Check suite: value parsers, "did you mean", and crl_opts built from declared options. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <crl/crl.h>
#include <crl/config.h>

/* ---- parsers ---- */

START_TEST(parse_bool_accepts_all_spellings)
{
    static const char *const yes[] = { "true", "TRUE", "True", "yes", "YES", "on", "On", "1" };
    static const char *const no[] = { "false", "FALSE", "no", "No", "off", "OFF", "0" };
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        bool b = false;
        ck_assert_msg(crl_parse_bool(yes[i], &b), "%s", yes[i]);
        ck_assert(b);
    }
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        bool b = true;
        ck_assert_msg(crl_parse_bool(no[i], &b), "%s", no[i]);
        ck_assert(!b);
    }
}
END_TEST

START_TEST(parse_bool_rejects_others)
{
    static const char *const bad[] = { "", "2", "maybe", "y", "n", "t", " true", "true ", "truee", "01", "-1" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        bool b = true;
        ck_assert_msg(!crl_parse_bool(bad[i], &b), "'%s' accepted", bad[i]);
        ck_assert(b); /* untouched */
    }
    ck_assert(!crl_parse_bool(NULL, NULL));
}
END_TEST

START_TEST(parse_int_good)
{
    static const struct { const char *s; int64_t v; } cases[] = {
        { "0", 0 }, { "42", 42 }, { "-42", -42 }, { "+7", 7 }, { "010", 10 },
        { "0x10", 16 }, { "0XfF", 255 }, { "-0x10", -16 },
        { "9223372036854775807", INT64_MAX }, { "-9223372036854775808", INT64_MIN },
        { "0x7fffffffffffffff", INT64_MAX },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t v = 0;
        ck_assert_msg(crl_parse_int(cases[i].s, &v), "%s", cases[i].s);
        ck_assert_int_eq(v, cases[i].v);
    }
}
END_TEST

START_TEST(parse_int_bad)
{
    static const char *const bad[] = {
        "", "-", "+", "0x", "12a", "1.5", "1e3", " 1", "1 ", "--1", "+-1", "0x-1", "0x 1",
        "9223372036854775808", "-9223372036854775809", "0x8000000000000000", "99999999999999999999",
        "ten", "1_000",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t v = 123;
        ck_assert_msg(!crl_parse_int(bad[i], &v), "'%s' accepted", bad[i]);
        ck_assert_int_eq(v, 123);
    }
}
END_TEST

START_TEST(parse_double_good_and_bad)
{
    static const struct { const char *s; double v; } good[] = {
        { "0", 0 }, { "1.5", 1.5 }, { "-2.25", -2.25 }, { "1e3", 1000 }, { "3E-2", 0.03 }, { ".5", 0.5 },
        { "1e-320", 1e-320 },
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        double v = -1;
        ck_assert_msg(crl_parse_double(good[i].s, &v), "%s", good[i].s);
        ck_assert_double_eq(v, good[i].v);
    }
    static const char *const bad[] = {
        "", "abc", "1.5x", "inf", "-inf", "nan", "NaN", "1e999", " 1", "1 ", "1,5", "--1",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        double v = 7;
        ck_assert_msg(!crl_parse_double(bad[i], &v), "'%s' accepted", bad[i]);
        ck_assert_double_eq(v, 7);
    }
}
END_TEST

START_TEST(parse_size_good)
{
    static const struct { const char *s; uint64_t v; } cases[] = {
        { "0", 0 }, { "4096", 4096 }, { "64K", 65536 }, { "64k", 65536 }, { "64KiB", 65536 },
        { "64kb", 65536 }, { "64M", 64ull << 20 }, { "64 M", 64ull << 20 }, { "2G", 2ull << 30 },
        { "1T", 1ull << 40 }, { "1P", 1ull << 50 }, { "512B", 512 }, { "3 GiB", 3ull << 30 },
        { "18446744073709551615", UINT64_MAX }, { "16383P", 16383ull << 50 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint64_t v = 0;
        ck_assert_msg(crl_parse_size(cases[i].s, &v), "%s", cases[i].s);
        ck_assert_msg(v == cases[i].v, "%s -> %llu", cases[i].s, (unsigned long long)v);
    }
}
END_TEST

START_TEST(parse_size_bad)
{
    static const char *const bad[] = {
        "", "K", "-1", "+1", "1.5G", "64X", "64KK", "64 ", " 64", "64 K B", "0x10",
        "18446744073709551616", "16384P", "17179869184G", "1E",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t v = 5;
        ck_assert_msg(!crl_parse_size(bad[i], &v), "'%s' accepted", bad[i]);
        ck_assert(v == 5);
    }
}
END_TEST

/* ---- did you mean ---- */

START_TEST(did_you_mean_picks_closest)
{
    const char *const c[] = { "level", "length", "lend", NULL };
    ck_assert_str_eq(crl_did_you_mean("lenght", c), "length");   /* one swap */
    ck_assert_str_eq(crl_did_you_mean("levl", c), "level");
    ck_assert_str_eq(crl_did_you_mean("lenhgt", c), "length");   /* 2 edits, len 6: limit 2 */
    /* A swap of adjacent characters is one edit: "lgo" (limit 1) finds "log". */
    const char *const sec[] = { "plugins", "log", NULL };
    ck_assert_str_eq(crl_did_you_mean("lgo", sec), "log");
    ck_assert_ptr_null(crl_did_you_mean("gol", sec));            /* 2 edits, limit 1 */
    const char *const cnt[] = { "count", NULL };
    ck_assert_str_eq(crl_did_you_mean("cuont", cnt), "count");
    ck_assert_ptr_null(crl_did_you_mean("cunot", cnt));          /* 2 edits, limit 1 */
    ck_assert_ptr_null(crl_did_you_mean("capacity", c));
    ck_assert_ptr_null(crl_did_you_mean("x", NULL));
    ck_assert_ptr_null(crl_did_you_mean(NULL, c));
    /* Short words still allow one edit. */
    const char *const d[] = { "on", "off", NULL };
    ck_assert_str_eq(crl_did_you_mean("of", d), "on");   /* tie: first wins */
    ck_assert_str_eq(crl_did_you_mean("off", d), "off");
    /* Limit is a third of the word: "abcdef" allows 2, not 3. */
    const char *const e[] = { "abcxyz", NULL };
    ck_assert_ptr_null(crl_did_you_mean("abcdef", e));
    const char *const f[] = { "abcdxy", NULL };
    ck_assert_str_eq(crl_did_you_mean("abcdef", f), "abcdxy");
    /* The smallest distance wins over order. */
    const char *const g[] = { "classsic", "classic", NULL };
    ck_assert_str_eq(crl_did_you_mean("clasic", g), "classic");
    const char *const none[] = { NULL };
    ck_assert_ptr_null(crl_did_you_mean("abc", none));
}
END_TEST

/* ---- crl_opts ---- */

static const crl_option table[] = {
    { "flag", CRL_OPT_BOOL, 0, "false", 0, 0, NULL, "a flag" },
    { "count", CRL_OPT_INT, CRL_OPT_RANGE, "3", 1, 10, NULL, "how many" },
    { "rate", CRL_OPT_DOUBLE, 0, "0.5", 0, 0, NULL, "a rate" },
    { "memory", CRL_OPT_SIZE, 0, "64M", 0, 0, NULL, "bytes" },
    { "name", CRL_OPT_STRING, 0, NULL, 0, 0, NULL, "unset, no default" },
    { "mode", CRL_OPT_ENUM, 0, "fast", 0, 0, "fast|slow|auto", "a mode" },
    { "items", CRL_OPT_LIST, 0, "a, b", 0, 0, NULL, "a list" },
    { "weights", CRL_OPT_DOUBLES, CRL_OPT_RANGE, "1,2,3", 1, 4, NULL, "doubles" },
    { "kwargs.", CRL_OPT_STRING, CRL_OPT_PREFIX, NULL, 0, 0, NULL, "passed through" },
    { "seed", CRL_OPT_INT, CRL_OPT_REQUIRED, NULL, 0, 0, NULL, "required" },
    CRL_OPTIONS_END,
};

static crl_opts *opts_from(const char *ini, crl_error *err)
{
    crl_config *cfg = crl_config_new(err);
    ck_assert_int_eq(crl_config_load_buffer(cfg, "o.ini", ini, strlen(ini), CRL_LAYER_FILE, err), CRL_OK);
    const crl_option *const tables[] = { table };
    crl_opts *o = crl_config_opts(cfg, "thing", tables, 1, err);
    crl_config_free(cfg);
    return o;
}

START_TEST(opts_defaults)
{
    crl_error err;
    crl_opts *o = opts_from("", &err);
    ck_assert_ptr_nonnull(o);
    ck_assert_str_eq(crl_opts_section(o), "thing");
    bool b = true;
    int64_t i = 0;
    double d = 0;
    uint64_t u = 0;
    const char *s = NULL;
    size_t n = 0;
    const char *const *items = NULL;
    const double *dv = NULL;
    ck_assert_int_eq(crl_opts_bool(o, "flag", &b, &err), CRL_OK);
    ck_assert(!b);
    ck_assert_int_eq(crl_opts_int(o, "count", &i, &err), CRL_OK);
    ck_assert_int_eq(i, 3);
    ck_assert_int_eq(crl_opts_double(o, "rate", &d, &err), CRL_OK);
    ck_assert_double_eq(d, 0.5);
    ck_assert_int_eq(crl_opts_size(o, "memory", &u, &err), CRL_OK);
    ck_assert(u == 64ull << 20);
    ck_assert_int_eq(crl_opts_string(o, "mode", &s, &err), CRL_OK);
    ck_assert_str_eq(s, "fast");
    ck_assert_int_eq(crl_opts_list(o, "items", &n, &items, &err), CRL_OK);
    ck_assert_uint_eq(n, 2);
    ck_assert_str_eq(items[0], "a");
    ck_assert_str_eq(items[1], "b");
    ck_assert_ptr_null(items[2]);
    ck_assert_int_eq(crl_opts_doubles(o, "weights", &n, &dv, &err), CRL_OK);
    ck_assert_uint_eq(n, 3);
    ck_assert_double_eq(dv[2], 3.0);
    ck_assert(!crl_opts_is_set(o, "flag"));
    ck_assert_str_eq(crl_opts_origin(o, "flag"), "default");
    ck_assert_str_eq(crl_opts_origin(o, "name"), "not set");
    ck_assert_ptr_null(crl_opts_origin(o, "nope"));
    ck_assert(!crl_opts_is_set(o, "nope"));
    ck_assert_uint_eq(crl_opts_prefixed_count(o, "kwargs."), 0);
    ck_assert_ptr_null(crl_opts_prefixed_key(o, "kwargs.", 0));
    crl_opts_free(o);
}
END_TEST

START_TEST(opts_values_and_origins)
{
    crl_error err;
    crl_opts *o = opts_from("[thing]\nflag = yes\ncount = 0x0a\nrate = 2.5e-1\nmemory = 1 GiB\nname = hello world\n"
                            "mode = slow\nitems =\nweights = 0.5 , 1.5\nkwargs.g = 9.8\nkwargs.render_mode = rgb\n"
                            "seed = 7\nundeclared = ignored here\n",
                            &err);
    ck_assert_msg(o != NULL, "%s", err.message);
    bool b = false;
    int64_t i = 0;
    double d = 0;
    uint64_t u = 0;
    const char *s = NULL;
    size_t n = 9;
    const char *const *items = NULL;
    const double *dv = NULL;
    ck_assert_int_eq(crl_opts_bool(o, "flag", &b, &err), CRL_OK);
    ck_assert(b);
    ck_assert(crl_opts_is_set(o, "flag"));
    ck_assert_str_eq(crl_opts_origin(o, "flag"), "o.ini:2");
    ck_assert_int_eq(crl_opts_int(o, "count", &i, &err), CRL_OK);
    ck_assert_int_eq(i, 10);
    ck_assert_int_eq(crl_opts_double(o, "rate", &d, &err), CRL_OK);
    ck_assert_double_eq(d, 0.25);
    ck_assert_int_eq(crl_opts_size(o, "memory", &u, &err), CRL_OK);
    ck_assert(u == 1ull << 30);
    ck_assert_int_eq(crl_opts_string(o, "name", &s, &err), CRL_OK);
    ck_assert_str_eq(s, "hello world");
    ck_assert_int_eq(crl_opts_string(o, "mode", &s, &err), CRL_OK);
    ck_assert_str_eq(s, "slow");
    ck_assert_int_eq(crl_opts_list(o, "items", &n, &items, &err), CRL_OK);
    ck_assert_uint_eq(n, 0);
    ck_assert_ptr_nonnull(items);
    ck_assert_ptr_null(items[0]);
    ck_assert_int_eq(crl_opts_doubles(o, "weights", &n, &dv, &err), CRL_OK);
    ck_assert_uint_eq(n, 2);
    ck_assert_double_eq(dv[0], 0.5);
    ck_assert_double_eq(dv[1], 1.5);
    ck_assert_int_eq(crl_opts_int(o, "seed", &i, &err), CRL_OK);
    ck_assert_int_eq(i, 7);
    ck_assert_uint_eq(crl_opts_prefixed_count(o, "kwargs."), 2);
    ck_assert_str_eq(crl_opts_prefixed_key(o, "kwargs.", 0), "kwargs.g");
    ck_assert_str_eq(crl_opts_prefixed_value(o, "kwargs.", 0), "9.8");
    ck_assert_str_eq(crl_opts_prefixed_key(o, "kwargs.", 1), "kwargs.render_mode");
    ck_assert_str_eq(crl_opts_prefixed_value(o, "kwargs.", 1), "rgb");
    ck_assert_ptr_null(crl_opts_prefixed_key(o, "kwargs.", 2));
    ck_assert_uint_eq(crl_opts_prefixed_count(o, "other."), 0);
    ck_assert(crl_opts_is_set(o, "kwargs."));
    ck_assert_str_eq(crl_opts_origin(o, "kwargs."), "o.ini:10");
    crl_opts_free(o);
}
END_TEST

START_TEST(opts_getter_errors)
{
    crl_error err;
    crl_opts *o = opts_from("[thing]\ncount = 4\n", &err);
    ck_assert_ptr_nonnull(o);
    int64_t i = 0;
    bool b = false;
    const char *s = NULL;
    size_t n;
    const double *dv;
    const char *const *items;
    /* Type mismatch: CRL_E_INVALID naming section, key, type and the right getter. */
    ck_assert_int_eq(crl_opts_bool(o, "count", &b, &err), CRL_E_INVALID);
    ck_assert_str_eq(err.message, "[thing] count is declared as INT; read it with crl_opts_int");
    ck_assert_int_eq(crl_opts_string(o, "count", &s, &err), CRL_E_INVALID);
    ck_assert_int_eq(crl_opts_int(o, "mode", &i, &err), CRL_E_INVALID);
    ck_assert_str_eq(err.message, "[thing] mode is declared as ENUM; read it with crl_opts_string");
    ck_assert_int_eq(crl_opts_doubles(o, "items", &n, &dv, &err), CRL_E_INVALID);
    ck_assert_int_eq(crl_opts_list(o, "weights", &n, &items, &err), CRL_E_INVALID);
    ck_assert_int_eq(crl_opts_string(o, "kwargs.", &s, &err), CRL_E_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "crl_opts_prefixed_*"));
    /* Unknown name, with a hint. */
    ck_assert_int_eq(crl_opts_int(o, "cuont", &i, &err), CRL_E_NOT_FOUND);
    ck_assert_str_eq(err.message, "[thing] declares no option 'cuont'; did you mean 'count'?");
    ck_assert_int_eq(crl_opts_int(o, "zzzzzzzz", &i, &err), CRL_E_NOT_FOUND);
    ck_assert_ptr_nonnull(strstr(err.message, "(declared: flag, count, rate,"));
    /* Unset without default. */
    ck_assert_int_eq(crl_opts_string(o, "name", &s, &err), CRL_E_NOT_FOUND);
    ck_assert_str_eq(err.message, "[thing] name is not set and has no default; add 'name = ...' under [thing]");
    ck_assert_int_eq(crl_opts_int(o, "seed", &i, &err), CRL_E_NOT_FOUND);
    /* NULL err still returns the code. */
    ck_assert_int_eq(crl_opts_int(o, "seed", &i, NULL), CRL_E_NOT_FOUND);
    ck_assert_int_eq(crl_opts_bool(o, "count", &b, NULL), CRL_E_INVALID);
    ck_assert_int_eq(crl_opts_int(NULL, "seed", &i, &err), CRL_E_INVALID);
    /* Values untouched on failure. */
    ck_assert_int_eq(i, 0);
    crl_opts_free(o);
    crl_opts_free(NULL);
}
END_TEST

START_TEST(opts_bad_values)
{
    static const struct { const char *ini; const char *msg; } cases[] = {
        { "[thing]\ncount = 11\n", "o.ini:2: [thing] count = '11': must be between 1 and 10" },
        { "[thing]\ncount = x\n", "o.ini:2: [thing] count = 'x': expected a 64-bit integer (decimal or 0x hex)" },
        { "[thing]\nflag = 2\n", "o.ini:2: [thing] flag = '2': expected a boolean (true/false, yes/no, on/off, 1/0)" },
        { "[thing]\nrate = nan\n", "o.ini:2: [thing] rate = 'nan': expected a finite number" },
        { "[thing]\nmemory = 1.5G\n",
          "o.ini:2: [thing] memory = '1.5G': expected a size in bytes (4096, 64K, 64M, 2G, 1T; powers of 1024)" },
        { "[thing]\nmode = turbo\n", "o.ini:2: [thing] mode = 'turbo': expected one of fast|slow|auto" },
        { "[thing]\nmode = slwo\n", "o.ini:2: [thing] mode = 'slwo': expected one of fast|slow|auto; did you mean 'slow'?" },
        { "[thing]\nmode = slo\n", "o.ini:2: [thing] mode = 'slo': expected one of fast|slow|auto; did you mean 'slow'?" },
        { "[thing]\nitems = a,,b\n", "o.ini:2: [thing] items = 'a,,b': item 2 of the list is empty; remove the extra ','" },
        { "[thing]\nitems = a,\n", "o.ini:2: [thing] items = 'a,': item 2 of the list is empty; remove the extra ','" },
        { "[thing]\nweights = 1,x\n", "o.ini:2: [thing] weights = '1,x': item 2 ('x') is not a finite number" },
        { "[thing]\nweights = 1,2,3,4,5\n", "o.ini:2: [thing] weights = '1,2,3,4,5': must have between 1 and 4 items" },
        { "[thing]\nweights =\n", "o.ini:2: [thing] weights = '': must have between 1 and 4 items" },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        crl_error err;
        crl_error_clear(&err);
        crl_config *cfg = crl_config_new(&err);
        ck_assert_int_eq(crl_config_load_buffer(cfg, "o.ini", cases[k].ini, strlen(cases[k].ini), CRL_LAYER_FILE,
                                                &err),
                         CRL_OK);
        const crl_option *const tables[] = { table };
        crl_opts *o = crl_config_opts(cfg, "thing", tables, 1, &err);
        ck_assert_ptr_null(o);
        ck_assert_int_eq(err.code, CRL_E_CONFIG);
        ck_assert_str_eq(err.message, cases[k].msg);
        crl_config_free(cfg);
    }
}
END_TEST

START_TEST(opts_bad_default_is_invalid)
{
    static const crl_option broken[] = {
        { "n", CRL_OPT_INT, 0, "ten", 0, 0, NULL, "bad default" },
        CRL_OPTIONS_END,
    };
    crl_error err;
    crl_config *cfg = crl_config_new(&err);
    const crl_option *const tables[] = { broken };
    ck_assert_ptr_null(crl_config_opts(cfg, "s", tables, 1, &err));
    ck_assert_int_eq(err.code, CRL_E_INVALID);
    ck_assert_str_eq(err.message, "option table for [s]: default of 'n' ('ten') is invalid: expected a 64-bit "
                                  "integer (decimal or 0x hex); fix the table");
    crl_config_free(cfg);
}
END_TEST

START_TEST(opts_first_table_wins_and_override_origin)
{
    static const crl_option base[] = {
        { "backend", CRL_OPT_STRING, 0, "a", 0, 0, NULL, NULL },
        CRL_OPTIONS_END,
    };
    static const crl_option comp[] = {
        { "backend", CRL_OPT_INT, 0, "1", 0, 0, NULL, NULL },
        { "speed", CRL_OPT_DOUBLE, 0, "1.0", 0, 0, NULL, NULL },
        CRL_OPTIONS_END,
    };
    crl_error err;
    crl_config *cfg = crl_config_new(&err);
    ck_assert_int_eq(crl_config_override(cfg, NULL, "env.speed=2", &err), CRL_OK);
    const crl_option *const tables[] = { base, comp };
    crl_opts *o = crl_config_opts(cfg, "env", tables, 2, &err);
    ck_assert_ptr_nonnull(o);
    const char *s;
    ck_assert_int_eq(crl_opts_string(o, "backend", &s, &err), CRL_OK);
    ck_assert_str_eq(s, "a");
    double d;
    ck_assert_int_eq(crl_opts_double(o, "speed", &d, &err), CRL_OK);
    ck_assert_double_eq(d, 2.0);
    ck_assert_str_eq(crl_opts_origin(o, "speed"), "command line");
    crl_opts_free(o);
    /* No tables: an empty set of options. */
    o = crl_config_opts(cfg, "env", NULL, 0, &err);
    ck_assert_ptr_nonnull(o);
    ck_assert_int_eq(crl_opts_double(o, "speed", &d, &err), CRL_E_NOT_FOUND);
    crl_opts_free(o);
    crl_config_free(cfg);
}
END_TEST

static Suite *options_suite(void)
{
    Suite *s = suite_create("options");
    TCase *tc = tcase_create("parsers");
    tcase_add_test(tc, parse_bool_accepts_all_spellings);
    tcase_add_test(tc, parse_bool_rejects_others);
    tcase_add_test(tc, parse_int_good);
    tcase_add_test(tc, parse_int_bad);
    tcase_add_test(tc, parse_double_good_and_bad);
    tcase_add_test(tc, parse_size_good);
    tcase_add_test(tc, parse_size_bad);
    tcase_add_test(tc, did_you_mean_picks_closest);
    suite_add_tcase(s, tc);
    tc = tcase_create("opts");
    tcase_add_test(tc, opts_defaults);
    tcase_add_test(tc, opts_values_and_origins);
    tcase_add_test(tc, opts_getter_errors);
    tcase_add_test(tc, opts_bad_values);
    tcase_add_test(tc, opts_bad_default_is_invalid);
    tcase_add_test(tc, opts_first_table_wins_and_override_origin);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(options_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
