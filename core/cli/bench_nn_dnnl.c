/* crl bench nn, oneDNN's side: the networks crl measures, run through oneDNN's primitives on the same
 * weights and inputs, so that the figures compare the same computation (checked: the largest difference
 * from crl's own outputs and gradients is reported next to them).  oneDNN 2.x (op descriptors, Debian 12)
 * and 3.x (primitive-descriptor constructors) differ only in how descriptors are made: the md_ and pd_
 * helpers below hide that. */
#include "config.h"
#include "cli-private.h"

#include <crl/nn.h>
#include <crl/rnn.h>
#include <dlfcn.h>
#include <math.h>
#include <oneapi/dnnl/dnnl.h>
#include <string.h>

#if DNNL_VERSION_MAJOR >= 3
typedef const_dnnl_memory_desc_t md_t;
#else
typedef const dnnl_memory_desc_t *md_t;
#endif

/* What one comparison holds; every object made is freed with it.  The first failure sticks in st/what and
 * every helper after it does nothing, so set-up code reads straight through and checks once. */
typedef struct dn {
    dnnl_engine_t eng;
    dnnl_stream_t strm;
    GPtrArray *mds, *pds, *prims, *mems, *bufs;
    dnnl_status_t st;
    const char *what;
} dn;

/* A program: primitives with their arguments, run in order. */
#define MAX_OPS 64
typedef struct op {
    dnnl_primitive_t p;
    int n;
    dnnl_exec_arg_t a[20];
} op;
typedef struct prog {
    op ops[MAX_OPS];
    int n;
} prog;

/* A value: memory and the layout it has. */
typedef struct val {
    dnnl_memory_t m;
    md_t md;
} val;

static bool fail(dn *d, dnnl_status_t s, const char *what)
{
    if (s != dnnl_success && d->st == dnnl_success) {
        d->st = s;
        d->what = what;
    }
    return d->st != dnnl_success;
}

static void md_free(gpointer p)
{
#if DNNL_VERSION_MAJOR >= 3
    dnnl_memory_desc_destroy(p);
#else
    g_free(p);
#endif
}

static void pd_free(gpointer p) { dnnl_primitive_desc_destroy(p); }
static void prim_free(gpointer p) { dnnl_primitive_destroy(p); }
static void mem_free(gpointer p) { dnnl_memory_destroy(p); }

static int dn_open(dn *d, crl_error *err)
{
    memset(d, 0, sizeof *d);
    d->mds = g_ptr_array_new_with_free_func(md_free);
    d->pds = g_ptr_array_new_with_free_func(pd_free);
    d->prims = g_ptr_array_new_with_free_func(prim_free);
    d->mems = g_ptr_array_new_with_free_func(mem_free);
    d->bufs = g_ptr_array_new_with_free_func(g_free);
    if (fail(d, dnnl_engine_create(&d->eng, dnnl_cpu, 0), "dnnl_engine_create") ||
        fail(d, dnnl_stream_create(&d->strm, d->eng, dnnl_stream_default_flags), "dnnl_stream_create"))
        return crl_error_set(err, CRL_E_RUNTIME, "oneDNN: %s failed (status %d)", d->what, (int)d->st);
    return CRL_OK;
}

static void dn_close(dn *d)
{
    /* primitives before their descriptors, memory before the engine */
    g_ptr_array_unref(d->prims);
    g_ptr_array_unref(d->pds);
    g_ptr_array_unref(d->mems);
    g_ptr_array_unref(d->mds);
    g_ptr_array_unref(d->bufs);
    if (d->strm)
        dnnl_stream_destroy(d->strm);
    if (d->eng)
        dnnl_engine_destroy(d->eng);
}

static md_t md(dn *d, int nd, const dnnl_dims_t dims, dnnl_format_tag_t tag)
{
    if (d->st)
        return NULL;
#if DNNL_VERSION_MAJOR >= 3
    dnnl_memory_desc_t m = NULL;
    if (fail(d, dnnl_memory_desc_create_with_tag(&m, nd, dims, dnnl_f32, tag), "a memory descriptor"))
        return NULL;
#else
    dnnl_memory_desc_t *m = g_new0(dnnl_memory_desc_t, 1);
    if (fail(d, dnnl_memory_desc_init_by_tag(m, nd, dims, dnnl_f32, tag), "a memory descriptor")) {
        g_free(m);
        return NULL;
    }
#endif
    g_ptr_array_add(d->mds, (gpointer)m);
    return m;
}

static md_t q(dn *d, const_dnnl_primitive_desc_t pd, dnnl_query_t what)
{
    if (d->st)
        return NULL;
    md_t m = dnnl_primitive_desc_query_md(pd, what, 0);
    fail(d, m ? dnnl_success : dnnl_invalid_arguments, "a primitive's memory descriptor query");
    return m;
}

/* The layout pd wants for execute argument `arg` (DNNL_ARG_WEIGHTS_LAYER, ...). */
static md_t q_arg(dn *d, const_dnnl_primitive_desc_t pd, int arg)
{
    if (d->st)
        return NULL;
    md_t m = dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, arg);
    fail(d, m ? dnnl_success : dnnl_invalid_arguments, "a primitive's argument descriptor query");
    return m;
}

/* *pd, just made by a call that returned s (read after the call: the argument order is unspecified). */
static dnnl_primitive_desc_t keep_pd(dn *d, dnnl_status_t s, dnnl_primitive_desc_t *pd, const char *what)
{
    if (fail(d, s, what))
        return NULL;
    g_ptr_array_add(d->pds, *pd);
    return *pd;
}

#if DNNL_VERSION_MAJOR < 3
/* 2.x: an op descriptor, then its primitive descriptor. */
static dnnl_primitive_desc_t pd_of(dn *d, dnnl_status_t init, const void *desc, const_dnnl_primitive_attr_t attr,
                                   const_dnnl_primitive_desc_t hint, const char *what)
{
    dnnl_primitive_desc_t pd = NULL;
    if (fail(d, init, what))
        return NULL;
    return keep_pd(d, dnnl_primitive_desc_create(&pd, desc, attr, d->eng, hint), &pd, what);
}
#endif

#if DNNL_VERSION_MAJOR >= 3
static const dnnl_dims_t no_dilation = { 0, 0 };
#endif

