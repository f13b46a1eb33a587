/* Networks as config: the [net.ROLE] sections a loss builds its networks from (crl_net_new).
 *
 * A section names a type from the table below and that type's options; `encoder = NAME` puts the
 * network of [net.NAME] (a type that ends in feature maps, such as conv) in front of it.  Every section
 * is parsed and checked against its type when a loss is configured (crl__nets_new), so a key of
 * another type, a dangling encoder or a section no network uses fails `crl config check` with its
 * FILE:LINE before anything runs; shapes are checked when the loss builds the network from the
 * transformed observation spec, which the check does too. */
#include "nn-private.h"
#include "config-private.h"

#include <crl/trainer.h>
#include <crl/rnn.h>

#include <math.h>

static const crl_option net_options[] = {
    /* One choice per entry of net_types below. */
    { "type", CRL_OPT_ENUM, 0, "mlp", 0, 0, "mlp|conv|lstm|gru",
      "the network: mlp (TorchRL's MLP), conv (TorchRL's ConvNet, only as another section's encoder); lstm, gru "
      "(TorchRL's LSTMModule / GRUModule on the observation, then an MLP head on its hidden state; the recurrent "
      "state travels in the TensorDict): the on-policy losses' [net.actor] and dqn's [net.q]" },
    { "hidden_size", CRL_OPT_INT, CRL_OPT_RANGE, NULL, 1, 16777216, NULL,
      "lstm, gru: width of the recurrent state (required)" },
    { "encoder", CRL_OPT_STRING, 0, NULL, 0, 0, NULL,
      "NAME: the network of [net.NAME] (an encoder type) reads the observation and feeds this one (an lstm or gru "
      "reads its features: dqn's [net.q] only)" },
    { "num_cells", CRL_OPT_DOUBLES, CRL_OPT_RANGE, NULL, 0, 16, NULL,
      "mlp: hidden layer widths (unset: the loss's num_cells); conv: output channels per layer "
      "(unset: 32, 64, 64, the Nature-DQN stack)" },
    { "kernel_sizes", CRL_OPT_DOUBLES, CRL_OPT_RANGE, "8, 4, 3", 1, 16, NULL,
      "conv: kernel size per layer, or one for all" },
    { "strides", CRL_OPT_DOUBLES, CRL_OPT_RANGE, "4, 2, 1", 1, 16, NULL, "conv: stride per layer, or one for all" },
    { "paddings", CRL_OPT_DOUBLES, CRL_OPT_RANGE, "0", 1, 16, NULL, "conv: zero padding per layer, or one for all" },
    /* MaxPool2d has no place in TorchRL's ConvNet: PyTorch's nn.MaxPool2d argument names, one per conv layer. */
    { "pool_kernel_sizes", CRL_OPT_DOUBLES, CRL_OPT_RANGE, "0", 1, 16, NULL,
      "conv: kernel_size of a MaxPool2d after each layer's activation, per layer or one for all (0: no pool after "
      "that layer)" },
    { "pool_strides", CRL_OPT_DOUBLES, CRL_OPT_RANGE, "0", 1, 16, NULL,
      "conv: stride of each pool, per layer or one for all (0: the pool's kernel size, as MaxPool2d's stride=None)" },
    { "pool_paddings", CRL_OPT_DOUBLES, CRL_OPT_RANGE, "0", 1, 16, NULL,
      "conv: padding of each pool (counts as -inf), per layer or one for all; at most half the pool's kernel size" },
    { "dueling", CRL_OPT_BOOL, 0, "false", 0, 0, NULL,
      "mlp, lstm, gru of [net.q]: a value and an advantage per action, Q = V + A - mean(A) (Wang et al., 2016)" },
    { "activation", CRL_OPT_ENUM, 0, NULL, 0, 0, "tanh|relu|elu|leaky_relu|identity",
      "activation_class after each hidden layer (unset: mlp the loss's activation, conv relu)" },
    { "init", CRL_OPT_ENUM, 0, NULL, 0, 0, "default|orthogonal|kaiming_uniform|xavier_uniform",
      "parameter init scheme (unset: the loss's; default is PyTorch's)" },
    { "gain", CRL_OPT_DOUBLE, CRL_OPT_RANGE, NULL, 1e-6, 1e6, NULL,
      "init gain of the hidden layers (unset: the loss's)" },
    { "last_gain", CRL_OPT_DOUBLE, CRL_OPT_RANGE, NULL, 1e-6, 1e6, NULL,
      "init gain of the output layer (unset: the loss's)" },
    CRL_OPTIONS_END
};

