/* MP4 videos of an env's frames (crl run's evaluation videos, crl eval --video, crl rollout --video)
 * through FFmpeg's libavformat/libavcodec, RGB converted to YUV 4:2:0 by libswscale.  The encoder is
 * H.264 through libx264 when this FFmpeg has it (Debian's does), else FFmpeg's own MPEG-4 part 2. */
#include "config.h"
#include "cli-private.h"

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/imgutils.h>
#include <libavutil/opt.h>
#include <libswscale/swscale.h>

#include <glib.h>
#include <string.h>

struct crl__video {
    char *path;
    AVFormatContext *fmt;
    AVCodecContext *enc;
    AVStream *st;
    struct SwsContext *sws;
    AVFrame *frame;
    AVPacket *pkt;
    int w, h;          /* the frames given */
    int64_t frames;
    const char *encoder;
    bool header_written;
};

static int av_fail(crl_error *err, const char *path, const char *what, int code)
{
    char msg[AV_ERROR_MAX_STRING_SIZE] = "";
    av_strerror(code, msg, sizeof msg);
    return crl_error_set(err, CRL_E_IO, "video '%s': %s: %s", path, what, msg);
}

/* Write what the encoder has ready (all of it when frame is NULL: the end). */
static int drain(crl__video *v, AVFrame *frame, crl_error *err)
{
    int rc = avcodec_send_frame(v->enc, frame);
    if (rc < 0)
        return av_fail(err, v->path, "encoding", rc);
    for (;;) {
        rc = avcodec_receive_packet(v->enc, v->pkt);
        if (rc == AVERROR(EAGAIN) || rc == AVERROR_EOF)
            return CRL_OK;
        if (rc < 0)
            return av_fail(err, v->path, "encoding", rc);
        av_packet_rescale_ts(v->pkt, v->enc->time_base, v->st->time_base);
        v->pkt->stream_index = v->st->index;
        rc = av_interleaved_write_frame(v->fmt, v->pkt);
        if (rc < 0)
            return av_fail(err, v->path, "writing", rc);
    }
}

const char *crl__video_encoder_name(void)
{
    return avcodec_find_encoder_by_name("libx264") ? "libx264" : "mpeg4";
}

