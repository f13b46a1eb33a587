/* Check suite: strict INI parsing, layers, overrides, getters, schema, validation and show. */
#include <check.h>
#include <errno.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <crl/crl.h>
#include <crl/config.h>

#ifndef TEST_SRCDIR
#define TEST_SRCDIR "tests"
#endif
#define BAD_DIR TEST_SRCDIR "/config/bad"

/* Local copies of the host's own tables (core/host.c defines the real
 * ones), so this suite stands alone. */
static const crl_option host_plugins[] = {
    { "path", CRL_OPT_LIST, 0, NULL, 0, 0, NULL, "extra plugin directories, searched first" },
    { "load", CRL_OPT_LIST, 0, NULL, 0, 0, NULL, "plugins to load by name" },
    { "disable", CRL_OPT_LIST, 0, NULL, 0, 0, NULL, "plugins never to load" },
    { "autoload", CRL_OPT_BOOL, 0, NULL, 0, 0, NULL, "load every plugin found when load is empty" },
    CRL_OPTIONS_END,
};
static const crl_option host_log[] = {
    { "level", CRL_OPT_ENUM, 0, "warning", 0, 0, "error|warning|info|debug", "log threshold" },
    CRL_OPTIONS_END,
};
/* A component-like section for the type and range errors. */
static const crl_option replay_opts[] = {
    { "capacity", CRL_OPT_INT, CRL_OPT_RANGE | CRL_OPT_REQUIRED, NULL, 1, 1e9, NULL, "transitions kept" },
    { "memory", CRL_OPT_SIZE, 0, "64M", 0, 0, NULL, "storage budget" },
    { "kwargs.", CRL_OPT_STRING, CRL_OPT_PREFIX, NULL, 0, 0, NULL, "storage arguments" },
    CRL_OPTIONS_END,
};

/* The good test plugin's [plugin.good] options, which the integer, range
 * and size fixtures use (crl config check loads that plugin for them). */
static const crl_option good_plugin_opts[] = {
    { "greeting", CRL_OPT_STRING, 0, "hello", 0, 0, NULL, "what init logs at info level" },
    { "count", CRL_OPT_INT, CRL_OPT_RANGE, "3", 1, 100, NULL, "how many greetings init logs" },
    { "buffer", CRL_OPT_SIZE, CRL_OPT_RANGE, "4K", 1, 1073741824.0, NULL, "scratch bytes (up to 1G)" },
    CRL_OPTIONS_END,
};

static crl_schema *host_schema(bool with_replay)
{
    crl_error err;
    crl_schema *s = crl_schema_new(&err);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(crl_schema_add(s, "plugins", host_plugins, "plugin loading", &err), CRL_OK);
    ck_assert_int_eq(crl_schema_add(s, "log", host_log, "logging", &err), CRL_OK);
    if (with_replay)
        ck_assert_int_eq(crl_schema_add(s, "replay", replay_opts, "replay buffer", &err), CRL_OK);
    return s;
}

/* What `crl config check` knows when the bad-INI fixtures load the good
 * test plugin: the host's sections and [plugin.good]. */
static crl_schema *fixture_schema(void)
{
    crl_error err;
    crl_schema *s = host_schema(false);
    ck_assert_int_eq(crl_schema_add(s, "plugin.good", good_plugin_opts, "the good test plugin", &err), CRL_OK);
    return s;
}

static int load(crl_config *cfg, const char *name, const char *text, crl_config_layer layer, crl_error *err)
{
    crl_error_clear(err);
    return crl_config_load_buffer(cfg, name, text, strlen(text), layer, err);
}

static crl_config *parse_ok(const char *text)
{
    crl_error err;
    crl_config *cfg = crl_config_new(&err);
    int rc = load(cfg, "t.ini", text, CRL_LAYER_FILE, &err);
    ck_assert_msg(rc == CRL_OK, "%s", err.message);
    return cfg;
}

/* ---- parsing ---- */

START_TEST(parse_sections_keys_comments)
{
    crl_config *cfg = parse_ok("\xEF\xBB\xBF; leading comment\r\n"
                               "# hash comment\n"
                               "[log]  ; a comment after the header\r\n"
                               "  level   =   debug   \n"
                               "\tcolour = #ff0000\n"
                               "path = /a;/b ; inline comment\n"
                               "empty =\n"
                               "semi = ;not a comment\n"
                               "eq = a=b\n"
                               "[ plugins ]\n"
                               "load = gym, classic\n"
                               "[empty.section]\n"
                               "[log]\n"
                               "again = merged\n"
                               "last = no newline at end");
    ck_assert_uint_eq(crl_config_section_count(cfg), 3);
    ck_assert_str_eq(crl_config_section_at(cfg, 0), "log");
    ck_assert_str_eq(crl_config_section_at(cfg, 1), "plugins");
    ck_assert_str_eq(crl_config_section_at(cfg, 2), "empty.section");
    ck_assert_ptr_null(crl_config_section_at(cfg, 3));
    ck_assert(crl_config_has_section(cfg, "empty.section"));
    ck_assert(!crl_config_has_section(cfg, "nope"));
    ck_assert_uint_eq(crl_config_key_count(cfg, "empty.section"), 0);
    ck_assert_str_eq(crl_config_get(cfg, "log", "level"), "debug");
    ck_assert_str_eq(crl_config_get(cfg, "log", "colour"), "#ff0000");
    ck_assert_str_eq(crl_config_get(cfg, "log", "path"), "/a;/b");
    ck_assert_str_eq(crl_config_get(cfg, "log", "empty"), "");
    ck_assert_str_eq(crl_config_get(cfg, "log", "semi"), "");
    ck_assert_str_eq(crl_config_get(cfg, "log", "eq"), "a=b");
    ck_assert_str_eq(crl_config_get(cfg, "plugins", "load"), "gym, classic");
    ck_assert_str_eq(crl_config_get(cfg, "log", "again"), "merged");
    ck_assert_str_eq(crl_config_get(cfg, "log", "last"), "no newline at end");
    ck_assert_uint_eq(crl_config_key_count(cfg, "log"), 8);
    ck_assert_str_eq(crl_config_key_at(cfg, "log", 0), "level");
    ck_assert_str_eq(crl_config_key_at(cfg, "log", 7), "last");
    ck_assert_ptr_null(crl_config_key_at(cfg, "log", 8));
    ck_assert_ptr_null(crl_config_key_at(cfg, "nope", 0));
    ck_assert_str_eq(crl_config_origin(cfg, "log", "level"), "t.ini:4");
    ck_assert_str_eq(crl_config_origin(cfg, "log", "again"), "t.ini:14");
    ck_assert_str_eq(crl_config_origin(cfg, "plugins", "load"), "t.ini:11");
    ck_assert_ptr_null(crl_config_origin(cfg, "log", "nope"));
    ck_assert_ptr_null(crl_config_get(cfg, "nope", "level"));
    crl_config_free(cfg);
    crl_config_free(NULL);
}
END_TEST

START_TEST(parse_semicolon_inside_value_without_blank)
{
    crl_config *cfg = parse_ok("[a]\nk = x;y\nj = x\t; tab comment\n");
    ck_assert_str_eq(crl_config_get(cfg, "a", "k"), "x;y");
    ck_assert_str_eq(crl_config_get(cfg, "a", "j"), "x");
    crl_config_free(cfg);
}
END_TEST

START_TEST(parse_empty_buffer)
{
    crl_config *cfg = parse_ok("");
    ck_assert_uint_eq(crl_config_section_count(cfg), 0);
    crl_config_free(cfg);
    cfg = parse_ok("\n\n; only comments\n   \n");
    ck_assert_uint_eq(crl_config_section_count(cfg), 0);
    crl_config_free(cfg);
}
END_TEST

