/* Fuzz target for the checkpoint reader: open a buffer, read every section and every TensorDict ("P/td") in it. */
#include "fuzz-crc.h"

#include <crl/checkpoint.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check_error(const crl_error *err, const char *prefix)
{
    CHECK(err->code == CRL_E_CORRUPT || err->code == CRL_E_NOMEM);
    if (err->code == CRL_E_CORRUPT)
        CHECK(strncmp(err->message, prefix, strlen(prefix)) == 0);
}

static void one_input(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_with_fixed_crcs(data, size, one_input);
    return 0;
}

static void one_input(const uint8_t *data, size_t size)
{
    /* Take the kind from the input itself so the fuzzer gets past the kind
     * check; a wrong kind is tried too. */
    char kind[256] = "crl.fuzz";
    uint32_t kind_version = 0;
    if (size >= 48) {
        uint32_t kl = (uint32_t)data[20] | (uint32_t)data[21] << 8 | (uint32_t)data[22] << 16 |
                      (uint32_t)data[23] << 24;
        if (kl >= 1 && kl <= 255 && 48 + (size_t)kl <= size) {
            memcpy(kind, data + 48, kl);
            kind[kl] = '\0';
        }
        kind_version = (uint32_t)data[12] | (uint32_t)data[13] << 8 | (uint32_t)data[14] << 16 |
                       (uint32_t)data[15] << 24;
    }
    crl_error err;
    crl_ckpt_reader *r = crl_ckpt_reader_open_buffer("fuzz", data, size, kind, UINT32_MAX, &err);
    if (!r) {
        check_error(&err, "fuzz: offset ");
        return;
    }
    /* The same bytes must be refused under another kind or an older reader. */
    crl_ckpt_reader *other = crl_ckpt_reader_open_buffer("fuzz", data, size, "crl.other-kind", UINT32_MAX, &err);
    CHECK(!other && err.code == CRL_E_CORRUPT);
    if (kind_version > 0) {
        other = crl_ckpt_reader_open_buffer("fuzz", data, size, kind, kind_version - 1, &err);
        CHECK(!other && err.code == CRL_E_CORRUPT);
    }
    CHECK(crl_ckpt_kind_version(r) == kind_version);
    size_t n = crl_ckpt_section_count(r);
    CHECK(crl_ckpt_section_name(r, n) == NULL);
    for (size_t i = 0; i < n; i++) {
        const char *name = crl_ckpt_section_name(r, i);
        CHECK(name && *name && crl_ckpt_has(r, name));
        size_t len = 0;
        const uint8_t *p = crl_ckpt_section(r, name, &len, &err);
        CHECK(p != NULL);
        /* Touch every byte: a bad offset shows up under ASan or valgrind. */
        uint32_t crc = crl_crc32(0, p, len);
        void *copy = malloc(len ? len : 1);
        CHECK(copy);
        CHECK(crl_ckpt_read(r, name, copy, len, &err) == CRL_OK);
        CHECK(crl_crc32(0, copy, len) == crc);
        if (len > 0)
            CHECK(crl_ckpt_read(r, name, copy, len - 1, &err) == CRL_E_CORRUPT);
        free(copy);
        size_t nl = strlen(name);
        if (nl >= 3 && strcmp(name + nl - 3, "/td") == 0) {
            char *prefix = strndup(name, nl - 3);
            CHECK(prefix);
            crl_td *td = crl_ckpt_read_td(r, prefix, &err);
            if (td) {
                char *repr = crl_td_repr(td);
                CHECK(repr);
                crl_free(repr);
                crl_td_unref(td);
            } else {
                check_error(&err, "fuzz: ");
            }
            free(prefix);
        }
    }
    CHECK(crl_ckpt_section(r, "no such section", NULL, &err) == NULL && err.code == CRL_E_CORRUPT);
    crl_ckpt_reader_free(r);
}
