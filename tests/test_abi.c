/* Check suite: the plugin ABI's layout, pinned for x86-64 (LP64).
 *
 * A failure here means a public struct changed shape: that breaks every
 * plugin built against an older SDK.  Structs may only grow at the end (then
 * bump CRL_ABI_MINOR and update the sizes here); anything else needs a
 * CRL_ABI_MAJOR bump. */
#include <check.h>
#include <stddef.h>
#include <stdlib.h>
#include <crl/crl.h>
#include <crl/host.h>

#if defined(__x86_64__) && defined(__LP64__)

#define PIN_SIZE(T, n) ck_assert_uint_eq(sizeof(T), (n))
#define PIN_OFF(T, m, n) ck_assert_uint_eq(offsetof(T, m), (n))

START_TEST(abi_version)
{
    ck_assert_int_eq(CRL_ABI_MAJOR, 1);
    ck_assert_int_eq(CRL_ABI_MINOR, 2);
}
END_TEST

START_TEST(error_layout)
{
    PIN_SIZE(crl_error, 8 + CRL_ERROR_MESSAGE_MAX);
    PIN_OFF(crl_error, code, 0);
    PIN_OFF(crl_error, reserved, 4);
    PIN_OFF(crl_error, message, 8);
    ck_assert_int_eq(CRL_ERROR_MESSAGE_MAX, 1024);
}
END_TEST

START_TEST(status_values)
{
    ck_assert_int_eq(CRL_OK, 0);
    ck_assert_int_eq(CRL_E_INVALID, 1);
    ck_assert_int_eq(CRL_E_NOMEM, 2);
    ck_assert_int_eq(CRL_E_IO, 3);
    ck_assert_int_eq(CRL_E_CONFIG, 4);
    ck_assert_int_eq(CRL_E_NOT_FOUND, 5);
    ck_assert_int_eq(CRL_E_EXISTS, 6);
    ck_assert_int_eq(CRL_E_ABI, 7);
    ck_assert_int_eq(CRL_E_PLUGIN, 8);
    ck_assert_int_eq(CRL_E_DTYPE, 9);
    ck_assert_int_eq(CRL_E_SHAPE, 10);
    ck_assert_int_eq(CRL_E_RANGE, 11);
    ck_assert_int_eq(CRL_E_RUNTIME, 12);
    ck_assert_int_eq(CRL_E_UNSUPPORTED, 13);
    ck_assert_int_eq(CRL_E_PERM, 14);
    ck_assert_int_eq(CRL_E_CRASH, 15);
    ck_assert_int_eq(CRL_E_USAGE, 16);
    ck_assert_int_eq(CRL_E_CORRUPT, 17);
    ck_assert_int_eq(CRL_E_TIMEOUT, 18);
    ck_assert_str_eq(crl_status_name(CRL_E_CORRUPT), "CRL_E_CORRUPT");
    ck_assert_str_eq(crl_status_name(CRL_E_TIMEOUT), "CRL_E_TIMEOUT");
    ck_assert_str_eq(crl_status_name(19), "CRL_E_UNKNOWN");
}
END_TEST

