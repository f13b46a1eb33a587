/* Counting heap calls in a test program: the program's own malloc family, forwarding to glibc's (glibc
 * allows replacing it), counts the calls made while `alloc_counting` is set.
 *
 * A call made while `alloc_blas_active` > 0 (a BLAS call is in progress, on any thread) is tallied in
 * `alloc_blas_calls` instead of `alloc_calls`: what a BLAS kernel allocates inside a matrix product depends
 * on the BLAS build and the CPU, not on crl.
 *
 * ASan and TSan own malloc and free (interposing them would hand their pointers to glibc), and valgrind
 * swaps in its own through LD_PRELOAD: there ALLOC_COUNT is 0 (sanitizers, not glibc) or alloc_count_works()
 * is false (valgrind), and the allocation tests skip.  Include once per program, after <stdlib.h>. */
#ifndef CRL_TEST_ALLOC_COUNT_H
#define CRL_TEST_ALLOC_COUNT_H

#include <malloc.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define ALLOC_COUNT_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define ALLOC_COUNT_SANITIZED 1
#endif

#if defined(__GLIBC__) && !defined(ALLOC_COUNT_SANITIZED)
#define ALLOC_COUNT 1
#else
#define ALLOC_COUNT 0
#endif

static atomic_int alloc_counting;
static atomic_long alloc_calls;       /* malloc, calloc, realloc, memalign and free(non-NULL) */
static atomic_long alloc_blas_calls;  /* the same, made while a BLAS call was in progress */
static atomic_int alloc_blas_active;

static inline void alloc_count_one(void)
{
    if (!atomic_load(&alloc_counting))
        return;
    atomic_fetch_add(atomic_load(&alloc_blas_active) > 0 ? &alloc_blas_calls : &alloc_calls, 1);
}

/* Start counting from zero. */
static inline void alloc_count_start(void)
{
    atomic_store(&alloc_calls, 0);
    atomic_store(&alloc_blas_calls, 0);
    atomic_store(&alloc_counting, 1);
}

/* Stop counting; returns the calls counted against the program (BLAS calls' own excluded). */
static inline long alloc_count_stop(void)
{
    atomic_store(&alloc_counting, 0);
    return atomic_load(&alloc_calls);
}

#if ALLOC_COUNT
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t m);
extern void *__libc_realloc(void *p, size_t n);
extern void *__libc_memalign(size_t align, size_t n);
extern void __libc_free(void *p);

void *malloc(size_t n)
{
    alloc_count_one();
    return __libc_malloc(n);
}

void *calloc(size_t n, size_t m)
{
    alloc_count_one();
    return __libc_calloc(n, m);
}

void *realloc(void *p, size_t n)
{
    alloc_count_one();
    return __libc_realloc(p, n);
}

void *memalign(size_t align, size_t n)
{
    alloc_count_one();
    return __libc_memalign(align, n);
}

void *aligned_alloc(size_t align, size_t n)
{
    alloc_count_one();
    return __libc_memalign(align, n);
}

int posix_memalign(void **out, size_t align, size_t n)
{
    alloc_count_one();
    void *p = __libc_memalign(align, n);
    if (!p)
        return 12;   /* ENOMEM */
    *out = p;
    return 0;
}

void free(void *p)
{
    if (p)
        alloc_count_one();
    __libc_free(p);
}
#endif

/* Whether the counter sees heap calls made through libc (one malloc, one free).  False where the sanitizers
 * or valgrind own malloc; any other miss is a broken interposition and fails the calling test. */
static inline bool alloc_count_works(void)
{
    if (!ALLOC_COUNT)
        return false;
    alloc_count_start();
    void *volatile p = malloc(32);
    free(p);
    long n = alloc_count_stop();
    if (n == 2)
        return true;
    const char *pre = getenv("LD_PRELOAD");
    ck_assert_msg(pre && strstr(pre, "vgpreload"), "the malloc interposition counted %ld calls for 2", n);
    return false;
}

#endif
