/* "Did you mean": the closest candidate by edit distance (GLib has none). */
#include "crl-private.h"

#include <string.h>

/* Edit distance with insertions, deletions, substitutions and swaps of two
 * adjacent bytes, each costing 1 (Levenshtein extended to transpositions,
 * "optimal string alignment"), so "lgo" is one edit from "log" like "lg".
 * Three rows; gives up and returns limit + 1 once two consecutive rows
 * exceed `limit`, as no later row can get back under it. */
static size_t edit_distance(const char *a, size_t la, const char *b, size_t lb, size_t limit)
{
    if (la > lb ? la - lb > limit : lb - la > limit)
        return limit + 1;
    size_t *rows = g_new(size_t, 3 * (lb + 1));
    size_t *prev2 = rows, *prev = rows + lb + 1, *cur = rows + 2 * (lb + 1);
    for (size_t j = 0; j <= lb; j++)
        prev[j] = j;
    size_t prev_min = 0, d;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = i;
        size_t row_min = cur[0];
        for (size_t j = 1; j <= lb; j++) {
            size_t del = prev[j] + 1, ins = cur[j - 1] + 1;
            size_t sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
            size_t m = del < ins ? del : ins;
            m = m < sub ? m : sub;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && prev2[j - 2] + 1 < m)
                m = prev2[j - 2] + 1;
            cur[j] = m;
            if (m < row_min)
                row_min = m;
        }
        size_t *t = prev2;
        prev2 = prev;
        prev = cur;
        cur = t;
        if (row_min > limit && prev_min > limit) {
            g_free(rows);
            return limit + 1;
        }
        prev_min = row_min;
    }
    d = prev[lb];
    g_free(rows);
    return d;
}

const char *crl_did_you_mean(const char *word, const char *const *candidates)
{
    if (!word || !candidates)
        return NULL;
    size_t lw = strlen(word);
    size_t limit = lw / 3 > 1 ? lw / 3 : 1;
    const char *best = NULL;
    size_t best_d = limit + 1;
    for (const char *const *c = candidates; *c; c++) {
        size_t d = edit_distance(word, lw, *c, strlen(*c), limit);
        if (d < best_d) {   /* strict: ties keep the first */
            best_d = d;
            best = *c;
        }
    }
    return best;
}
