/* The component registries ("kind/name"), registration from init, lookups. */
#include "host-private.h"

#include <stdarg.h>
#include <string.h>

/* Plurals for messages ("registered envs: ..."); the names are crl_kind_name's (kind.c). */
static const char *const kind_plurals[CRL_KIND_COUNT] = {
    NULL, "envs", "transforms", "storages", "samplers", "writers", "losses"
};

bool crl__kind_valid(int kind)
{
    return kind > 0 && kind < CRL_KIND_COUNT;
}

void crl__registry_init(crl_host *host)
{
    for (int k = 0; k < CRL_KIND_COUNT; k++) {
        host->reg[k].by_name = g_hash_table_new(g_str_hash, g_str_equal);
        host->reg[k].sorted = g_ptr_array_new_with_free_func(g_free);
    }
}

void crl__registry_destroy(crl_host *host)
{
    for (int k = 0; k < CRL_KIND_COUNT; k++) {
        if (host->reg[k].by_name)
            g_hash_table_destroy(host->reg[k].by_name);
        if (host->reg[k].sorted)
            g_ptr_array_free(host->reg[k].sorted, TRUE);
        host->reg[k].by_name = NULL;
        host->reg[k].sorted = NULL;
    }
}

/* Index where `name` sits or would be inserted in the sorted array. */
static guint sorted_position(const GPtrArray *a, const char *name)
{
    guint lo = 0, hi = a->len;
    while (lo < hi) {
        guint mid = lo + (hi - lo) / 2;
        const crl__reg_entry *e = g_ptr_array_index(a, mid);
        if (strcmp(e->comp.name, name) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

void crl__registry_unwind(crl_host *host, crl__plugin *p)
{
    if (!p->journal)
        return;
    /* Newest first, so the registries go back exactly to how they were. */
    for (guint i = p->journal->len; i-- > 0;) {
        crl__reg_entry *e = g_ptr_array_index(p->journal, i);
        crl__registry *r = &host->reg[e->comp.kind];
        g_hash_table_remove(r->by_name, e->comp.name);
        guint pos = sorted_position(r->sorted, e->comp.name);
        if (pos < r->sorted->len && g_ptr_array_index(r->sorted, pos) == e)
            g_ptr_array_remove_index(r->sorted, pos); /* frees e */
    }
    g_ptr_array_set_size(p->journal, 0);
}

static bool valid_component_name(const char *s)
{
    if (!s || !*s)
        return false;
    for (; *s; s++)
        if (!g_ascii_isalnum(*s) && *s != '_' && *s != '.' && *s != '-')
            return false;
    return true;
}

static void add_entry(crl_host *host, crl__plugin *owner, crl__reg_entry *e)
{
    crl__registry *r = &host->reg[e->comp.kind];
    e->owner = owner;
    g_hash_table_insert(r->by_name, (gpointer)e->comp.name, e);
    g_ptr_array_insert(r->sorted, (gint)sorted_position(r->sorted, e->comp.name), e);
    g_ptr_array_add(owner->journal, e);
}

static int refuse(crl_host *host, crl_error *err, int code, const char *fmt, ...) CRL_PRINTF(4, 5);

/* Record the first refused registration of the running init, so a failed
 * init reports its root cause (see loader.c), then set err. */
static int refuse(crl_host *host, crl_error *err, int code, const char *fmt, ...)
{
    char msg[CRL_ERROR_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    g_vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (host && host->current && host->current_reg_code == CRL_OK)
        host->current_reg_code = code;
    return crl_error_set(err, code, "%s", msg);
}

int crl_host_register(crl_host *host, const crl_component *c, crl_error *err)
{
    if (!host)
        return crl_error_set(err, CRL_E_INVALID, "crl_host_register: host is NULL");
    if (!host->current)
        return crl_error_set(err, CRL_E_INVALID,
                             "crl_host_register called outside a plugin's init: components may only "
                             "be registered from the init function of the plugin descriptor");
    if (!c)
        return refuse(host, err, CRL_E_INVALID, "crl_host_register: component is NULL");
    /* Every member up to ops is part of ABI 1.0, so a smaller struct is
     * corrupt rather than old. */
    if (c->struct_size < sizeof(crl_component))
        return refuse(host, err, CRL_E_INVALID,
                      "component struct_size is %u, expected at least %zu: set "
                      ".struct_size = sizeof(crl_component)",
                      (unsigned)c->struct_size, sizeof(crl_component));
    if (!crl__kind_valid(c->kind))
        return refuse(host, err, CRL_E_INVALID,
                      "component '%s' has unknown kind %d (use a crl_kind value: "
                      "CRL_KIND_ENV .. CRL_KIND_LOSS)",
                      c->name ? c->name : "(null)", (int)c->kind);
    const char *kn = crl_kind_name(c->kind);
    if (!valid_component_name(c->name))
        return refuse(host, err, CRL_E_INVALID,
                      "bad %s name '%s': names are non-empty and use only [A-Za-z0-9_.-]", kn, c->name ? c->name : "(null)");
    if (!c->ops)
        return refuse(host, err, CRL_E_INVALID, "%s '%s' has no ops (ops is NULL)", kn,
                      c->name);
    uint32_t ops_size;
    memcpy(&ops_size, c->ops, sizeof ops_size);
    if (ops_size < sizeof(uint32_t))
        return refuse(host, err, CRL_E_INVALID,
                      "%s '%s' ops struct_size is %u: every ops struct starts with "
                      "uint32_t struct_size set to sizeof the struct",
                      kn, c->name, (unsigned)ops_size);
    crl__registry *r = &host->reg[c->kind];
    const crl__reg_entry *old = g_hash_table_lookup(r->by_name, c->name);
    if (old)
        return refuse(host, err, CRL_E_EXISTS,
                      "%s '%s' is already registered by plugin '%s' (%s); rename the "
                      "component or disable one of the plugins ([plugins] disable = NAME)",
                      kn, c->name, old->owner->info.name, old->owner->path);

    crl__reg_entry *e = g_new0(crl__reg_entry, 1);
    memcpy(&e->comp, c, sizeof e->comp); /* min(struct_size, sizeof) == sizeof here */
    e->comp.struct_size = sizeof e->comp;
    add_entry(host, host->current, e);
    return CRL_OK;
}

int crl__registry_add_stub(crl_host *host, crl__plugin *p, int kind, const char *name, const char *description,
                           const crl_option *options, crl_error *err)
{
    const crl__reg_entry *old = g_hash_table_lookup(host->reg[kind].by_name, name);
    if (old)
        return crl_error_set(err, CRL_E_EXISTS,
                             "%s '%s' of plugin '%s' (%s) is already registered by plugin '%s' (%s); rename the "
                             "component or disable one of the plugins ([plugins] disable = NAME)",
                             crl_kind_name(kind), name, p->info.name, p->path, old->owner->info.name,
                             old->owner->path);
    crl__reg_entry *e = g_new0(crl__reg_entry, 1);
    e->comp.struct_size = sizeof e->comp;
    e->comp.kind = kind;
    e->comp.name = name;
    e->comp.description = description;
    e->comp.options = options;
    add_entry(host, p, e);
    return CRL_OK;
}

/* Load the deferred plugins that registered kind/name (or, with name NULL, every component of the kind),
 * so that what a caller gets has real ops.  Never from inside a plugin's init (plugins do not load
 * plugins): there the stubs stay, and lookups of them find nothing. */
static void materialize(crl_host *host, crl_kind kind, const char *name)
{
    if (host->current || !host->load_deferred)
        return;
    for (;;) {
        crl__plugin *owner = NULL;
        if (name) {
            const crl__reg_entry *e = g_hash_table_lookup(host->reg[kind].by_name, name);
            if (e && e->owner->deferred)
                owner = e->owner;
        } else {
            const GPtrArray *a = host->reg[kind].sorted;
            for (guint i = 0; i < a->len && !owner; i++) {
                const crl__reg_entry *e = g_ptr_array_index(a, i);
                if (e->owner->deferred)
                    owner = e->owner;
            }
        }
        if (!owner)
            return;
        host->load_deferred(host, owner);
    }
}

const crl_component *crl__host_peek(const crl_host *host, crl_kind kind, const char *name)
{
    if (!host || !crl__kind_valid((int)kind) || !name)
        return NULL;
    crl_host *h = (crl_host *)host;
    g_rec_mutex_lock(&h->lock);
    const crl__reg_entry *e = g_hash_table_lookup(host->reg[kind].by_name, name);
    g_rec_mutex_unlock(&h->lock);
    return e ? &e->comp : NULL;
}

/* Lookups load what they find deferred: the host is logically const to callers. */
const crl_component *crl_host_find(const crl_host *host, crl_kind kind, const char *name)
{
    if (!host || !crl__kind_valid((int)kind) || !name)
        return NULL;
    crl_host *h = (crl_host *)host;
    g_rec_mutex_lock(&h->lock);
    materialize(h, kind, name);
    const crl__reg_entry *e = g_hash_table_lookup(host->reg[kind].by_name, name);
    if (e && e->owner->deferred)
        e = NULL;
    g_rec_mutex_unlock(&h->lock);
    return e ? &e->comp : NULL;
}

static void not_found(const crl_host *host, crl_kind kind, const char *name, crl_error *err);

const crl_component *crl_host_lookup(const crl_host *host, crl_kind kind, const char *name, crl_error *err)
{
    if (!host || !name) {
        crl_error_set(err, CRL_E_INVALID, "crl_host_lookup: host and name must not be NULL");
        return NULL;
    }
    if (!crl__kind_valid((int)kind)) {
        crl_error_set(err, CRL_E_INVALID, "crl_host_lookup: unknown kind %d", (int)kind);
        return NULL;
    }
    const crl_component *c = crl_host_find(host, kind, name);
    if (c)
        return c;
    crl_host *h = (crl_host *)host;
    g_rec_mutex_lock(&h->lock);
    not_found(host, kind, name, err);
    g_rec_mutex_unlock(&h->lock);
    return NULL;
}

/* The plugins that failed, which may be the ones that would have provided a missing component:
 * "" or "; N plugins could not be loaded ...", for the end of a message.  Free with g_free. */
static char *failures_text(const crl_host *host)
{
    if (host->failures->len == 0)
        return g_strdup("");
    GString *s = g_string_new(NULL);
    g_string_append_printf(s, "; %u plugin%s could not be loaded (see 'crl plugins'):", host->failures->len,
                           host->failures->len == 1 ? "" : "s");
    for (guint i = 0; i < host->failures->len; i++) {
        const crl__failure *f = &g_array_index(host->failures, crl__failure, i);
        char *name = crl__plugin_name_from_path(f->path);
        g_string_append_printf(s, "%s %s: %s", i ? ";" : "", name, f->error.message);
        g_free(name);
    }
    return g_string_free(s, FALSE);
}

static void not_found(const crl_host *host, crl_kind kind, const char *name, crl_error *err)
{
    const GPtrArray *a = host->reg[kind].sorted;
    if (a->len == 0) {
        GString *loaded = g_string_new(NULL);
        for (guint i = 0; i < host->plugins->len; i++) {
            const crl__plugin *p = g_ptr_array_index(host->plugins, i);
            g_string_append_printf(loaded, "%s%s", i ? ", " : "", p->info.name);
        }
        char *fails = failures_text(host);
        crl_error_set(err, CRL_E_NOT_FOUND,
                      "no %s '%s': no loaded plugin registers any %s (loaded plugins: %s); check "
                      "[plugins] load/path and run 'crl plugins'%s",
                      crl_kind_name(kind), name, crl_kind_name(kind), loaded->len ? loaded->str : "none", fails);
        g_free(fails);
        g_string_free(loaded, TRUE);
        return;
    }
    const char **names = g_new(const char *, a->len + 1);
    GString *list = g_string_new(NULL);
    for (guint i = 0; i < a->len; i++) {
        const crl__reg_entry *e = g_ptr_array_index(a, i);
        names[i] = e->comp.name;
        g_string_append_printf(list, "%s%s", i ? ", " : "", e->comp.name);
    }
    names[a->len] = NULL;
    const char *hint = crl_did_you_mean(name, names);
    char *fails = failures_text(host);
    if (hint)
        crl_error_set(err, CRL_E_NOT_FOUND, "no %s '%s'; did you mean '%s'? registered %s: %s%s", crl_kind_name(kind),
                      name, hint, kind_plurals[kind], list->str, fails);
    else
        crl_error_set(err, CRL_E_NOT_FOUND, "no %s '%s'; registered %s: %s%s", crl_kind_name(kind), name,
                      kind_plurals[kind], list->str, fails);
    g_free(fails);
    g_string_free(list, TRUE);
    g_free(names);
}

/* Listing a kind loads every deferred plugin that provides one: callers go on to use the ops. */
size_t crl_host_component_count(const crl_host *host, crl_kind kind)
{
    if (!host || !crl__kind_valid((int)kind))
        return 0;
    crl_host *h = (crl_host *)host;
    g_rec_mutex_lock(&h->lock);
    materialize(h, kind, NULL);
    size_t n = 0;
    for (guint i = 0; i < host->reg[kind].sorted->len; i++)
        n += !((const crl__reg_entry *)g_ptr_array_index(host->reg[kind].sorted, i))->owner->deferred;
    g_rec_mutex_unlock(&h->lock);
    return n;
}

const crl_component *crl_host_component_at(const crl_host *host, crl_kind kind, size_t i)
{
    if (!host || !crl__kind_valid((int)kind))
        return NULL;
    crl_host *h = (crl_host *)host;
    g_rec_mutex_lock(&h->lock);
    materialize(h, kind, NULL);
    const crl__reg_entry *found = NULL;
    for (guint k = 0; k < host->reg[kind].sorted->len && !found; k++) {
        const crl__reg_entry *e = g_ptr_array_index(host->reg[kind].sorted, k);
        if (!e->owner->deferred && i-- == 0)
            found = e;
    }
    g_rec_mutex_unlock(&h->lock);
    return found ? &found->comp : NULL;
}

size_t crl_host_known_count(const crl_host *host, crl_kind kind)
{
    if (!host || !crl__kind_valid((int)kind))
        return 0;
    crl_host *h = (crl_host *)host;
    g_rec_mutex_lock(&h->lock);
    size_t n = host->reg[kind].sorted->len;
    g_rec_mutex_unlock(&h->lock);
    return n;
}

const crl_component *crl_host_known_at(const crl_host *host, crl_kind kind, size_t i)
{
    if (!host || !crl__kind_valid((int)kind))
        return NULL;
    crl_host *h = (crl_host *)host;
    g_rec_mutex_lock(&h->lock);
    const crl__reg_entry *e = i < host->reg[kind].sorted->len ? g_ptr_array_index(host->reg[kind].sorted, (guint)i)
                                                              : NULL;
    g_rec_mutex_unlock(&h->lock);
    return e ? &e->comp : NULL;
}

const char *crl_host_component_owner(const crl_host *host, crl_kind kind, const char *name)
{
    if (!host || !crl__kind_valid((int)kind) || !name)
        return NULL;
    crl_host *h = (crl_host *)host;
    g_rec_mutex_lock(&h->lock);
    const crl__reg_entry *e = g_hash_table_lookup(host->reg[kind].by_name, name);
    g_rec_mutex_unlock(&h->lock);
    return e ? e->owner->info.name : NULL;
}