static const struct {
    const char *text;
    const char *msg;
} parse_errors[] = {
    { "[log]\nlevel = a\nlevel = b\n", "t.ini:3: duplicate key 'level' in [log] (first set at t.ini:2); keep only one" },
    { "[log]\nlevel = a\n[plugins]\nload = x\n[log]\nlevel = b\n",
      "t.ini:6: duplicate key 'level' in [log] (first set at t.ini:2); keep only one" },
    { "; c\nlevel = a\n[log]\n",
      "t.ini:2: key 'level' comes before any [section] header; add a header such as [log] above it" },
    { "[log]\n[env\nx = 1\n", "t.ini:2: unterminated section header '[env'; close it with ']'" },
    { "[]\n", "t.ini:1: empty section name '[]'; write a name such as [log]" },
    { "[log]\n[   ]\n", "t.ini:2: empty section name '[]'; write a name such as [log]" },
    { "[log] x\n", "t.ini:1: unexpected text 'x' after section header [log]; start a comment with ';'" },
    { "[log]\nlevel: info\n",
      "t.ini:2: expected 'key = value', got 'level: info'; only '=' separates a key from its value" },
    { "[log]\nlevel\n",
      "t.ini:2: expected 'key = value', got 'level' (no '='); comment it out with ';' or add '= value'" },
    { "[log]\n  = x\n", "t.ini:2: empty key before '='; write 'key = value'" },
    { "[log]\n\n\ncontinued\n",
      "t.ini:4: expected 'key = value', got 'continued' (no '='); comment it out with ';' or add '= value'" },
};

START_TEST(parse_error_messages)
{
    for (size_t i = 0; i < G_N_ELEMENTS(parse_errors); i++) {
        crl_error err;
        crl_config *cfg = crl_config_new(&err);
        int rc = load(cfg, "t.ini", parse_errors[i].text, CRL_LAYER_FILE, &err);
        ck_assert_int_eq(rc, CRL_E_CONFIG);
        ck_assert_int_eq(err.code, CRL_E_CONFIG);
        ck_assert_str_eq(err.message, parse_errors[i].msg);
        ck_assert_uint_eq(crl_config_section_count(cfg), 0);   /* nothing merged */
        crl_config_free(cfg);
    }
}
END_TEST

START_TEST(parse_nul_byte)
{
    static const char text[] = "[log]\nlevel = in\0fo\nx = 1\n";
    crl_error err;
    crl_config *cfg = crl_config_new(&err);
    ck_assert_int_eq(crl_config_load_buffer(cfg, "t.ini", text, sizeof text - 1, CRL_LAYER_FILE, &err), CRL_E_CONFIG);
    ck_assert_str_eq(err.message, "t.ini:2: NUL byte at column 11; the file must be text (is it binary or UTF-16?)");
    ck_assert_uint_eq(crl_config_section_count(cfg), 0);
    crl_config_free(cfg);
}
END_TEST

START_TEST(parse_long_lines)
{
    /* Debian's inih truncates lines at 200 bytes; ours must not. */
    GString *text = g_string_new("[env]\n");
    char *v300 = g_strnfill(300, 'v');
    char *k250 = g_strnfill(250, 'k');
    char *s220 = g_strnfill(220, 's');
    g_string_append_printf(text, "long = %s\n%s = short\n[%s]\nafter = 1\n", v300, k250, s220);
    crl_config *cfg = parse_ok(text->str);
    ck_assert_str_eq(crl_config_get(cfg, "env", "long"), v300);
    ck_assert_uint_eq(strlen(crl_config_get(cfg, "env", "long")), 300);
    ck_assert_str_eq(crl_config_get(cfg, "env", k250), "short");
    ck_assert_uint_eq(crl_config_key_count(cfg, "env"), 2);
    ck_assert_str_eq(crl_config_get(cfg, s220, "after"), "1");
    ck_assert_str_eq(crl_config_origin(cfg, s220, "after"), "t.ini:5");
    crl_config_free(cfg);

    /* Exactly CRL_CONFIG_MAX_LINE bytes is fine (CRLF not counted). */
    char *v = g_strnfill(CRL_CONFIG_MAX_LINE - 4, 'x');
    char *ok = g_strdup_printf("[a]\r\nk = %s\r\n", v);
    cfg = parse_ok(ok);
    ck_assert_str_eq(crl_config_get(cfg, "a", "k"), v);
    crl_config_free(cfg);

    /* One more byte is too long; 5000 too. */
    char *v2 = g_strnfill(CRL_CONFIG_MAX_LINE - 3, 'x');
    char *bad = g_strdup_printf("[a]\n; c\nk = %s\n", v2);
    crl_error err;
    cfg = crl_config_new(&err);
    ck_assert_int_eq(load(cfg, "t.ini", bad, CRL_LAYER_FILE, &err), CRL_E_CONFIG);
    ck_assert_str_eq(err.message, "t.ini:3: line is 4097 bytes long, more than the limit of 4096; shorten the value");
    char *v5000 = g_strnfill(5000, 'y');
    char *bad2 = g_strdup_printf("[a]\nk = 1\n%s\n", v5000);
    ck_assert_int_eq(load(cfg, "t.ini", bad2, CRL_LAYER_FILE, &err), CRL_E_CONFIG);
    ck_assert_str_eq(err.message, "t.ini:3: line is 5000 bytes long, more than the limit of 4096; shorten the value");
    ck_assert_uint_eq(crl_config_section_count(cfg), 0);
    crl_config_free(cfg);

    g_free(v5000);
    g_free(bad2);
    g_free(bad);
    g_free(v2);
    g_free(ok);
    g_free(v);
    g_free(v300);
    g_free(k250);
    g_free(s220);
    g_string_free(text, TRUE);
}
END_TEST

START_TEST(error_leaves_config_unchanged)
{
    crl_config *cfg = parse_ok("[log]\nlevel = info\n");
    crl_error err;
    ck_assert_int_eq(load(cfg, "b.ini", "[log]\nlevel = debug\n[new]\nx = 1\nbroken line\n", CRL_LAYER_FILE, &err),
                     CRL_E_CONFIG);
    ck_assert_str_eq(crl_config_get(cfg, "log", "level"), "info");
    ck_assert_str_eq(crl_config_origin(cfg, "log", "level"), "t.ini:2");
    ck_assert(!crl_config_has_section(cfg, "new"));
    ck_assert_uint_eq(crl_config_section_count(cfg), 1);
    crl_config_free(cfg);
}
END_TEST

START_TEST(bad_arguments)
{
    crl_error err;
    crl_config *cfg = crl_config_new(&err);
    ck_assert_int_eq(crl_config_load_buffer(NULL, "x", "", 0, CRL_LAYER_FILE, &err), CRL_E_INVALID);
    ck_assert_int_eq(crl_config_load_buffer(cfg, "x", NULL, 3, CRL_LAYER_FILE, &err), CRL_E_INVALID);
    ck_assert_int_eq(crl_config_load_buffer(cfg, "x", "", 0, (crl_config_layer)9, &err), CRL_E_INVALID);
    ck_assert_int_eq(crl_config_load_buffer(cfg, NULL, "[a]\nk\n", 6, CRL_LAYER_FILE, &err), CRL_E_CONFIG);
    ck_assert_str_eq(err.message,
                     "<buffer>:2: expected 'key = value', got 'k' (no '='); comment it out with ';' or add '= value'");
    ck_assert_int_eq(crl_config_load_file(cfg, NULL, CRL_LAYER_FILE, &err), CRL_E_INVALID);
    ck_assert_int_eq(crl_config_validate(cfg, NULL, &err), CRL_E_INVALID);
    ck_assert_ptr_null(crl_config_show(NULL, NULL, &err));
    ck_assert_int_eq(err.code, CRL_E_INVALID);
    crl_config_free(cfg);
}
END_TEST

/* ---- files ---- */

static char *tmpdir(void)
{
    GError *gerr = NULL;
    char *d = g_dir_make_tmp("crl-test-config-XXXXXX", &gerr);
    ck_assert_msg(d != NULL, "%s", gerr ? gerr->message : "?");
    return d;
}

static void write_file(const char *path, const char *text)
{
    char *dir = g_path_get_dirname(path);
    ck_assert_int_eq(g_mkdir_with_parents(dir, 0700), 0);
    g_free(dir);
    ck_assert(g_file_set_contents(path, text, -1, NULL));
}

static void rm_rf(const char *path)
{
    if (g_file_test(path, G_FILE_TEST_IS_DIR)) {
        GDir *d = g_dir_open(path, 0, NULL);
        const char *n;
        while (d && (n = g_dir_read_name(d))) {
            char *p = g_build_filename(path, n, NULL);
            rm_rf(p);
            g_free(p);
        }
        if (d)
            g_dir_close(d);
        g_rmdir(path);
    } else {
        g_unlink(path);
    }
}

