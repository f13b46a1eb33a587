/* Helpers shared by the state group of the transforms plugin (normalisation, rewards, counters, frames). */
#ifndef CRL_TRANSFORMS_STATE_COMMON_H
#define CRL_TRANSFORMS_STATE_COMMON_H

#include "transforms.h"

/* Component tables of the group, one pair per transform (defined in the state_*.c files). */
extern const crl_option st_catframes_options[];
extern const crl_transform_ops st_catframes_ops;
extern const crl_option st_obsnorm_options[];
extern const crl_transform_ops st_obsnorm_ops;
extern const crl_option st_vecnorm_options[];
extern const crl_transform_ops st_vecnorm_ops;
/* The host VecNorm logs through: set by tf_register_state (state_vecnorm.c). */
void tf_state_set_host(crl_host *host);
extern const crl_option st_rscale_options[];
extern const crl_transform_ops st_rscale_ops;
extern const crl_option st_rclip_options[];
extern const crl_transform_ops st_rclip_ops;
extern const crl_option st_binarize_options[];
extern const crl_transform_ops st_binarize_ops;
extern const crl_option st_sign_options[];
extern const crl_transform_ops st_sign_ops;
extern const crl_option st_rsum_options[];
extern const crl_transform_ops st_rsum_ops;
extern const crl_option st_stepcount_options[];
extern const crl_transform_ops st_stepcount_ops;
extern const crl_option st_inittracker_options[];
extern const crl_transform_ops st_inittracker_ops;
extern const crl_option st_trajcount_options[];
extern const crl_transform_ops st_trajcount_ops;
extern const crl_option st_timemaxpool_options[];
extern const crl_transform_ops st_timemaxpool_ops;

/* The leaf spec at key: CRL_E_NOT_FOUND naming the available keys when
 * absent, CRL_E_DTYPE when key names a Composite (a nested TensorDict). */
crl_spec *st_spec_leaf(crl_transform_specs *s, const char *key, const char *who, crl_error *err);
/* CRL_E_DTYPE unless the spec's dtype is a floating-point one. */
int st_need_float(const crl_spec *leaf, const char *key, const char *who, crl_error *err);
/* CRL_E_DTYPE when the spec is bool (arithmetic transforms). */
int st_need_numeric(const crl_spec *leaf, const char *key, const char *who, crl_error *err);
/* For load_state: *out = the float64 vector at key of state, with n
 * elements (n < 0: any).  CRL_E_NOT_FOUND (naming the keys present),
 * CRL_E_DTYPE or CRL_E_SHAPE otherwise, naming who and the key. */
int st_state_vector(const crl_td *state, const char *key, int64_t n, const char *who, const crl_tensor **out,
                    crl_error *err);
/* For state: a new float64 vector of n elements from v, set at key of out. */
int st_state_put(crl_td *out, const char *key, const double *v, int64_t n, crl_error *err);
/* Product of the dims of a shape from `from` on. */
int64_t st_numel_from(int ndim, const int64_t *shape, int from);

/* Map a leaf spec elementwise: Bounded bounds go through f (the feature
 * index j is the position inside one batch row of F elements), with the
 * results sorted so low <= high; other kinds become Unbounded of out_dt
 * with the same shape when out_dt differs, else the spec itself (a new
 * reference either way). */
typedef double (*st_map_fn)(double x, int64_t j, void *user);
crl_spec *st_spec_map(const crl_spec *leaf, int batch_ndim, crl_dtype out_dt, st_map_fn f, void *user,
                      crl_error *err);
/* Put spec under key (steals the reference).  spec NULL: the call that made
 * it failed and recorded why in `made` (a local crl_error), handed on here. */
int st_spec_set(crl_transform_specs *s, const char *key, crl_spec *spec, const crl_error *made, crl_error *err);

/* The tensor at key in td as a contiguous new reference, checked to have
 * td's batch shape followed by F elements when F > 0 (CRL_E_SHAPE) and a
 * float dtype when need_float (CRL_E_DTYPE).  Missing: NULL with
 * CRL_E_NOT_FOUND naming the keys present, or NULL with err clear when
 * tolerant. */
crl_tensor *st_input(const crl_td *td, const char *key, const char *who, bool need_float, bool tolerant,
                     crl_error *err);
/* Rows (product of td's batch dims) of a tensor in td. */
int64_t st_rows(const crl_td *td);

/* Elements as doubles: read n contiguous elements from data (dtype dt) at
 * pos, or write them. */
void st_load(const void *data, crl_dtype dt, int64_t pos, int64_t n, double *out);
void st_store(void *data, crl_dtype dt, int64_t pos, int64_t n, const double *in);

/* A growable scratch array of doubles owned by a transform. */
typedef struct st_scratch {
    double *p;
    size_t cap;
} st_scratch;
double *st_scratch_get(st_scratch *s, size_t n, const char *who, crl_error *err);
void st_scratch_free(st_scratch *s);

/* CRL_E_CONFIG "ORIGIN: [section] name = value: why" (value as text). */
int st_bad_option(crl_error *err, const crl_opts *o, const char *name, const char *value, const char *why);

/* CRL_E_CONFIG unless the option is given (for options without a default). */
int st_require(const crl_opts *o, const char *name, const char *who, crl_error *err);

/* Elementwise float transforms (RewardScaling, SignTransform, ...): apply
 * fn to each in key and write the out key with out_dt (CRL_DTYPE_COUNT:
 * the input's dtype).  Missing keys are skipped when tolerant (the reset
 * output holds no reward). */
typedef void (*st_elem_fn)(void *t, double *v, int64_t n, int64_t F);
int st_apply_elementwise(void *t, const tf_keys *k, crl_td *td, const char *who, bool need_float, crl_dtype out_dt,
                         bool tolerant, st_scratch *scratch, st_elem_fn fn, crl_error *err);

#endif
