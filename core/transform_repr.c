/* print(env) and print(transform.parent) as TorchRL prints them: TransformedEnv, Compose, transforms, base envs. */
#include "config.h"
#include "transform-private.h"

#include <string.h>

/* Python's textwrap.indent: prefix every line that is not whitespace only. */
static void append_indented(GString *out, const char *text, const char *prefix)
{
    const char *p = text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) + 1 : strlen(p);
        bool blank = true;
        for (size_t i = 0; i < len && blank; i++)
            blank = p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r';
        if (!blank)
            g_string_append(out, prefix);
        g_string_append_len(out, p, (gssize)len);
        p += len;
    }
}

static void append_pystr(GString *out, const char *s, size_t len)
{
    g_string_append_c(out, '\'');
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '\'' || s[i] == '\\')
            g_string_append_c(out, '\\');
        g_string_append_c(out, s[i]);
    }
    g_string_append_c(out, '\'');
}

/* A key as Python prints a TensorDict key: 'a', or ('a', 'b') for the nested a.b. */
static void append_pykey(GString *out, const char *key)
{
    if (!strchr(key, '.')) {
        append_pystr(out, key, strlen(key));
        return;
    }
    g_string_append_c(out, '(');
    for (const char *p = key;;) {
        const char *dot = strchr(p, '.');
        append_pystr(out, p, dot ? (size_t)(dot - p) : strlen(p));
        if (!dot)
            break;
        g_string_append(out, ", ");
        p = dot + 1;
    }
    g_string_append_c(out, ')');
}

char *crl_transform_repr(const crl_transform *t)
{
    if (!t)
        return NULL;
    if (t->ops.repr) {
        char small[256];
        int n = t->ops.repr(t->t, small, sizeof small);
        if (n >= 0 && (size_t)n < sizeof small)
            return g_strdup(small);
        if (n >= 0) {
            char *big = g_malloc((size_t)n + 1);
            if (t->ops.repr(t->t, big, (size_t)n + 1) == n)
                return big;
            g_free(big);
        }
        /* A repr that fails or changes its length falls back on the default. */
    }
    GString *s = g_string_new(t->type);
    g_string_append(s, "(keys=[");
    for (size_t i = 0; t->in_keys && t->in_keys[i]; i++) {
        if (i)
            g_string_append(s, ", ");
        append_pykey(s, t->in_keys[i]);
    }
    g_string_append(s, "])");
    return g_string_free(s, FALSE);
}

static char *base_repr(const crl_env *env)
{
    const char *backend = crl_env_backend_name(env), *id = crl_env_id(env);
    char *batch = crl_shape_repr(crl_env_batch_ndim(env), crl_env_batch_shape(env));
    char *r;
    if (!strcmp(backend, "gym") || !strcmp(backend, "classic")) {
        r = g_strdup_printf("GymEnv(env=%s, batch_size=%s, device=cpu)", id, batch);
    } else if (!strcmp(backend, "dm_control")) {
        const char *slash = strchr(id, '/');
        r = slash ? g_strdup_printf("DMControlEnv(env=%.*s, task=%s, batch_size=%s)", (int)(slash - id), id, slash + 1,
                                    batch)
                  : g_strdup_printf("DMControlEnv(env=%s, batch_size=%s)", id, batch);
    } else {
        r = g_strdup_printf("EnvBase(backend=%s, env=%s, batch_size=%s, device=cpu)", backend, id, batch);
    }
    crl_free(batch);
    return r;
}

/* TransformedEnv over env's base with its transforms [0, n). */
static char *transformed_repr(const crl_env *env, size_t n)
{
    GString *layers = g_string_new(NULL);
    for (size_t i = 0; i < n; i++) {
        char *r = crl_transform_repr(crl_env_transform_at(env, i));
        if (i)
            g_string_append(layers, ",\n");
        append_indented(layers, r ? r : "?", "    ");
        crl_free(r);
    }
    GString *compose = g_string_new("Compose(\n");
    append_indented(compose, layers->str, "    ");
    g_string_append_c(compose, ')');
    g_string_free(layers, TRUE);

    char *base = base_repr(env);
    char *env_part = g_strconcat("env=", base, NULL);
    char *tf_part = g_strconcat("transform=", compose->str, NULL);
    GString *s = g_string_new("TransformedEnv(\n");
    append_indented(s, env_part, "    ");
    g_string_append(s, ",\n");
    append_indented(s, tf_part, "    ");
    g_string_append_c(s, ')');
    g_free(base);
    g_free(env_part);
    g_free(tf_part);
    g_string_free(compose, TRUE);
    return g_string_free(s, FALSE);
}

char *crl_env_repr(const crl_env *env)
{
    if (!env)
        return NULL;
    size_t n = crl_env_transform_count(env);
    return n ? transformed_repr(env, n) : base_repr(env);
}

char *crl_transform_parent_repr(const crl_transform *t)
{
    size_t index = 0;
    crl_env *env = crl_transform_parent_env(t, &index);
    return env ? transformed_repr(env, index) : NULL;
}