START_TEST(load_file_and_io_errors)
{
    char *dir = tmpdir();
    char *path = g_build_filename(dir, "exp.ini", NULL);
    write_file(path, "[log]\nlevel = info\n");
    crl_error err;
    crl_config *cfg = crl_config_new(&err);
    ck_assert_int_eq(crl_config_load_file(cfg, path, CRL_LAYER_FILE, &err), CRL_OK);
    char *origin = g_strdup_printf("%s:2", path);
    ck_assert_str_eq(crl_config_origin(cfg, "log", "level"), origin);

    char *missing = g_build_filename(dir, "missing.ini", NULL);
    ck_assert_int_eq(crl_config_load_file(cfg, missing, CRL_LAYER_FILE, &err), CRL_E_IO);
    char *want = g_strdup_printf("cannot read config file '%s': %s", missing, g_strerror(ENOENT));
    ck_assert_str_eq(err.message, want);
    ck_assert_int_eq(crl_config_load_file(cfg, dir, CRL_LAYER_FILE, &err), CRL_E_IO);
    ck_assert_ptr_nonnull(strstr(err.message, dir));
    ck_assert_str_eq(crl_config_get(cfg, "log", "level"), "info");

    g_free(want);
    g_free(missing);
    g_free(origin);
    crl_config_free(cfg);
    rm_rf(dir);
    g_free(path);
    g_free(dir);
}
END_TEST

static char *save_env(const char *name)
{
    const char *v = getenv(name);
    return v ? g_strdup(v) : NULL;
}

static void restore_env(const char *name, char *value)
{
    if (value)
        g_setenv(name, value, TRUE);
    else
        g_unsetenv(name);
    g_free(value);
}

START_TEST(load_defaults_layers)
{
    char *old_sys = save_env("CRL_SYSCONFDIR"), *old_xdg = save_env("XDG_CONFIG_HOME");
    char *dir = tmpdir();
    char *sysdir = g_build_filename(dir, "etc", NULL);
    char *xdg = g_build_filename(dir, "xdg", NULL);
    char *sysfile = g_build_filename(sysdir, "crl", "crl.ini", NULL);
    char *userfile = g_build_filename(xdg, "crl", "crl.ini", NULL);
    g_setenv("CRL_SYSCONFDIR", sysdir, TRUE);
    g_setenv("XDG_CONFIG_HOME", xdg, TRUE);
    crl_error err;

    /* Neither file exists: fine, nothing loaded. */
    crl_config *cfg = crl_config_new(&err);
    ck_assert_int_eq(crl_config_load_defaults(cfg, &err), CRL_OK);
    ck_assert_uint_eq(crl_config_section_count(cfg), 0);
    crl_config_free(cfg);

    write_file(sysfile, "[log]\nlevel = error\n[plugins]\nautoload = true\n");
    write_file(userfile, "[log]\nlevel = info\n");
    cfg = crl_config_new(&err);
    ck_assert_int_eq(crl_config_load_defaults(cfg, &err), CRL_OK);
    ck_assert_str_eq(crl_config_get(cfg, "log", "level"), "info");
    char *o = g_strdup_printf("%s:2", userfile);
    ck_assert_str_eq(crl_config_origin(cfg, "log", "level"), o);
    g_free(o);
    o = g_strdup_printf("%s:4", sysfile);
    ck_assert_str_eq(crl_config_origin(cfg, "plugins", "autoload"), o);
    g_free(o);
    crl_config_free(cfg);

    /* A malformed system file is an error naming it. */
    write_file(sysfile, "[log\n");
    cfg = crl_config_new(&err);
    ck_assert_int_eq(crl_config_load_defaults(cfg, &err), CRL_E_CONFIG);
    char *want = g_strdup_printf("%s:1: unterminated section header '[log'; close it with ']'", sysfile);
    ck_assert_str_eq(err.message, want);
    g_free(want);
    crl_config_free(cfg);

    restore_env("CRL_SYSCONFDIR", old_sys);
    restore_env("XDG_CONFIG_HOME", old_xdg);
    rm_rf(dir);
    g_free(sysfile);
    g_free(userfile);
    g_free(sysdir);
    g_free(xdg);
    g_free(dir);
}
END_TEST

/* Only regular files: a FIFO, a device or a directory is refused at once naming it, a file past 16 MiB before
 * it is read; the user's crl.ini as a FIFO is an error too, never a hang. */
