/* PNG writing for the `crl` command (rollout frames) through cairo. */
#include "config.h"
#include "cli-private.h"

#include <glib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#ifdef CRL_CLI_HAVE_CAIRO
#include <cairo.h>

int crl__png_write_rgb(const char *path, const uint8_t *rgb, int width, int height, crl_error *err)
{
    if (width <= 0 || height <= 0 || width > 32767 || height > 32767)
        return crl_error_set(err, CRL_E_INVALID, "cannot write '%s': bad frame size %dx%d (1..32767 per side)",
                             path, width, height);
    /* cairo's RGB24 is one native-endian uint32 per pixel, 0x00RRGGBB. */
    int stride = cairo_format_stride_for_width(CAIRO_FORMAT_RGB24, width);
    if (stride <= 0)
        return crl_error_set(err, CRL_E_INVALID, "cannot write '%s': cairo refuses a width of %d", path, width);
    unsigned char *pix = g_try_malloc((gsize)stride * (gsize)height);
    if (!pix)
        return crl_error_set(err, CRL_E_NOMEM, "cannot write '%s': out of memory for a %dx%d frame", path,
                             width, height);
    for (int y = 0; y < height; y++) {
        uint32_t *row = (uint32_t *)(void *)(pix + (size_t)y * (size_t)stride);
        const uint8_t *src = rgb + (size_t)y * (size_t)width * 3;
        for (int x = 0; x < width; x++, src += 3)
            row[x] = ((uint32_t)src[0] << 16) | ((uint32_t)src[1] << 8) | (uint32_t)src[2];
    }
    int rc = CRL_OK;
    cairo_surface_t *s = cairo_image_surface_create_for_data(pix, CAIRO_FORMAT_RGB24, width, height, stride);
    cairo_status_t st = cairo_surface_status(s);
    if (st == CAIRO_STATUS_SUCCESS)
        st = cairo_surface_write_to_png(s, path);
    if (st != CAIRO_STATUS_SUCCESS)
        rc = crl_error_set(err, st == CAIRO_STATUS_NO_MEMORY ? CRL_E_NOMEM : CRL_E_IO,
                           "cannot write PNG '%s': %s (is the directory writable?)", path,
                           cairo_status_to_string(st));
    cairo_surface_destroy(s);
    g_free(pix);
    return rc;
}

/* ---- learning curves ------------------------------------------------------------------------------ */

/* A round step for about `want` ticks over span: 1, 2 or 5 times a power of ten ("nice numbers",
 * Heckbert, Graphics Gems, 1990). */
static double nice_step(double span, int want)
{
    double raw = span / want, p = pow(10, floor(log10(raw))), f = raw / p;
    return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * p;
}

typedef struct axis {
    double lo, hi, step;
    bool log;  /* log10 scale: lo, hi and the ticks are exponents */
} axis;

/* The axis of values lo..hi, widened to whole steps. */
static axis make_axis(double lo, double hi, int want, bool zero)
{
    axis a = { 0, 1, 0.2, false };
    if (!(lo <= hi))
        return a;
    if (zero) {
        lo = fmin(lo, 0);
        hi = fmax(hi, 0);
    }
    if (hi - lo < 1e-9 * fmax(1, fabs(hi))) {
        lo -= fmax(1, fabs(lo) * 0.1);
        hi += fmax(1, fabs(hi) * 0.1);
    }
    a.step = nice_step(hi - lo, want);
    a.lo = floor(lo / a.step + 1e-9) * a.step;
    a.hi = ceil(hi / a.step - 1e-9) * a.step;
    return a;
}

/* A tick label in the axis's unit: 5000 -> "5k" on an axis reaching 10000 or more, 1500000 -> "1.5M";
 * others as %g (steps are round, so few digits). */
static void tick_label(char *buf, size_t n, double v, const axis *a)
{
    if (fabs(v) < a->step * 1e-6)
        v = 0;
    double top = fmax(fabs(a->lo), fabs(a->hi));
    if (v == 0)
        snprintf(buf, n, "0");
    else if (top >= 1e6 && a->step >= 1e5)
        snprintf(buf, n, "%gM", v / 1e6);
    else if (top >= 1e4 && a->step >= 1e3)
        snprintf(buf, n, "%gk", v / 1e3);
    else
        snprintf(buf, n, "%.6g", v);
}

typedef struct panel {
    double x0, y0, w, h;  /* the plot area in pixels */
    axis xa, ya;
} panel;