static dnnl_primitive_desc_t pd_conv_fwd(dn *d, md_t src, md_t w, md_t b, md_t dst, const dnnl_dims_t strides,
                                         const dnnl_dims_t pad, const_dnnl_primitive_attr_t attr)
{
    if (d->st)
        return NULL;
    dnnl_primitive_desc_t pd = NULL;
#if DNNL_VERSION_MAJOR >= 3
    return keep_pd(d, dnnl_convolution_forward_primitive_desc_create(&pd, d->eng, dnnl_forward_training,
                      dnnl_convolution_direct, src, w, b, dst, strides, no_dilation, pad, pad, attr), &pd,
                   "convolution forward");
#else
    (void)pd;
    dnnl_convolution_desc_t c;
    return pd_of(d, dnnl_convolution_forward_desc_init(&c, dnnl_forward_training, dnnl_convolution_direct, src, w, b,
                                                       dst, strides, pad, pad), &c, attr, NULL,
                 "convolution forward");
#endif
}

static dnnl_primitive_desc_t pd_conv_bwd_data(dn *d, md_t dsrc, md_t w, md_t ddst, const dnnl_dims_t strides,
                                              const dnnl_dims_t pad, const_dnnl_primitive_desc_t hint)
{
    if (d->st)
        return NULL;
    dnnl_primitive_desc_t pd = NULL;
#if DNNL_VERSION_MAJOR >= 3
    return keep_pd(d, dnnl_convolution_backward_data_primitive_desc_create(&pd, d->eng, dnnl_convolution_direct,
                      dsrc, w, ddst, strides, no_dilation, pad, pad, hint, NULL), &pd, "convolution backward data");
#else
    (void)pd;
    dnnl_convolution_desc_t c;
    return pd_of(d, dnnl_convolution_backward_data_desc_init(&c, dnnl_convolution_direct, dsrc, w, ddst, strides, pad,
                                                             pad), &c, NULL, hint, "convolution backward data");
#endif
}

static dnnl_primitive_desc_t pd_conv_bwd_w(dn *d, md_t src, md_t dw, md_t db, md_t ddst, const dnnl_dims_t strides,
                                           const dnnl_dims_t pad, const_dnnl_primitive_desc_t hint)
{
    if (d->st)
        return NULL;
    dnnl_primitive_desc_t pd = NULL;
#if DNNL_VERSION_MAJOR >= 3
    return keep_pd(d, dnnl_convolution_backward_weights_primitive_desc_create(&pd, d->eng, dnnl_convolution_direct,
                      src, dw, db, ddst, strides, no_dilation, pad, pad, hint, NULL), &pd,
                   "convolution backward weights");
#else
    (void)pd;
    dnnl_convolution_desc_t c;
    return pd_of(d, dnnl_convolution_backward_weights_desc_init(&c, dnnl_convolution_direct, src, dw, db, ddst, strides,
                                                                pad, pad), &c, NULL, hint,
                 "convolution backward weights");
#endif
}

static dnnl_primitive_desc_t pd_ip_fwd(dn *d, md_t src, md_t w, md_t b, md_t dst, const_dnnl_primitive_attr_t attr)
{
    if (d->st)
        return NULL;
    dnnl_primitive_desc_t pd = NULL;
#if DNNL_VERSION_MAJOR >= 3
    return keep_pd(d, dnnl_inner_product_forward_primitive_desc_create(&pd, d->eng, dnnl_forward_training, src, w, b,
                                                                       dst, attr), &pd, "inner product forward");
#else
    (void)pd;
    dnnl_inner_product_desc_t c;
    return pd_of(d, dnnl_inner_product_forward_desc_init(&c, dnnl_forward_training, src, w, b, dst), &c, attr, NULL,
                 "inner product forward");
#endif
}

static dnnl_primitive_desc_t pd_ip_bwd_data(dn *d, md_t dsrc, md_t w, md_t ddst, const_dnnl_primitive_desc_t hint)
{
    if (d->st)
        return NULL;
    dnnl_primitive_desc_t pd = NULL;
#if DNNL_VERSION_MAJOR >= 3
    return keep_pd(d, dnnl_inner_product_backward_data_primitive_desc_create(&pd, d->eng, dsrc, w, ddst, hint, NULL),
                   &pd, "inner product backward data");
#else
    (void)pd;
    dnnl_inner_product_desc_t c;
    return pd_of(d, dnnl_inner_product_backward_data_desc_init(&c, dsrc, w, ddst), &c, NULL, hint,
                 "inner product backward data");
#endif
}

static dnnl_primitive_desc_t pd_ip_bwd_w(dn *d, md_t src, md_t dw, md_t db, md_t ddst,
                                         const_dnnl_primitive_desc_t hint)
{
    if (d->st)
        return NULL;
    dnnl_primitive_desc_t pd = NULL;
#if DNNL_VERSION_MAJOR >= 3
    return keep_pd(d, dnnl_inner_product_backward_weights_primitive_desc_create(&pd, d->eng, src, dw, db, ddst, hint,
                                                                                NULL), &pd,
                   "inner product backward weights");
#else
    (void)pd;
    dnnl_inner_product_desc_t c;
    return pd_of(d, dnnl_inner_product_backward_weights_desc_init(&c, src, dw, db, ddst), &c, NULL, hint,
                 "inner product backward weights");
#endif
}

/* ReLU's backward from its output (the fused post-op's dst), with the forward it needs as a hint. */
static dnnl_primitive_desc_t pd_relu_bwd(dn *d, md_t diff, md_t data)
{
    if (d->st)
        return NULL;
    dnnl_primitive_desc_t fwd = NULL, pd = NULL;
#if DNNL_VERSION_MAJOR >= 3
    if (!keep_pd(d, dnnl_eltwise_forward_primitive_desc_create(&fwd, d->eng, dnnl_forward_training,
                    dnnl_eltwise_relu_use_dst_for_bwd, data, data, 0, 0, NULL), &fwd, "ReLU forward (hint)"))
        return NULL;
    return keep_pd(d, dnnl_eltwise_backward_primitive_desc_create(&pd, d->eng, dnnl_eltwise_relu_use_dst_for_bwd, diff,
                                                                  diff, data, 0, 0, fwd, NULL), &pd, "ReLU backward");
#else
    (void)pd;
    dnnl_eltwise_desc_t f, b;
    if (!(fwd = pd_of(d, dnnl_eltwise_forward_desc_init(&f, dnnl_forward_training, dnnl_eltwise_relu_use_dst_for_bwd,
                                                        data, 0, 0), &f, NULL, NULL, "ReLU forward (hint)")))
        return NULL;
    return pd_of(d, dnnl_eltwise_backward_desc_init(&b, dnnl_eltwise_relu_use_dst_for_bwd, diff, data, 0, 0), &b, NULL,
                 fwd, "ReLU backward");
#endif
}

