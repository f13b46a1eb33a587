/* A loss over the user's own networks (crl_loss_from_modules): TorchRL's DDPGLoss(actor, value) from C. */
#include "config.h"
#include "crl-private.h"
#include "config-private.h"

#include <crl/trainer.h>

#include <glib.h>
#include <stddef.h>
#include <string.h>

static const crl_option no_options[] = { CRL_OPTIONS_END };

/* Section "loss" of a new config holding the key=value arguments ("argument N" as their origin). */
static int kv_config(const char *const *kv, crl_config **out, crl_error *err)
{
    crl_error e;
    crl_error_clear(&e);
    crl_config *cfg = crl_config_new(&e);
    if (!cfg)
        return crl_error_pass(err, &e, CRL_E_NOMEM);
    crl__section *sec = crl__config_ensure_section(cfg, "loss", "arguments");
    for (size_t i = 0; kv && kv[i]; i++) {
        const char *eq = strchr(kv[i], '=');
        char origin[32];
        g_snprintf(origin, sizeof origin, "argument %zu", i + 1);
        if (!eq || eq == kv[i]) {
            crl_config_free(cfg);
            return crl_error_set(err, CRL_E_CONFIG, "%s: '%s' is not key=value; write e.g. 'gamma=0.99'", origin,
                                 kv[i]);
        }
        char *key = g_strstrip(g_strndup(kv[i], (size_t)(eq - kv[i])));
        char *value = g_strstrip(g_strdup(eq + 1));
        bool twice = crl__section_entry(sec, key) != NULL, typed = !strcmp(key, "type");
        if (twice || typed)
            crl_error_set(err, CRL_E_CONFIG, "%s: %s", origin,
                          typed ? "'type' is the loss argument of crl_loss_from_modules; drop it here"
                                : "a key given twice; give it once");
        else
            crl__section_add(sec, key, value, origin, CRL_LAYER_OVERRIDE);
        g_free(key);
        g_free(value);
        if (twice || typed) {
            crl_config_free(cfg);
            return CRL_E_CONFIG;
        }
    }
    *out = cfg;
    return CRL_OK;
}

int crl_loss_from_modules(crl_host *host, const char *type, const char *const *kv, const crl_loss_modules *modules,
                          uint64_t seed, const crl_loss_ops **ops_out, void **st, crl_error *err)
{
    if (!host || !type || !modules || !ops_out || !st)
        return crl_error_set(err, CRL_E_INVALID, "crl_loss_from_modules: %s is NULL",
                             !host ? "host" : !type ? "type" : !modules ? "modules" : !ops_out ? "ops" : "st");
    if (modules->struct_size < offsetof(crl_loss_modules, value) + sizeof modules->value)
        return crl_error_set(err, CRL_E_INVALID, "crl_loss_from_modules: modules->struct_size is %u; set it to "
                             "sizeof(crl_loss_modules) (%zu)", modules->struct_size, sizeof(crl_loss_modules));
    crl_error e;
    crl_error_clear(&e);
    const crl_component *comp = crl_host_lookup(host, CRL_KIND_LOSS, type, &e);
    if (!comp)
        return crl_error_set(err, e.code ? e.code : CRL_E_NOT_FOUND, "loss '%s': %s", type, e.message);
    const crl_loss_ops *ops = comp->ops;
    if (!ops || ops->struct_size < offsetof(crl_loss_ops, create_from_modules) + sizeof ops->create_from_modules ||
        !ops->create_from_modules)
        return crl_error_set(err, CRL_E_UNSUPPORTED, "loss '%s' (plugin '%s') builds its own networks only: it "
                             "takes no user modules (use crl_loss_from_config)", type,
                             crl_host_component_owner(host, CRL_KIND_LOSS, type));
    if (!ops->destroy || !ops->act || !ops->num_params || !ops->param || !ops->forward || !ops->save || !ops->load ||
        ((ops->flags & CRL_LOSS_ON_POLICY) && !ops->prepare))
        return crl_error_set(err, CRL_E_PLUGIN, "loss '%s' (plugin '%s') has incomplete ops", type,
                             crl_host_component_owner(host, CRL_KIND_LOSS, type));
    crl_config *cfg = NULL;
    int rc = kv_config(kv, &cfg, err);
    if (rc)
        return crl_error_prefix(err, "loss '%s': ", type), rc;
    const crl_option *tables[2] = { crl_loss_section_options(), comp->options ? comp->options : no_options };
    rc = crl__config_check_keys(cfg, "loss", tables, 2, err);
    crl_opts *o = NULL;
    if (!rc) {
        crl_error_clear(&e);
        if (!(o = crl_config_opts(cfg, "loss", tables, 2, &e)))
            rc = crl_error_pass(err, &e, CRL_E_CONFIG);
    }
    if (rc)
        crl_error_prefix(err, "loss '%s': ", type);
    /* (the loss's own errors name it already) */
    else if (!(rc = ops->create_from_modules(o, modules, seed, st, err)))
        *ops_out = ops;
    crl_opts_free(o);
    crl_config_free(cfg);
    return rc;
}
