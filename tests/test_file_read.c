/* Check suite for crl/file.h: regular files only (FIFOs, devices, directories, sockets and, when asked, symbolic
 * links refused without blocking), sizes checked before reading and bounded while reading. */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <crl/crl.h>

#include "scratch-dir.h"

static void setup(void)
{
    scratch_open("crl-file-test-XXXXXX");
}

static void teardown(void)
{
    scratch_close();
}

static char *spit(const char *name, const char *text)
{
    char *path = tpath(name);
    ck_assert(g_file_set_contents(path, text, -1, NULL));
    return path;
}

/* err holds `code` and a message with every string given. */
#define expect_err(e, code, ...) expect_err_(e, code, __VA_ARGS__, (const char *)NULL)
static void expect_err_(const crl_error *e, int code, ...)
{
    ck_assert_msg(e->code == code, "code %s, wanted %s: %s", crl_status_name(e->code), crl_status_name(code),
                  e->message);
    va_list ap;
    va_start(ap, code);
    const char *want;
    while ((want = va_arg(ap, const char *)))
        ck_assert_msg(strstr(e->message, want), "'%s' lacks '%s'", e->message, want);
    va_end(ap);
}

START_TEST(read_regular)
{
    char *p = spit("a.ini", "[env]\nid = x\n");
    char *data = (char *)1;
    size_t len = 99;
    crl_error e;
    ck_assert_int_eq(crl_file_read(p, "config file", 0, 1024, &data, &len, &e), CRL_OK);
    ck_assert_uint_eq(len, 13);
    ck_assert_str_eq(data, "[env]\nid = x\n");
    crl_free(data);
    /* Exactly the limit is fine; one byte less is refused before reading, naming the size and the limit. */
    ck_assert_int_eq(crl_file_read(p, NULL, 0, 13, &data, &len, &e), CRL_OK);
    crl_free(data);
    ck_assert_int_eq(crl_file_read(p, "config file", 0, 12, &data, &len, &e), CRL_E_IO);
    expect_err(&e, CRL_E_IO, "cannot read config file '", p, "it is 13 bytes, more than the 12 bytes limit");
    ck_assert_ptr_null(data);
    ck_assert_uint_eq(len, 0);
    /* An empty file reads as "" (a valid pointer). */
    char *empty = spit("empty", "");
    ck_assert_int_eq(crl_file_read(empty, NULL, 0, 1, &data, &len, &e), CRL_OK);
    ck_assert_uint_eq(len, 0);
    ck_assert_str_eq(data, "");
    crl_free(data);
    /* NUL bytes are data: len counts them. */
    char *nul = tpath("nul");
    ck_assert(g_file_set_contents(nul, "a\0b", 3, NULL));
    ck_assert_int_eq(crl_file_read(nul, NULL, 0, 16, &data, &len, &e), CRL_OK);
    ck_assert_uint_eq(len, 3);
    ck_assert(data[0] == 'a' && data[1] == '\0' && data[2] == 'b' && data[3] == '\0');
    crl_free(data);
    g_free(nul);
    g_free(empty);
    g_free(p);
}
END_TEST

/* A file bigger than the limit is refused by its size, however big: nothing is allocated for it. */
START_TEST(read_sparse_huge)
{
    char *p = tpath("huge.ckpt");
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(ftruncate(fd, (off_t)1 << 40), 0);   /* 1 TiB of holes */
    close(fd);
    char *data;
    size_t len;
    crl_error e;
    ck_assert_int_eq(crl_file_read(p, "config file", 0, 16u << 20, &data, &len, &e), CRL_E_IO);
    expect_err(&e, CRL_E_IO, "it is 1099511627776 bytes, more than the 16 MiB limit");
    uint64_t size = 0;
    ck_assert_int_eq(crl_file_open(p, "checkpoint", 0, 1u << 10, &size, &e), -1);
    expect_err(&e, CRL_E_IO, "more than the 1 KiB limit");
    /* Without a limit it opens (the caller checks the size against what the file's header says). */
    fd = crl_file_open(p, "checkpoint", 0, 0, &size, &e);
    ck_assert_int_ge(fd, 0);
    ck_assert_uint_eq(size, (uint64_t)1 << 40);
    close(fd);
    g_free(p);
}
END_TEST