/* ReLU fused after a convolution or inner product. */
static dnnl_primitive_attr_t relu_attr(dn *d)
{
    dnnl_primitive_attr_t a = NULL;
    dnnl_post_ops_t po = NULL;
    if (d->st || fail(d, dnnl_primitive_attr_create(&a), "primitive attributes") ||
        fail(d, dnnl_post_ops_create(&po), "post-ops")) {
        if (a)
            dnnl_primitive_attr_destroy(a);
        return NULL;
    }
#if DNNL_VERSION_MAJOR >= 3
    fail(d, dnnl_post_ops_append_eltwise(po, dnnl_eltwise_relu, 0, 0), "a ReLU post-op");
#else
    fail(d, dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0, 0), "a ReLU post-op");
#endif
    fail(d, dnnl_primitive_attr_set_post_ops(a, po), "a ReLU post-op");
    dnnl_post_ops_destroy(po);
    return a;
}

/* Whether oneDNN picked its reference (slow, portable) implementation for pd. */
static bool is_ref(const_dnnl_primitive_desc_t pd)
{
    const char *impl = NULL;
    return pd && dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl &&
           !strncmp(impl, "ref", 3);
}

static dnnl_primitive_t prim(dn *d, const_dnnl_primitive_desc_t pd)
{
    dnnl_primitive_t p = NULL;
    if (d->st || fail(d, dnnl_primitive_create(&p, pd), "a primitive"))
        return NULL;
    g_ptr_array_add(d->prims, p);
    return p;
}

/* Memory of layout m, on handle (NULL: oneDNN allocates it). */
static val mem(dn *d, md_t m, void *handle)
{
    val v = { NULL, m };
    if (d->st || fail(d, dnnl_memory_create(&v.m, m, d->eng, handle ? handle : DNNL_MEMORY_ALLOCATE), "memory"))
        return (val){ NULL, NULL };
    g_ptr_array_add(d->mems, v.m);
    return v;
}

/* A copy of n floats owned by d, as plain memory of layout m. */
static val mem_copy(dn *d, md_t m, const float *src, size_t n)
{
    float *buf = g_memdup2(src, n * sizeof *buf);
    g_ptr_array_add(d->bufs, buf);
    return mem(d, m, buf);
}

static void add(dn *d, prog *p, dnnl_primitive_t prim_, int n, const dnnl_exec_arg_t *args)
{
    if (d->st)
        return;
    if (p->n == MAX_OPS || n > 20) {
        fail(d, dnnl_out_of_memory, "the program (too many primitives)");
        return;
    }
    op *o = &p->ops[p->n++];
    o->p = prim_;
    o->n = n;
    memcpy(o->a, args, (size_t)n * sizeof *args);
}

static void run(dn *d, const prog *p)
{
    for (int i = 0; i < p->n && !d->st; i++)
        fail(d, dnnl_primitive_execute(p->ops[i].p, d->strm, p->ops[i].n, p->ops[i].a), "executing a primitive");
    if (!d->st)
        fail(d, dnnl_stream_wait(d->strm), "dnnl_stream_wait");
}

/* v in layout want: v itself when it has it, else new memory that a reorder added to p fills. */
static val as(dn *d, prog *p, val v, md_t want)
{
    if (d->st)
        return (val){ NULL, NULL };
    if (dnnl_memory_desc_equal(v.md, want))
        return v;
    val out = mem(d, want, NULL);
    dnnl_primitive_desc_t pd = NULL;
    if (!keep_pd(d, dnnl_reorder_primitive_desc_create(&pd, v.md, d->eng, want, d->eng, NULL), &pd, "a reorder"))
        return (val){ NULL, NULL };
    add(d, p, prim(d, pd), 2, (dnnl_exec_arg_t[]){ { DNNL_ARG_FROM, v.m }, { DNNL_ARG_TO, out.m } });
    return out;
}

static const float *data_of(dn *d, val v)
{
    void *h = NULL;
    if (d->st || fail(d, dnnl_memory_get_data_handle(v.m, &h), "a memory's data"))
        return NULL;
    return h;
}

/* ---- threads ------------------------------------------------------------------------------------ */

bool crl__dnnl_single_thread(void)
{
#if DNNL_CPU_RUNTIME == DNNL_RUNTIME_OMP
    /* libgomp comes with libdnnl; looked up by name so crl need not link OpenMP itself */
    void (*set)(int) = (void (*)(int))dlsym(RTLD_DEFAULT, "omp_set_num_threads");
    if (set) {
        set(1);
        return true;
    }
#endif
    return false;
}

void crl__dnnl_describe(char *buf, size_t len)
{
    const dnnl_version_t *v = dnnl_version();
    const char *rt = v->cpu_runtime == DNNL_RUNTIME_OMP   ? "OpenMP"
                     : v->cpu_runtime == DNNL_RUNTIME_TBB ? "TBB"
                     : v->cpu_runtime == DNNL_RUNTIME_SEQ ? "sequential"
                                                          : "threadpool";
    int (*get)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "omp_get_max_threads");
    if (v->cpu_runtime == DNNL_RUNTIME_OMP && get)
        snprintf(buf, len, "oneDNN %d.%d.%d, %s runtime, %d thread%s", v->major, v->minor, v->patch, rt, get(),
                 get() == 1 ? "" : "s");
    else
        snprintf(buf, len, "oneDNN %d.%d.%d, %s runtime, its own thread count", v->major, v->minor, v->patch, rt);
}

/* ---- the Nature-DQN stack ------------------------------------------------------------------------ */

#define NCONV 3
#define NL (NCONV + 2)

typedef struct layer_shape {
    int64_t ci, co, k, s, hin, hout;
} layer_shape;

/* One layer's dims: weights, source, destination (4 dims for the convs and the first inner product, which
 * reads [B, C, H, W] with OIHW weights: the flatten, as crl's [out, C*H*W] rows). */
typedef struct dims3 {
    dnnl_dims_t w, s, d;
    int wn, sn, dn;
    int64_t co, stride;
    bool conv;
} dims3;

typedef struct conv_net {
    prog fwd, bwd;
    val out;               /* [B, A] */
    val dw[NL], db[NL];    /* parameter gradients, in oneDNN's layouts */
    md_t wplain[NL];       /* the weights' plain layouts (OIHW, OI) */
    dims3 dm[NL];
} conv_net;