const crl_option *crl_net_section_options(void) { return net_options; }

/* ---- the types ---------------------------------------------------------------------------------- */

struct crl__netcfg;

/* One entry per `type`: the keys it reads besides type (and encoder, for a head), whether it is an
 * encoder (ends in feature maps, feeds a head) or a head (writes the loss's outputs). */
typedef struct net_type {
    const char *name;
    const char *const *keys;
    bool encoder;
    /* Check the section's values (ranges, list lengths); the shapes wait for build. */
    int (*check)(const struct crl__netcfg *c, crl_error *err);
    /* A recurrent network (lstm, gru) in front of an MLP head: only losses that ask crl_net_recurrent
     * build it. */
    bool recurrent;
} net_type;

typedef struct crl__netcfg {
    char *name;          /* NAME of [net.NAME] */
    char *section;       /* "net.NAME" */
    char *origin;        /* FILE:LINE of the section's header */
    const net_type *type;
    crl_opts *opts;
    char *encoder;       /* NAME, or NULL */
    bool used;
    bool claimed;        /* a recurrent section the loss asked for with crl_net_recurrent */
} crl__netcfg;

struct crl__nets {
    GPtrArray *cfgs;     /* crl__netcfg * */
    GPtrArray *roles;    /* char *: the roles the loss asked for, in order */
};

static const char *const mlp_keys[] = { "num_cells", "activation", "init", "gain", "last_gain", "dueling", NULL };
static const char *const conv_keys[] = { "num_cells", "kernel_sizes", "strides", "paddings", "pool_kernel_sizes",
                                         "pool_strides", "pool_paddings", "activation", NULL };

/* num_cells of a section as widths in [1, 2^24]. */
static int read_widths(const crl__netcfg *c, const char *key, int64_t *out, int *n, crl_error *err)
{
    size_t k;
    const double *v;
    int rc = crl_opts_doubles(c->opts, key, &k, &v, err);
    if (rc)
        return rc;
    for (size_t i = 0; i < k; i++)
        if (!(v[i] >= 1 && v[i] <= (1 << 24) && v[i] == floor(v[i])))
            return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] %s: %g is not a width (a whole number in 1..16777216)",
                                 crl_opts_origin(c->opts, key), c->section, key, v[i]);
    for (size_t i = 0; out && i < k; i++)
        out[i] = (int64_t)v[i];
    *n = (int)k;
    return CRL_OK;
}

static int mlp_check(const crl__netcfg *c, crl_error *err)
{
    int n;
    for (const char *const *g = (const char *const[]){ "gain", "last_gain", NULL }; *g; g++)
        if (crl_opts_is_set(c->opts, *g) && !crl_opts_is_set(c->opts, "init"))
            return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] %s: a gain needs an init scheme that uses it; set init "
                                 "(orthogonal, kaiming_uniform or xavier_uniform) or drop %s",
                                 crl_opts_origin(c->opts, *g), c->section, *g, *g);
    return crl_opts_is_set(c->opts, "num_cells") ? read_widths(c, "num_cells", NULL, &n, err) : CRL_OK;
}

#define CONV_DEFAULT_CELLS "32, 64, 64"