/* A file whose size says 0 (as /proc's do) is read to its end, never past the limit. */
START_TEST(read_proc)
{
    char *data;
    size_t len;
    crl_error e;
    ck_assert_int_eq(crl_file_read("/proc/self/status", NULL, 0, 1u << 20, &data, &len, &e), CRL_OK);
    ck_assert_uint_gt(len, 0);
    ck_assert_uint_eq(strlen(data), len);
    ck_assert_ptr_nonnull(strstr(data, "Name:"));
    crl_free(data);
    ck_assert_int_eq(crl_file_read("/proc/self/status", "status", 0, 16, &data, &len, &e), CRL_E_IO);
    expect_err(&e, CRL_E_IO, "cannot read status '/proc/self/status'", "holds more than the 16 bytes limit");
    ck_assert_ptr_null(data);
}
END_TEST

START_TEST(refuse_fifo)
{
    char *p = tpath("f.ini");
    ck_assert_int_eq(mkfifo(p, 0600), 0);
    alarm(20); /* a blocking open ends the test loudly even with CK_FORK=no */
    char *data;
    size_t len;
    crl_error e;
    ck_assert_int_eq(crl_file_read(p, "config file", 0, 1024, &data, &len, &e), CRL_E_IO);
    expect_err(&e, CRL_E_IO, "cannot read config file '", p, "': it is a FIFO, not a regular file");
    ck_assert_int_eq(crl_file_open(p, "checkpoint", CRL_FILE_RDWR, 0, NULL, &e), -1);
    expect_err(&e, CRL_E_IO, "cannot read checkpoint '", p, "it is a FIFO");
    /* With a writer waiting on it, still refused: crl never reads a FIFO. */
    pid_t w = fork();
    ck_assert_int_ge(w, 0);
    if (w == 0) {
        int fd = open(p, O_WRONLY);
        if (fd >= 0)
            (void)!write(fd, "[env]\n", 6);
        _exit(0);
    }
    ck_assert_int_eq(crl_file_read(p, "config file", 0, 1024, &data, &len, &e), CRL_E_IO);
    expect_err(&e, CRL_E_IO, "it is a FIFO");
    kill(w, SIGKILL);
    waitpid(w, NULL, 0);
    alarm(0);
    g_free(p);
}
END_TEST