static void set_dims(int64_t *dst, int n, const int64_t *src) { memcpy(dst, src, (size_t)n * sizeof *dst); }

static void layer_dims(dims3 *m, const layer_shape *L, int l, int64_t B, int64_t hidden, int64_t A)
{
    memset(m, 0, sizeof *m);
    m->conv = l < NCONV;
    m->co = m->conv ? L[l].co : l == NCONV ? hidden : A;
    m->stride = m->conv ? L[l].s : 1;
    if (m->conv) {
        set_dims(m->w, 4, (int64_t[]){ m->co, L[l].ci, L[l].k, L[l].k });
        set_dims(m->s, 4, (int64_t[]){ B, L[l].ci, L[l].hin, L[l].hin });
        set_dims(m->d, 4, (int64_t[]){ B, m->co, L[l].hout, L[l].hout });
        m->wn = m->sn = m->dn = 4;
    } else if (l == NCONV) {
        const layer_shape *p = &L[NCONV - 1];
        set_dims(m->w, 4, (int64_t[]){ m->co, p->co, p->hout, p->hout });
        set_dims(m->s, 4, (int64_t[]){ B, p->co, p->hout, p->hout });
        set_dims(m->d, 2, (int64_t[]){ B, m->co });
        m->wn = m->sn = 4;
        m->dn = 2;
    } else {
        set_dims(m->w, 2, (int64_t[]){ m->co, hidden });
        set_dims(m->s, 2, (int64_t[]){ B, hidden });
        set_dims(m->d, 2, (int64_t[]){ B, m->co });
        m->wn = m->sn = m->dn = 2;
    }
}

/* A layout tag: oneDNN's choice when `any`, else the plain one for n dims (NCHW / NC, OIHW / OI). */
static dnnl_format_tag_t tag(bool any, int n, bool weights)
{
    return any ? dnnl_format_tag_any : n == 4 ? (weights ? dnnl_oihw : dnnl_nchw) : (weights ? dnnl_oi : dnnl_nc);
}

/* The programs of one layout choice: `any` lets every primitive pick its layouts (the input and the
 * activations reordered in the program where two disagree), else every memory is plain.  x and gy are
 * read in place; the weights are copied from P (crl's flat parameters) once. */
static void conv_build(dn *d, conv_net *n, bool any, const layer_shape *L, int64_t B, int64_t hidden, int64_t A,
                       const float *P, float *x, float *gy)
{
    prog setup = { .n = 0 };
    val src[NL], dst[NL], W[NL];
    dnnl_primitive_desc_t fpd[NL];
    dnnl_dims_t pad0 = { 0, 0 };
    size_t off = 0;
    dnnl_primitive_attr_t relu = relu_attr(d);
    val cur = mem(d, md(d, 4, (dnnl_dims_t){ B, L[0].ci, L[0].hin, L[0].hin }, dnnl_nchw), x);
    /* forward: conv + bias + ReLU x 3, inner product + ReLU, inner product */
    for (int l = 0; l < NL && !d->st; l++) {
        dims3 *m = &n->dm[l];
        layer_dims(m, L, l, B, hidden, A);
        md_t smd = md(d, m->sn, m->s, tag(any, m->sn, false)), wmd = md(d, m->wn, m->w, tag(any, m->wn, true));
        md_t bmd = md(d, 1, (dnnl_dims_t){ m->co }, dnnl_x), dmd = md(d, m->dn, m->d, tag(any, m->dn, false));
        const_dnnl_primitive_attr_t attr = l < NL - 1 ? relu : NULL;
        fpd[l] = m->conv ? pd_conv_fwd(d, smd, wmd, bmd, dmd, (dnnl_dims_t){ m->stride, m->stride }, pad0, attr)
                         : pd_ip_fwd(d, smd, wmd, bmd, dmd, attr);
        n->wplain[l] = md(d, m->wn, m->w, tag(false, m->wn, true));
        size_t wcount = 1;
        for (int i = 0; i < m->wn; i++)
            wcount *= (size_t)m->w[i];
        /* crl's parameters: weight then bias per layer, as crl_convnet_new lays them out */
        val wuser = mem_copy(d, n->wplain[l], P + off, wcount);
        off += wcount;
        val b = mem_copy(d, bmd, P + off, (size_t)m->co);
        off += (size_t)m->co;
        if (d->st)
            break;
        W[l] = as(d, &setup, wuser, q(d, fpd[l], dnnl_query_weights_md));
        src[l] = as(d, &n->fwd, cur, q(d, fpd[l], dnnl_query_src_md));
        dst[l] = mem(d, q(d, fpd[l], dnnl_query_dst_md), NULL);
        add(d, &n->fwd, prim(d, fpd[l]), 4,
            (dnnl_exec_arg_t[]){ { DNNL_ARG_SRC, src[l].m }, { DNNL_ARG_WEIGHTS, W[l].m }, { DNNL_ARG_BIAS, b.m },
                                 { DNNL_ARG_DST, dst[l].m } });
        cur = dst[l];
    }
    if (relu)
        dnnl_primitive_attr_destroy(relu);
    n->out = cur;
    run(d, &setup);
    /* backward, last layer first: ReLU's (but after the output layer), the weights' gradient, and the data's
     * (but into the input, which crl's step does not compute either) */
    val g = mem(d, md(d, 2, (dnnl_dims_t){ B, A }, dnnl_nc), gy);
    for (int l = NL - 1; l >= 0 && !d->st; l--) {
        const dims3 *m = &n->dm[l];
        dnnl_dims_t st = { m->stride, m->stride };
        if (l < NL - 1) {
            dnnl_primitive_desc_t rpd = pd_relu_bwd(d, dst[l].md, dst[l].md);
            val gin = as(d, &n->bwd, g, dst[l].md);
            val gout = mem(d, dst[l].md, NULL);
            add(d, &n->bwd, prim(d, rpd), 3,
                (dnnl_exec_arg_t[]){ { DNNL_ARG_DST, dst[l].m }, { DNNL_ARG_DIFF_DST, gin.m },
                                     { DNNL_ARG_DIFF_SRC, gout.m } });
            g = gout;
        }
        md_t ddmd = md(d, m->dn, m->d, tag(any, m->dn, false)), dwmd = md(d, m->wn, m->w, tag(any, m->wn, true));
        md_t dbmd = md(d, 1, (dnnl_dims_t){ m->co }, dnnl_x);
        /* The source and weights as the forward has them (no reorder per step), unless oneDNN has only its
         * reference kernel for that (2.6 does for some blocked convolution layouts): then its choice. */
        dnnl_primitive_desc_t wpd = NULL;
        for (int pin = any ? 1 : 0; pin >= 0 && !d->st; pin--) {
            md_t smd = pin ? src[l].md : md(d, m->sn, m->s, tag(any, m->sn, false));
            wpd = m->conv ? pd_conv_bwd_w(d, smd, dwmd, dbmd, ddmd, st, pad0, fpd[l])
                          : pd_ip_bwd_w(d, smd, dwmd, dbmd, ddmd, fpd[l]);
            if (!pin || !is_ref(wpd))
                break;
        }
        if (d->st)
            break;
        val sw = as(d, &n->bwd, src[l], q(d, wpd, dnnl_query_src_md));
        val gw = as(d, &n->bwd, g, q(d, wpd, dnnl_query_diff_dst_md));
        n->dw[l] = mem(d, q(d, wpd, dnnl_query_diff_weights_md), NULL);
        n->db[l] = mem(d, dbmd, NULL);
        add(d, &n->bwd, prim(d, wpd), 4,
            (dnnl_exec_arg_t[]){ { DNNL_ARG_SRC, sw.m }, { DNNL_ARG_DIFF_DST, gw.m },
                                 { DNNL_ARG_DIFF_WEIGHTS, n->dw[l].m }, { DNNL_ARG_DIFF_BIAS, n->db[l].m } });
        if (l == 0)
            break;
        md_t dsmd = md(d, m->sn, m->s, tag(any, m->sn, false));
        dnnl_primitive_desc_t dpd = NULL;
        for (int pin = any ? 1 : 0; pin >= 0 && !d->st; pin--) {
            md_t wmd = pin ? W[l].md : md(d, m->wn, m->w, tag(any, m->wn, true));
            dpd = m->conv ? pd_conv_bwd_data(d, dsmd, wmd, ddmd, st, pad0, fpd[l])
                          : pd_ip_bwd_data(d, dsmd, wmd, ddmd, fpd[l]);
            if (!pin || !is_ref(dpd))
                break;
        }
        if (d->st)
            break;
        /* the backward may want the weights in another layout than the forward: a reorder per step */
        val wd = as(d, &n->bwd, W[l], q(d, dpd, dnnl_query_weights_md));
        val gdat = as(d, &n->bwd, g, q(d, dpd, dnnl_query_diff_dst_md));
        val gsrc = mem(d, q(d, dpd, dnnl_query_diff_src_md), NULL);
        add(d, &n->bwd, prim(d, dpd), 3,
            (dnnl_exec_arg_t[]){ { DNNL_ARG_DIFF_DST, gdat.m }, { DNNL_ARG_WEIGHTS, wd.m },
                                 { DNNL_ARG_DIFF_SRC, gsrc.m } });
        g = gsrc;
    }
}