static double px(const panel *p, double v)
{
    return p->x0 + p->w * (v - p->xa.lo) / (p->xa.hi - p->xa.lo);
}

static double py(const panel *p, double v)
{
    if (p->ya.log)
        v = log10(v);
    return p->y0 + p->h - p->h * (v - p->ya.lo) / (p->ya.hi - p->ya.lo);
}

static void text_at(cairo_t *c, double x, double y, const char *s, double align)
{
    cairo_text_extents_t te;
    cairo_text_extents(c, s, &te);
    cairo_move_to(c, x - align * te.x_advance, y);
    cairo_show_text(c, s);
}

/* The frame, grid, tick labels (y right-aligned left of the frame, x centred below it) and the y axis
 * name (rotated); x labels only when xlabels. */
static void draw_axes(cairo_t *c, const panel *p, const char *yname, bool xlabels)
{
    char buf[64];
    cairo_set_font_size(c, 11);
    cairo_set_line_width(c, 1);
    for (double v = p->ya.lo; v <= p->ya.hi + p->ya.step * 1e-6; v += p->ya.step) {
        double y = p->y0 + p->h - p->h * (v - p->ya.lo) / (p->ya.hi - p->ya.lo);
        cairo_set_source_rgb(c, 0.9, 0.9, 0.9);
        cairo_move_to(c, p->x0, y);
        cairo_line_to(c, p->x0 + p->w, y);
        cairo_stroke(c);
        cairo_set_source_rgb(c, 0, 0, 0);
        if (p->ya.log)
            snprintf(buf, sizeof buf, "%g", pow(10, round(v)));
        else
            tick_label(buf, sizeof buf, v, &p->ya);
        text_at(c, p->x0 - 6, y + 4, buf, 1);
    }
    for (double v = p->xa.lo; v <= p->xa.hi + p->xa.step * 1e-6; v += p->xa.step) {
        double x = px(p, v);
        cairo_set_source_rgb(c, 0.9, 0.9, 0.9);
        cairo_move_to(c, x, p->y0);
        cairo_line_to(c, x, p->y0 + p->h);
        cairo_stroke(c);
        if (xlabels) {
            cairo_set_source_rgb(c, 0, 0, 0);
            tick_label(buf, sizeof buf, v, &p->xa);
            text_at(c, x, p->y0 + p->h + 15, buf, 0.5);
        }
    }
    cairo_set_source_rgb(c, 0, 0, 0);
    cairo_rectangle(c, p->x0, p->y0, p->w, p->h);
    cairo_stroke(c);
    cairo_save(c);
    cairo_move_to(c, 16, p->y0 + p->h / 2);
    cairo_rotate(c, -G_PI / 2);
    cairo_text_extents_t te;
    cairo_text_extents(c, yname, &te);
    cairo_rel_move_to(c, -te.x_advance / 2, 0);
    cairo_show_text(c, yname);
    cairo_restore(c);
}

static void draw_line(cairo_t *c, const panel *p, const double *x, const double *y, size_t n)
{
    bool pen = false;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(y[i]) || (p->ya.log && !(y[i] > 0))) {
            pen = false;
            continue;
        }
        if (pen)
            cairo_line_to(c, px(p, x[i]), py(p, y[i]));
        else
            cairo_move_to(c, px(p, x[i]), py(p, y[i]));
        pen = true;
    }
    cairo_stroke(c);
}

static void draw_target(cairo_t *c, const panel *p, double target)
{
    if (!isfinite(target))
        return;
    double dash[] = { 6, 4 };
    cairo_set_source_rgb(c, 0.2, 0.6, 0.2);
    cairo_set_line_width(c, 1.5);
    cairo_set_dash(c, dash, 2, 0);
    cairo_move_to(c, p->x0, py(p, target));
    cairo_line_to(c, p->x0 + p->w, py(p, target));
    cairo_stroke(c);
    cairo_set_dash(c, NULL, 0, 0);
}

/* A legend entry at (*x, y), moving *x on. */
static void legend(cairo_t *c, double *x, double y, double r, double g, double b, const char *s)
{
    cairo_set_source_rgb(c, r, g, b);
    cairo_rectangle(c, *x, y - 8, 14, 4);
    cairo_fill(c);
    cairo_set_source_rgb(c, 0, 0, 0);
    cairo_move_to(c, *x + 18, y);
    cairo_show_text(c, s);
    cairo_text_extents_t te;
    cairo_text_extents(c, s, &te);
    *x += 18 + te.x_advance + 16;
}