START_TEST(refuse_devices_dirs_sockets)
{
    char *data;
    size_t len;
    crl_error e;
    ck_assert_int_eq(crl_file_read("/dev/zero", "config file", 0, 1u << 20, &data, &len, &e), CRL_E_IO);
    expect_err(&e, CRL_E_IO, "'/dev/zero': it is a character device, not a regular file");
    ck_assert_int_eq(crl_file_read("/dev/null", NULL, 0, 1, &data, &len, &e), CRL_E_IO);
    expect_err(&e, CRL_E_IO, "cannot read file '/dev/null': it is a character device");
    ck_assert_int_eq(crl_file_read(tmp_root, "config file", 0, 1024, &data, &len, &e), CRL_E_IO);
    expect_err(&e, CRL_E_IO, tmp_root, "it is a directory, not a regular file");
    ck_assert_int_eq(crl_file_open(tmp_root, NULL, CRL_FILE_RDWR, 0, NULL, &e), -1);
    expect_err(&e, CRL_E_IO, "it is a directory");

    char *sock = tpath("s.sock");
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    ck_assert_int_ge(s, 0);
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    ck_assert_uint_lt(strlen(sock), sizeof a.sun_path);
    strcpy(a.sun_path, sock);
    ck_assert_int_eq(bind(s, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(crl_file_read(sock, NULL, 0, 1024, &data, &len, &e), CRL_E_IO);
    expect_err(&e, CRL_E_IO, "it is a socket, not a regular file");
    close(s);
    g_free(sock);
}
END_TEST

START_TEST(symlinks)
{
    char *target = spit("t.bin", "xyz");
    char *link = tpath("l.bin");
    ck_assert_int_eq(symlink(target, link), 0);
    char *data;
    size_t len;
    crl_error e;
    /* A path a user names may be a link... */
    ck_assert_int_eq(crl_file_read(link, NULL, 0, 16, &data, &len, &e), CRL_OK);
    ck_assert_str_eq(data, "xyz");
    crl_free(data);
    /* ...a file crl made in its own directory may not. */
    ck_assert_int_eq(crl_file_read(link, "registry cache", CRL_FILE_NOFOLLOW, 16, &data, &len, &e), CRL_E_IO);
    expect_err(&e, CRL_E_IO, "it is a symbolic link, which is refused here");
    char *dangling = tpath("d.bin");
    ck_assert_int_eq(symlink("/nonexistent/crl-file-test", dangling), 0);
    ck_assert_int_eq(crl_file_open(dangling, NULL, CRL_FILE_NOFOLLOW, 0, NULL, &e), -1);
    expect_err(&e, CRL_E_IO, "symbolic link");
    ck_assert_int_eq(crl_file_open(dangling, NULL, 0, 0, NULL, &e), -1);
    expect_err(&e, CRL_E_NOT_FOUND, "No such file");
    /* A link to a FIFO is a FIFO. */
    char *fifo = tpath("f");
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    char *tofifo = tpath("tofifo");
    ck_assert_int_eq(symlink(fifo, tofifo), 0);
    alarm(20);
    ck_assert_int_eq(crl_file_read(tofifo, NULL, 0, 16, &data, &len, &e), CRL_E_IO);
    alarm(0);
    expect_err(&e, CRL_E_IO, "it is a FIFO");
    g_free(tofifo);
    g_free(fifo);
    g_free(dangling);
    g_free(link);
    g_free(target);
}
END_TEST

START_TEST(open_modes_and_errors)
{
    char *p = spit("m.bin", "12345678");
    crl_error e;
    uint64_t size = 0;
    int fd = crl_file_open(p, NULL, CRL_FILE_RDWR, 8, &size, &e);
    ck_assert_int_ge(fd, 0);
    ck_assert_uint_eq(size, 8);
    /* Read-write, blocking again, close-on-exec. */
    ck_assert_int_eq(pwrite(fd, "A", 1, 0), 1);
    int fl = fcntl(fd, F_GETFL);
    ck_assert_int_eq(fl & O_ACCMODE, O_RDWR);
    ck_assert_int_eq(fl & O_NONBLOCK, 0);
    ck_assert(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    close(fd);
    fd = crl_file_open(p, NULL, 0, 0, NULL, &e);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(fcntl(fd, F_GETFL) & O_ACCMODE, O_RDONLY);
    ck_assert_int_lt(write(fd, "B", 1), 0);
    close(fd);

    char *missing = tpath("missing.ini");
    ck_assert_int_eq(crl_file_open(missing, "config file", 0, 0, NULL, &e), -1);
    expect_err(&e, CRL_E_NOT_FOUND, "cannot read config file '", missing, "': No such file or directory");
    char *through = g_build_filename(p, "x", NULL);
    ck_assert_int_eq(crl_file_open(through, NULL, 0, 0, NULL, &e), -1);
    expect_err(&e, CRL_E_IO, g_strerror(ENOTDIR));
    if (geteuid() != 0) {
        ck_assert_int_eq(chmod(p, 0), 0);
        ck_assert_int_eq(crl_file_open(p, NULL, 0, 0, NULL, &e), -1);
        expect_err(&e, CRL_E_IO, g_strerror(EACCES));
    }

    char *data = (char *)1;
    size_t len = 1;
    ck_assert_int_eq(crl_file_open(NULL, NULL, 0, 0, NULL, &e), -1);
    expect_err(&e, CRL_E_INVALID, "path is NULL");
    ck_assert_int_eq(crl_file_open("", NULL, 0, 0, NULL, &e), -1);
    expect_err(&e, CRL_E_INVALID, "path is empty");
    ck_assert_int_eq(crl_file_open(p, NULL, 0x100, 0, NULL, &e), -1);
    expect_err(&e, CRL_E_INVALID, "unknown flags");
    ck_assert_int_eq(crl_file_read(p, NULL, 0, 0, &data, &len, &e), CRL_E_INVALID);
    expect_err(&e, CRL_E_INVALID, "max_bytes is 0");
    ck_assert_ptr_null(data);
    ck_assert_int_eq(crl_file_read(p, NULL, 0, 8, NULL, &len, &e), CRL_E_INVALID);
    /* err may be NULL: the codes still say what happened. */
    ck_assert_int_eq(crl_file_open(missing, NULL, 0, 0, NULL, NULL), -1);
    ck_assert_int_eq(crl_file_read(tmp_root, NULL, 0, 8, &data, &len, NULL), CRL_E_IO);
    ck_assert_int_eq(crl_file_read(missing, NULL, 0, 8, &data, &len, NULL), CRL_E_NOT_FOUND);
    g_free(through);
    g_free(missing);
    g_free(p);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("file_read");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, read_regular);
    tcase_add_test(tc, read_sparse_huge);
    tcase_add_test(tc, read_proc);
    tcase_add_test(tc, refuse_fifo);
    tcase_add_test(tc, refuse_devices_dirs_sockets);
    tcase_add_test(tc, symlinks);
    tcase_add_test(tc, open_modes_and_errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