typedef struct conv_run {
    dn *d;
    conv_net *n;
    bool backward;
} conv_run;

static void run_conv(void *p, uint64_t count)
{
    conv_run *r = p;
    for (uint64_t i = 0; i < count && !r->d->st; i++) {
        run(r->d, &r->n->fwd);
        if (r->backward)
            run(r->d, &r->n->bwd);
    }
}

/* The largest |a - b| and |b| over n floats. */
static void diff_into(const float *a, const float *b, size_t n, double *diff, double *max)
{
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - (double)b[i]);
        if (e > *diff || e != e)
            *diff = e;
        if (fabs((double)b[i]) > *max)
            *max = fabs((double)b[i]);
    }
}

/* crl's output and parameter gradients against the plain programs' on the same x, gy and weights. */
static int conv_agree(dn *d, conv_net *n, crl_mlp *m, const crl_tensor *x, const crl_tensor *gy,
                      crl__dnnl_conv_result *out, crl_error *err)
{
    int64_t B = crl_tensor_shape(x)[0], A = crl_mlp_out_features(m);
    crl_error e;
    crl_error_clear(&e);
    crl_tensor *y = crl_tensor_new(CRL_F32, 2, (int64_t[]){ B, A }, &e);
    if (!y || crl_mlp_infer(m, x, y, &e)) {
        crl_tensor_unref(y);
        return crl_error_pass(err, &e, CRL_E_RUNTIME);
    }
    run_conv(&(conv_run){ d, n, true }, 1);
    const float *o = data_of(d, n->out);
    if (o)
        diff_into(o, crl_tensor_data(y), (size_t)(B * A), &out->out_diff, &out->out_max);
    crl_tensor_unref(y);
    crl_mlp_zero_grad(m);
    if (!crl_mlp_forward(m, x, &e) || crl_mlp_backward(m, gy, NULL, &e))
        return crl_error_pass(err, &e, CRL_E_RUNTIME);
    const float *G = crl_tensor_data(crl_mlp_grads_get(m));
    size_t off = 0;
    for (int l = 0; l < NL && !d->st; l++) {
        prog p = { .n = 0 };
        val plain = as(d, &p, n->dw[l], n->wplain[l]);
        run(d, &p);
        const float *dw = data_of(d, plain), *db = data_of(d, n->db[l]);
        size_t wcount = dnnl_memory_desc_get_size(n->wplain[l]) / sizeof(float);
        if (!dw || !db)
            break;
        diff_into(dw, G + off, wcount, &out->grad_diff, &out->grad_max);
        off += wcount;
        diff_into(db, G + off, (size_t)n->dm[l].co, &out->grad_diff, &out->grad_max);
        off += (size_t)n->dm[l].co;
    }
    crl_mlp_zero_grad(m);
    return CRL_OK;
}

