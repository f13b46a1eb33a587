/* Plugin ABI from ELF symbol versions: refuse a plugin that needs libcrl symbols of a newer ABI minor
 * (core/libcrl.map has one version node per minor) before dlopen fails on them with only "version `CRL_1.3'
 * not found".  The file is untrusted input: every offset, size and count is checked against the file, and
 * anything not understood is left to dlopen (CRL_OK). */
#include "host-private.h"
#include "file-private.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Only objects of this machine's class and byte order can be dlopen'd here. */
#if UINTPTR_MAX == UINT64_MAX
#define NATIVE_CLASS ELFCLASS64
typedef Elf64_Ehdr ehdr_t;
typedef Elf64_Phdr phdr_t;
typedef Elf64_Shdr shdr_t;
typedef Elf64_Verneed verneed_t;
typedef Elf64_Vernaux vernaux_t;
#else
#define NATIVE_CLASS ELFCLASS32
typedef Elf32_Ehdr ehdr_t;
typedef Elf32_Phdr phdr_t;
typedef Elf32_Shdr shdr_t;
typedef Elf32_Verneed verneed_t;
typedef Elf32_Vernaux vernaux_t;
#endif
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define NATIVE_DATA ELFDATA2MSB
#else
#define NATIVE_DATA ELFDATA2LSB
#endif

/* Version needs are a few hundred bytes; anything much bigger is not a plugin worth parsing. */
#define MAX_VERNEED_BYTES (1u << 20)
/* More sections than this (extended numbering goes past 0xff00) is no plugin. */
#define MAX_SECTIONS (1u << 16)
/* Longest name compared: "libcrl.so.<digits>" and "CRL_<major>.<minor>". */
#define NAME_MAX_LEN 64

typedef struct elf_file {
    int fd;
    uint64_t size;
} elf_file;

/* Read exactly n bytes at off, all inside the file. */
static bool read_at(const elf_file *f, uint64_t off, void *buf, size_t n)
{
    if (off > f->size || n > f->size - off)
        return false;
    size_t done = 0;
    while (done < n) {
        ssize_t r = pread(f->fd, (char *)buf + done, n - done, (off_t)(off + done));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false;
        done += (size_t)r;
    }
    return true;
}

/* The NUL-terminated string at `idx` of a string table [off, off + size) into buf; false when it is out of
 * bounds, unterminated or longer than buf holds (no name we look for is). */
static bool read_str(const elf_file *f, uint64_t off, uint64_t size, uint64_t idx, char *buf, size_t n)
{
    if (idx >= size)
        return false;
    uint64_t avail = size - idx;
    size_t want = avail < n ? (size_t)avail : n;
    /* A string table at the very end of a file may be shorter than buf: read what exists. */
    if (off + idx > f->size)
        return false;
    if (want > f->size - (off + idx))
        want = (size_t)(f->size - (off + idx));
    if (want == 0 || !read_at(f, off + idx, buf, want))
        return false;
    return memchr(buf, '\0', want) != NULL;
}

/* "libcrl.so" followed by "." and anything: the soname of any libcrl major. */
static bool is_libcrl(const char *file)
{
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    return strncmp(base, "libcrl.so.", strlen("libcrl.so.")) == 0;
}

static bool parse_uint(const char **s, unsigned *out)
{
    const char *p = *s;
    unsigned v = 0;
    int digits = 0;
    while (*p >= '0' && *p <= '9') {
        if (++digits > 6)
            return false;
        v = v * 10 + (unsigned)(*p++ - '0');
    }
    if (!digits)
        return false;
    *s = p;
    *out = v;
    return true;
}

/* "CRL_<major>.<minor>" exactly. */
static bool parse_crl_version(const char *name, unsigned *major, unsigned *minor)
{
    if (strncmp(name, "CRL_", 4) != 0)
        return false;
    const char *p = name + 4;
    return parse_uint(&p, major) && *p++ == '.' && parse_uint(&p, minor) && *p == '\0';
}

/* What the file's libcrl version needs say; found == false when it names none. */
typedef struct abi_need {
    bool found;
    bool other_major;        /* some need is of another major: major/minor are that one */
    unsigned major, minor;   /* else the newest minor needed */
} abi_need;