/* A list key of a conv section: one value for every layer or one per layer, each a whole number in lo..1024. */
static int layer_list(const crl__netcfg *c, const char *key, int nc, double lo, const double **v, size_t *k,
                      crl_error *err)
{
    int rc = crl_opts_doubles(c->opts, key, k, v, err);
    if (rc)
        return rc;
    if (*k != 1 && *k != (size_t)nc)
        return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] %s has %zu values for %d layers (num_cells = %s): give "
                             "one per layer, or one for all", crl_opts_origin(c->opts, key), c->section, key, *k, nc,
                             crl_opts_is_set(c->opts, "num_cells") ? "as set" : CONV_DEFAULT_CELLS);
    for (size_t i = 0; i < *k; i++)
        if (!((*v)[i] >= lo && (*v)[i] <= 1024 && (*v)[i] == floor((*v)[i])))
            return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] %s: %g is not a whole number in %g..1024",
                                 crl_opts_origin(c->opts, key), c->section, key, (*v)[i], lo);
    return CRL_OK;
}

/* A conv section's layers into out[*n] (NULL: only check; out has room for 32): num_cells channels, per layer a
 * kernel size, stride and padding, and after a layer whose pool_kernel_sizes is not 0 a MaxPool2d (as
 * Conv2d, activation, MaxPool2d in one nn.Sequential).  Each list has one value (for every layer) or one per
 * layer. */
static int conv_layers(const crl__netcfg *c, crl_conv_layer *out, int *n, crl_error *err)
{
    int64_t ch[16];
    int nc = 3;
    ch[0] = 32;
    ch[1] = 64;
    ch[2] = 64;
    int rc;
    if (crl_opts_is_set(c->opts, "num_cells") && (rc = read_widths(c, "num_cells", ch, &nc, err)))
        return rc;
    if (nc < 1 || nc > 16)
        return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] num_cells: a conv stack has 1 to 16 layers",
                             crl_opts_origin(c->opts, "num_cells"), c->section);
    static const char *const lists[] = { "kernel_sizes", "strides", "paddings", "pool_kernel_sizes", "pool_strides",
                                         "pool_paddings" };
    static const double lo[] = { 1, 1, 0, 0, 0, 0 };
    const double *v[6];
    size_t k[6];
    for (int l = 0; l < 6; l++)
        if ((rc = layer_list(c, lists[l], nc, lo[l], &v[l], &k[l], err)))
            return rc;
#define AT(l, i) ((int64_t)v[l][k[l] == 1 ? 0 : (i)])
    int pools = 0;
    for (int i = 0; i < nc; i++)
        pools += AT(3, i) > 0;
    for (int l = 4; l < 6; l++) {
        const char *o = crl_opts_origin(c->opts, lists[l]);
        if (!pools && crl_opts_is_set(c->opts, lists[l]))
            return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] %s: no layer has a pool; set pool_kernel_sizes (e.g. "
                                 "pool_kernel_sizes = 2) or drop %s", o, c->section, lists[l], lists[l]);
        for (int i = 0; k[l] > 1 && i < nc; i++)
            if (AT(3, i) == 0 && AT(l, i) != 0)
                return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] %s: layer %d has no pool (pool_kernel_sizes is 0 "
                                     "there), so its value must be 0, not %" PRId64, o, c->section, lists[l], i + 1,
                                     AT(l, i));
    }
    int m = 0;
    for (int i = 0; i < nc; i++) {
        int64_t pk = AT(3, i), ps = AT(4, i) ? AT(4, i) : pk, pp = AT(5, i);
        /* PyTorch's MaxPool2d refuses a padding over half its kernel */
        if (pk > 0 && 2 * pp > pk)
            return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] pool_paddings: %" PRId64 " on a %" PRId64 "x%" PRId64
                                 " pool (layer %d) is more than half its kernel size; at most %" PRId64,
                                 crl_opts_origin(c->opts, "pool_paddings"), c->section, pp, pk, pk, i + 1, pk / 2);
        if (out)
            out[m] = (crl_conv_layer){ CRL_CONV2D, ch[i], AT(0, i), AT(1, i), AT(2, i) };
        m++;
        if (pk > 0) {
            if (out)
                out[m] = (crl_conv_layer){ CRL_MAXPOOL2D, 0, pk, ps, pp };
            m++;
        }
    }
#undef AT
    *n = m;
    return CRL_OK;
}

/* Every layer of a conv section keeps at least one pixel of in_shape [C, H, W], else CRL_E_CONFIG naming the
 * section (a conv layer, as numbered in num_cells) or pool_kernel_sizes (a pool) and network `name`. */