START_TEST(load_file_not_regular_or_too_big)
{
    char *dir = tmpdir();
    char *fifo = g_build_filename(dir, "f.ini", NULL);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    crl_error err;
    crl_config *cfg = crl_config_new(&err);
    alarm(20); /* a blocking open ends the test loudly even with CK_FORK=no */
    ck_assert_int_eq(crl_config_load_file(cfg, fifo, CRL_LAYER_FILE, &err), CRL_E_IO);
    char *want = g_strdup_printf("cannot read config file '%s': it is a FIFO, not a regular file; crl reads only "
                                 "regular files: save what it gives to a file and name that file instead", fifo);
    ck_assert_str_eq(err.message, want);
    g_free(want);
    ck_assert_int_eq(crl_config_load_file(cfg, "/dev/zero", CRL_LAYER_FILE, &err), CRL_E_IO);
    ck_assert_msg(strstr(err.message, "'/dev/zero': it is a character device"), "%s", err.message);
    ck_assert_int_eq(crl_config_load_file(cfg, dir, CRL_LAYER_FILE, &err), CRL_E_IO);
    ck_assert_msg(strstr(err.message, "it is a directory, not a regular file") &&
                  strstr(err.message, "name an INI file in it"), "%s", err.message);

    char *big = g_build_filename(dir, "big.ini", NULL);
    FILE *f = fopen(big, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(ftruncate(fileno(f), (off_t)(16u << 20) + 1), 0);
    fclose(f);
    ck_assert_int_eq(crl_config_load_file(cfg, big, CRL_LAYER_FILE, &err), CRL_E_IO);
    want = g_strdup_printf("cannot read config file '%s': it is 16777217 bytes, more than the 16 MiB limit; is it "
                           "the right file?", big);
    ck_assert_str_eq(err.message, want);
    g_free(want);
    ck_assert_uint_eq(crl_config_section_count(cfg), 0);

    char *old_xdg = save_env("XDG_CONFIG_HOME"), *old_sys = save_env("CRL_SYSCONFDIR");
    char *xdg = g_build_filename(dir, "xdg", NULL);
    char *user = g_build_filename(xdg, "crl", "crl.ini", NULL);
    char *userdir = g_path_get_dirname(user);
    ck_assert_int_eq(g_mkdir_with_parents(userdir, 0700), 0);
    g_free(userdir);
    ck_assert_int_eq(mkfifo(user, 0600), 0);
    g_setenv("XDG_CONFIG_HOME", xdg, TRUE);
    g_setenv("CRL_SYSCONFDIR", dir, TRUE);
    ck_assert_int_eq(crl_config_load_defaults(cfg, &err), CRL_E_IO);
    ck_assert_msg(strstr(err.message, user) && strstr(err.message, "it is a FIFO"), "%s", err.message);
    alarm(0);
    restore_env("XDG_CONFIG_HOME", old_xdg);
    restore_env("CRL_SYSCONFDIR", old_sys);

    crl_config_free(cfg);
    rm_rf(dir);
    g_free(user);
    g_free(xdg);
    g_free(big);
    g_free(fifo);
    g_free(dir);
}
END_TEST

/* ---- layers and overrides ---- */

START_TEST(layering_and_provenance)
{
    crl_error err;
    crl_config *cfg = crl_config_new(&err);
    ck_assert_int_eq(load(cfg, "sys.ini", "[log]\nlevel = error\nsys = 1\n", CRL_LAYER_SYSTEM, &err), CRL_OK);
    ck_assert_int_eq(load(cfg, "user.ini", "[log]\nlevel = warning\nuser = 1\n", CRL_LAYER_USER, &err), CRL_OK);
    ck_assert_int_eq(load(cfg, "a.ini", "[log]\n\nlevel = info\n", CRL_LAYER_FILE, &err), CRL_OK);
    ck_assert_str_eq(crl_config_get(cfg, "log", "level"), "info");
    ck_assert_str_eq(crl_config_origin(cfg, "log", "level"), "a.ini:3");
    /* A later file of the same layer wins. */
    ck_assert_int_eq(load(cfg, "b.ini", "[log]\nlevel = debug\n", CRL_LAYER_FILE, &err), CRL_OK);
    ck_assert_str_eq(crl_config_get(cfg, "log", "level"), "debug");
    ck_assert_str_eq(crl_config_origin(cfg, "log", "level"), "b.ini:2");
    /* A lower layer loaded late does not undo a higher one. */
    ck_assert_int_eq(load(cfg, "late-sys.ini", "[log]\nlevel = error\nsys = 2\n", CRL_LAYER_SYSTEM, &err), CRL_OK);
    ck_assert_str_eq(crl_config_get(cfg, "log", "level"), "debug");
    ck_assert_str_eq(crl_config_get(cfg, "log", "sys"), "2");
    ck_assert_str_eq(crl_config_origin(cfg, "log", "sys"), "late-sys.ini:3");
    ck_assert_str_eq(crl_config_origin(cfg, "log", "user"), "user.ini:3");
    /* Overrides beat everything, and later files do not undo them. */
    ck_assert_int_eq(crl_config_override(cfg, NULL, "log.level = info", &err), CRL_OK);
    ck_assert_int_eq(load(cfg, "c.ini", "[log]\nlevel = error\n", CRL_LAYER_FILE, &err), CRL_OK);
    ck_assert_str_eq(crl_config_get(cfg, "log", "level"), "info");
    ck_assert_str_eq(crl_config_origin(cfg, "log", "level"), "command line");
    /* Key order is first-seen order across layers. */
    ck_assert_str_eq(crl_config_key_at(cfg, "log", 0), "level");
    ck_assert_str_eq(crl_config_key_at(cfg, "log", 1), "sys");
    ck_assert_str_eq(crl_config_key_at(cfg, "log", 2), "user");
    crl_config_free(cfg);
}
END_TEST

START_TEST(overrides_resolve_sections)
{
    crl_error err;
    crl_schema *schema = host_schema(false);
    static const crl_option plugin_opts[] = {
        { "python_path", CRL_OPT_STRING, 0, NULL, 0, 0, NULL, NULL },
        CRL_OPTIONS_END,
    };
    ck_assert_int_eq(crl_schema_add(schema, "plugin.*", plugin_opts, NULL, &err), CRL_OK);
    crl_config *cfg = parse_ok("[env]\nbackend = classic\n[a.b]\nx = 1\n");

    ck_assert_int_eq(crl_config_override(cfg, schema, "plugin.gym.python_path=x", &err), CRL_OK);
    ck_assert_str_eq(crl_config_get(cfg, "plugin.gym", "python_path"), "x");
    ck_assert_str_eq(crl_config_origin(cfg, "plugin.gym", "python_path"), "command line");
    /* [env] is in the config: the rest is the key. */
    ck_assert_int_eq(crl_config_override(cfg, schema, "env.kwargs.g=9.8", &err), CRL_OK);
    ck_assert_str_eq(crl_config_get(cfg, "env", "kwargs.g"), "9.8");
    /* Longest known prefix: [a.b] beats [a]. */
    ck_assert_int_eq(crl_config_override(cfg, schema, "a.b.c=2", &err), CRL_OK);
    ck_assert_str_eq(crl_config_get(cfg, "a.b", "c"), "2");
    /* Unknown: the first dot. */
    ck_assert_int_eq(crl_config_override(cfg, schema, "new.deep.key= v w ", &err), CRL_OK);
    ck_assert_str_eq(crl_config_get(cfg, "new", "deep.key"), "v w");
    /* Without a schema the plugin.* pattern is unknown. */
    crl_config *bare = crl_config_new(&err);
    ck_assert_int_eq(crl_config_override(bare, NULL, "plugin.gym.python_path=y", &err), CRL_OK);
    ck_assert_str_eq(crl_config_get(bare, "plugin", "gym.python_path"), "y");
    ck_assert_int_eq(crl_config_override(bare, NULL, "log.level=", &err), CRL_OK);
    ck_assert_str_eq(crl_config_get(bare, "log", "level"), "");
    crl_config_free(bare);

    static const char *const bad[] = { "noequals", "nodot=1", ".x=1", "x.=1", "=1", " . = 1", "a.b=1\nc" };
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
        crl_error_clear(&err);
        ck_assert_msg(crl_config_override(cfg, schema, bad[i], &err) == CRL_E_USAGE, "%s", bad[i]);
        ck_assert_int_eq(err.code, CRL_E_USAGE);
        ck_assert_ptr_nonnull(strstr(err.message, "bad override '"));
    }
    ck_assert_str_eq(err.message, "bad override 'a.b=1\nc': a value cannot span lines");
    crl_config_override(cfg, schema, "nodot=1", &err);
    ck_assert_str_eq(err.message, "bad override 'nodot=1': expected section.key=value with a non-empty section and "
                                  "key (e.g. log.level=debug)");
    ck_assert_int_eq(crl_config_override(NULL, schema, "a.b=1", &err), CRL_E_INVALID);
    crl_config_free(cfg);
    crl_schema_free(schema);
}
END_TEST

/* ---- typed getters of raw values ---- */

START_TEST(raw_getters)
{
    crl_config *cfg = parse_ok("[s]\nb = Off\ni = -0x20\nd = 1e-3\nz = 2G\ne = slow\nl = a , b,c\nempty =\n"
                               "bb = maybe\nbi = 1.0\nbd = x\nbz = 2Q\nbe = medium\nbl = a,\n");
    crl_error err;
    bool b = true;
    int64_t i = 0;
    double d = 0;
    uint64_t z = 0;
    int e = -1;
    char **l = NULL;
    ck_assert_int_eq(crl_config_get_bool(cfg, "s", "b", true, &b, &err), CRL_OK);
    ck_assert(!b);
    ck_assert_int_eq(crl_config_get_int(cfg, "s", "i", 0, &i, &err), CRL_OK);
    ck_assert_int_eq(i, -32);
    ck_assert_int_eq(crl_config_get_double(cfg, "s", "d", 0, &d, &err), CRL_OK);
    ck_assert_double_eq(d, 1e-3);
    ck_assert_int_eq(crl_config_get_size(cfg, "s", "z", 0, &z, &err), CRL_OK);
    ck_assert(z == 2ull << 30);
    ck_assert_int_eq(crl_config_get_enum(cfg, "s", "e", "fast|slow", 0, &e, &err), CRL_OK);
    ck_assert_int_eq(e, 1);
    ck_assert_int_eq(crl_config_get_list(cfg, "s", "l", &l, &err), CRL_OK);
    ck_assert_str_eq(l[0], "a");
    ck_assert_str_eq(l[1], "b");
    ck_assert_str_eq(l[2], "c");
    ck_assert_ptr_null(l[3]);
    crl_free(l);
    ck_assert_int_eq(crl_config_get_list(cfg, "s", "empty", &l, &err), CRL_OK);
    ck_assert_ptr_null(l[0]);
    crl_free(l);

    /* Absent: the default. */
    ck_assert_int_eq(crl_config_get_bool(cfg, "s", "nope", true, &b, &err), CRL_OK);
    ck_assert(b);
    ck_assert_int_eq(crl_config_get_int(cfg, "nope", "i", 77, &i, &err), CRL_OK);
    ck_assert_int_eq(i, 77);
    ck_assert_int_eq(crl_config_get_double(cfg, "s", "nope", 2.5, &d, &err), CRL_OK);
    ck_assert_double_eq(d, 2.5);
    ck_assert_int_eq(crl_config_get_size(cfg, "s", "nope", 9, &z, &err), CRL_OK);
    ck_assert(z == 9);
    ck_assert_int_eq(crl_config_get_enum(cfg, "s", "nope", "fast|slow", 0, &e, &err), CRL_OK);
    ck_assert_int_eq(e, 0);
    ck_assert_int_eq(crl_config_get_list(cfg, "s", "nope", &l, &err), CRL_OK);
    ck_assert_ptr_null(l[0]);
    crl_free(l);

    /* Bad values: CRL_E_CONFIG "ORIGIN: [section] key = 'v': expected ...". */
    ck_assert_int_eq(crl_config_get_bool(cfg, "s", "bb", false, &b, &err), CRL_E_CONFIG);
    ck_assert_str_eq(err.message, "t.ini:9: [s] bb = 'maybe': expected a boolean (true/false, yes/no, on/off, 1/0)");
    ck_assert_int_eq(crl_config_get_int(cfg, "s", "bi", 0, &i, &err), CRL_E_CONFIG);
    ck_assert_str_eq(err.message, "t.ini:10: [s] bi = '1.0': expected a 64-bit integer (decimal or 0x hex)");
    ck_assert_int_eq(crl_config_get_double(cfg, "s", "bd", 0, &d, &err), CRL_E_CONFIG);
    ck_assert_str_eq(err.message, "t.ini:11: [s] bd = 'x': expected a finite number");
    ck_assert_int_eq(crl_config_get_size(cfg, "s", "bz", 0, &z, &err), CRL_E_CONFIG);
    ck_assert_str_eq(err.message,
                     "t.ini:12: [s] bz = '2Q': expected a size in bytes (4096, 64K, 64M, 2G, 1T; powers of 1024)");
    ck_assert_int_eq(crl_config_get_enum(cfg, "s", "be", "fast|slow", 0, &e, &err), CRL_E_CONFIG);
    ck_assert_str_eq(err.message, "t.ini:13: [s] be = 'medium': expected one of fast|slow");
    ck_assert_int_eq(crl_config_get_list(cfg, "s", "bl", &l, &err), CRL_E_CONFIG);
    ck_assert_str_eq(err.message, "t.ini:14: [s] bl = 'a,': item 2 of the list is empty; remove the extra ','");
    ck_assert_int_eq(crl_config_get_enum(cfg, "s", "e", "", 0, &e, &err), CRL_E_INVALID);
    crl_config_free(cfg);
}
END_TEST