static void note_need(abi_need *need, unsigned major, unsigned minor)
{
    if (need->other_major)
        return;
    if (major != CRL_ABI_MAJOR) {
        need->found = need->other_major = true;
        need->major = major;
        need->minor = minor;
        return;
    }
    if (!need->found || minor > need->minor) {
        need->found = true;
        need->major = major;
        need->minor = minor;
    }
}

/* Walk the version needs in buf (the SHT_GNU_verneed section's bytes) against the string table [str_off,
 * str_off + str_size).  Like ld.so, follow the vn_next chain and ignore the count in sh_info. */
static void scan_verneed(const elf_file *f, const unsigned char *buf, size_t len, uint64_t str_off, uint64_t str_size,
                         abi_need *need)
{
    size_t pos = 0;
    /* Offsets only move forward (vn_next, vn_aux and vna_next are unsigned) and every read is bounds-checked;
     * the iteration caps end a chain of tiny steps. */
    for (size_t i = 0; i < len / sizeof(verneed_t); i++) {
        if (pos > len || len - pos < sizeof(verneed_t))
            return;
        verneed_t vn;
        memcpy(&vn, buf + pos, sizeof vn);
        char file[NAME_MAX_LEN];
        if (vn.vn_version == VER_NEED_CURRENT && read_str(f, str_off, str_size, vn.vn_file, file, sizeof file) &&
            is_libcrl(file)) {
            size_t apos = pos;
            uint64_t aoff = vn.vn_aux;
            for (size_t j = 0; j < len / sizeof(vernaux_t); j++) { /* vn_cnt ignored too, as ld.so does */
                if (aoff > len - apos)
                    break;
                apos += (size_t)aoff;
                if (len - apos < sizeof(vernaux_t))
                    break;
                vernaux_t vna;
                memcpy(&vna, buf + apos, sizeof vna);
                char name[NAME_MAX_LEN];
                unsigned major, minor;
                if (read_str(f, str_off, str_size, vna.vna_name, name, sizeof name) &&
                    parse_crl_version(name, &major, &minor))
                    note_need(need, major, minor);
                if (!vna.vna_next)
                    break;
                aoff = vna.vna_next;
            }
        }
        if (!vn.vn_next || vn.vn_next > len - pos)
            return;
        pos += vn.vn_next;
    }
}

/* Fill *need from the file's SHT_GNU_verneed sections; leave it empty for a file that is not something to
 * judge. */
static void read_needs(const elf_file *f, abi_need *need)
{
    ehdr_t eh;
    if (!read_at(f, 0, &eh, sizeof eh) || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
        eh.e_ident[EI_CLASS] != NATIVE_CLASS || eh.e_ident[EI_DATA] != NATIVE_DATA ||
        eh.e_ident[EI_VERSION] != EV_CURRENT)
        return;
    if (eh.e_shoff == 0 || eh.e_shentsize < sizeof(shdr_t))
        return;
    uint64_t shnum = eh.e_shnum;
    if (shnum == 0) {
        /* Many sections: the count is in section 0's sh_size. */
        shdr_t s0;
        if (!read_at(f, eh.e_shoff, &s0, sizeof s0))
            return;
        shnum = s0.sh_size;
    }
    /* Every section header must lie inside the file, and a plugin has a few dozen of them. */
    if (shnum > MAX_SECTIONS || eh.e_shoff > f->size || shnum > (f->size - eh.e_shoff) / eh.e_shentsize)
        return;

    for (uint64_t i = 0; i < shnum; i++) {
        shdr_t sh;
        if (!read_at(f, eh.e_shoff + i * eh.e_shentsize, &sh, sizeof sh))
            return;
        if (sh.sh_type != SHT_GNU_verneed)
            continue;
        shdr_t str;
        if (sh.sh_link == 0 || sh.sh_link >= shnum ||
            !read_at(f, eh.e_shoff + (uint64_t)sh.sh_link * eh.e_shentsize, &str, sizeof str) ||
            str.sh_type != SHT_STRTAB || str.sh_offset > f->size || str.sh_size > f->size - str.sh_offset)
            continue;
        if (sh.sh_size == 0 || sh.sh_size > MAX_VERNEED_BYTES || sh.sh_offset > f->size ||
            sh.sh_size > f->size - sh.sh_offset)
            continue;
        unsigned char *buf = malloc((size_t)sh.sh_size);
        if (!buf)
            return;
        if (read_at(f, sh.sh_offset, buf, (size_t)sh.sh_size))
            scan_verneed(f, buf, (size_t)sh.sh_size, str.sh_offset, str.sh_size, need);
        free(buf);
    }
}

