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

int crl__png_write_curve(const char *path, const char *title, const double *x, const double *y, size_t n,
                         const double *ex, const double *ey, size_t en, crl_error *err)
{
    const int W = 800, H = 480, L = 70, R = 40, T = 40, B = 50;
    double xmax = 1, ymin = INFINITY, ymax = -INFINITY;
    for (size_t i = 0; i < n; i++)
        if (isfinite(y[i])) {
            ymin = fmin(ymin, y[i]);
            ymax = fmax(ymax, y[i]);
            xmax = fmax(xmax, x[i]);
        }
    for (size_t i = 0; i < en; i++)
        if (isfinite(ey[i])) {
            ymin = fmin(ymin, ey[i]);
            ymax = fmax(ymax, ey[i]);
            xmax = fmax(xmax, ex[i]);
        }
    if (!(ymin <= ymax)) {
        ymin = 0;
        ymax = 1;
    }
    if (ymax - ymin < 1e-9) {
        ymin -= 1;
        ymax += 1;
    }
    cairo_surface_t *s = cairo_image_surface_create(CAIRO_FORMAT_RGB24, W, H);
    cairo_t *c = cairo_create(s);
    cairo_set_source_rgb(c, 1, 1, 1);
    cairo_paint(c);
    cairo_set_source_rgb(c, 0, 0, 0);
    cairo_set_line_width(c, 1);
    cairo_rectangle(c, L, T, W - L - R, H - T - B);
    cairo_stroke(c);
    cairo_select_font_face(c, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(c, 14);
    cairo_move_to(c, L, T - 14);
    cairo_show_text(c, title);
    cairo_set_font_size(c, 11);
    char buf[64];
    for (int k = 0; k <= 4; k++) {
        double v = ymin + (ymax - ymin) * k / 4, py = H - B - (H - T - B) * k / 4.0;
        snprintf(buf, sizeof buf, "%.4g", v);
        cairo_move_to(c, 4, py + 4);
        cairo_show_text(c, buf);
        double fx = xmax * k / 4, px = L + (W - L - R) * k / 4.0;
        snprintf(buf, sizeof buf, "%.4g", fx);
        cairo_move_to(c, px - 10, H - B + 16);
        cairo_show_text(c, buf);
    }
    cairo_move_to(c, W / 2 - 20, H - 12);
    cairo_show_text(c, "frames");
#define PX(v) (L + (W - L - R) * (v) / xmax)
#define PY(v) (H - B - (H - T - B) * ((v) - ymin) / (ymax - ymin))
    cairo_set_source_rgb(c, 0.12, 0.47, 0.71);
    cairo_set_line_width(c, 2);
    bool pen = false;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(y[i]))
            continue;
        if (pen)
            cairo_line_to(c, PX(x[i]), PY(y[i]));
        else
            cairo_move_to(c, PX(x[i]), PY(y[i]));
        pen = true;
    }
    cairo_stroke(c);
    cairo_set_source_rgb(c, 0.84, 0.15, 0.16);
    for (size_t i = 0; i < en; i++)
        if (isfinite(ey[i])) {
            cairo_arc(c, PX(ex[i]), PY(ey[i]), 4, 0, 2 * G_PI);
            cairo_fill(c);
        }
#undef PX
#undef PY
    cairo_set_source_rgb(c, 0.12, 0.47, 0.71);
    cairo_move_to(c, W - 260, T - 14);
    cairo_show_text(c, "training return (last 10)");
    cairo_set_source_rgb(c, 0.84, 0.15, 0.16);
    cairo_move_to(c, W - 100, T - 14);
    cairo_show_text(c, "evaluation");
    cairo_destroy(c);
    cairo_status_t st = cairo_surface_write_to_png(s, path);
    cairo_surface_destroy(s);
    if (st != CAIRO_STATUS_SUCCESS)
        return crl_error_set(err, CRL_E_IO, "cannot write PNG '%s': %s", path, cairo_status_to_string(st));
    return CRL_OK;
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

int crl__png_write_curve(const char *path, const char *title, const double *x, const double *y, size_t n,
                         const double *ex, const double *ey, size_t en, crl_error *err)
{
    (void)title, (void)x, (void)y, (void)n, (void)ex, (void)ey, (void)en;
    return crl_error_set(err, CRL_E_UNSUPPORTED, "cannot write '%s': crl was built without cairo", path);
}

#endif