/* ---- schema ---- */

START_TEST(schema_rejects_bad_tables)
{
    static const crl_option enum_without_choices[] = {
        { "mode", CRL_OPT_ENUM, 0, NULL, 0, 0, NULL, NULL }, CRL_OPTIONS_END,
    };
    static const crl_option bad_default[] = {
        { "n", CRL_OPT_SIZE, 0, "lots", 0, 0, NULL, NULL }, CRL_OPTIONS_END,
    };
    static const crl_option prefix_without_dot[] = {
        { "kwargs", CRL_OPT_STRING, CRL_OPT_PREFIX, NULL, 0, 0, NULL, NULL }, CRL_OPTIONS_END,
    };
    static const crl_option no_name[] = {
        { NULL, CRL_OPT_INT, 0, NULL, 0, 0, NULL, NULL }, CRL_OPTIONS_END,
    };
    static const crl_option bad_type[] = {
        { "x", 42, 0, NULL, 0, 0, NULL, NULL }, CRL_OPTIONS_END,
    };
    static const crl_option bad_range[] = {
        { "x", CRL_OPT_INT, CRL_OPT_RANGE, NULL, 5, 1, NULL, NULL }, CRL_OPTIONS_END,
    };
    static const crl_option default_out_of_range[] = {
        { "x", CRL_OPT_INT, CRL_OPT_RANGE, "0", 1, 5, NULL, NULL }, CRL_OPTIONS_END,
    };
    crl_error err;
    crl_schema *s = crl_schema_new(&err);
    ck_assert_int_eq(crl_schema_add(s, "a", enum_without_choices, NULL, &err), CRL_E_INVALID);
    ck_assert_str_eq(err.message, "option table for [a]: enum option 'mode' has no choices (\"a|b|c\")");
    ck_assert_int_eq(crl_schema_add(s, "a", bad_default, NULL, &err), CRL_E_INVALID);
    ck_assert_str_eq(err.message, "option table for [a]: default of 'n' ('lots') is invalid: expected a size in "
                                  "bytes (4096, 64K, 64M, 2G, 1T; powers of 1024)");
    ck_assert_int_eq(crl_schema_add(s, "a", prefix_without_dot, NULL, &err), CRL_E_INVALID);
    ck_assert_str_eq(err.message, "option table for [a]: prefix option 'kwargs' must end with '.'");
    ck_assert_int_eq(crl_schema_add(s, "a", no_name, NULL, &err), CRL_E_INVALID);
    ck_assert_int_eq(crl_schema_add(s, "a", bad_type, NULL, &err), CRL_E_INVALID);
    ck_assert_int_eq(crl_schema_add(s, "a", bad_range, NULL, &err), CRL_E_INVALID);
    ck_assert_int_eq(crl_schema_add(s, "a", default_out_of_range, NULL, &err), CRL_E_INVALID);
    ck_assert_str_eq(err.message, "option table for [a]: default of 'x' ('0') is invalid: must be between 1 and 5");
    static const char *const bad_sections[] = { "", ".*", "a b", "a*", "[a]", "a.*.b" };
    for (size_t i = 0; i < G_N_ELEMENTS(bad_sections); i++)
        ck_assert_msg(crl_schema_add(s, bad_sections[i], host_log, NULL, &err) == CRL_E_INVALID, "%s",
                      bad_sections[i]);
    ck_assert_int_eq(crl_schema_add(s, NULL, host_log, NULL, &err), CRL_E_INVALID);
    ck_assert_int_eq(crl_schema_add(NULL, "a", host_log, NULL, &err), CRL_E_INVALID);
    ck_assert_int_eq(crl_schema_add_selector(s, "env", "", CRL_KIND_ENV, &err), CRL_E_INVALID);
    ck_assert_int_eq(crl_schema_add_selector(s, "env", "backend", (crl_kind)99, &err), CRL_E_INVALID);
    /* Nothing was added. */
    size_t n = 7;
    ck_assert_ptr_null(crl_schema_tables(s, NULL, "a", &n));
    ck_assert_uint_eq(n, 0);
    crl_schema_free(s);
    crl_schema_free(NULL);
}
END_TEST

START_TEST(schema_tables_and_patterns)
{
    static const crl_option t1[] = { { "a", CRL_OPT_INT, 0, "1", 0, 0, NULL, NULL }, CRL_OPTIONS_END };
    static const crl_option t2[] = { { "b", CRL_OPT_INT, 0, "2", 0, 0, NULL, NULL }, CRL_OPTIONS_END };
    crl_error err;
    crl_schema *s = crl_schema_new(&err);
    ck_assert_int_eq(crl_schema_add(s, "plugin.*", t1, NULL, &err), CRL_OK);
    ck_assert_int_eq(crl_schema_add(s, "plugin.gym", t2, NULL, &err), CRL_OK);
    ck_assert_int_eq(crl_schema_add(s, "bare", NULL, "a section without options", &err), CRL_OK);
    size_t n = 0;
    const crl_option *const *t = crl_schema_tables(s, NULL, "plugin.gym", &n);
    ck_assert_ptr_nonnull(t);
    ck_assert_uint_eq(n, 2);
    ck_assert_ptr_eq(t[0], t1);
    ck_assert_ptr_eq(t[1], t2);
    ck_assert_ptr_null(t[2]);
    t = crl_schema_tables(s, NULL, "plugin.classic", &n);
    ck_assert_uint_eq(n, 1);
    ck_assert_ptr_eq(t[0], t1);
    t = crl_schema_tables(s, NULL, "bare", &n);
    ck_assert_ptr_nonnull(t);
    ck_assert_uint_eq(n, 0);
    ck_assert_ptr_null(t[0]);
    ck_assert_ptr_null(crl_schema_tables(s, NULL, "plugin", &n));
    ck_assert_ptr_null(crl_schema_tables(s, NULL, "plugin.", &n));
    ck_assert_ptr_null(crl_schema_tables(s, NULL, "plugin.a.b", &n));
    ck_assert_ptr_null(crl_schema_tables(s, NULL, "other", &n));
    ck_assert_ptr_null(crl_schema_tables(NULL, NULL, "bare", &n));
    crl_schema_free(s);
}
END_TEST