int crl__elf_abi_check(const char *path, const char *what, crl_error *err)
{
    if (!path)
        return CRL_OK;
    struct stat st;
    int fd = crl__file_open(path, 0, 0, &st, NULL);
    if (fd < 0)
        return CRL_OK; /* dlopen will say why */
    abi_need need = { 0 };
    if (st.st_size > 0) {
        elf_file f = { fd, (uint64_t)st.st_size };
        read_needs(&f, &need);
    }
    close(fd);
    if (!what)
        what = path;
    if (need.other_major)
        return crl_error_set(err, CRL_E_ABI,
                             "%s was built for plugin ABI %u.%u (it uses libcrl symbols of version CRL_%u.%u), "
                             "but this libcrl %s speaks ABI %d.%d: rebuild the plugin against this crl's SDK",
                             what, need.major, need.minor, need.major, need.minor, crl_version(), CRL_ABI_MAJOR,
                             CRL_ABI_MINOR);
    if (need.found && need.minor > CRL_ABI_MINOR)
        return crl_error_set(err, CRL_E_ABI,
                             "%s needs plugin ABI %u.%u (it uses libcrl symbols of version CRL_%u.%u), newer than "
                             "the %d.%d of this libcrl %s: upgrade crl or rebuild the plugin against this crl's SDK",
                             what, need.major, need.minor, need.major, need.minor, CRL_ABI_MAJOR, CRL_ABI_MINOR,
                             crl_version());
    return CRL_OK;
}

int crl__elf_extent_check(const char *path, const char *what, crl_error *err)
{
    struct stat st;
    int fd = crl__file_open(path, 0, 0, &st, NULL);
    if (fd < 0)
        return CRL_OK; /* dlopen will say why */
    elf_file f = { fd, st.st_size > 0 ? (uint64_t)st.st_size : 0 };
    ehdr_t eh;
    int rc = CRL_OK;
    /* Not an ELF object of this machine: dlopen refuses it without mapping anything. */
    if (read_at(&f, 0, &eh, sizeof eh) && memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 &&
        eh.e_ident[EI_CLASS] == NATIVE_CLASS && eh.e_ident[EI_DATA] == NATIVE_DATA) {
        if (eh.e_phentsize < sizeof(phdr_t) || eh.e_phoff > f.size ||
            eh.e_phnum > (f.size - eh.e_phoff) / eh.e_phentsize)
            rc = crl_error_set(err, CRL_E_CORRUPT, "refusing to load %s: %s is truncated or corrupt (its program "
                               "headers end past its %llu bytes)", what, path, (unsigned long long)f.size);
        for (unsigned i = 0; !rc && i < eh.e_phnum; i++) {
            phdr_t ph;
            if (!read_at(&f, eh.e_phoff + (uint64_t)i * eh.e_phentsize, &ph, sizeof ph))
                rc = crl_error_set(err, CRL_E_IO, "refusing to load %s: cannot read %s", what, path);
            else if (ph.p_type == PT_LOAD && (ph.p_offset > f.size || ph.p_filesz > f.size - ph.p_offset))
                rc = crl_error_set(err, CRL_E_CORRUPT, "refusing to load %s: %s is truncated or corrupt (a "
                                   "loadable segment ends at byte %llu of its %llu); mapping it would crash crl",
                                   what, path, (unsigned long long)ph.p_offset + (unsigned long long)ph.p_filesz,
                                   (unsigned long long)f.size);
        }
    }
    close(fd);
    return rc;
}