int crl__bench_dnnl_conv(crl_mlp *m, const crl_tensor *x, const crl_tensor *gy, double seconds,
                         crl__dnnl_conv_result *out, crl_error *err)
{
    memset(out, 0, sizeof *out);
    int64_t shape[CRL_MAX_DIMS];
    if (!m || !x || !gy || crl_mlp_in_shape(m, shape) != 3 || !crl_tensor_is_contiguous(x) ||
        !crl_tensor_is_contiguous(gy))
        return crl_error_set(err, CRL_E_INVALID, "crl__bench_dnnl_conv: a conv network and contiguous x, gy");
    /* the Nature-DQN stack crl bench nn builds; its hidden width and actions are read off the network */
    static const int64_t co[NCONV] = { 32, 64, 64 }, k[NCONV] = { 8, 4, 3 }, s[NCONV] = { 4, 2, 1 };
    layer_shape L[NCONV];
    int64_t c = shape[0], h = shape[1];
    for (int l = 0; l < NCONV; l++) {
        L[l] = (layer_shape){ c, co[l], k[l], s[l], h, (h - k[l]) / s[l] + 1 };
        c = co[l];
        h = L[l].hout;
    }
    int64_t B = crl_tensor_shape(x)[0], A = crl_mlp_out_features(m), P = crl_tensor_numel(crl_mlp_params_get(m));
    int64_t conv_params = 0;
    for (int l = 0; l < NCONV; l++)
        conv_params += L[l].co * L[l].ci * L[l].k * L[l].k + L[l].co;
    int64_t head_in = c * h * h;
    /* P = conv + head_in*hidden + hidden + hidden*A + A */
    int64_t hidden = (P - conv_params - A) / (head_in + 1 + A);
    if (hidden < 1 || conv_params + hidden * (head_in + 1 + A) + A != P)
        return crl_error_set(err, CRL_E_INVALID, "crl__bench_dnnl_conv: the network is not the Nature-DQN stack with "
                             "one hidden layer");
    const float *params = crl_tensor_data(crl_mlp_params_get(m));
    dn d;
    int rc = dn_open(&d, err);
    conv_net *nets = g_new0(conv_net, 2);
    for (int v = 0; !rc && v < 2; v++) {
        conv_build(&d, &nets[v], v == 1, L, B, hidden, A, params, crl_tensor_data((crl_tensor *)x),
                   crl_tensor_data((crl_tensor *)gy));
        if (!d.st && v == 0)
            rc = conv_agree(&d, &nets[0], m, x, gy, out, err);
        if (!rc && !d.st) {
            out->fwd_ns[v] = crl__bench_measure(run_conv, &(conv_run){ &d, &nets[v], false }, seconds, 3).ns_per_op;
            out->train_ns[v] = crl__bench_measure(run_conv, &(conv_run){ &d, &nets[v], true }, seconds, 3).ns_per_op;
        }
    }
    if (!rc && d.st)
        rc = crl_error_set(err, CRL_E_RUNTIME, "oneDNN: %s failed (status %d)", d.what, (int)d.st);
    g_free(nets);
    dn_close(&d);
    return rc;
}

/* ---- an LSTM step ------------------------------------------------------------------------------- */

static dnnl_primitive_desc_t pd_lstm(dn *d, dnnl_prop_kind_t prop, md_t src, md_t hi, md_t ci, md_t wl, md_t wi,
                                     md_t b, md_t dst, md_t ho, md_t co)
{
    if (d->st)
        return NULL;
    dnnl_primitive_desc_t pd = NULL;
#if DNNL_VERSION_MAJOR >= 3
    return keep_pd(d, dnnl_lstm_forward_primitive_desc_create(&pd, d->eng, prop, dnnl_unidirectional_left2right, src,
                      hi, ci, wl, wi, NULL, NULL, b, dst, ho, co, 0, NULL), &pd, "LSTM forward");
#else
    (void)pd;
    dnnl_rnn_desc_t r;
    return pd_of(d, dnnl_lstm_forward_desc_init(&r, prop, dnnl_unidirectional_left2right, src, hi, ci, wl, wi, b, dst,
                                                ho, co, 0), &r, NULL, NULL, "LSTM forward");
#endif
}

/* lstm_backward: the forward's descriptors, their gradients' (weights' in the layout it picks), hint. */
static dnnl_primitive_desc_t pd_lstm_bwd(dn *d, md_t src, md_t st, md_t wl, md_t wi, md_t b, md_t dst, md_t dwl,
                                         md_t dwi, const_dnnl_primitive_desc_t hint)
{
    if (d->st)
        return NULL;
    dnnl_primitive_desc_t pd = NULL;
#if DNNL_VERSION_MAJOR >= 3
    return keep_pd(d, dnnl_lstm_backward_primitive_desc_create(&pd, d->eng, dnnl_backward,
                      dnnl_unidirectional_left2right, src, st, st, wl, wi, NULL, NULL, b, dst, st, st, src, st, st, dwl,
                      dwi, NULL, NULL, b, dst, st, st, 0, hint, NULL), &pd, "LSTM backward");
#else
    (void)pd;
    dnnl_rnn_desc_t r;
    return pd_of(d, dnnl_lstm_backward_desc_init(&r, dnnl_backward, dnnl_unidirectional_left2right, src, st, st, wl, wi,
                                                 b, dst, st, st, src, st, st, dwl, dwi, b, dst, st, st, 0), &r, NULL,
                 hint, "LSTM backward");
#endif
}

typedef struct lstm_net {
    prog fwd, bwd;
    val y, h, c;
    val dwl, dwi, db;   /* the backward's parameter gradients (it adds into them) */
    md_t wl_plain, wi_plain;
} lstm_net;

/* One lstm_forward over x [N, T, F] (batch-first: oneDNN's ntc) from states h0, c0 [N, H] (NULL: zeros), r's
 * weights reordered once into the layouts the primitive picks, PyTorch's two biases summed (oneDNN has one).
 * With gy [N, T, H] (training only) also the lstm_backward of gy, zero gradients into the final states as
 * crl's step gives; the weights' reorder into its layout, when it wants another, is timed with it. */