/* ---- validation ---- */

static int validate_text(const char *text, const crl_schema *schema, crl_error *err)
{
    crl_config *cfg = crl_config_new(err);
    int rc = load(cfg, "v.ini", text, CRL_LAYER_FILE, err);
    if (rc == CRL_OK)
        rc = crl_config_validate(cfg, schema, err);
    crl_config_free(cfg);
    return rc;
}

static const struct {
    const char *text;
    const char *msg;   /* NULL: valid */
} validation_cases[] = {
    { "[log]\nlevel = debug\n[plugins]\nload = a, b\nautoload = no\n[replay]\ncapacity = 1000000000\nmemory = 1G\n"
      "kwargs.path = /tmp\nkwargs.x = 1\n",
      NULL },
    { "[plugins]\nautoload = off\n\n[lgo]\nlevel = info\n", "v.ini:4: unknown section [lgo]; did you mean [log]?" },
    { "[zzzzzz]\n", "v.ini:1: unknown section [zzzzzz]; known sections: [plugins], [log], [replay]" },
    { "[log]\nlevl = debug\n", "v.ini:2: unknown key 'levl' in [log]; did you mean 'level'?" },
    { "[replay]\ncapacity = 5\nlenght = 3\n", "v.ini:3: unknown key 'lenght' in [replay]; known keys: capacity, memory, kwargs." },
    { "[replay]\ncapacity = 5\nkwargs = 3\n", "v.ini:3: unknown key 'kwargs' in [replay]; did you mean 'kwargs.'?" },
    { "[replay]\ncapacity = -5\n", "v.ini:2: [replay] capacity = '-5': must be between 1 and 1e9" },
    { "[replay]\ncapacity = 1000000001\n", "v.ini:2: [replay] capacity = '1000000001': must be between 1 and 1e9" },
    { "[replay]\ncapacity = 12.5\n",
      "v.ini:2: [replay] capacity = '12.5': expected a 64-bit integer (decimal or 0x hex)" },
    { "[replay]\ncapacity = 4\nmemory = 4 lots\n",
      "v.ini:3: [replay] memory = '4 lots': expected a size in bytes (4096, 64K, 64M, 2G, 1T; powers of 1024)" },
    { "[log]\nlevel = inf\n", "v.ini:2: [log] level = 'inf': expected one of error|warning|info|debug; did you mean "
                              "'info'?" },
    { "[plugins]\nautoload = sure\n",
      "v.ini:2: [plugins] autoload = 'sure': expected a boolean (true/false, yes/no, on/off, 1/0)" },
    { "[plugins]\nload = a,,b\n", "v.ini:2: [plugins] load = 'a,,b': item 2 of the list is empty; remove the "
                                  "extra ','" },
    { "; no capacity\n[replay]\nmemory = 1K\n",
      "v.ini:2: [replay] capacity is required but not set; add 'capacity = ...' under [replay] (files loaded: v.ini)" },
    { "[log]\n", "[replay] capacity is required but not set; add 'capacity = ...' under [replay] (files loaded: "
                 "v.ini)" },
};

START_TEST(validation_messages)
{
    crl_schema *schema = host_schema(true);
    for (size_t i = 0; i < G_N_ELEMENTS(validation_cases); i++) {
        crl_error err;
        crl_error_clear(&err);
        int rc = validate_text(validation_cases[i].text, schema, &err);
        if (!validation_cases[i].msg) {
            ck_assert_msg(rc == CRL_OK, "case %zu: %s", i, err.message);
            continue;
        }
        ck_assert_msg(rc == CRL_E_CONFIG, "case %zu: rc %d", i, rc);
        ck_assert_str_eq(err.message, validation_cases[i].msg);
    }
    crl_schema_free(schema);
}
END_TEST

START_TEST(validation_of_overrides_and_required_without_files)
{
    crl_schema *schema = host_schema(true);
    crl_error err;
    crl_config *cfg = crl_config_new(&err);
    ck_assert_int_eq(crl_config_validate(cfg, schema, &err), CRL_E_CONFIG);
    ck_assert_str_eq(err.message, "[replay] capacity is required but not set; add 'capacity = ...' under [replay] "
                                  "(no files loaded)");
    ck_assert_int_eq(crl_config_override(cfg, schema, "replay.capacity=10", &err), CRL_OK);
    ck_assert_int_eq(crl_config_validate(cfg, schema, &err), CRL_OK);
    ck_assert_int_eq(crl_config_override(cfg, schema, "replay.capacity=0", &err), CRL_OK);
    ck_assert_int_eq(crl_config_validate(cfg, schema, &err), CRL_E_CONFIG);
    ck_assert_str_eq(err.message, "command line: [replay] capacity = '0': must be between 1 and 1e9");
    ck_assert_int_eq(crl_config_override(cfg, schema, "replay.capacity=10", &err), CRL_OK);
    ck_assert_int_eq(crl_config_override(cfg, schema, "lgo.level=info", &err), CRL_OK);
    ck_assert_int_eq(crl_config_validate(cfg, schema, &err), CRL_E_CONFIG);
    ck_assert_str_eq(err.message, "command line: unknown section [lgo]; did you mean [log]?");
    crl_config_free(cfg);
    crl_schema_free(schema);
}
END_TEST

START_TEST(validation_pattern_sections)
{
    static const crl_option plugin_opts[] = {
        { "python_path", CRL_OPT_STRING, 0, NULL, 0, 0, NULL, NULL },
        CRL_OPTIONS_END,
    };
    crl_error err;
    crl_schema *schema = host_schema(false);
    ck_assert_int_eq(crl_schema_add(schema, "plugin.*", plugin_opts, NULL, &err), CRL_OK);
    ck_assert_int_eq(validate_text("[plugin.gym]\npython_path = /x\n[plugin.classic]\n", schema, &err), CRL_OK);
    ck_assert_int_eq(validate_text("[plugin.gym]\npython_pth = /x\n", schema, &err), CRL_E_CONFIG);
    ck_assert_str_eq(err.message, "v.ini:2: unknown key 'python_pth' in [plugin.gym]; did you mean 'python_path'?");
    ck_assert_int_eq(validate_text("[plugn.gym]\n", schema, &err), CRL_E_CONFIG);
    ck_assert_str_eq(err.message, "v.ini:1: unknown section [plugn.gym]; did you mean [plugin.gym]?");
    ck_assert_int_eq(validate_text("[plugin]\n", schema, &err), CRL_E_CONFIG);
    ck_assert_str_eq(err.message, "v.ini:1: unknown section [plugin]; did you mean [plugins]?");
    crl_schema_free(schema);
}
END_TEST

/* ---- selectors ---- */

static const crl_option env_base[] = {
    { "backend", CRL_OPT_STRING, CRL_OPT_REQUIRED, NULL, 0, 0, NULL, "which env backend" },
    { "num_envs", CRL_OPT_INT, CRL_OPT_RANGE, "1", 1, 4096, NULL, "batch size" },
    CRL_OPTIONS_END,
};
static const crl_option classic_opts[] = {
    { "task", CRL_OPT_ENUM, 0, "CartPole", 0, 0, "CartPole|Pendulum|Acrobot", "which task" },
    { "gravity", CRL_OPT_DOUBLE, CRL_OPT_RANGE, "9.8", 0, 100, NULL, "m/s^2" },
    CRL_OPTIONS_END,
};
static const crl_option gym_opts[] = {
    { "id", CRL_OPT_STRING, CRL_OPT_REQUIRED, NULL, 0, 0, NULL, "gym id" },
    { "kwargs.", CRL_OPT_STRING, CRL_OPT_PREFIX, NULL, 0, 0, NULL, "make() kwargs" },
    CRL_OPTIONS_END,
};

static int lookups;

static const crl_option *fake_lookup(void *user, crl_kind kind, const char *name)
{
    ck_assert_ptr_eq(user, &lookups);
    lookups++;
    if (kind == CRL_KIND_ENV && strcmp(name, "classic") == 0)
        return classic_opts;
    if (kind == CRL_KIND_ENV && strcmp(name, "gym") == 0)
        return gym_opts;
    return NULL;
}