static int conv_fit(const crl__netcfg *c, const crl_conv_layer *layers, int n, const int64_t *in_shape,
                    const char *shp, const char *name, crl_error *err)
{
    int64_t h = in_shape[1], w = in_shape[2];
    for (int i = 0, conv = 0; i < n; i++) {
        const crl_conv_layer *L = &layers[i];
        conv += L->kind == CRL_CONV2D;
        int64_t hp = h + 2 * L->padding, wp = w + 2 * L->padding;
        if (hp >= L->kernel_size && wp >= L->kernel_size) {
            h = (hp - L->kernel_size) / L->stride + 1;
            w = (wp - L->kernel_size) / L->stride + 1;
            continue;
        }
        if (L->kind == CRL_CONV2D)
            return crl_error_set(err, CRL_E_CONFIG, "%s: [%s]: on the observation [%s] of network '%s', conv layer "
                                 "%d: a %" PRId64 "x%" PRId64 " kernel (padding %" PRId64 ") does not fit its %"
                                 PRId64 "x%" PRId64 " input: fewer or smaller layers, or a larger image", c->origin,
                                 c->section, shp, name, conv, L->kernel_size, L->kernel_size, L->padding, h, w);
        return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] pool_kernel_sizes: on the observation [%s] of network "
                             "'%s', the pool after conv layer %d: a %" PRId64 "x%" PRId64 " window (padding %" PRId64
                             ") does not fit its %" PRId64 "x%" PRId64 " input and would leave no output: a smaller "
                             "pool, none after that layer (0), or a larger image",
                             crl_opts_origin(c->opts, "pool_kernel_sizes"), c->section, shp, name, conv,
                             L->kernel_size, L->kernel_size, L->padding, h, w);
    }
    return CRL_OK;
}

static int conv_check(const crl__netcfg *c, crl_error *err)
{
    int n;
    return conv_layers(c, NULL, &n, err);
}


static const char *const rnn_keys[] = { "hidden_size", "num_cells", "activation", "init", "gain", "last_gain",
                                        "dueling", NULL };

static int rnn_check(const crl__netcfg *c, crl_error *err)
{
    if (!crl_opts_is_set(c->opts, "hidden_size"))
        return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] type = %s needs hidden_size (the recurrent state's width, "
                             "e.g. hidden_size = 64)", c->origin, c->section, c->type->name);
    return mlp_check(c, err);
}

static const net_type net_types[] = {
    { "mlp", mlp_keys, false, mlp_check, false },
    { "conv", conv_keys, true, conv_check, false },
    { "lstm", rnn_keys, false, rnn_check, true },
    { "gru", rnn_keys, false, rnn_check, true },
};

static const net_type *type_named(const char *name)
{
    for (size_t i = 0; i < G_N_ELEMENTS(net_types); i++)
        if (!strcmp(net_types[i].name, name))
            return &net_types[i];
    return NULL;
}

static bool type_reads(const net_type *t, const char *key)
{
    if (!strcmp(key, "type") || (!t->encoder && !strcmp(key, "encoder")))
        return true;
    for (size_t i = 0; t->keys[i]; i++)
        if (!strcmp(t->keys[i], key))
            return true;
    return false;
}

/* ---- the sections ------------------------------------------------------------------------------- */

static void netcfg_free(gpointer p)
{
    crl__netcfg *c = p;
    g_free(c->name);
    g_free(c->section);
    g_free(c->origin);
    g_free(c->encoder);
    crl_opts_free(c->opts);
    g_free(c);
}

void crl__nets_free(crl__nets *n)
{
    if (!n)
        return;
    g_ptr_array_unref(n->cfgs);
    g_ptr_array_unref(n->roles);
    g_free(n);
}

static crl__netcfg *find_cfg(const crl__nets *n, const char *name)
{
    for (guint i = 0; n && i < n->cfgs->len; i++) {
        crl__netcfg *c = g_ptr_array_index(n->cfgs, i);
        if (!strcmp(c->name, name))
            return c;
    }
    return NULL;
}

