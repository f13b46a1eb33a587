/* The strict INI parser: our line grammar, driven through inih's ini_parse_stream.
 *
 * Why this design.  inih as shipped by distributions is compiled with
 * settings we cannot change at build time and that contradict our grammar:
 * Debian's has INI_MAX_LINE=200 (longer lines are silently truncated and the
 * rest parsed as a new line), INI_ALLOW_MULTILINE=1 (an indented line
 * continues the previous value), ':' as a second separator, no line numbers
 * in the handler, and INI_STOP_ON_FIRST_ERROR=0.  Other builds differ again
 * (inline comments, BOM, handler signature).  So the reader below owns the
 * grammar: it splits the in-memory buffer into lines, counts them, rejects
 * NUL bytes and over-long lines, strips a UTF-8 BOM and leading whitespace,
 * and classifies each line (blank/comment, [section], key = value) with the
 * strict errors of config.h.  It records each parsed line in a side table
 * indexed by line number and hands inih a short synthetic line in its
 * place: "[N]" for a header on line N, "k=N" for a key on line N, an empty
 * line otherwise.  These never exceed inih's buffer (`num`), never start
 * with whitespace (so continuation cannot trigger), hold no ':' or ';', and
 * keep inih's line count equal to ours.  inih then drives the handler with
 * "current section, key line", and the handler resolves both through the
 * side table, so values of any length up to CRL_CONFIG_MAX_LINE come back
 * whole whatever INI_MAX_LINE is.  Errors stop the parse: the reader
 * returns NULL (end of input) once one is recorded.
 *
 * Grammar decisions: comments are lines whose first non-blank character is
 * ';' or '#'; after a value, " ;" (a ';' preceded by a blank) starts an
 * inline comment ('#' does not, so values may hold '#'); there is no
 * quoting; values and names are trimmed; an empty value is allowed.  A
 * section header may be followed by a ';' or '#' comment.  A section header
 * repeated in one file is allowed and merges with the first (a key set
 * under both is still a duplicate).  Lines end with "\n" or "\r\n"; the
 * line length limit counts bytes without the line ending. */
#include "config-private.h"

#include <ini.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { LINE_BLANK = 0, LINE_SECTION, LINE_KEY } line_kind;

typedef struct parsed_line {
    line_kind kind;
    char *name;    /* section name or key */
    char *value;   /* LINE_KEY */
} parsed_line;

typedef struct parse_state {
    const char *name;
    const char *data;
    size_t len, pos;
    int lineno;
    int layer;
    GArray *lines;       /* parsed_line, index = line number (0 unused) */
    crl_config *into;
    bool seen_section;
    bool failed;
    crl_error *err;
} parse_state;

static void clear_line(gpointer p)
{
    parsed_line *l = p;
    g_free(l->name);
    g_free(l->value);
}

static char *origin_of(const parse_state *st, int line)
{
    return g_strdup_printf("%s:%d", st->name, line);
}

/* A short excerpt of a line for messages. */
static char *excerpt(const char *s)
{
    size_t n = strlen(s);
    if (n <= 60)
        return g_strdup(s);
    return g_strdup_printf("%.57s...", s);
}

CRL_PRINTF(2, 3)
static void fail(parse_state *st, const char *fmt, ...)
{
    if (st->failed)
        return;
    st->failed = true;
    va_list ap;
    va_start(ap, fmt);
    char *msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    crl_error_set(st->err, CRL_E_CONFIG, "%s:%d: %s", st->name, st->lineno, msg);
    g_free(msg);
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
}

/* Classify one line (NUL-terminated, BOM and line ending removed) into pl.
 * Returns false after recording an error. */
static bool classify(parse_state *st, char *s, parsed_line *pl)
{
    while (is_blank(*s))
        s++;
    if (*s == '\0' || *s == ';' || *s == '#') {
        pl->kind = LINE_BLANK;
        return true;
    }
    if (*s == '[') {
        char *close = strchr(s + 1, ']');
        if (!close) {
            char *ex = excerpt(g_strchomp(s));
            fail(st, "unterminated section header '%s'; close it with ']'", ex);
            g_free(ex);
            return false;
        }
        *close = '\0';
        char *name = g_strstrip(s + 1);
        char *rest = close + 1;
        while (is_blank(*rest))
            rest++;
        if (*name == '\0') {
            fail(st, "empty section name '[]'; write a name such as [log]");
            return false;
        }
        if (*rest != '\0' && *rest != ';' && *rest != '#') {
            char *ex = excerpt(g_strchomp(rest));
            fail(st, "unexpected text '%s' after section header [%s]; start a comment with ';'", ex, name);
            g_free(ex);
            return false;
        }
        pl->kind = LINE_SECTION;
        pl->name = g_strdup(name);
        return true;
    }
    char *eq = strchr(s, '=');
    if (!eq) {
        char *ex = excerpt(g_strchomp(s));
        if (strchr(s, ':'))
            fail(st, "expected 'key = value', got '%s'; only '=' separates a key from its value", ex);
        else
            fail(st, "expected 'key = value', got '%s' (no '='); comment it out with ';' or add '= value'",
                 ex);
        g_free(ex);
        return false;
    }
    *eq = '\0';
    char *key = g_strstrip(s);
    if (*key == '\0') {
        fail(st, "empty key before '='; write 'key = value'");
        return false;
    }
    char *value = eq + 1;
    /* Inline comment: ';' preceded by a blank. */
    for (char *p = value; *p; p++) {
        if (*p == ';' && (p == value || is_blank(p[-1]))) {
            *p = '\0';
            break;
        }
    }
    value = g_strstrip(value);
    if (!st->seen_section) {
        fail(st, "key '%s' comes before any [section] header; add a header such as [log] above it", key);
        return false;
    }
    pl->kind = LINE_KEY;
    pl->name = g_strdup(key);
    pl->value = g_strdup(value);
    return true;
}