static const char *fake_names(void *user, crl_kind kind, size_t i)
{
    static const char *const names[] = { "classic", "gym" };
    (void)user;
    return kind == CRL_KIND_ENV && i < 2 ? names[i] : NULL;
}

static crl_schema *selector_schema(bool with_names)
{
    crl_error err;
    crl_schema *s = host_schema(false);
    ck_assert_int_eq(crl_schema_add(s, "env", env_base, "the environment", &err), CRL_OK);
    ck_assert_int_eq(crl_schema_add_selector(s, "env", "backend", CRL_KIND_ENV, &err), CRL_OK);
    crl_schema_set_lookup(s, fake_lookup, &lookups);
    if (with_names)
        crl_schema_set_names(s, fake_names, NULL);
    return s;
}

START_TEST(selector_tables)
{
    crl_schema *s = selector_schema(true);
    crl_error err;
    crl_config *cfg = parse_ok("[env]\nbackend = classic\ngravity = 3.7\n");
    size_t n = 0;
    const crl_option *const *t = crl_schema_tables(s, cfg, "env", &n);
    ck_assert_uint_eq(n, 2);
    ck_assert_ptr_eq(t[0], env_base);
    ck_assert_ptr_eq(t[1], classic_opts);
    /* The same answer is the same array. */
    ck_assert_ptr_eq(crl_schema_tables(s, cfg, "env", &n), t);
    ck_assert_int_eq(crl_config_validate(cfg, s, &err), CRL_OK);

    /* The component's options build into the section's opts. */
    crl_opts *o = crl_config_opts(cfg, "env", t, n, &err);
    ck_assert_ptr_nonnull(o);
    double g = 0;
    const char *task = NULL;
    int64_t num = 0;
    ck_assert_int_eq(crl_opts_double(o, "gravity", &g, &err), CRL_OK);
    ck_assert_double_eq(g, 3.7);
    ck_assert_int_eq(crl_opts_string(o, "task", &task, &err), CRL_OK);
    ck_assert_str_eq(task, "CartPole");
    ck_assert_int_eq(crl_opts_int(o, "num_envs", &num, &err), CRL_OK);
    ck_assert_int_eq(num, 1);
    crl_opts_free(o);

    /* Switching the backend switches the accepted keys. */
    ck_assert_int_eq(crl_config_override(cfg, s, "env.backend=gym", &err), CRL_OK);
    t = crl_schema_tables(s, cfg, "env", &n);
    ck_assert_uint_eq(n, 2);
    ck_assert_ptr_eq(t[1], gym_opts);
    ck_assert_int_eq(crl_config_validate(cfg, s, &err), CRL_E_CONFIG);
    ck_assert_str_eq(err.message, "t.ini:3: unknown key 'gravity' in [env]; known keys: backend, num_envs, id, kwargs.");
    crl_config_free(cfg);

    cfg = parse_ok("[env]\nbackend = gym\nid = CartPole-v1\nkwargs.render_mode = rgb_array\n");
    ck_assert_int_eq(crl_config_validate(cfg, s, &err), CRL_OK);
    crl_config_free(cfg);
    cfg = parse_ok("[env]\nbackend = gym\n");
    ck_assert_int_eq(crl_config_validate(cfg, s, &err), CRL_E_CONFIG);
    ck_assert_str_eq(err.message, "t.ini:1: [env] id is required but not set; add 'id = ...' under [env] (files "
                                  "loaded: t.ini)");
    crl_config_free(cfg);
    cfg = parse_ok("[env]\nnum_envs = 8\n");
    ck_assert_int_eq(crl_config_validate(cfg, s, &err), CRL_E_CONFIG);
    ck_assert_str_eq(err.message, "t.ini:1: [env] backend is required but not set; add 'backend = ...' under [env] "
                                  "(files loaded: t.ini)");
    crl_config_free(cfg);
    ck_assert_int_gt(lookups, 0);
    crl_schema_free(s);
}
END_TEST

START_TEST(selector_unknown_component)
{
    crl_schema *s = selector_schema(true);
    crl_error err;
    ck_assert_int_eq(validate_text("[env]\nbackend = clasic\ngravity = 1\n", s, &err), CRL_E_CONFIG);
    ck_assert_str_eq(err.message, "v.ini:2: [env] backend = 'clasic': no env 'clasic' is registered; did you mean "
                                  "'classic'?");
    ck_assert_int_eq(validate_text("[env]\nbackend = mujoco\n", s, &err), CRL_E_CONFIG);
    ck_assert_str_eq(err.message, "v.ini:2: [env] backend = 'mujoco': no env 'mujoco' is registered (registered: "
                                  "classic, gym); load the plugin that provides it");
    crl_schema_free(s);

    s = selector_schema(false);
    ck_assert_int_eq(validate_text("[env]\nbackend = clasic\n", s, &err), CRL_E_CONFIG);
    ck_assert_str_eq(err.message, "v.ini:2: [env] backend = 'clasic': no env 'clasic' is registered; no env is "
                                  "registered at all: load the plugin that provides it ([plugins] load)");
    crl_schema_free(s);
}
END_TEST

START_TEST(selector_default_from_base_table)
{
    static const crl_option base[] = {
        { "name", CRL_OPT_STRING, 0, "classic", 0, 0, NULL, NULL },
        CRL_OPTIONS_END,
    };
    crl_error err;
    crl_schema *s = crl_schema_new(&err);
    ck_assert_int_eq(crl_schema_add(s, "transform.*", base, NULL, &err), CRL_OK);
    ck_assert_int_eq(crl_schema_add_selector(s, "transform.*", "name", CRL_KIND_ENV, &err), CRL_OK);
    crl_schema_set_lookup(s, fake_lookup, &lookups);
    ck_assert_int_eq(validate_text("[transform.a]\ngravity = 2\n", s, &err), CRL_OK);
    ck_assert_int_eq(validate_text("[transform.a]\nname = gym\nid = x\n", s, &err), CRL_OK);
    ck_assert_int_eq(validate_text("[transform.a]\nname = gym\ngravity = 2\n", s, &err), CRL_E_CONFIG);
    crl_schema_free(s);
}
END_TEST

/* ---- show ---- */

START_TEST(show_small_config)
{
    crl_schema *schema = host_schema(true);
    crl_config *cfg = parse_ok("[replay]\ncapacity = 100\nkwargs.a = 1\nextra = 2\n");
    crl_error err;
    ck_assert_int_eq(crl_config_override(cfg, schema, "log.level=debug", &err), CRL_OK);
    ck_assert_int_eq(crl_config_override(cfg, schema, "lgo.x=1", &err), CRL_OK);
    char *text = crl_config_show(cfg, schema, &err);
    ck_assert_ptr_nonnull(text);
    ck_assert_str_eq(text, "[replay]\n"
                           "capacity = 100  ; t.ini:2\n"
                           "memory = 64M  ; default\n"
                           "kwargs.a = 1  ; t.ini:3\n"
                           "extra = 2  ; t.ini:4 (undeclared)\n"
                           "\n"
                           "[log]\n"
                           "level = debug  ; command line\n"
                           "\n"
                           "[lgo]  ; unknown section\n"
                           "x = 1  ; command line (undeclared)\n"
                           "\n"
                           "[plugins]\n"
                           "; path =  ; not set\n"
                           "; load =  ; not set\n"
                           "; disable =  ; not set\n"
                           "; autoload =  ; not set\n");
    crl_free(text);

    /* Without a schema: what the config holds, with origins. */
    text = crl_config_show(cfg, NULL, &err);
    ck_assert_str_eq(text, "[replay]\n"
                           "capacity = 100  ; t.ini:2\n"
                           "kwargs.a = 1  ; t.ini:3\n"
                           "extra = 2  ; t.ini:4\n"
                           "\n"
                           "[log]\n"
                           "level = debug  ; command line\n"
                           "\n"
                           "[lgo]\n"
                           "x = 1  ; command line\n");
    crl_free(text);

    /* A missing required key is marked. */
    crl_config *empty = crl_config_new(&err);
    ck_assert_int_eq(crl_config_override(empty, schema, "log.level=", &err), CRL_OK);
    text = crl_config_show(empty, schema, &err);
    ck_assert_str_eq(text, "[log]\n"
                           "level =  ; command line\n"
                           "\n"
                           "[plugins]\n"
                           "; path =  ; not set\n"
                           "; load =  ; not set\n"
                           "; disable =  ; not set\n"
                           "; autoload =  ; not set\n"
                           "\n"
                           "[replay]\n"
                           "; capacity =  ; required, not set\n"
                           "memory = 64M  ; default\n");
    crl_free(text);
    crl_config_free(empty);
    crl_config_free(cfg);
    crl_schema_free(schema);
}
END_TEST

