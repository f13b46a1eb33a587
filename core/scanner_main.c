/* The scanner process: load one plugin file in a process of its own, record what it registers, check it,
 * run its fini, and report to the host on a pipe.  Whatever the plugin's code does (crash, exit, hang), only
 * this process suffers it; the host reads the report or names how the process ended.
 *
 * It knows the consumers' option tables ([env], [transform.*], [replay], [loss]) to refuse a component
 * option that would shadow a host key, and each kind's required ops: it is an application of libcrl, like
 * the crl program, not part of the plugin host. */
#include "host-private.h"
#include "scan-private.h"

#include <crl/env.h>
#include <crl/env_backend.h>
#include <crl/loss_backend.h>
#include <crl/replay.h>
#include <crl/storage_backend.h>
#include <crl/trainer.h>
#include <crl/transform.h>
#include <crl/transform_backend.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config-private.h"

/* One ops member a kind requires: where it sits, and its name for messages. */
typedef struct {
    size_t offset;
    const char *name;
} required_op;

#define OP(type, member) { offsetof(type, member), #member }
static const required_op env_ops[] = { OP(crl_env_ops, list), OP(crl_env_ops, make), OP(crl_env_ops, bind),
                                       OP(crl_env_ops, reset), OP(crl_env_ops, step), OP(crl_env_ops, close),
                                       { 0, NULL } };
static const required_op transform_ops[] = { OP(crl_transform_ops, create), OP(crl_transform_ops, destroy),
                                             { 0, NULL } };
static const required_op storage_ops[] = {
    OP(crl_storage_ops, open), OP(crl_storage_ops, set),   OP(crl_storage_ops, get),
    OP(crl_storage_ops, len),  OP(crl_storage_ops, write_count), OP(crl_storage_ops, clear),
    OP(crl_storage_ops, dump), OP(crl_storage_ops, load),  OP(crl_storage_ops, close), { 0, NULL }
};
static const required_op loss_ops[] = {
    OP(crl_loss_ops, create), OP(crl_loss_ops, destroy), OP(crl_loss_ops, act),  OP(crl_loss_ops, num_params),
    OP(crl_loss_ops, param),  OP(crl_loss_ops, forward), OP(crl_loss_ops, save), OP(crl_loss_ops, load),
    { 0, NULL }
};
#undef OP

/* What each kind must provide, and the host's keys in the section its options join. */
static const required_op *kind_required(int kind)
{
    switch (kind) {
    case CRL_KIND_ENV: return env_ops;
    case CRL_KIND_TRANSFORM: return transform_ops;
    case CRL_KIND_STORAGE: return storage_ops;
    case CRL_KIND_LOSS: return loss_ops;
    default: return NULL;
    }
}

static const crl_option *kind_host_table(int kind, const char **section)
{
    switch (kind) {
    case CRL_KIND_ENV: *section = "[env]"; return crl_env_options();
    case CRL_KIND_TRANSFORM: *section = "[transform.*]"; return crl_transform_section_options();
    case CRL_KIND_STORAGE: *section = "[replay]"; return crl_replay_options();
    case CRL_KIND_LOSS: *section = "[loss]"; return crl_loss_section_options();
    default: *section = NULL; return NULL;
    }
}

/* A member is present when it lies inside the plugin's struct_size and is not NULL. */
static bool op_present(const void *ops, size_t offset)
{
    uint32_t size;
    memcpy(&size, ops, sizeof size);
    if (offset + sizeof(void (*)(void)) > size)
        return false;
    void (*fn)(void);
    memcpy(&fn, (const char *)ops + offset, sizeof fn);
    return fn != NULL;
}

/* Every default parses as its declared type and lies in its range; names are unique. */
static int check_table(const crl_option *table, const char *what, crl_error *err)
{
    for (const crl_option *o = table; o && o->type != CRL_OPT_END; o++) {
        if (!o->name || !*o->name)
            return crl_error_set(err, CRL_E_INVALID, "%s declares an option without a name", what);
        if (o->type < CRL_OPT_BOOL || o->type > CRL_OPT_DOUBLES)
            return crl_error_set(err, CRL_E_INVALID, "%s: option '%s' has unknown type %d", what, o->name,
                                 (int)o->type);
        for (const crl_option *p = table; p < o; p++)
            if (!strcmp(p->name, o->name))
                return crl_error_set(err, CRL_E_INVALID, "%s declares option '%s' twice", what, o->name);
        if (!o->default_value)
            continue;
        crl__value v;
        char *why = NULL;
        if (!crl__parse_value(o, o->default_value, &v, &why)) {
            int rc = crl_error_set(err, CRL_E_INVALID,
                                   "%s: option '%s' has default \"%s\", which is not a valid %s (%s): fix the "
                                   "option table",
                                   what, o->name, o->default_value, crl__opt_type_name(o->type),
                                   why ? why : "bad value");
            g_free(why);
            return rc;
        }
        crl__value_clear(&v);
    }
    return CRL_OK;
}

