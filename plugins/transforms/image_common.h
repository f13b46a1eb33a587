/* The image group's shared frame: per-key plans, the generic call and spec rewrite, and its registration lists. */
#ifndef CRL_TF_IMAGE_COMMON_H
#define CRL_TF_IMAGE_COMMON_H

#include "transforms.h"

/* What one key becomes: computed from the input's dtype and shape (by the
 * transform's plan function), then carried out by its run function. */
typedef struct img_plan {
    crl_dtype out_dt;
    int ndim;
    int64_t shape[CRL_MAX_DIMS];
    int permute, scale;     /* ToTensorImage */
    int64_t top, left;      /* crops */
    int copy;               /* the output equals the input (GrayScale on one channel) */
} img_plan;

typedef struct img_tf img_tf;
struct img_tf {
    const char *who;        /* the registered type, for messages */
    tf_keys keys;
    /* Validate dt/shape of key (batch_ndim leading batch dims) and fill p. */
    int (*plan)(img_tf *t, crl_dtype dt, int ndim, const int64_t *shape, int batch_ndim, const char *key,
                img_plan *p, crl_error *err);
    /* in: contiguous, of the dtype and shape the plan was made for (a
     * spec's bounds are cast to the spec's dtype first); out: contiguous,
     * of the planned dtype and shape. */
    int (*run)(img_tf *t, const img_plan *p, const crl_tensor *in, crl_tensor *out, crl_error *err);
    void (*free_extra)(img_tf *t);
    void *extra;
};

/* "[3, 64, 64]" into buf. */
const char *img_shape_str(int ndim, const int64_t *shape, char *buf, size_t cap);

/* Allocate an img_tf with who set and keys read from in_keys/out_keys. */
img_tf *img_tf_new(const crl_opts *o, const char *who, bool allow_empty, crl_error *err);
void img_tf_destroy(void *t);
/* The ops' call and transform_specs for any img_tf. */
int img_tf_call(void *t, crl_td *td, crl_error *err);
int img_tf_specs(void *t, crl_transform_specs *s, crl_error *err);

/* Registration of the two halves of the group. */
int tf_register_image_pixels(crl_host *host, crl_error *err);
int tf_register_image_shape(crl_host *host, crl_error *err);
int tf_register_image_index(crl_host *host, crl_error *err);

#endif