/* The keys a type reads, for messages ("num_cells, activation, ..."). */
static void keys_list(const net_type *t, char *buf, size_t len)
{
    buf[0] = '\0';
    if (!t->encoder)
        g_strlcat(buf, "encoder", len);
    for (size_t i = 0; t->keys[i]; i++) {
        if (buf[0])
            g_strlcat(buf, ", ", len);
        g_strlcat(buf, t->keys[i], len);
    }
}

static int parse_section(crl__nets *n, const crl_config *cfg, const char *section, crl_error *err)
{
    crl__netcfg *c = g_new0(crl__netcfg, 1);
    g_ptr_array_add(n->cfgs, c);
    c->section = g_strdup(section);
    c->name = g_strdup(section + 4);
    /* The first key's FILE:LINE, which the callers' messages recognise as the config's; else the header's. */
    const crl__section *sec = crl__config_section(cfg, section);
    const char *o = crl_config_key_count(cfg, section) ? crl_config_origin(cfg, section, crl_config_key_at(cfg, section, 0))
                                                       : sec ? sec->origin : NULL;
    c->origin = g_strdup(o ? o : section);
    if (!*c->name || strchr(c->name, '.'))
        return crl_error_set(err, CRL_E_CONFIG, "%s: [%s]: name a network [net.NAME], NAME without dots (q, actor, "
                             "critic, or an encoder's name)", c->origin, section);
    int rc = crl__config_section_opts(cfg, section, net_options, &c->opts, err);
    if (rc)
        return rc;
    const char *type;
    if ((rc = crl_opts_string(c->opts, "type", &type, err)))
        return rc;
    if (!(c->type = type_named(type)))
        return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] type = %s: no such network type", 
                             crl_opts_origin(c->opts, "type"), section, type);
    for (size_t k = 0; k < crl_config_key_count(cfg, section); k++) {
        const char *key = crl_config_key_at(cfg, section, k);
        if (type_reads(c->type, key))
            continue;
        char keys[256];
        keys_list(c->type, keys, sizeof keys);
        return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] %s: type = %s does not read it (it reads %s); drop it%s",
                             crl_config_origin(cfg, section, key), section, key, c->type->name, keys,
                             !strcmp(key, "encoder") ? ", or set the encoder in the section this one should feed"
                                                     : "");
    }
    if (crl_opts_is_set(c->opts, "encoder")) {
        const char *enc;
        if ((rc = crl_opts_string(c->opts, "encoder", &enc, err)))
            return rc;
        c->encoder = g_strdup(enc);
    }
    return c->type->check(c, err);
}

crl__nets *crl__nets_new(const crl_config *cfg, crl_error *err)
{
    crl__nets *n = g_new0(crl__nets, 1);
    n->cfgs = g_ptr_array_new_with_free_func(netcfg_free);
    n->roles = g_ptr_array_new_with_free_func(g_free);
    int rc = CRL_OK;
    for (size_t i = 0; !rc && i < crl_config_section_count(cfg); i++) {
        const char *s = crl_config_section_at(cfg, i);
        if (!strncmp(s, "net.", 4))
            rc = parse_section(n, cfg, s, err);
    }
    /* Encoders: each names an encoder-type section, and is not itself fed by one. */
    for (guint i = 0; !rc && i < n->cfgs->len; i++) {
        const crl__netcfg *c = g_ptr_array_index(n->cfgs, i);
        if (!c->encoder)
            continue;
        const crl__netcfg *e = find_cfg(n, c->encoder);
        const char *o = crl_opts_origin(c->opts, "encoder");
        if (!e)
            rc = crl_error_set(err, CRL_E_CONFIG, "%s: [%s] encoder = %s: there is no [net.%s] section; add one "
                               "(type = conv, num_cells, kernel_sizes, strides)", o, c->section, c->encoder,
                               c->encoder);
        else if (!e->type->encoder)
            rc = crl_error_set(err, CRL_E_CONFIG, "%s: [%s] encoder = %s: [net.%s] is type = %s, which writes a "
                               "network's outputs, not feature maps to feed one; name a conv section", o,
                               c->section, c->encoder, c->encoder, e->type->name);
    }
    if (rc) {
        crl__nets_free(n);
        return NULL;
    }
    return n;
}

