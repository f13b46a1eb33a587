/* Spec printing in TorchRL's layout (BoundedTensorSpec(...), CompositeSpec(...)).
 *
 * Class names and domains follow the TorchRL release the seed documents
 * print (the *TensorSpec names): Box-based specs (Bounded, Unbounded of any
 * dtype) say domain=continuous, the discrete families domain=discrete.  An
 * Unbounded integer spec prints TorchRL's ContinuousBox of int64 (bool for
 * bool) limits, as UnboundedDiscreteTensorSpec does. */
#include "spec-private.h"

#include <string.h>

static void append_torch_size(GString *s, int ndim, const int64_t *shape)
{
    g_string_append(s, "torch.Size(");
    crl__spec_append_dims(s, ndim, shape);
    g_string_append_c(s, ')');
}

/* Python's textwrap.indent: prefix every line that is not blank. */
static void append_indented(GString *out, const char *text, const char *pad)
{
    const char *p = text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p + 1) : strlen(p);
        bool blank = true;
        for (size_t i = 0; i < len; i++)
            if (p[i] != ' ' && p[i] != '\t' && p[i] != '\n' && p[i] != '\r')
                blank = false;
        if (!blank)
            g_string_append(out, pad);
        g_string_append_len(out, p, (gssize)len);
        p += len;
    }
}

static void append_box_tensor(GString *s, const char *name, const crl_spec *sp, crl_dtype dt)
{
    g_string_append_printf(s, "\n%s=Tensor(shape=", name);
    append_torch_size(s, sp->ndim, sp->shape);
    g_string_append(s, ", device=");
    crl__spec_append_device(s, sp->device);
    g_string_append_printf(s, ", dtype=%s, contiguous=True)", crl__spec_torch_dtype(dt));
}

/* ContinuousBox(\n    low=Tensor(...),\n    high=Tensor(...)) */
static void append_continuous_box(GString *s, const crl_spec *sp, crl_dtype dt)
{
    GString *lo = g_string_new(""), *hi = g_string_new("");
    append_box_tensor(lo, "low", sp, dt);
    append_box_tensor(hi, "high", sp, dt);
    g_string_append(s, "ContinuousBox(");
    append_indented(s, lo->str, "    ");
    g_string_append_c(s, ',');
    append_indented(s, hi->str, "    ");
    g_string_append_c(s, ')');
    g_string_free(lo, TRUE);
    g_string_free(hi, TRUE);
}

/* TorchRL's BoxList.from_nvec over nvec expanded to the spec's shape: one
 * BoxList level per leading dim, DiscreteBoxes in the last. */
static void append_nvec_boxes(GString *s, const crl_spec *sp, int dim)
{
    g_string_append(s, "BoxList(boxes=[");
    if (dim == sp->ndim - 1) {
        for (size_t i = 0; i < sp->nvec_len; i++)
            g_string_append_printf(s, "%sDiscreteBox(n=%" G_GINT64_FORMAT ")", i ? ", " : "",
                                   (gint64)sp->nvec[i]);
    } else {
        for (int64_t i = 0; i < sp->shape[dim]; i++) {
            if (i)
                g_string_append(s, ", ");
            append_nvec_boxes(s, sp, dim + 1);
        }
    }
    g_string_append(s, "])");
}

static const char *class_name(const crl_spec *sp)
{
    switch (sp->kind) {
    case CRL_SPEC_UNBOUNDED:
        return !crl__spec_dtype_is_int(sp->dtype) ? "UnboundedContinuousTensorSpec"
                                             : "UnboundedDiscreteTensorSpec";
    case CRL_SPEC_BOUNDED: return "BoundedTensorSpec";
    case CRL_SPEC_CATEGORICAL: return "DiscreteTensorSpec";
    case CRL_SPEC_ONEHOT: return "OneHotDiscreteTensorSpec";
    case CRL_SPEC_MULTI_CATEGORICAL: return "MultiDiscreteTensorSpec";
    case CRL_SPEC_MULTI_ONEHOT: return "MultiOneHotDiscreteTensorSpec";
    case CRL_SPEC_BINARY: return "BinaryDiscreteTensorSpec";
    case CRL_SPEC_COMPOSITE: return "CompositeSpec";
    }
    return "TensorSpec";
}