static int check_component(const crl_component *c, crl_error *err)
{
    const char *kn = crl_kind_name((crl_kind)c->kind);
    char what[300];
    g_snprintf(what, sizeof what, "%s '%s'", kn, c->name);
    const required_op *req = kind_required(c->kind);
    for (; req && req->name; req++)
        if (!op_present(c->ops, req->offset))
            return crl_error_set(err, CRL_E_INVALID,
                                 "%s has no '%s' op (NULL or past its ops struct_size): every %s must "
                                 "provide it",
                                 what, req->name, kn);
    if (c->kind == CRL_KIND_LOSS) {
        const crl_loss_ops *ops = c->ops;
        if ((ops->flags & CRL_LOSS_ON_POLICY) && !op_present(ops, offsetof(crl_loss_ops, prepare)))
            return crl_error_set(err, CRL_E_INVALID, "%s is on-policy (CRL_LOSS_ON_POLICY) but has no 'prepare' op",
                                 what);
    }
    int rc = check_table(c->options, what, err);
    if (rc)
        return rc;
    const char *section = NULL;
    const crl_option *host = kind_host_table(c->kind, &section);
    for (const crl_option *o = c->options; host && o && o->type != CRL_OPT_END; o++)
        for (const crl_option *h = host; h->type != CRL_OPT_END; h++)
            if (!strcmp(o->name, h->name))
                return crl_error_set(err, CRL_E_INVALID,
                                     "%s declares option '%s', which is the host's own key in %s (%s): rename "
                                     "the option",
                                     what, o->name, section, h->doc ? h->doc : "");
    return CRL_OK;
}

/* Copy what the plugin registered and its descriptor into r, and check it all. */
static int record(crl_host *host, crl__scan_result *r, crl_error *err)
{
    const crl_plugin_info *info = crl_host_plugin_at(host, 0);
    const crl__plugin *p = g_ptr_array_index(host->plugins, 0);
    r->name = g_strdup(info->name);
    r->version = g_strdup(info->version);
    r->license = g_strdup(info->license);
    r->description = g_strdup(info->description);
    r->abi_major = info->abi_major;
    r->abi_minor = info->abi_minor;
    crl__options_free(r->plugin_options);
    r->plugin_options = crl__options_dup(p->desc->options);
    char what[300];
    g_snprintf(what, sizeof what, "plugin '%s': its [plugin.%s] table", info->name, info->name);
    int rc = check_table(p->desc->options, what, err);

    r->n_components = p->journal->len;
    r->components = g_new0(crl__scan_component, r->n_components);
    for (guint i = 0; i < p->journal->len; i++) {
        const crl__reg_entry *e = g_ptr_array_index(p->journal, i);
        crl__scan_component *sc = &r->components[i];
        sc->kind = e->comp.kind;
        sc->name = g_strdup(e->comp.name);
        sc->description = g_strdup(e->comp.description ? e->comp.description : "");
        sc->options = crl__options_dup(e->comp.options);
        if (!rc)
            rc = check_component(&e->comp, err);
    }
    if (rc) {
        /* A refused plugin reports only its reason: its tables may be what is malformed. */
        for (size_t i = 0; i < r->n_components; i++) {
            g_free(r->components[i].name);
            g_free(r->components[i].description);
            crl__options_free(r->components[i].options);
        }
        g_free(r->components);
        r->components = NULL;
        r->n_components = 0;
        crl__options_free(r->plugin_options);
        r->plugin_options = crl__options_dup(NULL);
    }
    return rc;
}

int crl_plugin_scanner_main(int argc, char **argv)
{
    if (argc != 4 || strcmp(argv[1], "--report-fd") != 0) {
        fprintf(stderr,
                "Usage: crl-plugin-scanner --report-fd FD PLUGIN.so\n\n"
                "crl's plugin scanner: loads one plugin in this process, checks it and reports to the crl\n"
                "program that started it.  It is not meant to be run by hand: 'crl plugins --rescan' runs it.\n");
        return 2;
    }
    char *end = NULL;
    long fd = strtol(argv[2], &end, 10);
    if (!end || *end || fd < 3 || fd > 1024 || fcntl((int)fd, F_GETFD) == -1) {
        fprintf(stderr, "crl-plugin-scanner: bad report fd '%s'\n", argv[2]);
        return 2;
    }
    const char *path = argv[3];
    /* A crash must end this process with its signal so the host can name it. */
    static const int fatal[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT };
    for (size_t i = 0; i < G_N_ELEMENTS(fatal); i++)
        signal(fatal[i], SIG_DFL);

    crl__scan_result *r = crl__scan_result_new(path);
    crl_error e = { 0 };
    crl_host *host = crl_host_new(NULL, &e);
    if (host) {
        host->probe_fd = (int)fd;
        if (!crl_host_load_path(host, path, &e))
            record(host, r, &e);
    }
    r->status = e.code;
    if (e.code)
        r->reason = g_strdup(e.message);
    /* Wrapped in a "v" so the host can take the bytes before it checks their type. */
    GVariant *rec = g_variant_ref_sink(crl__scan_result_to_variant(r));
    GVariant *v = g_variant_ref_sink(g_variant_new_variant(rec));
    g_variant_unref(rec);
    crl__scan_result_free(r);
    char tag = CRL__PROBE_STAGE_REPORT;
    uint64_t len = g_variant_get_size(v);
    unsigned char lenle[8];
    for (int i = 0; i < 8; i++)
        lenle[i] = (unsigned char)(len >> (8 * i));
    bool ok = crl__write_all((int)fd, &tag, 1) && crl__write_all((int)fd, lenle, sizeof lenle) &&
              crl__write_all((int)fd, g_variant_get_data(v), (size_t)len);
    g_variant_unref(v);
    /* Then fini (in crl_host_free), which may crash or hang too; the host waits for its marker. */
    if (host) {
        crl__probe_stage(host, CRL__PROBE_STAGE_FINI);
        host->probe_fd = -1;
        crl_host_free(host);
    }
    tag = CRL__PROBE_STAGE_DONE;
    ok = ok && crl__write_all((int)fd, &tag, 1);
    fflush(NULL);
    /* The scan ends here: process teardown (atexit handlers of libraries the plugin pulled in, a leak
     * checker's report on code fini already unmapped) is no part of it. */
    _exit(ok ? 0 : 1);
}