crl__video *crl__video_open(const char *path, int width, int height, int fps, crl_error *err)
{
    if (width <= 0 || height <= 0 || width > 16384 || height > 16384 || fps <= 0) {
        crl_error_set(err, CRL_E_INVALID, "video '%s': frames of %dx%d at %d/s cannot be encoded", path, width, height,
                      fps);
        return NULL;
    }
    av_log_set_level(AV_LOG_ERROR);   /* x264's statistics are not ours to print */
    crl__video *v = g_new0(crl__video, 1);
    v->path = g_strdup(path);
    v->w = width;
    v->h = height;
    int rc = avformat_alloc_output_context2(&v->fmt, NULL, "mp4", path);
    if (rc < 0 || !v->fmt) {
        av_fail(err, path, "no MP4 muxer", rc);
        crl__video_close(v, NULL, NULL);
        return NULL;
    }
    const AVCodec *codec = avcodec_find_encoder_by_name("libx264");
    v->encoder = "libx264";
    if (!codec) {
        codec = avcodec_find_encoder(AV_CODEC_ID_MPEG4);
        v->encoder = "mpeg4";
    }
    if (!codec || !(v->st = avformat_new_stream(v->fmt, NULL)) || !(v->enc = avcodec_alloc_context3(codec)) ||
        !(v->frame = av_frame_alloc()) || !(v->pkt = av_packet_alloc())) {
        crl_error_set(err, CRL_E_UNSUPPORTED, "video '%s': this FFmpeg has neither the libx264 nor the mpeg4 encoder",
                      path);
        crl__video_close(v, NULL, NULL);
        return NULL;
    }
    /* 4:2:0 needs even sizes: an odd one gets one more row or column, scaled */
    v->enc->width = (width + 1) & ~1;
    v->enc->height = (height + 1) & ~1;
    v->enc->pix_fmt = AV_PIX_FMT_YUV420P;
    v->enc->time_base = (AVRational){ 1, fps };
    v->enc->framerate = (AVRational){ fps, 1 };
    v->enc->gop_size = 2 * fps;
    v->st->time_base = v->enc->time_base;
    if (!strcmp(v->encoder, "libx264"))
        av_opt_set(v->enc->priv_data, "preset", "veryfast", 0);
    else
        v->enc->bit_rate = 4000000;
    if (v->fmt->oformat->flags & AVFMT_GLOBALHEADER)
        v->enc->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
    if ((rc = avcodec_open2(v->enc, codec, NULL)) < 0 ||
        (rc = avcodec_parameters_from_context(v->st->codecpar, v->enc)) < 0) {
        av_fail(err, path, "opening the encoder", rc);
        crl__video_close(v, NULL, NULL);
        return NULL;
    }
    v->frame->format = AV_PIX_FMT_YUV420P;
    v->frame->width = v->enc->width;
    v->frame->height = v->enc->height;
    if ((rc = av_frame_get_buffer(v->frame, 0)) < 0) {
        av_fail(err, path, "frame buffer", rc);
        crl__video_close(v, NULL, NULL);
        return NULL;
    }
    v->sws = sws_getContext(width, height, AV_PIX_FMT_RGB24, v->enc->width, v->enc->height, AV_PIX_FMT_YUV420P,
                            SWS_BICUBIC, NULL, NULL, NULL);
    if (!v->sws) {
        crl_error_set(err, CRL_E_IO, "video '%s': no RGB to YUV 4:2:0 conversion", path);
        crl__video_close(v, NULL, NULL);
        return NULL;
    }
    if ((rc = avio_open(&v->fmt->pb, path, AVIO_FLAG_WRITE)) < 0) {
        av_fail(err, path, "cannot create it", rc);
        crl__video_close(v, NULL, NULL);
        return NULL;
    }
    if ((rc = avformat_write_header(v->fmt, NULL)) < 0) {
        av_fail(err, path, "writing the header", rc);
        crl__video_close(v, NULL, NULL);
        return NULL;
    }
    v->header_written = true;
    return v;
}

const char *crl__video_encoder(const crl__video *v) { return v ? v->encoder : NULL; }
int64_t crl__video_frames(const crl__video *v) { return v ? v->frames : 0; }

int crl__video_add(crl__video *v, const uint8_t *rgb, crl_error *err)
{
    int rc = av_frame_make_writable(v->frame);
    if (rc < 0)
        return av_fail(err, v->path, "frame buffer", rc);
    const uint8_t *src[1] = { rgb };
    int stride[1] = { 3 * v->w };
    sws_scale(v->sws, src, stride, 0, v->h, v->frame->data, v->frame->linesize);
    v->frame->pts = v->frames;
    rc = drain(v, v->frame, err);
    if (!rc)
        v->frames++;
    return rc;
}

int crl__video_close(crl__video *v, int64_t *frames, crl_error *err)
{
    if (!v)
        return CRL_OK;
    int rc = CRL_OK;
    if (v->header_written && err) {
        rc = drain(v, NULL, err);
        int r2 = av_write_trailer(v->fmt);
        if (!rc && r2 < 0)
            rc = av_fail(err, v->path, "writing the trailer", r2);
    }
    if (frames)
        *frames = v->frames;
    if (v->fmt && v->fmt->pb)
        avio_closep(&v->fmt->pb);
    avformat_free_context(v->fmt);
    avcodec_free_context(&v->enc);
    av_frame_free(&v->frame);
    av_packet_free(&v->pkt);
    sws_freeContext(v->sws);
    g_free(v->path);
    g_free(v);
    return rc;
}