int crl__nets_check_used(const crl__nets *n, const char *who, crl_error *err)
{
    for (guint i = 0; n && i < n->cfgs->len; i++) {
        const crl__netcfg *c = g_ptr_array_index(n->cfgs, i);
        /* A recurrent section the loss built as a plain head: it makes no recurrent network. */
        if (c->used && c->type->recurrent && !c->claimed)
            return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] type = %s: %s builds no recurrent network there; "
                                 "recurrent networks are the on-policy losses' [net.actor] ([loss] type = ppo, a2c "
                                 "or reinforce) and dqn's [net.q]; use type = mlp here", crl_opts_origin(c->opts, "type"), c->section,
                                 c->type->name, who);
        /* A recurrent section's encoder is built by the loss (crl_net_encoder), and only dqn does. */
        const crl__netcfg *e = c->claimed && c->encoder ? find_cfg(n, c->encoder) : NULL;
        if (e && !e->used)
            return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] encoder = %s: %s feeds its recurrent network the "
                                 "observation vector; a conv encoder in front of a recurrent network is supported "
                                 "for dqn's [net.q] only: drop encoder (and flatten the observation) or use "
                                 "[loss] type = dqn", crl_opts_origin(c->opts, "encoder"), c->section, c->encoder,
                                 who);
        if (c->used)
            continue;
        GString *roles = g_string_new(NULL);
        for (guint r = 0; r < n->roles->len; r++)
            g_string_append_printf(roles, "%s[net.%s]", r ? ", " : "", (char *)g_ptr_array_index(n->roles, r));
        int rc = crl_error_set(err, CRL_E_CONFIG, "%s: [%s]: %s builds no network from it (it reads %s); rename "
                               "it to one of those%s", c->origin, c->section, who,
                               roles->len ? roles->str : "no [net.*] section",
                               c->type->encoder ? ", or name it as some section's encoder" : "");
        g_string_free(roles, TRUE);
        return rc;
    }
    return CRL_OK;
}

bool crl_net_sets_init(const crl_opts *opts, const char *role)
{
    const crl__netcfg *c = role ? find_cfg(crl__opts_nets(opts), role) : NULL;
    return c && crl_opts_is_set(c->opts, "init");
}

/* ---- building ----------------------------------------------------------------------------------- */

static void shape_str(char *buf, size_t len, int nd, const int64_t *s)
{
    buf[0] = '\0';
    for (int d = 0; d < nd; d++) {
        char x[32];
        snprintf(x, sizeof x, "%s%" PRId64, d ? ", " : "", s[d]);
        g_strlcat(buf, x, len);
    }
}

