/* crl inspect: build the env of an [env] section and print its specs (text or JSON). */
#include "config.h"
#include "cli-private.h"
#include "examples-private.h"

#include <crl/env.h>
#include <crl/transform.h>
#include <glib.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- JSON helpers shared with crl rollout -------------------------------- */

/* The shortest of %.{min..max}g that reads back as the same value (of
 * float width when is_f32), so 0.1f prints as 0.1, not 0.100000001. */
static void json_double(FILE *f, double v, int min, int max, bool is_f32)
{
    /* JSON has no inf/nan: they are written as strings. */
    if (isnan(v)) {
        fputs("\"nan\"", f);
        return;
    }
    if (isinf(v)) {
        fputs(v > 0 ? "\"inf\"" : "\"-inf\"", f);
        return;
    }
    char buf[40];
    for (int digits = min; digits <= max; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, v);
        if (digits == max || (is_f32 ? strtof(buf, NULL) == (float)v : strtod(buf, NULL) == v))
            break;
    }
    fputs(buf, f);
}

static void json_element(FILE *f, crl_dtype dt, const char *p)
{
    switch (dt) {
    case CRL_BOOL: fputs(*(const uint8_t *)p ? "true" : "false", f); break;
    case CRL_U8: fprintf(f, "%u", (unsigned)*(const uint8_t *)p); break;
    case CRL_I8: fprintf(f, "%d", (int)*(const int8_t *)p); break;
    case CRL_I16: fprintf(f, "%d", (int)*(const int16_t *)p); break;
    case CRL_I32: fprintf(f, "%" G_GINT32_FORMAT, *(const int32_t *)p); break;
    case CRL_I64: fprintf(f, "%" G_GINT64_FORMAT, (gint64) * (const int64_t *)p); break;
    case CRL_F16: json_double(f, (double)crl_half_to_float(*(const uint16_t *)p), 5, 5, false); break;
    case CRL_F32: json_double(f, (double)*(const float *)p, 6, 9, true); break;
    case CRL_F64: json_double(f, *(const double *)p, 15, 17, false); break;
    default: fputs("null", f); break;
    }
}

static void json_nested(FILE *f, crl_dtype dt, size_t esize, const char *p, int dim, int ndim,
                        const int64_t *shape, const int64_t *strides)
{
    if (dim == ndim) {
        json_element(f, dt, p);
        return;
    }
    fputc('[', f);
    for (int64_t i = 0; i < shape[dim]; i++) {
        if (i)
            fputc(',', f);
        json_nested(f, dt, esize, p + (ptrdiff_t)(i * strides[dim]) * (ptrdiff_t)esize, dim + 1, ndim, shape,
                    strides);
    }
    fputc(']', f);
}

void crl__cli_json_tensor_data(FILE *f, const crl_tensor *t)
{
    crl_dtype dt = crl_tensor_dtype(t);
    json_nested(f, dt, crl_dtype_size(dt), crl_tensor_data(t), 0, crl_tensor_ndim(t), crl_tensor_shape(t),
                crl_tensor_strides(t));
}

void crl__cli_json_shape(FILE *f, int ndim, const int64_t *shape)
{
    fputc('[', f);
    for (int i = 0; i < ndim; i++)
        fprintf(f, "%s%" G_GINT64_FORMAT, i ? "," : "", (gint64)shape[i]);
    fputc(']', f);
}

/* ---- specs as JSON ------------------------------------------------------- */

static void json_device(FILE *f, crl_device d)
{
    if (d.type == CRL_DEVICE_CUDA)
        fprintf(f, "\"cuda:%d\"", (int)d.index);
    else
        fputs("\"cpu\"", f);
}

static void json_spec(FILE *f, const crl_spec *s)
{
    if (!s) {
        fputs("null", f);
        return;
    }
    crl_spec_kind k = crl_spec_get_kind(s);
    fprintf(f, "{\"kind\":\"%s\"", crl_spec_kind_name(k) ? crl_spec_kind_name(k) : "?");
    if (k != CRL_SPEC_COMPOSITE)
        fprintf(f, ",\"dtype\":\"%s\"", crl_dtype_name(crl_spec_dtype(s)));
    fputs(",\"shape\":", f);
    crl__cli_json_shape(f, crl_spec_ndim(s), crl_spec_shape(s));
    fputs(",\"device\":", f);
    json_device(f, crl_spec_device(s));
    switch (k) {
    case CRL_SPEC_BOUNDED:
        fputs(",\"low\":", f);
        crl__cli_json_tensor_data(f, crl_spec_low(s));
        fputs(",\"high\":", f);
        crl__cli_json_tensor_data(f, crl_spec_high(s));
        break;
    case CRL_SPEC_CATEGORICAL:
    case CRL_SPEC_ONEHOT:
    case CRL_SPEC_BINARY:
        fprintf(f, ",\"n\":%" G_GINT64_FORMAT, (gint64)crl_spec_n(s));
        break;
    case CRL_SPEC_MULTI_CATEGORICAL:
    case CRL_SPEC_MULTI_ONEHOT: {
        fputs(",\"nvec\":", f);
        crl__cli_json_shape(f, (int)crl_spec_nvec_len(s), crl_spec_nvec(s));
        break;
    }
    case CRL_SPEC_COMPOSITE:
        fputs(",\"entries\":{", f);
        for (size_t i = 0; i < crl_spec_composite_len(s); i++) {
            if (i)
                fputc(',', f);
            crl__cli_json_string(f, crl_spec_composite_key_at(s, i));
            fputc(':', f);
            json_spec(f, crl_spec_composite_at(s, i));
        }
        fputc('}', f);
        break;
    default:
        break;
    }
    fputc('}', f);
}

