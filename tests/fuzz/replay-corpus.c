/* Runs a fuzz target's LLVMFuzzerTestOneInput over every file of its corpus (make check; no libFuzzer needed). */
#include <glib.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int cmp_str(const void *a, const void *b)
{
    return g_strcmp0(*(char *const *)a, *(char *const *)b);
}

/* Every regular file directly in dir, in name order; -1 if dir is unreadable. */
static long replay_dir(const char *dir)
{
    GError *gerr = NULL;
    GDir *d = g_dir_open(dir, 0, &gerr);
    if (!d) {
        fprintf(stderr, "replay-corpus: %s\n", gerr->message);
        g_error_free(gerr);
        return -1;
    }
    GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
    const char *n;
    while ((n = g_dir_read_name(d)))
        g_ptr_array_add(names, g_build_filename(dir, n, NULL));
    g_dir_close(d);
    qsort(names->pdata, names->len, sizeof(char *), cmp_str);
    long count = 0;
    for (guint i = 0; i < names->len; i++) {
        const char *path = names->pdata[i];
        if (!g_file_test(path, G_FILE_TEST_IS_REGULAR))
            continue;
        gchar *buf;
        gsize len;
        if (!g_file_get_contents(path, &buf, &len, &gerr)) {
            fprintf(stderr, "replay-corpus: %s\n", gerr->message);
            g_error_free(gerr);
            g_ptr_array_free(names, TRUE);
            return -1;
        }
        LLVMFuzzerTestOneInput((const uint8_t *)buf, len);
        g_free(buf);
        count++;
    }
    g_ptr_array_free(names, TRUE);
    return count;
}

int main(int argc, char **argv)
{
    long total = 0;
    if (argc > 1) {
        for (int i = 1; i < argc; i++) {
            long c = replay_dir(argv[i]);
            if (c < 0)
                return 1;
            total += c;
        }
    } else {
        total = replay_dir(FUZZ_CORPUS_DIR);
        if (total < 0)
            return 1;
    }
    printf("replay-corpus: %ld inputs handled\n", total);
    /* An empty corpus would make this test pass without testing anything. */
    return total > 0 ? 0 : 1;
}
