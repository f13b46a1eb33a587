/* The standard transforms plugin: shared helpers and the three registration groups. */
#ifndef CRL_TRANSFORMS_PLUGIN_H
#define CRL_TRANSFORMS_PLUGIN_H

#include <crl/crl.h>

/* A malloc'd copy of s (NULL when out of memory). */
char *tf_strdup(const char *s);

/* Pairs of keys read from an in/out option pair: out[i] receives in[i];
 * an empty out list means out = in.  Strings owned by the struct. */
typedef struct tf_keys {
    size_t n;
    char **in;
    char **out;
} tf_keys;

/* Read in_name/out_name (CRL_OPT_LIST options) into k.  Different lengths
 * are CRL_E_CONFIG naming both keys and their origins; who is the
 * transform's type for messages.  An empty in list is allowed only when
 * allow_empty is true.  On error k is empty. */
int tf_keys_read(const crl_opts *o, const char *in_name, const char *out_name, bool allow_empty, const char *who,
                 tf_keys *k, crl_error *err);
void tf_keys_free(tf_keys *k);

/* Which member of a spec set holds key (observation, reward, done, state,
 * action, searched in that order); NULL when none does.  *leaf (may be
 * NULL) receives the spec at key. */
crl_spec **tf_specs_owner(crl_transform_specs *s, const char *key, crl_spec **leaf);
/* The leaf spec at key in any member, or CRL_E_NOT_FOUND naming the key
 * and every key of the set. */
crl_spec *tf_specs_need(crl_transform_specs *s, const char *key, const char *who, crl_error *err);
/* The tensor at key in td, or CRL_E_NOT_FOUND naming the key and the keys
 * present. */
crl_tensor *tf_td_need(const crl_td *td, const char *key, const char *who, crl_error *err);
/* Put child at key in the member that holds key already, else in the
 * observation Composite.  Steals child's reference. */
int tf_specs_put(crl_transform_specs *s, const char *key, crl_spec *child, crl_error *err);

/* Python's repr of a key list, as TorchRL prints in_keys: ['a', 'b'], a
 * dotted key as a tuple ('next', 'x').  malloc'd; NULL when out of memory. */
char *tf_pylist(size_t n, char *const *keys);

/* Register one transform component (static strings, options and ops). */
int tf_register(crl_host *host, const char *name, const char *description, const crl_option *options,
                const crl_transform_ops *ops, crl_error *err);

/* The groups, one file each (image.c ..., state ..., action ...). */
int tf_register_image(crl_host *host, crl_error *err);
int tf_register_state(crl_host *host, crl_error *err);
/* Forget the host tf_register_state keeps for VecNorm's warnings (the
 * plugin's fini: that host is not to be used afterwards). */
void tf_state_forget_host(void);
int tf_register_action(crl_host *host, crl_error *err);
/* FunctionTransform (function.c): forward is a C function from a library, through libffi. */
int tf_register_function(crl_host *host, crl_error *err);

#endif