START_TEST(enum_values)
{
    ck_assert_int_eq(CRL_BOOL, 0);
    ck_assert_int_eq(CRL_U8, 1);
    ck_assert_int_eq(CRL_I8, 2);
    ck_assert_int_eq(CRL_I16, 3);
    ck_assert_int_eq(CRL_I32, 4);
    ck_assert_int_eq(CRL_I64, 5);
    ck_assert_int_eq(CRL_F16, 6);
    ck_assert_int_eq(CRL_F32, 7);
    ck_assert_int_eq(CRL_F64, 8);
    ck_assert_int_eq(CRL_MAX_DIMS, 8);
    ck_assert_int_eq(CRL_DEVICE_CPU, 0);
    ck_assert_int_eq(CRL_DEVICE_CUDA, 1);
    ck_assert_int_eq(CRL_KIND_ENV, 1);
    ck_assert_int_eq(CRL_KIND_TRANSFORM, 2);
    ck_assert_int_eq(CRL_KIND_STORAGE, 3);
    ck_assert_int_eq(CRL_KIND_SAMPLER, 4);
    ck_assert_int_eq(CRL_KIND_WRITER, 5);
    ck_assert_int_eq(CRL_KIND_LOSS, 6);
    ck_assert_int_eq(CRL_SPEC_UNBOUNDED, 0);
    ck_assert_int_eq(CRL_SPEC_COMPOSITE, 7);
    ck_assert_int_eq(CRL_OPT_END, 0);
    ck_assert_int_eq(CRL_OPT_DOUBLES, 8);
    ck_assert_int_eq(CRL_OPT_REQUIRED, 1);
    ck_assert_int_eq(CRL_OPT_RANGE, 2);
    ck_assert_int_eq(CRL_OPT_PREFIX, 4);
    ck_assert_int_eq(CRL_LOG_ERROR, 0);
    ck_assert_int_eq(CRL_LOG_DEBUG, 3);
}
END_TEST

START_TEST(device_layout)
{
    PIN_SIZE(crl_device, 8);
    PIN_OFF(crl_device, type, 0);
    PIN_OFF(crl_device, index, 4);
}
END_TEST

START_TEST(rng_layout)
{
    PIN_SIZE(crl_rng, 48);
    PIN_OFF(crl_rng, key, 0);
    PIN_OFF(crl_rng, ctr, 8);
    PIN_OFF(crl_rng, out, 24);
    PIN_OFF(crl_rng, idx, 40);
    PIN_OFF(crl_rng, reserved, 44);
}
END_TEST

START_TEST(option_layout)
{
    PIN_SIZE(crl_option, 56);
    PIN_OFF(crl_option, name, 0);
    PIN_OFF(crl_option, type, 8);
    PIN_OFF(crl_option, flags, 12);
    PIN_OFF(crl_option, default_value, 16);
    PIN_OFF(crl_option, min, 24);
    PIN_OFF(crl_option, max, 32);
    PIN_OFF(crl_option, choices, 40);
    PIN_OFF(crl_option, doc, 48);
}
END_TEST

START_TEST(component_layout)
{
    PIN_SIZE(crl_component, 40);
    PIN_OFF(crl_component, struct_size, 0);
    PIN_OFF(crl_component, kind, 4);
    PIN_OFF(crl_component, name, 8);
    PIN_OFF(crl_component, description, 16);
    PIN_OFF(crl_component, options, 24);
    PIN_OFF(crl_component, ops, 32);
}
END_TEST

START_TEST(plugin_desc_layout)
{
    PIN_SIZE(crl_plugin_desc, 128);
    PIN_OFF(crl_plugin_desc, abi_major, 0);
    PIN_OFF(crl_plugin_desc, abi_minor, 4);
    PIN_OFF(crl_plugin_desc, name, 8);
    PIN_OFF(crl_plugin_desc, version, 16);
    PIN_OFF(crl_plugin_desc, license, 24);
    PIN_OFF(crl_plugin_desc, description, 32);
    PIN_OFF(crl_plugin_desc, init, 40);
    PIN_OFF(crl_plugin_desc, fini, 48);
    PIN_OFF(crl_plugin_desc, options, 56);
    PIN_OFF(crl_plugin_desc, reserved, 64);
}
END_TEST

START_TEST(plugin_info_layout)
{
    PIN_SIZE(crl_plugin_info, 56);
    PIN_OFF(crl_plugin_info, name, 0);
    PIN_OFF(crl_plugin_info, path, 32);
    PIN_OFF(crl_plugin_info, abi_major, 40);
    PIN_OFF(crl_plugin_info, abi_minor, 44);
    PIN_OFF(crl_plugin_info, builtin, 48);
    PIN_OFF(crl_plugin_info, loaded, 49);
}
END_TEST