static void range_of(const double *v, size_t n, double *lo, double *hi)
{
    for (size_t i = 0; i < n; i++)
        if (isfinite(v[i])) {
            *lo = fmin(*lo, v[i]);
            *hi = fmax(*hi, v[i]);
        }
}

static cairo_t *begin(int w, int h, const char *title, cairo_surface_t **s)
{
    *s = cairo_image_surface_create(CAIRO_FORMAT_RGB24, w, h);
    cairo_t *c = cairo_create(*s);
    cairo_set_source_rgb(c, 1, 1, 1);
    cairo_paint(c);
    cairo_select_font_face(c, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_source_rgb(c, 0, 0, 0);
    cairo_set_font_size(c, 14);
    text_at(c, w / 2.0, 20, title ? title : "", 0.5);
    return c;
}

static int finish(cairo_t *c, cairo_surface_t *s, const char *path, crl_error *err)
{
    cairo_status_t st = cairo_status(c);
    cairo_destroy(c);
    if (st == CAIRO_STATUS_SUCCESS)
        st = cairo_surface_write_to_png(s, path);
    cairo_surface_destroy(s);
    if (st != CAIRO_STATUS_SUCCESS)
        return crl_error_set(err, st == CAIRO_STATUS_NO_MEMORY ? CRL_E_NOMEM : CRL_E_IO,
                             "cannot write PNG '%s': %s", path, cairo_status_to_string(st));
    return CRL_OK;
}

/* Layout: a 70-pixel left margin holds the y labels (right-aligned to the frame) and the rotated axis
 * name; the x labels and "frames" sit inside the bottom margin. */
enum { CW = 800, CL = 78, CR = 24, CT = 48 };

int crl__png_write_curve(const char *path, const crl_curve_plot *p, crl_error *err)
{
    bool losses = false;
    for (size_t i = 0; i < p->ln; i++)
        losses |= isfinite(p->ly[i]);
    const int H = losses ? 640 : 480;
    double xmax = 1, ylo = INFINITY, yhi = -INFINITY;
    for (size_t i = 0; i < p->n; i++)
        xmax = fmax(xmax, p->x[i]);
    for (size_t i = 0; i < p->en; i++)
        xmax = fmax(xmax, p->ex[i]);
    range_of(p->y, p->n, &ylo, &yhi);
    range_of(p->ey, p->en, &ylo, &yhi);
    if (isfinite(p->target))
        range_of(&p->target, 1, &ylo, &yhi);
    cairo_surface_t *s;
    cairo_t *c = begin(CW, H, p->title, &s);
    panel top = { CL, CT, CW - CL - CR, 330, make_axis(0, xmax, 8, true), make_axis(ylo, yhi, 6, false) };
    draw_axes(c, &top, "return", !losses);
    draw_target(c, &top, p->target);
    cairo_set_source_rgb(c, 0.12, 0.47, 0.71);
    cairo_set_line_width(c, 2);
    draw_line(c, &top, p->x, p->y, p->n);
    cairo_set_source_rgb(c, 0.84, 0.15, 0.16);
    for (size_t i = 0; i < p->en; i++)
        if (isfinite(p->ey[i])) {
            cairo_arc(c, px(&top, p->ex[i]), py(&top, p->ey[i]), 4, 0, 2 * G_PI);
            cairo_fill(c);
        }
    double bottom = top.y0 + top.h;
    if (losses) {
        double llo = INFINITY, lhi = -INFINITY;
        range_of(p->ly, p->ln, &llo, &lhi);
        panel lp = { CL, bottom + 24, top.w, 150, top.xa, make_axis(llo, lhi, 4, false) };
        /* a loss spanning decades reads better on a log scale */
        if (llo > 0 && lhi / llo > 100) {
            lp.ya.log = true;
            lp.ya.lo = floor(log10(llo));
            lp.ya.hi = ceil(log10(lhi));
            lp.ya.step = ceil((lp.ya.hi - lp.ya.lo) / 5);
            lp.ya.hi = lp.ya.lo + lp.ya.step * ceil((lp.ya.hi - lp.ya.lo) / lp.ya.step);
        }
        draw_axes(c, &lp, "loss", true);
        cairo_set_source_rgb(c, 0.5, 0.3, 0.6);
        cairo_set_line_width(c, 1.2);
        draw_line(c, &lp, p->lx, p->ly, p->ln);
        bottom = lp.y0 + lp.h;
    }
    cairo_set_source_rgb(c, 0, 0, 0);
    cairo_set_font_size(c, 12);
    text_at(c, CL + top.w / 2, bottom + 34, "frames", 0.5);
    cairo_set_font_size(c, 11);
    double lx = CL;
    legend(c, &lx, H - 10, 0.12, 0.47, 0.71, "training return (last 10 episodes)");
    legend(c, &lx, H - 10, 0.84, 0.15, 0.16, "evaluation");
    if (isfinite(p->target)) {
        char t[64];
        snprintf(t, sizeof t, "stop_return %g", p->target);
        legend(c, &lx, H - 10, 0.2, 0.6, 0.2, t);
    }
    if (losses)
        legend(c, &lx, H - 10, 0.5, 0.3, 0.6, "loss");
    return finish(c, s, path, err);
}

int crl__png_write_band(const char *path, const char *title, const double *x, const double *mean,
                        const double *lo, const double *hi, size_t n, double target, crl_error *err)
{
    const int H = 480;
    double xmax = 1, ylo = INFINITY, yhi = -INFINITY;
    for (size_t i = 0; i < n; i++)
        xmax = fmax(xmax, x[i]);
    range_of(lo, n, &ylo, &yhi);
    range_of(hi, n, &ylo, &yhi);
    if (isfinite(target))
        range_of(&target, 1, &ylo, &yhi);
    cairo_surface_t *s;
    cairo_t *c = begin(CW, H, title, &s);
    panel p = { CL, CT, CW - CL - CR, H - CT - 84, make_axis(0, xmax, 8, true), make_axis(ylo, yhi, 6, false) };
    draw_axes(c, &p, "evaluation return", true);
    draw_target(c, &p, target);
    /* the band: along hi, back along lo, one polygon per run of finite points */
    cairo_set_source_rgba(c, 0.12, 0.47, 0.71, 0.25);
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && isfinite(lo[j]) && isfinite(hi[j]))
            j++;
        if (j > i) {
            cairo_move_to(c, px(&p, x[i]), py(&p, hi[i]));
            for (size_t k = i + 1; k < j; k++)
                cairo_line_to(c, px(&p, x[k]), py(&p, hi[k]));
            for (size_t k = j; k-- > i;)
                cairo_line_to(c, px(&p, x[k]), py(&p, lo[k]));
            cairo_close_path(c);
            cairo_fill(c);
        }
        i = j + 1;
    }
    cairo_set_source_rgb(c, 0.12, 0.47, 0.71);
    cairo_set_line_width(c, 2);
    draw_line(c, &p, x, mean, n);
    cairo_set_source_rgb(c, 0, 0, 0);
    cairo_set_font_size(c, 12);
    text_at(c, CL + p.w / 2, p.y0 + p.h + 34, "frames", 0.5);
    cairo_set_font_size(c, 11);
    double lx = CL;
    legend(c, &lx, H - 10, 0.12, 0.47, 0.71, "mean over seeds");
    legend(c, &lx, H - 10, 0.65, 0.8, 0.9, "min to max");
    if (isfinite(target)) {
        char t[64];
        snprintf(t, sizeof t, "stop_return %g", target);
        legend(c, &lx, H - 10, 0.2, 0.6, 0.2, t);
    }
    return finish(c, s, path, err);
}

#else

int crl__png_write_rgb(const char *path, const uint8_t *rgb, int width, int height, crl_error *err)
{
    (void)rgb;
    (void)width;
    (void)height;
    return crl_error_set(err, CRL_E_UNSUPPORTED,
                         "cannot write '%s': this crl was built without cairo (configure found none, or "
                         "--disable-classic); install libcairo2-dev and reconfigure", path);
}

int crl__png_write_curve(const char *path, const crl_curve_plot *p, crl_error *err)
{
    (void)p;
    return crl_error_set(err, CRL_E_UNSUPPORTED, "cannot write '%s': crl was built without cairo", path);
}

int crl__png_write_band(const char *path, const char *title, const double *x, const double *mean,
                        const double *lo, const double *hi, size_t n, double target, crl_error *err)
{
    (void)title, (void)x, (void)mean, (void)lo, (void)hi, (void)n, (void)target;
    return crl_error_set(err, CRL_E_UNSUPPORTED, "cannot write '%s': crl was built without cairo", path);
}

#endif
