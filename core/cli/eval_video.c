/* The first episode of env 0 in each evaluation as an MP4 (crl run's [train] record_video, crl eval
 * --video): a crl_eval_hook that renders env 0 before each action and once more at the episode's end. */
#include "config.h"
#include "cli-private.h"

#include <crl/trainer.h>

#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>

/* 30 frames a second: gym's classic-control render_fps lies between 15 and 50; no backend declares its own. */
#define VIDEO_FPS 30

struct crl__eval_video {
    char *dir, *fixed;      /* dir: one file per evaluation, DIR/eval-FRAMES.mp4; else the one file fixed */
    char *cur;              /* the file being written */
    crl__video *v;
    crl_tensor *frame;
    bool recorded;          /* this evaluation's episode is in its file */
    char *last;             /* the last file finished */
    int64_t last_frames;
};

crl__eval_video *crl__eval_video_new(const char *dir, const char *path)
{
    crl__eval_video *r = g_new0(crl__eval_video, 1);
    r->dir = g_strdup(dir);
    r->fixed = g_strdup(path);
    return r;
}

const char *crl__eval_video_last(const crl__eval_video *r, int64_t *frames)
{
    if (frames)
        *frames = r ? r->last_frames : 0;
    return r ? r->last : NULL;
}

static int shoot(crl__eval_video *r, crl_env *env, crl_error *err)
{
    int rc = crl_env_render(env, 0, r->frame, err);
    return rc ? rc : crl__video_add(r->v, crl_tensor_data(r->frame), err);
}

static int finish(crl__eval_video *r, crl_error *err)
{
    g_free(r->last);
    r->last = g_strdup(r->cur);
    int rc = crl__video_close(r->v, &r->last_frames, err);
    r->v = NULL;
    r->recorded = true;
    return rc;
}

static int on_event(void *user, crl_eval_event what, crl_env *env, const crl_td *td, int64_t frames, crl_error *err)
{
    crl__eval_video *r = user;
    switch (what) {
    case CRL_EVAL_BEGIN: {
        int32_t h = crl_env_render_height(env), w = crl_env_render_width(env);
        if (h <= 0 || w <= 0)
            return crl_error_set(err, CRL_E_UNSUPPORTED, "video: env %s/%s cannot render (its backend declares no "
                                 "frame size); drop the video", crl_env_backend_name(env), crl_env_id(env));
        int64_t shape[3] = { h, w, 3 };
        crl_tensor_unref(r->frame);
        if (!(r->frame = crl_tensor_new(CRL_U8, 3, shape, err)))
            return CRL_E_NOMEM;
        char *name = g_strdup_printf("eval-%09lld.mp4", (long long)frames);
        g_free(r->cur);
        r->cur = r->dir ? g_build_filename(r->dir, name, NULL) : g_strdup(r->fixed);
        g_free(name);
        r->recorded = false;
        r->v = crl__video_open(r->cur, w, h, VIDEO_FPS, err);
        return r->v ? CRL_OK : CRL_E_IO;
    }
    case CRL_EVAL_STEP: {
        if (!r->v || r->recorded)
            return CRL_OK;
        /* the state after the step that ended env 0's episode (the env resets it in the next step) */
        const crl_tensor *d = crl_td_get(td, "next.done");
        bool ended = d && crl_tensor_flat_get(d, 0) != 0.0;
        int rc = shoot(r, env, err);
        return rc ? rc : ended ? finish(r, err) : CRL_OK;
    }
    case CRL_EVAL_ROLLOUT_END: {
        if (!r->v || r->recorded)
            return CRL_OK;
        /* cut by eval_max_steps: the last state too */
        int rc = shoot(r, env, err);
        return rc ? rc : finish(r, err);
    }
    case CRL_EVAL_END:
        if (r->v) {  /* an evaluation that failed: its file is dropped */
            crl__video_close(r->v, NULL, NULL);
            r->v = NULL;
            g_unlink(r->cur);
        }
        return CRL_OK;
    }
    return CRL_OK;
}

crl_eval_hook crl__eval_video_hook(crl__eval_video *r)
{
    crl_eval_hook h = { sizeof h, on_event, r };
    return h;
}

void crl__eval_video_free(crl__eval_video *r)
{
    if (!r)
        return;
    crl__video_close(r->v, NULL, NULL);
    crl_tensor_unref(r->frame);
    g_free(r->dir);
    g_free(r->fixed);
    g_free(r->cur);
    g_free(r->last);
    g_free(r);
}