static void append_space(GString *s, const crl_spec *sp)
{
    switch (sp->kind) {
    case CRL_SPEC_UNBOUNDED:
        if (!crl__spec_dtype_is_int(sp->dtype))
            g_string_append(s, "None");
        else
            append_continuous_box(s, sp, sp->dtype == CRL_BOOL ? CRL_BOOL : CRL_I64);
        break;
    case CRL_SPEC_BOUNDED:
        append_continuous_box(s, sp, sp->dtype);
        break;
    case CRL_SPEC_CATEGORICAL:
    case CRL_SPEC_ONEHOT:
        g_string_append_printf(s, "DiscreteBox(n=%" G_GINT64_FORMAT ")", (gint64)sp->n);
        break;
    case CRL_SPEC_BINARY:
        /* TorchRL's BinaryDiscreteTensorSpec is a DiscreteTensorSpec(n=2). */
        g_string_append(s, "DiscreteBox(n=2)");
        break;
    case CRL_SPEC_MULTI_CATEGORICAL:
        append_nvec_boxes(s, sp, 0);
        break;
    case CRL_SPEC_MULTI_ONEHOT:
        g_string_append(s, "BoxList(boxes=[");
        for (size_t i = 0; i < sp->nvec_len; i++)
            g_string_append_printf(s, "%sDiscreteBox(n=%" G_GINT64_FORMAT ")", i ? ", " : "",
                                   (gint64)sp->nvec[i]);
        g_string_append(s, "])");
        break;
    case CRL_SPEC_COMPOSITE:
        break;
    }
}

static void append_spec(GString *out, const crl_spec *sp);

static void append_composite(GString *out, const crl_spec *sp)
{
    g_string_append(out, "CompositeSpec(\n");
    for (guint i = 0; i < sp->children->len; i++) {
        const crl__spec_entry *e = &g_array_index(sp->children, crl__spec_entry, i);
        GString *item = g_string_new(e->key);
        g_string_append(item, ": ");
        append_spec(item, e->spec);
        if (i)
            g_string_append(out, ",\n");
        append_indented(out, item->str, "    ");
        g_string_free(item, TRUE);
    }
    g_string_append(out, ", device=");
    crl__spec_append_device(out, sp->device);
    g_string_append(out, ", shape=");
    append_torch_size(out, sp->ndim, sp->shape);
    g_string_append_c(out, ')');
}

static void append_spec(GString *out, const crl_spec *sp)
{
    if (sp->kind == CRL_SPEC_COMPOSITE) {
        append_composite(out, sp);
        return;
    }
    bool continuous = sp->kind == CRL_SPEC_UNBOUNDED || sp->kind == CRL_SPEC_BOUNDED;
    GString *field[5];
    for (int i = 0; i < 5; i++)
        field[i] = g_string_new("");
    g_string_append(field[0], "shape=");
    append_torch_size(field[0], sp->ndim, sp->shape);
    g_string_append(field[1], "space=");
    append_space(field[1], sp);
    g_string_append(field[2], "device=");
    crl__spec_append_device(field[2], sp->device);
    g_string_append_printf(field[3], "dtype=%s", crl__spec_torch_dtype(sp->dtype));
    g_string_append_printf(field[4], "domain=%s", continuous ? "continuous" : "discrete");

    g_string_append_printf(out, "%s(\n", class_name(sp));
    for (int i = 0; i < 5; i++) {
        if (i)
            g_string_append(out, ",\n");
        append_indented(out, field[i]->str, "    ");
        g_string_free(field[i], TRUE);
    }
    g_string_append_c(out, ')');
}

char *crl_spec_repr(const crl_spec *s)
{
    if (!s)
        return g_strdup("None");
    GString *out = g_string_new("");
    append_spec(out, s);
    return g_string_free(out, FALSE);
}