static void lstm_build(dn *d, lstm_net *n, dnnl_prop_kind_t prop, crl_rnn *r, int64_t N, int64_t T, float *x,
                       const float *h0, const float *c0, float *gy)
{
    int64_t F = crl_rnn_input_size(r), H = crl_rnn_hidden_size(r);
    const float *P = crl_tensor_data(crl_rnn_params_get(r));
    md_t src = md(d, 3, (dnnl_dims_t){ T, N, F }, dnnl_ntc), dst = md(d, 3, (dnnl_dims_t){ T, N, H }, dnnl_ntc);
    md_t st = md(d, 4, (dnnl_dims_t){ 1, 1, N, H }, dnnl_ldnc);
    md_t wl = md(d, 5, (dnnl_dims_t){ 1, 1, F, 4, H }, dnnl_format_tag_any);
    md_t wi = md(d, 5, (dnnl_dims_t){ 1, 1, H, 4, H }, dnnl_format_tag_any);
    md_t b = md(d, 4, (dnnl_dims_t){ 1, 1, 4, H }, dnnl_ldgo);
    dnnl_primitive_desc_t pd = pd_lstm(d, prop, src, st, st, wl, wi, b, dst, st, st);
    if (d->st)
        return;
    /* PyTorch's weight_ih [4H, F] and weight_hh [4H, H] are oneDNN's ldgoi, gates i, f, g, o in both */
    prog setup = { .n = 0 };
    n->wl_plain = md(d, 5, (dnnl_dims_t){ 1, 1, F, 4, H }, dnnl_ldgoi);
    n->wi_plain = md(d, 5, (dnnl_dims_t){ 1, 1, H, 4, H }, dnnl_ldgoi);
    val wlu = mem_copy(d, n->wl_plain, P, (size_t)(4 * H * F));
    val wiu = mem_copy(d, n->wi_plain, P + 4 * H * F, (size_t)(4 * H * H));
    val WL = as(d, &setup, wlu, q_arg(d, pd, DNNL_ARG_WEIGHTS_LAYER));
    val WI = as(d, &setup, wiu, q_arg(d, pd, DNNL_ARG_WEIGHTS_ITER));
    run(d, &setup);
    float *bias = g_new(float, (size_t)(4 * H));
    g_ptr_array_add(d->bufs, bias);
    for (int64_t i = 0; i < 4 * H; i++)
        bias[i] = P[4 * H * (F + H) + i] + P[4 * H * (F + H) + 4 * H + i];
    float *zeros = g_new0(float, (size_t)(N * H));
    g_ptr_array_add(d->bufs, zeros);
    val B = mem(d, b, bias), X = mem(d, src, x);
    val h0v = mem_copy(d, st, h0 ? h0 : zeros, (size_t)(N * H)), c0v = mem_copy(d, st, c0 ? c0 : zeros, (size_t)(N * H));
    n->y = mem(d, dst, NULL);
    n->h = mem(d, st, NULL);
    n->c = mem(d, st, NULL);
    dnnl_exec_arg_t a[10] = { { DNNL_ARG_SRC_LAYER, X.m },      { DNNL_ARG_SRC_ITER, h0v.m },
                              { DNNL_ARG_SRC_ITER_C, c0v.m },   { DNNL_ARG_WEIGHTS_LAYER, WL.m },
                              { DNNL_ARG_WEIGHTS_ITER, WI.m },  { DNNL_ARG_BIAS, B.m },
                              { DNNL_ARG_DST_LAYER, n->y.m },   { DNNL_ARG_DST_ITER, n->h.m },
                              { DNNL_ARG_DST_ITER_C, n->c.m } };
    int na = 9;
    val ws = { NULL, NULL };
    if (prop == dnnl_forward_training) {
        /* the workspace the backward reads */
        ws = mem(d, q(d, pd, dnnl_query_workspace_md), NULL);
        a[na++] = (dnnl_exec_arg_t){ DNNL_ARG_WORKSPACE, ws.m };
    }
    add(d, &n->fwd, prim(d, pd), na, a);
    if (!gy || prop != dnnl_forward_training || d->st)
        return;
    md_t any_l = md(d, 5, (dnnl_dims_t){ 1, 1, F, 4, H }, dnnl_format_tag_any);
    md_t any_i = md(d, 5, (dnnl_dims_t){ 1, 1, H, 4, H }, dnnl_format_tag_any);
    dnnl_primitive_desc_t bpd = pd_lstm_bwd(d, src, st, any_l, any_i, b, dst, any_l, any_i, pd);
    if (d->st)
        return;
    val bwl = as(d, &n->bwd, WL, q_arg(d, bpd, DNNL_ARG_WEIGHTS_LAYER));
    val bwi = as(d, &n->bwd, WI, q_arg(d, bpd, DNNL_ARG_WEIGHTS_ITER));
    n->dwl = mem(d, q_arg(d, bpd, DNNL_ARG_DIFF_WEIGHTS_LAYER), NULL);
    n->dwi = mem(d, q_arg(d, bpd, DNNL_ARG_DIFF_WEIGHTS_ITER), NULL);
    n->db = mem(d, b, NULL);
    val G = mem(d, dst, gy), zh = mem_copy(d, st, zeros, (size_t)(N * H)), zc = mem_copy(d, st, zeros, (size_t)(N * H));
    val dx = mem(d, src, NULL), dh0 = mem(d, st, NULL), dc0 = mem(d, st, NULL);
    add(d, &n->bwd, prim(d, bpd), 19,
        (dnnl_exec_arg_t[]){ { DNNL_ARG_SRC_LAYER, X.m },          { DNNL_ARG_SRC_ITER, h0v.m },
                             { DNNL_ARG_SRC_ITER_C, c0v.m },       { DNNL_ARG_WEIGHTS_LAYER, bwl.m },
                             { DNNL_ARG_WEIGHTS_ITER, bwi.m },     { DNNL_ARG_BIAS, B.m },
                             { DNNL_ARG_DST_LAYER, n->y.m },       { DNNL_ARG_DST_ITER, n->h.m },
                             { DNNL_ARG_DST_ITER_C, n->c.m },      { DNNL_ARG_WORKSPACE, ws.m },
                             { DNNL_ARG_DIFF_SRC_LAYER, dx.m },    { DNNL_ARG_DIFF_SRC_ITER, dh0.m },
                             { DNNL_ARG_DIFF_SRC_ITER_C, dc0.m },  { DNNL_ARG_DIFF_WEIGHTS_LAYER, n->dwl.m },
                             { DNNL_ARG_DIFF_WEIGHTS_ITER, n->dwi.m }, { DNNL_ARG_DIFF_BIAS, n->db.m },
                             { DNNL_ARG_DIFF_DST_LAYER, G.m },     { DNNL_ARG_DIFF_DST_ITER, zh.m },
                             { DNNL_ARG_DIFF_DST_ITER_C, zc.m } });
}

/* Zero the memory of v (the backward adds into its gradients). */
static void zero(dn *d, val v)
{
    const float *p = data_of(d, v);
    if (p)
        memset((void *)p, 0, dnnl_memory_desc_get_size(v.md));
}

typedef struct lstm_run {
    dn *d;
    lstm_net *n;
    bool backward;
} lstm_run;

static void run_lstm(void *p, uint64_t count)
{
    lstm_run *r = p;
    for (uint64_t i = 0; i < count && !r->d->st; i++) {
        run(r->d, &r->n->fwd);
        if (r->backward)
            run(r->d, &r->n->bwd);
    }
}

/* The gradients of one forward + backward from zero against crl's (weight_ih, weight_hh, bias_ih, bias_hh
 * in its flat grads: oneDNN's one bias has the gradient of both). */