crl_mlp *crl_net_new(const crl_opts *opts, const char *role, const char *name, int in_ndim, const int64_t *in_shape,
                     int64_t out_features, const crl_net_defaults *def, crl_rng *rng, crl_error *err)
{
    crl_net_defaults d = { 0 };
    if (def)
        memcpy(&d, def, def->struct_size < sizeof d ? def->struct_size : sizeof d);
    if (!role || !*role || !in_shape || in_ndim < 1 || in_ndim > CRL_MAX_DIMS) {
        crl_error_set(err, CRL_E_INVALID, "crl_net_new: give a role and an input shape of 1 to %d dims",
                      CRL_MAX_DIMS);
        return NULL;
    }
    crl__nets *nets = (crl__nets *)crl__opts_nets(opts);
    crl__netcfg *c = find_cfg(nets, role);
    if (nets) {
        bool seen = false;
        for (guint r = 0; r < nets->roles->len; r++)
            seen |= !strcmp(g_ptr_array_index(nets->roles, r), role);
        if (!seen)
            g_ptr_array_add(nets->roles, g_strdup(role));
    }
    int64_t cells[64];
    int n_cells = d.n_cells < 0 ? 0 : d.n_cells > 64 ? 64 : d.n_cells;
    if (n_cells && d.cells)
        memcpy(cells, d.cells, (size_t)n_cells * sizeof *cells);
    else
        n_cells = 0;
    crl_activation act = d.act;
    crl_init init = CRL_INIT_DEFAULT;
    double gain = 1, last_gain = 1;
    const char *where = NULL;   /* what to name in a shape error */
    char wbuf[160];
    int rc = CRL_OK;
    if (c) {
        c->used = true;
        if (c->type->encoder) {
            crl_error_set(err, CRL_E_CONFIG, "%s: [%s] type = %s ends in feature maps, not the %" PRId64 " outputs "
                          "the network '%s' writes: make it the encoder of an mlp, e.g. [net.%s] type = mlp, "
                          "encoder = %s_encoder, and rename this section [net.%s_encoder]",
                          crl_opts_origin(c->opts, "type"), c->section, c->type->name, out_features, name, role,
                          role, role);
            return NULL;
        }
        const char *s;
        if (crl_opts_is_set(c->opts, "num_cells") && (rc = read_widths(c, "num_cells", cells, &n_cells, err)))
            return NULL;
        if (crl_opts_is_set(c->opts, "activation") &&
            ((rc = crl_opts_string(c->opts, "activation", &s, err)) || (rc = crl_activation_from_name(s, &act, err))))
            return NULL;
        if (crl_opts_is_set(c->opts, "init") &&
            ((rc = crl_opts_string(c->opts, "init", &s, err)) || (rc = crl_init_from_name(s, &init, err))))
            return NULL;
        if (crl_opts_is_set(c->opts, "gain") && (rc = crl_opts_double(c->opts, "gain", &gain, err)))
            return NULL;
        if (crl_opts_is_set(c->opts, "last_gain") && (rc = crl_opts_double(c->opts, "last_gain", &last_gain, err)))
            return NULL;
        snprintf(wbuf, sizeof wbuf, "%s: [%s]", c->origin, c->section);
        where = wbuf;
    }
    /* a recurrent section's encoder feeds the recurrent network (crl_net_encoder), not this head */
    crl__netcfg *enc = c && c->encoder && !c->type->recurrent ? find_cfg(nets, c->encoder) : NULL;
    if (enc)
        enc->used = true;
    char shp[160];
    shape_str(shp, sizeof shp, in_ndim, in_shape);
    if (!enc && in_ndim != 1) {
        crl_error_set(err, CRL_E_SHAPE, "%s%snetwork '%s' reads [%s] per row, but an MLP reads vectors: give it a conv "
                      "encoder ([net.%s] encoder = NAME and a [net.NAME] section with type = conv), or flatten the "
                      "observation (a FlattenObservation transform)", where ? where : "", where ? ": " : "", name,
                      shp, role);
        return NULL;
    }
    bool dueling = false;
    if (c && (rc = crl_opts_bool(c->opts, "dueling", &dueling, err)))
        return NULL;
    if (dueling && strcmp(role, "q")) {
        crl_error_set(err, CRL_E_CONFIG, "%s: [%s] dueling = true: only a Q-network ([net.q]) has a value and "
                      "advantages; drop it", crl_opts_origin(c->opts, "dueling"), c->section);
        return NULL;
    }
    crl_conv_layer layers[32];
    int n_layers = 0;
    crl_activation conv_act = CRL_ACT_RELU;
    if (enc) {
        const char *s;
        if ((rc = conv_layers(enc, layers, &n_layers, err)) ||
            (crl_opts_is_set(enc->opts, "activation") && ((rc = crl_opts_string(enc->opts, "activation", &s, err)) ||
                                                          (rc = crl_activation_from_name(s, &conv_act, err)))))
            return NULL;
        if (in_ndim != 3) {
            crl_error_set(err, CRL_E_SHAPE, "%s: [%s] encoder = %s: a conv stack reads images [C, H, W] per row, "
                          "but network '%s' reads [%s]%s", crl_opts_origin(c->opts, "encoder"), c->section,
                          c->encoder, name, shp, in_ndim == 1 ? " (this loss's network reads vectors: drop the "
                          "encoder)" : "");
            return NULL;
        }
        if (conv_fit(enc, layers, n_layers, in_shape, shp, name, err))
            return NULL;
    }
    crl_error e;
    crl_error_clear(&e);
    crl_mlp *m = crl_convnet_new(name, in_ndim, in_shape, layers, n_layers, conv_act, cells, n_cells, act,
                                 out_features, dueling, rng, &e);
    if (!m && enc && e.code == CRL_E_INVALID) {
        /* the layers do not fit the observation: the config's to change */
        const char *why = strstr(e.message, "': ");
        crl_error_set(err, CRL_E_CONFIG, "%s: [%s]: on the observation [%s] of network '%s', %s", enc->origin,
                      enc->section, shp, name, why ? why + 3 : e.message);
        return NULL;
    }
    if (!m) {
        crl_error_pass(err, &e, CRL_E_INVALID);
        if (where && err)
            crl_error_prefix(err, "%s: ", where);
        return NULL;
    }
    if (m && init != CRL_INIT_DEFAULT && crl_mlp_init(m, init, gain, last_gain, rng, err)) {
        crl_mlp_unref(m);
        m = NULL;
    }
    if (!m && where && err)
        crl_error_prefix(err, "%s: ", where);
    return m;
}

