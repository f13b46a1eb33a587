/* The action, key and episode-control group of the transforms plugin: registration hooks and shared helpers. */
#ifndef CRL_TRANSFORMS_ACTION_GROUP_H
#define CRL_TRANSFORMS_ACTION_GROUP_H

#include "transforms.h"
#include <crl/transform_backend.h>

/* One per file; tf_register_action (action_register.c) calls them all. */
int tfa_register_dtype(crl_host *host, crl_error *err);     /* DoubleToFloat, DTypeCastTransform */
int tfa_register_clip(crl_host *host, crl_error *err);      /* ClipTransform */
int tfa_register_scaling(crl_host *host, crl_error *err);   /* ActionScaling */
int tfa_register_discrete(crl_host *host, crl_error *err);  /* DiscreteActionProjection, ActionMask */
int tfa_register_keys(crl_host *host, crl_error *err);      /* ExcludeTransform, SelectTransform, RenameTransform */
int tfa_register_primer(crl_host *host, crl_error *err);    /* TensorDictPrimer */
int tfa_register_episode(crl_host *host, crl_error *err);   /* NoopResetEnv, FrameSkipTransform */
int tfa_register_checks(crl_host *host, crl_error *err);    /* FiniteTensorDictCheck, TerminateTransform,
                                                               RandomTruncationTransform */

/* The same domain (kind, bounds, n, nvec) with another dtype.  New reference. */
crl_spec *tfa_spec_cast(const crl_spec *s, crl_dtype dt, crl_error *err);
/* Dotted leaf keys of a Composite (NULL: none), NULL-terminated; free with
 * tfa_strv_free.  NULL only when out of memory. */
char **tfa_spec_leaf_keys(const crl_spec *comp);
size_t tfa_strv_len(char *const *v);
bool tfa_strv_has(char *const *v, const char *s);
void tfa_strv_free(char **v);
/* Fill k from a string vector (out = in); CRL_E_NOMEM naming who. */
int tfa_keys_from(tf_keys *k, char *const *v, const char *who, crl_error *err);
/* A dtype option ("float32", "torch.float64", ...): CRL_E_CONFIG naming the
 * key, its origin and the dtypes accepted. */
int tfa_opt_dtype(const crl_opts *o, const char *name, crl_dtype *out, crl_error *err);
/* Per-env flags in a tensor holding one value per env ([num, 1], [num], [1]). */
bool tfa_flag(const crl_tensor *t, int64_t i);
void tfa_set_flag(crl_tensor *t, int64_t i, bool v);
/* Elements of one env's row of t (t's numel / num). */
int64_t tfa_row_elems(const crl_tensor *t, int64_t num);
/* Copy env i's row of src into dst (same dtype and shape). */
void tfa_row_copy(crl_tensor *dst, const crl_tensor *src, int64_t i, int64_t num);
/* "env 2" for a batch, "the env" for a single env, into buf. */
const char *tfa_env_label(char *buf, size_t n, int64_t i, int64_t num);

#endif