static void print_json(const crl_env *env)
{
    FILE *f = stdout;
    fputs("{\"backend\":", f);
    crl__cli_json_string(f, crl_env_backend_name(env));
    fputs(",\"id\":", f);
    crl__cli_json_string(f, crl_env_id(env));
    fputs(",\"batch_size\":", f);
    crl__cli_json_shape(f, crl_env_batch_ndim(env), crl_env_batch_shape(env));
    fprintf(f, ",\"num_envs\":%" G_GINT64_FORMAT ",\"max_episode_steps\":%" G_GINT64_FORMAT,
            (gint64)crl_env_num(env), (gint64)crl_env_max_episode_steps(env));
    char *repr = crl_env_repr(env);
    fputs(",\"repr\":", f);
    crl__cli_json_string(f, repr ? repr : "");
    crl_free(repr);
    fputs(",\"transforms\":[", f);
    for (size_t i = 0; i < crl_env_transform_count(env); i++) {
        const crl_transform *t = crl_env_transform_at(env, i);
        char *tr = crl_transform_repr(t);
        fputs(i ? ",{\"name\":" : "{\"name\":", f);
        crl__cli_json_string(f, crl_transform_name(t));
        fputs(",\"type\":", f);
        crl__cli_json_string(f, crl_transform_type(t));
        fputs(",\"repr\":", f);
        crl__cli_json_string(f, tr ? tr : "");
        fputc('}', f);
        crl_free(tr);
    }
    fputc(']', f);
    int32_t h = crl_env_render_height(env), w = crl_env_render_width(env);
    if (h > 0 && w > 0)
        fprintf(f, ",\"render\":{\"height\":%d,\"width\":%d}", (int)h, (int)w);
    else
        fputs(",\"render\":null", f);
    static const struct {
        const char *name;
        const crl_spec *(*get)(const crl_env *);
    } specs[] = {
        { "observation_spec", crl_env_full_observation_spec },
        { "action_spec", crl_env_full_action_spec },
        { "reward_spec", crl_env_full_reward_spec },
        { "done_spec", crl_env_full_done_spec },
        { "state_spec", crl_env_full_state_spec },
    };
    for (size_t i = 0; i < G_N_ELEMENTS(specs); i++) {
        fprintf(f, ",\"%s\":", specs[i].name);
        json_spec(f, specs[i].get(env));
    }
    fputs("}\n", f);
}

/* ---- the command --------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: crl inspect [FILE.ini...] [section.key=value...] [--json]\n\n"
            "Build the env that the [env] section describes and print it as TorchRL's\n"
            "print(env) does (a TransformedEnv with its Compose of transforms when it\n"
            "has transforms), then its specs as TorchRL prints env.observation_spec,\n"
            "env.action_spec, ... e.g.\n\n"
            "  crl inspect env.backend=classic env.id=Pendulum-v1\n"
            "  crl inspect %s/cartpole-random.ini env.num_envs=8\n\n"
            "  --json      print the specs as one JSON object: backend, id, batch_size,\n"
            "              num_envs, max_episode_steps, repr (print(env)), transforms\n"
            "              ([{name, type, repr}] in chain order), render, and\n"
            "              observation_spec, action_spec, reward_spec, done_spec,\n"
            "              state_spec (each the full Composite), each a spec\n"
            "              {\"kind\", \"dtype\", \"shape\", \"device\", and \"low\"/\"high\" arrays\n"
            "              for Bounded, \"n\" for Categorical/OneHot/Binary, \"nvec\" for the\n"
            "              Multi* kinds, \"entries\" for Composite}; infinite bounds are\n"
            "              written as the strings \"inf\" and \"-inf\"\n"
            "  -h, --help  print this help\n\n"
            "Exit status: 0 ok, 1 runtime failure, 2 bad usage, bad config or unknown env.\n", crl__examples_dir());
}

int crl__cmd_inspect(int argc, char **argv)
{
    bool json = false;
    GPtrArray *rest = g_ptr_array_new();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            g_ptr_array_free(rest, TRUE);
            return CRL_EXIT_OK;
        } else if (!strcmp(a, "--json")) {
            json = true;
        } else if (!strcmp(a, "--")) {
            for (i++; i < argc; i++)
                g_ptr_array_add(rest, argv[i]);
        } else {
            g_ptr_array_add(rest, argv[i]);
        }
    }
    crl_cli_ctx ctx;
    crl_error err = { 0 };
    crl_env *env = NULL;
    int rc = crl__cli_env_setup(&ctx, (int)rest->len, (char **)rest->pdata, &env, &err);
    g_ptr_array_free(rest, TRUE);
    if (rc)
        return crl__cli_setup_failed("inspect", &err);
    if (json) {
        print_json(env);
    } else {
        char *batch = crl_shape_repr(crl_env_batch_ndim(env), crl_env_batch_shape(env));
        char *repr = crl_env_specs_repr(env), *env_repr = crl_env_repr(env);
        printf("%s/%s: batch_size=%s, max_episode_steps=%" G_GINT64_FORMAT "\nenv:\n%s\n%s", crl_env_backend_name(env),
               crl_env_id(env), batch ? batch : "?", (gint64)crl_env_max_episode_steps(env), env_repr ? env_repr : "",
               repr ? repr : "");
        crl_free(env_repr);
        if (repr && repr[0] && repr[strlen(repr) - 1] != '\n')
            printf("\n");
        crl_free(repr);
        crl_free(batch);
    }
    crl_env_free(env);
    crl__cli_teardown(&ctx);
    return CRL_EXIT_OK;
}