int crl_net_recurrent(const crl_opts *opts, const char *role, bool *recurrent, crl_rnn_kind *kind,
                      int64_t *hidden_size, crl_error *err)
{
    crl__netcfg *c = role ? find_cfg(crl__opts_nets(opts), role) : NULL;
    *recurrent = false;
    if (!c || !c->type->recurrent)
        return CRL_OK;
    int rc = crl_rnn_kind_from_name(c->type->name, kind, err);
    if (!rc && (rc = crl_opts_int(c->opts, "hidden_size", hidden_size, err)))
        return rc;
    c->claimed = *recurrent = !rc;
    return rc;
}

int crl_net_encoder(const crl_opts *opts, const char *role, const char *name, int in_ndim, const int64_t *in_shape,
                    crl_rng *rng, crl_mlp **out, crl_error *err)
{
    if (!out)
        return crl_error_set(err, CRL_E_INVALID, "crl_net_encoder: out is NULL");
    *out = NULL;
    crl__netcfg *c = role ? find_cfg(crl__opts_nets(opts), role) : NULL;
    crl__netcfg *enc = c && c->type->recurrent && c->encoder ? find_cfg(crl__opts_nets(opts), c->encoder) : NULL;
    if (!enc)
        return CRL_OK;
    if (!name || !*name)
        name = enc->name;
    char shp[160];
    shape_str(shp, sizeof shp, in_ndim, in_shape);
    if (in_ndim != 3 || !in_shape)
        return crl_error_set(err, CRL_E_CONFIG, "%s: [%s] encoder = %s: a conv stack reads images [C, H, W] per row, "
                             "but network '%s' reads [%s]%s", crl_opts_origin(c->opts, "encoder"), c->section,
                             c->encoder, name, shp, in_ndim == 1 ? " (a vector: drop the encoder)" : "");
    crl_conv_layer layers[32];
    int n_layers = 0, rc;
    crl_activation conv_act = CRL_ACT_RELU;
    const char *s;
    if ((rc = conv_layers(enc, layers, &n_layers, err)) ||
        (crl_opts_is_set(enc->opts, "activation") && ((rc = crl_opts_string(enc->opts, "activation", &s, err)) ||
                                                      (rc = crl_activation_from_name(s, &conv_act, err)))) ||
        (rc = conv_fit(enc, layers, n_layers, in_shape, shp, name, err)))
        return rc;
    crl_error e;
    crl_error_clear(&e);
    /* out_features 0: the conv stack alone, its flattened feature maps are the output (TorchRL's ConvNet) */
    crl_mlp *m = crl_convnet_new(name, in_ndim, in_shape, layers, n_layers, conv_act, NULL, 0, conv_act, 0, false,
                                 rng, &e);
    if (!m) {
        rc = crl_error_pass(err, &e, CRL_E_INVALID);
        if (err)
            crl_error_prefix(err, "%s: [%s]: ", enc->origin, enc->section);
        return rc;
    }
    enc->used = true;
    *out = m;
    return CRL_OK;
}
