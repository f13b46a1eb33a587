/* `crl bench mpi`: crl run's mpi backend on this machine -- frames/s of PPO on CartPole-v1 with 1, 2 and 3
 * collector ranks (mpirun -np 2, 3, 4, oversubscribed), and what the learner spent per batch received
 * and per weight sync sent, the figures of the README's model for K hosts. */
#include "config.h"
#include "cli-private.h"
#include "remove-tree.h"

#include <glib.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifndef CRL_HAVE_MPI
int crl__bench_mpi(double seconds)
{
    (void)seconds;
    fprintf(stderr, "crl bench mpi: this crl was built without Open MPI (install libopenmpi-dev and openmpi-bin, "
            "configure --with-mpi)\n");
    return CRL_EXIT_USAGE;
}
#else

/* Per collector rank: 8 envs x 64 steps a batch; one PPO epoch over it, so the learner's work grows with
 * the frames as the collectors' does. */
static const char bench_ini[] =
    "[env]\nbackend = classic\nid = CartPole-v1\nnum_envs = 8\nseed = 0\n"
    "[collector]\nframes_per_batch = %d\ntotal_frames = %d\n"
    "[loss]\ntype = ppo\nnum_cells = 64, 64\n"
    "[optim]\ntype = adam\nlr = 0.00025\n"
    "[train]\nseed = 0\nepochs = 1\nminibatch_size = 256\neval_episodes = 0\n"
    "[distributed]\nbackend = mpi\n";

typedef struct figures {
    double fps, seconds, recv_ms, recv_bytes, sync_ms, sync_bytes;
    long long frames, batches, syncs;
} figures;

static int run_one(const char *self, const char *dir, int ranks, int batches, figures *f)
{
    int fpb = 512 * ranks;
    char *ini = g_strdup_printf(bench_ini, fpb, fpb * batches);
    char *path = g_strdup_printf("%s/k%d.ini", dir, ranks), *rd = g_strdup_printf("train.run_dir=%s/k%d", dir, ranks);
    char np[16];
    snprintf(np, sizeof np, "%d", ranks + 1);
    int rc = CRL_EXIT_RUNTIME;
    char *out = NULL, *errout = NULL;
    GError *ge = NULL;
    int status = 0;
    if (!g_file_set_contents(path, ini, -1, &ge)) {
        fprintf(stderr, "crl bench mpi: %s\n", ge->message);
        goto out;
    }
    const char *argv[16];
    int a = 0;
    argv[a++] = CRL_MPIRUN;
    argv[a++] = "--oversubscribe";
    if (geteuid() == 0)
        argv[a++] = "--allow-run-as-root";
    argv[a++] = "-np";
    argv[a++] = np;
    argv[a++] = self;
    argv[a++] = "run";
    argv[a++] = path;
    argv[a++] = rd;
    argv[a++] = "--quiet";
    argv[a] = NULL;
    if (!g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, &errout, &status, &ge)) {
        fprintf(stderr, "crl bench mpi: cannot start %s: %s\n", CRL_MPIRUN, ge->message);
        goto out;
    }
    const char *fl = strstr(out, "  frames:"), *ml = strstr(out, "  mpi:");
    if (!g_spawn_check_wait_status(status, NULL) || !fl || !ml ||
        sscanf(fl, "  frames: %lld in %lf s (%lf frames/s)", &f->frames, &f->seconds, &f->fps) != 3 ||
        sscanf(strchr(ml, ';'), "; %lld batches, %lf ms and %lf bytes each to receive; %lld weight syncs, %lf ms and "
               "%lf bytes each to send", &f->batches, &f->recv_ms, &f->recv_bytes, &f->syncs, &f->sync_ms,
               &f->sync_bytes) != 6) {
        fprintf(stderr, "crl bench mpi: mpirun -np %s crl run failed:\n%s%s", np, out, errout);
        goto out;
    }
    rc = CRL_EXIT_OK;
out:
    g_clear_error(&ge);
    g_free(out);
    g_free(errout);
    g_free(ini);
    g_free(path);
    g_free(rd);
    return rc;
}

int crl__bench_mpi(double seconds)
{
    (void)seconds;
    char *self = g_file_read_link("/proc/self/exe", NULL);
    GError *ge = NULL;
    char *dir = g_dir_make_tmp("crl-bench-mpi-XXXXXX", &ge);
    if (!self || !dir) {
        fprintf(stderr, "crl bench mpi: %s\n", ge ? ge->message : "cannot find this crl (/proc/self/exe)");
        g_clear_error(&ge);
        g_free(self);
        return CRL_EXIT_RUNTIME;
    }
    printf("crl run under mpirun: PPO on CartPole-v1, 8 envs x 64 steps per collector rank per batch, 60 batches,\n"
           "one epoch per batch; rank 0 learns, the others collect (sync), all on this machine (%ld cores)\n\n",
           sysconf(_SC_NPROCESSORS_ONLN));
    printf("%-16s %12s %12s %14s %12s %14s %12s\n", "collector ranks", "frames/s", "seconds", "recv ms/batch",
           "KB/batch", "send ms/sync", "KB/sync");
    int rc = CRL_EXIT_OK;
    for (int k = 1; k <= 3 && !rc; k++) {
        figures f = { 0 };
        if ((rc = run_one(self, dir, k, 60, &f)))
            break;
        printf("%-16d %12.0f %12.2f %14.3f %12.1f %14.3f %12.1f\n", k, f.fps, f.seconds, f.recv_ms,
               f.recv_bytes / 1024, f.sync_ms, f.sync_bytes / 1024);
        fflush(stdout);
    }
    crl__remove_tree(dir);
    g_free(dir);
    g_free(self);
    printf("\nrecv: the learner's MPI_Recv and decoding of one collector's batch; send: one weight sync to one rank\n"
           "(the learner sends each rank its own copy).  The README's \"Distributed runs\" turns these into a model for K hosts.\n");
    return rc;
}
#endif
