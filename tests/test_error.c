/* Check suite: crl_error values. */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <crl/crl.h>

START_TEST(set_formats_and_returns_code)
{
    crl_error err;
    int rc = crl_error_set(&err, CRL_E_CONFIG, "%s:%d: bad '%s'", "a.ini", 3, "x");
    ck_assert_int_eq(rc, CRL_E_CONFIG);
    ck_assert_int_eq(err.code, CRL_E_CONFIG);
    ck_assert_str_eq(err.message, "a.ini:3: bad 'x'");
}
END_TEST

START_TEST(null_error_is_allowed)
{
    ck_assert_int_eq(crl_error_set(NULL, CRL_E_IO, "x"), CRL_E_IO);
    crl_error_prefix(NULL, "y");
    crl_error_clear(NULL);
}
END_TEST

START_TEST(long_message_truncates)
{
    crl_error err;
    char big[3000];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    crl_error_set(&err, CRL_E_INVALID, "%s", big);
    ck_assert_uint_eq(strlen(err.message), CRL_ERROR_MESSAGE_MAX - 1);
}
END_TEST

START_TEST(prefix_prepends_context)
{
    crl_error err;
    crl_error_set(&err, CRL_E_NOT_FOUND, "no env 'x'");
    crl_error_prefix(&err, "while loading %s: ", "exp.ini");
    ck_assert_str_eq(err.message, "while loading exp.ini: no env 'x'");
    ck_assert_int_eq(err.code, CRL_E_NOT_FOUND);
    /* A cleared error takes no prefix. */
    crl_error_clear(&err);
    crl_error_prefix(&err, "ctx: ");
    ck_assert_str_eq(err.message, "");
    ck_assert_int_eq(err.code, CRL_OK);
}
END_TEST

START_TEST(prefix_keeps_within_bounds)
{
    crl_error err;
    char big[CRL_ERROR_MESSAGE_MAX];
    memset(big, 'm', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    crl_error_set(&err, CRL_E_IO, "%s", big);
    crl_error_prefix(&err, "context: ");
    ck_assert_uint_eq(strlen(err.message), CRL_ERROR_MESSAGE_MAX - 1);
    ck_assert(strncmp(err.message, "context: mmm", 12) == 0);
}
END_TEST

START_TEST(status_names)
{
    ck_assert_str_eq(crl_status_name(CRL_OK), "CRL_OK");
    ck_assert_str_eq(crl_status_name(CRL_E_CONFIG), "CRL_E_CONFIG");
    ck_assert_str_eq(crl_status_name(CRL_E_USAGE), "CRL_E_USAGE");
    ck_assert_str_eq(crl_status_name(-1), "CRL_E_UNKNOWN");
    ck_assert_str_eq(crl_status_name(999), "CRL_E_UNKNOWN");
}
END_TEST

/* crl_error_pass hands a local error on: its code and message, or the
 * fallback when nothing was recorded; a full-length message survives. */
START_TEST(pass_hands_on)
{
    crl_error local, out;
    crl_error_clear(&local);
    crl_error_clear(&out);
    /* nothing recorded: the fallback, with a message, never CRL_OK */
    ck_assert_int_eq(crl_error_pass(&out, &local, CRL_E_NOMEM), CRL_E_NOMEM);
    ck_assert_int_eq(out.code, CRL_E_NOMEM);
    ck_assert(strstr(out.message, "CRL_E_NOMEM") != NULL);
    ck_assert_int_eq(crl_error_pass(NULL, &local, CRL_E_IO), CRL_E_IO);
    ck_assert_int_eq(crl_error_pass(NULL, NULL, CRL_E_IO), CRL_E_IO);
    /* a recorded error: its code and message, whatever the fallback */
    crl_error_set(&local, CRL_E_CORRUPT, "file %s: offset %d", "x.ckpt", 12);
    ck_assert_int_eq(crl_error_pass(&out, &local, CRL_E_NOMEM), CRL_E_CORRUPT);
    ck_assert_int_eq(out.code, CRL_E_CORRUPT);
    ck_assert_str_eq(out.message, "file x.ckpt: offset 12");
    ck_assert_int_eq(crl_error_pass(NULL, &local, CRL_E_NOMEM), CRL_E_CORRUPT);
    ck_assert_int_eq(crl_error_pass(&local, &local, CRL_E_NOMEM), CRL_E_CORRUPT);
    ck_assert_str_eq(local.message, "file x.ckpt: offset 12");
    /* fallback CRL_OK with nothing recorded: success, err cleared */
    crl_error_clear(&local);
    ck_assert_int_eq(crl_error_pass(&out, &local, CRL_OK), CRL_OK);
    ck_assert_int_eq(out.code, CRL_OK);
    ck_assert_str_eq(out.message, "");
    char big[CRL_ERROR_MESSAGE_MAX + 10];
    memset(big, 'q', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    crl_error_set(&local, CRL_E_IO, "%s", big);
    ck_assert_int_eq(crl_error_pass(&out, &local, CRL_E_NOMEM), CRL_E_IO);
    ck_assert_uint_eq(strlen(out.message), CRL_ERROR_MESSAGE_MAX - 1);
    ck_assert_str_eq(out.message, local.message);
}
END_TEST

static Suite *error_suite(void)
{
    Suite *s = suite_create("error");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, set_formats_and_returns_code);
    tcase_add_test(tc, null_error_is_allowed);
    tcase_add_test(tc, long_message_truncates);
    tcase_add_test(tc, prefix_prepends_context);
    tcase_add_test(tc, prefix_keeps_within_bounds);
    tcase_add_test(tc, status_names);
    tcase_add_test(tc, pass_hands_on);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(error_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