START_TEST(env_specs_layout)
{
    PIN_SIZE(crl_env_specs, 72);
    PIN_OFF(crl_env_specs, struct_size, 0);
    PIN_OFF(crl_env_specs, reserved, 4);
    PIN_OFF(crl_env_specs, observation, 8);
    PIN_OFF(crl_env_specs, action, 16);
    PIN_OFF(crl_env_specs, reward, 24);
    PIN_OFF(crl_env_specs, done, 32);
    PIN_OFF(crl_env_specs, state, 40);
    PIN_OFF(crl_env_specs, info, 48);
    PIN_OFF(crl_env_specs, max_episode_steps, 56);
    PIN_OFF(crl_env_specs, render_height, 64);
    PIN_OFF(crl_env_specs, render_width, 68);
}
END_TEST

START_TEST(env_ops_layout)
{
    PIN_SIZE(crl_env_ops, 64);
    PIN_OFF(crl_env_ops, struct_size, 0);
    PIN_OFF(crl_env_ops, reserved, 4);
    PIN_OFF(crl_env_ops, list, 8);
    PIN_OFF(crl_env_ops, make, 16);
    PIN_OFF(crl_env_ops, bind, 24);
    PIN_OFF(crl_env_ops, reset, 32);
    PIN_OFF(crl_env_ops, step, 40);
    PIN_OFF(crl_env_ops, render, 48);
    PIN_OFF(crl_env_ops, close, 56);
}
END_TEST

/* Since ABI 1.1. */
START_TEST(transform_layout)
{
    PIN_SIZE(crl_transform_specs, 56);
    PIN_OFF(crl_transform_specs, struct_size, 0);
    PIN_OFF(crl_transform_specs, batch_ndim, 4);
    PIN_OFF(crl_transform_specs, batch_shape, 8);
    PIN_OFF(crl_transform_specs, observation, 16);
    PIN_OFF(crl_transform_specs, action, 24);
    PIN_OFF(crl_transform_specs, reward, 32);
    PIN_OFF(crl_transform_specs, done, 40);
    PIN_OFF(crl_transform_specs, state, 48);
    PIN_SIZE(crl_transform_ops, 96);
    PIN_OFF(crl_transform_ops, struct_size, 0);
    PIN_OFF(crl_transform_ops, reserved, 4);
    PIN_OFF(crl_transform_ops, create, 8);
    PIN_OFF(crl_transform_ops, transform_specs, 16);
    PIN_OFF(crl_transform_ops, bind, 24);
    PIN_OFF(crl_transform_ops, call, 32);
    PIN_OFF(crl_transform_ops, reset, 40);
    PIN_OFF(crl_transform_ops, step, 48);
    PIN_OFF(crl_transform_ops, inv, 56);
    PIN_OFF(crl_transform_ops, destroy, 64);
    PIN_OFF(crl_transform_ops, repr, 72);   /* since ABI 1.2, at the end */
    PIN_OFF(crl_transform_ops, state, 80);  /* since ABI 1.2 */
    PIN_OFF(crl_transform_ops, load_state, 88);
}
END_TEST