static void lstm_grads_agree(dn *d, lstm_net *n, crl_rnn *r, crl__dnnl_lstm_result *out)
{
    zero(d, n->dwl);
    zero(d, n->dwi);
    zero(d, n->db);
    run_lstm(&(lstm_run){ d, n, true }, 1);
    prog p = { .n = 0 };
    val wl = as(d, &p, n->dwl, n->wl_plain), wi = as(d, &p, n->dwi, n->wi_plain);
    run(d, &p);
    const float *L = data_of(d, wl), *I = data_of(d, wi), *Bd = data_of(d, n->db);
    if (!L || !I || !Bd)
        return;
    int64_t F = crl_rnn_input_size(r), H = crl_rnn_hidden_size(r);
    const float *G = crl_tensor_data(crl_rnn_grads_get(r));
    diff_into(L, G, (size_t)(4 * H * F), &out->grad_diff, &out->grad_max);
    diff_into(I, G + 4 * H * F, (size_t)(4 * H * H), &out->grad_diff, &out->grad_max);
    diff_into(Bd, G + 4 * H * (F + H), (size_t)(4 * H), &out->grad_diff, &out->grad_max);
    diff_into(Bd, G + 4 * H * (F + H + 1), (size_t)(4 * H), &out->grad_diff, &out->grad_max);
}

static void lstm_agree(dn *d, const lstm_net *n, const crl_tensor *y, const crl_tensor *h, const crl_tensor *c,
                       crl__dnnl_lstm_result *out)
{
    const float *Y = data_of(d, n->y), *Hd = data_of(d, n->h), *C = data_of(d, n->c);
    if (!Y || !Hd || !C)
        return;
    diff_into(Y, crl_tensor_data((crl_tensor *)y), (size_t)crl_tensor_numel(y), &out->diff, &out->max);
    diff_into(Hd, crl_tensor_data((crl_tensor *)h), (size_t)crl_tensor_numel(h), &out->diff, &out->max);
    diff_into(C, crl_tensor_data((crl_tensor *)c), (size_t)crl_tensor_numel(c), &out->diff, &out->max);
}

int crl__bench_dnnl_lstm(crl_rnn *r, const crl_tensor *x_act, const crl_tensor *h0, const crl_tensor *c0,
                         const crl_tensor *x_seq, const crl_tensor *g_seq, double seconds, crl__dnnl_lstm_result *out,
                         crl_error *err)
{
    memset(out, 0, sizeof *out);
    if (!r || crl_rnn_kind_get(r) != CRL_RNN_LSTM || !x_act || !h0 || !c0 || !x_seq || !g_seq ||
        crl_tensor_ndim(x_act) != 3 || crl_tensor_ndim(x_seq) != 3 || !crl_tensor_is_contiguous(x_act) ||
        !crl_tensor_is_contiguous(x_seq) || !crl_tensor_is_contiguous(g_seq) || !crl_tensor_is_contiguous(h0) ||
        !crl_tensor_is_contiguous(c0) || crl_tensor_numel(g_seq) != crl_tensor_numel(x_seq) / crl_rnn_input_size(r) *
                                                                      crl_rnn_hidden_size(r))
        return crl_error_set(err, CRL_E_INVALID, "crl__bench_dnnl_lstm: an LSTM and contiguous [B, T, F] inputs");
    int64_t H = crl_rnn_hidden_size(r), Na = crl_tensor_shape(x_act)[0], Ta = crl_tensor_shape(x_act)[1];
    int64_t Ns = crl_tensor_shape(x_seq)[0], Ts = crl_tensor_shape(x_seq)[1];
    /* crl's results on the same inputs and weights */
    crl_error e;
    crl_error_clear(&e);
    crl_tensor *ya = crl_tensor_new(CRL_F32, 3, (int64_t[]){ Na, Ta, H }, &e);
    crl_tensor *ha = ya ? crl_tensor_new(CRL_F32, 2, (int64_t[]){ Na, H }, &e) : NULL;
    crl_tensor *ca = ha ? crl_tensor_new(CRL_F32, 2, (int64_t[]){ Na, H }, &e) : NULL;
    crl_tensor *ys = NULL;
    crl_rnn_zero_grad(r);
    int rc = !ca || crl_rnn_infer(r, x_act, h0, c0, NULL, ya, ha, ca, &e) ||
                     !(ys = crl_rnn_forward(r, x_seq, NULL, NULL, NULL, &e)) ||
                     crl_rnn_backward(r, g_seq, NULL, NULL, NULL, NULL, NULL, &e)
                 ? crl_error_pass(err, &e, CRL_E_RUNTIME)
                 : CRL_OK;
    dn d;
    bool opened = !rc;
    if (opened)
        rc = dn_open(&d, err);
    if (!rc) {
        lstm_net *n = g_new0(lstm_net, 2);
        lstm_build(&d, &n[0], dnnl_forward_inference, r, Na, Ta, crl_tensor_data((crl_tensor *)x_act),
                   crl_tensor_data((crl_tensor *)h0), crl_tensor_data((crl_tensor *)c0), NULL);
        lstm_build(&d, &n[1], dnnl_forward_training, r, Ns, Ts, crl_tensor_data((crl_tensor *)x_seq), NULL, NULL,
                   crl_tensor_data((crl_tensor *)g_seq));
        run_lstm(&(lstm_run){ &d, &n[0], false }, 1);
        run_lstm(&(lstm_run){ &d, &n[1], false }, 1);
        if (!d.st) {
            lstm_agree(&d, &n[0], ya, ha, ca, out);
            lstm_agree(&d, &n[1], ys, crl_rnn_last_h(r), crl_rnn_last_c(r), out);
            lstm_grads_agree(&d, &n[1], r, out);
        }
        if (!d.st) {
            out->act_ns = crl__bench_measure(run_lstm, &(lstm_run){ &d, &n[0], false }, seconds, 10).ns_per_op;
            out->seq_ns = crl__bench_measure(run_lstm, &(lstm_run){ &d, &n[1], false }, seconds, 10).ns_per_op;
            out->train_ns = crl__bench_measure(run_lstm, &(lstm_run){ &d, &n[1], true }, seconds, 10).ns_per_op;
        }
        if (d.st)
            rc = crl_error_set(err, CRL_E_RUNTIME, "oneDNN: %s failed (status %d)", d.what, (int)d.st);
        g_free(n);
    }
    if (opened)
        dn_close(&d);
    crl_tensor_unref(ya);
    crl_tensor_unref(ha);
    crl_tensor_unref(ca);
    return rc;
}
