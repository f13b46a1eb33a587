/* PNG writing for the `crl` command (rollout frames) through cairo. */
#include "config.h"
#include "cli-private.h"

#include <glib.h>
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

#endif