/* ---- the bad-INI table (tests/config/bad) ---- */

static const struct {
    const char *file;
    int line;
    const char *msg;
} bad_ini[] = {
    { "unknown-section.ini", 5, "unknown section [lgo]; did you mean [log]?" },
    { "unknown-key.ini", 6, "unknown key 'levl' in [log]; did you mean 'level'?" },
    { "dup-key.ini", 4, "duplicate key 'level' in [log] (first set at " BAD_DIR "/dup-key.ini:3); keep only one" },
    { "key-before-section.ini", 2,
      "key 'level' comes before any [section] header; add a header such as [log] above it" },
    { "unterminated-section.ini", 4, "unterminated section header '[log'; close it with ']'" },
    { "no-equals.ini", 3, "expected 'key = value', got 'level: info'; only '=' separates a key from its value" },
    { "nul-byte.ini", 2, "NUL byte at column 11; the file must be text (is it binary or UTF-16?)" },
    { "long-line.ini", 3, "line is 5000 bytes long, more than the limit of 4096; shorten the value" },
    { "bad-int.ini", 6, "[plugin.good] count = '10k': expected a 64-bit integer (decimal or 0x hex)" },
    { "out-of-range.ini", 6, "[plugin.good] count = '500': must be between 1 and 100" },
    { "bad-enum.ini", 6, "[log] level = 'verbose': expected one of error|warning|info|debug" },
    { "bad-bool.ini", 3, "[plugins] autoload = 'maybe': expected a boolean (true/false, yes/no, on/off, 1/0)" },
    { "bad-size.ini", 6,
      "[plugin.good] buffer = '64X': expected a size in bytes (4096, 64K, 64M, 2G, 1T; powers of 1024)" },
    { "empty-key.ini", 3, "empty key before '='; write 'key = value'" },
    { "empty-section.ini", 4, "empty section name '[]'; write a name such as [log]" },
};

/* Load one file and validate it; the error code. */
static int check_file(const char *path, const crl_schema *schema, crl_error *err)
{
    crl_config *cfg = crl_config_new(err);
    int rc = crl_config_load_file(cfg, path, CRL_LAYER_FILE, err);
    if (rc == CRL_OK)
        rc = crl_config_validate(cfg, schema, err);
    crl_config_free(cfg);
    return rc;
}

START_TEST(bad_ini_table)
{
    /* Host sections plus [plugin.good] for the integer, range and size cases. */
    crl_schema *schema = fixture_schema();
    for (size_t i = 0; i < G_N_ELEMENTS(bad_ini); i++) {
        char *path = g_strdup_printf("%s/%s", BAD_DIR, bad_ini[i].file);
        char *want = g_strdup_printf("%s:%d: %s", path, bad_ini[i].line, bad_ini[i].msg);
        crl_error err;
        crl_error_clear(&err);
        ck_assert_msg(check_file(path, schema, &err) == CRL_E_CONFIG, "%s: %s", bad_ini[i].file, err.message);
        ck_assert_str_eq(err.message, want);
        g_free(want);
        g_free(path);
    }
    crl_schema_free(schema);
}
END_TEST

/* EXPECTED holds "KIND file.ini LINE substring" for `crl config check`.  The
 * schema cases are found with the host's sections and, with the good test
 * plugin loaded, [plugin.good]: check them with exactly that schema.  The
 * experiment cases need the runtime and its plugins (tests/test_trainer_check
 * runs them).  Every file is listed once. */
START_TEST(bad_ini_expected_file)
{
    char *text = NULL;
    ck_assert(g_file_get_contents(BAD_DIR "/EXPECTED", &text, NULL, NULL));
    crl_schema *schema = fixture_schema();
    char **lines = g_strsplit(text, "\n", -1);
    GHashTable *seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    size_t count = 0, schema_cases = 0;
    for (char **l = lines; *l; l++) {
        if (!**l || **l == '#')
            continue;
        char **f = g_strsplit(*l, " ", 4);
        ck_assert_msg(f[0] && f[1] && f[2] && f[3], "malformed EXPECTED line '%s'", *l);
        ck_assert_msg(!strcmp(f[0], "schema") || !strcmp(f[0], "experiment"), "unknown kind in '%s'", *l);
        ck_assert_msg(!g_hash_table_contains(seen, f[1]), "%s is listed twice in EXPECTED", f[1]);
        g_hash_table_add(seen, g_strdup(f[1]));
        count++;
        if (strcmp(f[0], "schema") != 0) {
            g_strfreev(f);
            continue;
        }
        char *path = g_strdup_printf("%s/%s", BAD_DIR, f[1]);
        char *prefix = g_strdup_printf("%s:%s: ", path, f[2]);
        crl_error err;
        crl_error_clear(&err);
        ck_assert_msg(check_file(path, schema, &err) == CRL_E_CONFIG, "%s: %s", f[1], err.message);
        ck_assert_msg(g_str_has_prefix(err.message, prefix), "%s: '%s' lacks '%s'", f[1], err.message, prefix);
        ck_assert_msg(strstr(err.message, f[3]) != NULL, "%s: '%s' lacks '%s'", f[1], err.message, f[3]);
        schema_cases++;
        g_free(prefix);
        g_free(path);
        g_strfreev(f);
    }
    GDir *d = g_dir_open(BAD_DIR, 0, NULL);
    ck_assert_ptr_nonnull(d);
    const char *name;
    size_t files = 0;
    while ((name = g_dir_read_name(d))) {
        if (!g_str_has_suffix(name, ".ini"))
            continue;
        files++;
        ck_assert_msg(g_hash_table_contains(seen, name), "%s is not listed in EXPECTED", name);
    }
    g_dir_close(d);
    ck_assert_uint_eq(files, count);
    ck_assert_uint_eq(schema_cases, G_N_ELEMENTS(bad_ini));
    g_hash_table_unref(seen);
    g_strfreev(lines);
    g_free(text);
    crl_schema_free(schema);
}
END_TEST

static Suite *config_suite(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("parse");
    tcase_add_test(tc, parse_sections_keys_comments);
    tcase_add_test(tc, parse_semicolon_inside_value_without_blank);
    tcase_add_test(tc, parse_empty_buffer);
    tcase_add_test(tc, parse_error_messages);
    tcase_add_test(tc, parse_nul_byte);
    tcase_add_test(tc, parse_long_lines);
    tcase_add_test(tc, error_leaves_config_unchanged);
    tcase_add_test(tc, bad_arguments);
    tcase_add_test(tc, load_file_and_io_errors);
    tcase_add_test(tc, load_file_not_regular_or_too_big);
    tcase_add_test(tc, load_defaults_layers);
    suite_add_tcase(s, tc);
    tc = tcase_create("layers");
    tcase_add_test(tc, layering_and_provenance);
    tcase_add_test(tc, overrides_resolve_sections);
    tcase_add_test(tc, raw_getters);
    suite_add_tcase(s, tc);
    tc = tcase_create("schema");
    tcase_add_test(tc, schema_rejects_bad_tables);
    tcase_add_test(tc, schema_tables_and_patterns);
    tcase_add_test(tc, validation_messages);
    tcase_add_test(tc, validation_of_overrides_and_required_without_files);
    tcase_add_test(tc, validation_pattern_sections);
    tcase_add_test(tc, selector_tables);
    tcase_add_test(tc, selector_unknown_component);
    tcase_add_test(tc, selector_default_from_base_table);
    tcase_add_test(tc, show_small_config);
    suite_add_tcase(s, tc);
    tc = tcase_create("bad-ini");
    tcase_add_test(tc, bad_ini_table);
    tcase_add_test(tc, bad_ini_expected_file);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(config_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
