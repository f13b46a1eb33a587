/* TensorBoard event files (events.out.tfevents.TIME.HOST): TFRecord records of Event protos, encoded
 * by protobuf-c from crl's tfevent.proto.  Each record: u64 length, u32 masked crc32c of those 8 bytes,
 * the data, u32 masked crc32c of the data, all little-endian. */
#include "config.h"
#include "cli-private.h"

#include "tfevent.pb-c.h"

#include <errno.h>
#include <glib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), a table per byte: Debian ships no C library for
 * it (zlib's crc32 is the other polynomial), and a record is a few dozen bytes. */
static uint32_t crc32c_table[256];

static void crc32c_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc32c_table[i] = c;
    }
}

uint32_t crl__crc32c(const void *data, size_t len)
{
    static gsize done;
    if (g_once_init_enter(&done)) {
        crc32c_init();
        g_once_init_leave(&done, 1);
    }
    const uint8_t *p = data;
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < len; i++)
        c = crc32c_table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

/* TFRecord's mask: rotate right by 15 and add a constant (so a CRC of data holding CRCs stays strong). */
static uint32_t masked_crc(const void *data, size_t len)
{
    uint32_t c = crl__crc32c(data, len);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

static void put_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

struct crl__tb_writer {
    FILE *f;
    char *path;
};

/* One TFRecord around a packed Event. */
static int write_event(crl__tb_writer *w, const Crl__Tb__Event *ev, crl_error *err)
{
    size_t n = crl__tb__event__get_packed_size(ev);
    uint8_t *buf = g_malloc(n + 16);
    uint8_t *head = buf, *data = buf + 12;
    uint64_t len = n;
    for (int i = 0; i < 8; i++)
        head[i] = (uint8_t)(len >> (8 * i));
    put_le32(head + 8, masked_crc(head, 8));
    crl__tb__event__pack(ev, data);
    put_le32(data + n, masked_crc(data, n));
    bool ok = fwrite(buf, 1, n + 16, w->f) == n + 16 && fflush(w->f) == 0;
    g_free(buf);
    if (!ok)
        return crl_error_set(err, CRL_E_IO, "cannot write '%s': %s", w->path, g_strerror(errno));
    return CRL_OK;
}

crl__tb_writer *crl__tb_open(const char *dir, double wall_time, crl_error *err)
{
    char host[256] = "localhost";
    if (gethostname(host, sizeof host) != 0)
        g_strlcpy(host, "localhost", sizeof host);
    host[sizeof host - 1] = '\0';
    for (char *c = host; *c; c++)
        if (*c == '/')
            *c = '_';
    /* TensorFlow's name; a second writer in the same second (a resume) gets its own file */
    char *name = g_strdup_printf("events.out.tfevents.%lld.%s", (long long)wall_time, host);
    crl__tb_writer *w = g_new0(crl__tb_writer, 1);
    w->path = g_build_filename(dir, name, NULL);
    g_free(name);
    for (int k = 2; g_file_test(w->path, G_FILE_TEST_EXISTS) && k < 1000; k++) {
        g_free(w->path);
        name = g_strdup_printf("events.out.tfevents.%lld.%s.%d", (long long)wall_time, host, k);
        w->path = g_build_filename(dir, name, NULL);
        g_free(name);
    }
    if (!(w->f = fopen(w->path, "wbx"))) {
        crl_error_set(err, CRL_E_IO, "cannot create '%s': %s", w->path, g_strerror(errno));
        crl__tb_close(w, NULL);
        return NULL;
    }
    Crl__Tb__Event ev = CRL__TB__EVENT__INIT;
    ev.wall_time = wall_time;
    ev.what_case = CRL__TB__EVENT__WHAT_FILE_VERSION;
    ev.file_version = (char *)"brain.Event:2";
    if (write_event(w, &ev, err)) {
        crl__tb_close(w, NULL);
        return NULL;
    }
    return w;
}

const char *crl__tb_path(const crl__tb_writer *w) { return w ? w->path : NULL; }

int crl__tb_scalars(crl__tb_writer *w, double wall_time, int64_t step, const char *const *tags, const double *values,
                    size_t n, crl_error *err)
{
    Crl__Tb__Summary__Value *vals = g_new(Crl__Tb__Summary__Value, n ? n : 1);
    Crl__Tb__Summary__Value **ptrs = g_new(Crl__Tb__Summary__Value *, n ? n : 1);
    for (size_t i = 0; i < n; i++) {
        crl__tb__summary__value__init(&vals[i]);
        vals[i].tag = (char *)tags[i];
        vals[i].value_case = CRL__TB__SUMMARY__VALUE__VALUE_SIMPLE_VALUE;
        vals[i].simple_value = (float)values[i];
        ptrs[i] = &vals[i];
    }
    Crl__Tb__Summary sum = CRL__TB__SUMMARY__INIT;
    sum.n_value = n;
    sum.value = ptrs;
    Crl__Tb__Event ev = CRL__TB__EVENT__INIT;
    ev.wall_time = wall_time;
    ev.step = step;
    ev.what_case = CRL__TB__EVENT__WHAT_SUMMARY;
    ev.summary = &sum;
    int rc = write_event(w, &ev, err);
    g_free(ptrs);
    g_free(vals);
    return rc;
}

int crl__tb_close(crl__tb_writer *w, crl_error *err)
{
    if (!w)
        return CRL_OK;
    int rc = CRL_OK;
    if (w->f && fclose(w->f) != 0)
        rc = crl_error_set(err, CRL_E_IO, "cannot write '%s': %s", w->path, g_strerror(errno));
    g_free(w->path);
    g_free(w);
    return rc;
}