/* ini_reader over the buffer: one synthetic line per real line. */
static char *reader(char *str, int num, void *stream)
{
    parse_state *st = stream;
    if (st->failed || st->pos >= st->len)
        return NULL;
    const char *start = st->data + st->pos;
    size_t avail = st->len - st->pos;
    const char *nl = memchr(start, '\n', avail);
    size_t raw = nl ? (size_t)(nl - start) : avail;
    st->pos += raw + (nl ? 1 : 0);
    st->lineno++;

    size_t n = raw;
    if (n > 0 && start[n - 1] == '\r')
        n--;
    if (st->lineno == 1 && n >= 3 && memcmp(start, "\xEF\xBB\xBF", 3) == 0) {
        start += 3;
        n -= 3;
    }
    const char *nul = memchr(start, '\0', n);
    if (nul) {
        fail(st, "NUL byte at column %zu; the file must be text (is it binary or UTF-16?)",
             (size_t)(nul - start) + 1);
        return NULL;
    }
    if (n > CRL_CONFIG_MAX_LINE) {
        fail(st, "line is %zu bytes long, more than the limit of %d; shorten the value", n,
             CRL_CONFIG_MAX_LINE);
        return NULL;
    }

    parsed_line pl = { LINE_BLANK, NULL, NULL };
    char *copy = g_strndup(start, n);
    bool ok = classify(st, copy, &pl);
    g_free(copy);
    g_array_set_size(st->lines, (guint)st->lineno + 1);
    g_array_index(st->lines, parsed_line, st->lineno) = pl;
    if (!ok)
        return NULL;

    char synth[32];
    switch (pl.kind) {
    case LINE_SECTION: {
        st->seen_section = true;
        char *origin = origin_of(st, st->lineno);
        crl__config_ensure_section(st->into, pl.name, origin);
        g_free(origin);
        snprintf(synth, sizeof synth, "[%d]\n", st->lineno);
        break;
    }
    case LINE_KEY:
        snprintf(synth, sizeof synth, "k=%d\n", st->lineno);
        break;
    default:
        snprintf(synth, sizeof synth, "\n");
        break;
    }
    if (num < 0 || strlen(synth) >= (size_t)num) {
        fail(st, "internal error: inih's line buffer (%d bytes) is too small", num);
        return NULL;
    }
    memcpy(str, synth, strlen(synth) + 1);
    return str;
}

static const parsed_line *line_at(const parse_state *st, const char *index, line_kind kind)
{
    char *end = NULL;
    long i = strtol(index ? index : "", &end, 10);
    if (!index || end == index || *end || i <= 0 || i >= (long)st->lines->len)
        return NULL;
    const parsed_line *pl = &g_array_index(st->lines, parsed_line, i);
    return pl->kind == kind ? pl : NULL;
}

static int handle_key(parse_state *st, const char *section, const char *value)
{
    if (st->failed)
        return 0;
    const parsed_line *sec = line_at(st, section, LINE_SECTION);
    const parsed_line *key = line_at(st, value, LINE_KEY);
    if (!sec || !key) {
        fail(st, "internal error: inih returned an unexpected line");
        return 0;
    }
    crl__section *s = crl__config_section(st->into, sec->name);
    crl__entry *prev = s ? crl__section_entry(s, key->name) : NULL;
    if (prev) {
        fail(st, "duplicate key '%s' in [%s] (first set at %s); keep only one", key->name, sec->name,
             prev->origin);
        return 0;
    }
    char *origin = origin_of(st, st->lineno);
    crl__section_add(s, key->name, key->value, origin, st->layer);
    g_free(origin);
    return 1;
}

#if INI_HANDLER_LINENO
static int handler(void *user, const char *section, const char *name, const char *value, int lineno)
{
    (void)name;
    (void)lineno;
    return handle_key(user, section, value);
}
#else
static int handler(void *user, const char *section, const char *name, const char *value)
{
    (void)name;
    return handle_key(user, section, value);
}
#endif

int crl__config_parse(crl_config *into, const char *name, const char *data, size_t len, int layer,
                      crl_error *err)
{
    parse_state st = {
        .name = name, .data = data, .len = data ? len : 0, .layer = layer, .into = into, .err = err,
    };
    st.lines = g_array_new(FALSE, TRUE, sizeof(parsed_line));
    g_array_set_clear_func(st.lines, clear_line);
    int rc = ini_parse_stream(reader, &st, handler, &st);
    if (!st.failed && rc != 0) {
        st.lineno = rc > 0 ? rc : st.lineno;
        fail(&st, "could not parse this line (inih error %d)", rc);
    }
    g_array_free(st.lines, TRUE);
    return st.failed ? CRL_E_CONFIG : CRL_OK;
}
