/* Cairo drawing helpers shared by the classic envs' render_one. */
#include "classic.h"

#include <math.h>

static void set_rgb(cairo_t *cr, uint32_t rgb)
{
    cairo_set_source_rgb(cr, ((rgb >> 16) & 0xFF) / 255.0, ((rgb >> 8) & 0xFF) / 255.0,
                         (rgb & 0xFF) / 255.0);
}

int classic_canvas_begin(classic_canvas *cv, const classic_def *d, int w, int h, crl_error *err)
{
    cv->surface = NULL;
    cv->cr = NULL;
    cv->width = w;
    cv->height = h;
    if (w < 1 || h < 1 || w > CLASSIC_RENDER_MAX_SIDE || h > CLASSIC_RENDER_MAX_SIDE)
        return crl_error_set(err, CRL_E_INVALID,
                             "%s: cannot render a %d x %d frame; width and height must be in "
                             "1..%d (the env's own size is %d x %d)",
                             d->id, w, h, CLASSIC_RENDER_MAX_SIDE, d->render_width,
                             d->render_height);
    cv->surface = cairo_image_surface_create(CAIRO_FORMAT_RGB24, w, h);
    if (cairo_surface_status(cv->surface) != CAIRO_STATUS_SUCCESS) {
        cairo_surface_destroy(cv->surface);
        cv->surface = NULL;
        return crl_error_set(err, CRL_E_NOMEM, "%s: cannot allocate a %d x %d frame", d->id, w,
                             h);
    }
    cv->cr = cairo_create(cv->surface);
    if (cairo_status(cv->cr) != CAIRO_STATUS_SUCCESS) {
        cairo_destroy(cv->cr);
        cairo_surface_destroy(cv->surface);
        cv->cr = NULL;
        cv->surface = NULL;
        return crl_error_set(err, CRL_E_NOMEM, "%s: cannot allocate a drawing context", d->id);
    }
    cairo_t *cr = cv->cr;
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    /* Map pygame's pixel (x, y) of the env's frame, before Gymnasium's final
     * vertical flip, onto the centre of the pixel it ends up in. */
    cairo_scale(cr, (double)w / d->render_width, (double)h / d->render_height);
    cairo_translate(cr, 0.5, d->render_height - 0.5);
    cairo_scale(cr, 1, -1);
    cairo_set_line_width(cr, 1.0);
    return CRL_OK;
}

int classic_canvas_finish(classic_canvas *cv, const classic_def *d, uint8_t *rgb, crl_error *err)
{
    int rc = CRL_OK;
    if (cairo_status(cv->cr) != CAIRO_STATUS_SUCCESS) {
        rc = crl_error_set(err, CRL_E_NOMEM, "%s: drawing failed: %s", d->id,
                           cairo_status_to_string(cairo_status(cv->cr)));
    } else {
        cairo_surface_flush(cv->surface);
        const unsigned char *data = cairo_image_surface_get_data(cv->surface);
        int stride = cairo_image_surface_get_stride(cv->surface);
        for (int y = 0; y < cv->height; y++) {
            const uint32_t *row = (const uint32_t *)(const void *)(data + (size_t)y * stride);
            uint8_t *out = rgb + (size_t)y * cv->width * 3;
            for (int x = 0; x < cv->width; x++) {
                uint32_t px = row[x]; /* RGB24: native-endian 0x00RRGGBB */
                out[3 * x] = (uint8_t)(px >> 16);
                out[3 * x + 1] = (uint8_t)(px >> 8);
                out[3 * x + 2] = (uint8_t)px;
            }
        }
    }
    cairo_destroy(cv->cr);
    cairo_surface_destroy(cv->surface);
    cv->cr = NULL;
    cv->surface = NULL;
    return rc;
}

void classic_rotate(double x, double y, double angle, double *ox, double *oy)
{
    double c = cos(angle), s = sin(angle);
    *ox = x * c - y * s;
    *oy = x * s + y * c;
}

void classic_fill_polygon(cairo_t *cr, const double *xy, int npoints, uint32_t rgb)
{
    if (npoints < 3)
        return;
    cairo_move_to(cr, xy[0], xy[1]);
    for (int k = 1; k < npoints; k++)
        cairo_line_to(cr, xy[2 * k], xy[2 * k + 1]);
    cairo_close_path(cr);
    set_rgb(cr, rgb);
    cairo_fill(cr);
}

void classic_fill_circle(cairo_t *cr, double cx, double cy, double radius, uint32_t rgb)
{
    /* Pixels whose centres lie within `radius` span radius + 1/2 outwards. */
    cairo_new_sub_path(cr);
    cairo_arc(cr, cx, cy, radius + 0.5, 0, 2 * M_PI);
    set_rgb(cr, rgb);
    cairo_fill(cr);
}

void classic_line(cairo_t *cr, double x0, double y0, double x1, double y1, uint32_t rgb)
{
    if (y0 == y1 || x0 == x1) {
        /* Axis-aligned: pygame truncates to whole pixels and includes both
         * end pixels, so the line stays crisp. */
        double xa = floor(fmin(x0, x1)) - 0.5, xb = floor(fmax(x0, x1)) + 0.5;
        double ya = floor(fmin(y0, y1)) - 0.5, yb = floor(fmax(y0, y1)) + 0.5;
        cairo_rectangle(cr, xa, ya, xb - xa, yb - ya);
        set_rgb(cr, rgb);
        cairo_fill(cr);
        return;
    }
    cairo_move_to(cr, x0, y0);
    cairo_line_to(cr, x1, y1);
    set_rgb(cr, rgb);
    cairo_stroke(cr);
}

void classic_polyline(cairo_t *cr, const double *xy, int npoints, uint32_t rgb)
{
    if (npoints < 2)
        return;
    cairo_move_to(cr, xy[0], xy[1]);
    for (int k = 1; k < npoints; k++)
        cairo_line_to(cr, xy[2 * k], xy[2 * k + 1]);
    set_rgb(cr, rgb);
    cairo_stroke(cr);
}

void classic_arrow_arc(cairo_t *cr, double cx, double cy, double size, bool ccw, uint32_t rgb)
{
    /* A three-quarter ring with a head at its end, like Gymnasium's
     * clockwise.png.  Angles are in the y-up drawing frame, so turning
     * counter-clockwise on screen means increasing angle. */
    const double radius = size * 0.35, width = size * 0.1;
    const double start = M_PI / 2, sweep = 1.5 * M_PI;
    const double end = ccw ? start + sweep : start - sweep;
    set_rgb(cr, rgb);
    cairo_save(cr);
    cairo_set_line_width(cr, width);
    cairo_new_sub_path(cr);
    if (ccw)
        cairo_arc(cr, cx, cy, radius, start, end);
    else
        cairo_arc_negative(cr, cx, cy, radius, start, end);
    cairo_stroke(cr);
    cairo_restore(cr);
    /* Head: a triangle at the arc's end pointing along the direction of travel. */
    const double ex = cx + radius * cos(end), ey = cy + radius * sin(end);
    const double dir = ccw ? 1.0 : -1.0;
    const double tx = -sin(end) * dir, ty = cos(end) * dir; /* unit tangent */
    const double nx = cos(end), ny = sin(end);               /* unit normal (outwards) */
    const double head = size * 0.18;
    const double tri[6] = {ex + tx * head,      ey + ty * head,      ex + nx * head * 0.8,
                           ey + ny * head * 0.8, ex - nx * head * 0.8, ey - ny * head * 0.8};
    classic_fill_polygon(cr, tri, 3, rgb);
}