START_TEST(storage_ops_layout)
{
    PIN_SIZE(crl_storage_ops, 104);
    PIN_OFF(crl_storage_ops, struct_size, 0);
    PIN_OFF(crl_storage_ops, reserved, 4);
    PIN_OFF(crl_storage_ops, open, 8);
    PIN_OFF(crl_storage_ops, set, 16);
    PIN_OFF(crl_storage_ops, get, 24);
    PIN_OFF(crl_storage_ops, len, 32);
    PIN_OFF(crl_storage_ops, has, 40);
    PIN_OFF(crl_storage_ops, write_count, 48);
    PIN_OFF(crl_storage_ops, sync, 56);
    PIN_OFF(crl_storage_ops, clear, 64);
    PIN_OFF(crl_storage_ops, dump, 72);
    PIN_OFF(crl_storage_ops, load, 80);
    PIN_OFF(crl_storage_ops, close, 88);
    PIN_OFF(crl_storage_ops, check, 96);
    PIN_SIZE(crl_storage_finding, 32);
    PIN_OFF(crl_storage_finding, file, 0);
    PIN_OFF(crl_storage_finding, slot, 8);
    PIN_OFF(crl_storage_finding, offset, 16);
    PIN_OFF(crl_storage_finding, reason, 24);
    PIN_SIZE(crl_storage_report, 64);
    PIN_OFF(crl_storage_report, struct_size, 0);
    PIN_OFF(crl_storage_report, reserved, 4);
    PIN_OFF(crl_storage_report, finding, 8);
    PIN_OFF(crl_storage_report, user, 16);
    PIN_OFF(crl_storage_report, capacity, 24);
    PIN_OFF(crl_storage_report, items, 32);
    PIN_OFF(crl_storage_report, bad_slots, 40);
    PIN_OFF(crl_storage_report, bad_files, 48);
    PIN_OFF(crl_storage_report, dropped, 56);
    ck_assert_int_eq(CRL_STORAGE_REPAIR, 1);
}
END_TEST

START_TEST(loss_ops_layout)
{
    PIN_SIZE(crl_loss_ops, 112);
    PIN_OFF(crl_loss_ops, struct_size, 0);
    PIN_OFF(crl_loss_ops, flags, 4);
    PIN_OFF(crl_loss_ops, create, 8);
    PIN_OFF(crl_loss_ops, destroy, 16);
    PIN_OFF(crl_loss_ops, act, 24);
    PIN_OFF(crl_loss_ops, explore_step, 32);
    PIN_OFF(crl_loss_ops, num_params, 40);
    PIN_OFF(crl_loss_ops, param, 48);
    PIN_OFF(crl_loss_ops, prepare, 56);
    PIN_OFF(crl_loss_ops, forward, 64);
    PIN_OFF(crl_loss_ops, update, 72);
    PIN_OFF(crl_loss_ops, save, 80);
    PIN_OFF(crl_loss_ops, load, 88);
    PIN_OFF(crl_loss_ops, param_active, 96);
    PIN_OFF(crl_loss_ops, create_from_modules, 104);
    ck_assert_uint_eq(CRL_LOSS_ON_POLICY, 1);
    PIN_SIZE(crl_loss_modules, 40);
    PIN_OFF(crl_loss_modules, struct_size, 0);
    PIN_OFF(crl_loss_modules, det_actor, 8);
    PIN_OFF(crl_loss_modules, prob_actor, 16);
    PIN_OFF(crl_loss_modules, qvalue_actor, 24);
    PIN_OFF(crl_loss_modules, value, 32);
}
END_TEST

static Suite *abi_suite(void)
{
    Suite *s = suite_create("abi");
    TCase *tc = tcase_create("layout");
    tcase_add_test(tc, abi_version);
    tcase_add_test(tc, error_layout);
    tcase_add_test(tc, status_values);
    tcase_add_test(tc, enum_values);
    tcase_add_test(tc, device_layout);
    tcase_add_test(tc, rng_layout);
    tcase_add_test(tc, option_layout);
    tcase_add_test(tc, component_layout);
    tcase_add_test(tc, plugin_desc_layout);
    tcase_add_test(tc, plugin_info_layout);
    tcase_add_test(tc, env_specs_layout);
    tcase_add_test(tc, env_ops_layout);
    tcase_add_test(tc, transform_layout);
    tcase_add_test(tc, storage_ops_layout);
    tcase_add_test(tc, loss_ops_layout);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(abi_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#else
/* The pinned numbers are for x86-64; elsewhere the suite is skipped (77). */
int main(void) { return 77; }
#endif
