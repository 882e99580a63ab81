/*
 * FFmpeg, the decoder common/audio.c tries when libsndfile cannot read a
 * file (audio-private.h): m4a/mp4 (AAC), webm/mkv (Opus, Vorbis), mpeg,
 * and what libsndfile lacks in the formats it knows.
 *
 * libavformat reads the bytes through an AVIOContext of our own over the
 * descriptor (pread from the file's start, so its position does not
 * matter) or over the memory of an upload: no temporary file, no URL, and
 * an io_open() that refuses, so no demuxer can open another file or
 * address named inside the data (HLS, concat, mov references). Only the
 * demuxers of AUDIO_FF_DEMUXERS may read it: the probe takes what fits
 * best, and anything else is refused before it reads a header.
 *
 * The best audio stream is decoded (on the calling thread: sottod's
 * compute thread runs one job at a time) and libswresample turns each
 * frame into interleaved float at the stream's own rate and channels;
 * audio.c mixes to mono and resamples to 16 kHz as it does libsndfile's
 * frames, so NaN is made 0 before any filter sees it. One decoded frame
 * is held at a time: memory does not grow with the file.
 *
 * A packet that does not decode is skipped, as the ffmpeg program does,
 * and the first is the file's problem; an error reading ends the file
 * after what was decoded, as libsndfile's read errors do.
 */
#include <sys/stat.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/avutil.h>
#include <libavutil/mem.h>
#include <libswresample/swresample.h>

#include "audio-private.h"

#define AUDIO_FF_IO_BUFFER	32768
#define AUDIO_FF_CHANNELS_MAX	64	/* libswresample's SWR_CH_MAX */
/*
 * The largest single allocation FFmpeg may make (av_max_alloc, for the
 * whole process): a demuxer sizes its tables from numbers in the file,
 * and a few bytes of upload must not ask for gigabytes. The index of
 * 10 hours of 44.1 kHz AAC (1.6 million packets, 24 bytes each) is
 * about 40 MB.
 */
#define AUDIO_FF_ALLOC_MAX	((size_t)128 << 20)
/* libavformat's names (a demuxer may have several, "mov,mp4,m4a,..."). */
#define AUDIO_FF_DEMUXERS	"mov,matroska,ogg,mp3,flac,wav,aac,mpeg," \
	"mpegts"

/*
 * One file being decoded. Owns the AVIOContext and its buffer, the
 * demuxer, the decoder, the converter, the packet and the frame; borrows
 * src's descriptor or memory.
 */
struct audio_ff {
	struct audio_src src;
	int64_t		 pos;		/* next byte of src to read */
	int64_t		 size;		/* of src from its start */
	AVIOContext	*io;
	AVFormatContext	*fmt;
	AVCodecContext	*dec;
	SwrContext	*swr;		/* made for the first frame's format */
	int		 sample_fmt;	/* of every frame: the first one's */
	AVPacket	*pkt;
	AVFrame		*frame;
	int		 stream;
	int		 channels, rate;
	int		 frame_pos;	/* samples of frame already given */
	int		 draining;	/* the demuxer is done; decoder flushed */
	int		 failed;	/* an error to give at the next read */
	char		 why[128];
	long		 n_bad;		/* packets that did not decode */
	double		 bad_at;	/* seconds decoded at the first */
	char		 bad_why[96];
	int64_t		 decoded;	/* samples given */
};

static pthread_once_t audio_ff_once = PTHREAD_ONCE_INIT;

/* Process-wide settings, once: see AUDIO_FF_ALLOC_MAX; messages are ours. */
static void
audio_ff_init(void)
{
	av_max_alloc(AUDIO_FF_ALLOC_MAX);
	av_log_set_level(AV_LOG_QUIET);
}

static void
audio_ff_strerror(int e, char *buf, size_t len)
{
	char why[AV_ERROR_MAX_STRING_SIZE];

	if (av_strerror(e, why, sizeof(why)) != 0)
		snprintf(why, sizeof(why), "error %d", e);
	snprintf(buf, len, "FFmpeg: %s", why);
}

static int
audio_ff_read_packet(void *opaque, uint8_t *buf, int size)
{
	struct audio_ff *ff = opaque;
	int64_t left = ff->size - ff->pos;
	ssize_t n;

	if (left <= 0 || size <= 0)
		return AVERROR_EOF;
	if (size > left)
		size = (int)left;
	if (ff->src.mem != NULL) {
		memcpy(buf, ff->src.mem + ff->pos, (size_t)size);
		n = size;
	} else {
		do
			n = pread(ff->src.fd, buf, (size_t)size,
			    ff->src.start + ff->pos);
		while (n == -1 && errno == EINTR);
		if (n == -1)
			return AVERROR(errno);
		if (n == 0)
			return AVERROR_EOF;
	}
	ff->pos += n;
	return (int)n;
}

static int64_t
audio_ff_seek(void *opaque, int64_t offset, int whence)
{
	struct audio_ff *ff = opaque;
	int64_t at;

	if (whence & AVSEEK_SIZE)
		return ff->size;
	switch (whence & ~AVSEEK_FORCE) {
	case SEEK_SET:
		at = 0;
		break;
	case SEEK_CUR:
		at = ff->pos;
		break;
	case SEEK_END:
		at = ff->size;
		break;
	default:
		return AVERROR(EINVAL);
	}
	if (offset < -at || offset > ff->size - at)
		return AVERROR(EINVAL);
	ff->pos = at + offset;
	return ff->pos;
}

/* Nothing named inside a file is opened. */
static int
audio_ff_io_open(AVFormatContext *s, AVIOContext **pb, const char *url,
    int flags, AVDictionary **options)
{
	return AVERROR(EPERM);
}

/* The AVIOContext over src: 0, or a negative AVERROR. */
static int
audio_ff_io_new(struct audio_ff *ff)
{
	struct stat st;
	unsigned char *buf;

	if (ff->src.mem != NULL)
		ff->size = (int64_t)ff->src.len;
	else if (fstat(ff->src.fd, &st) == -1)
		return AVERROR(errno);
	else
		ff->size = (int64_t)st.st_size - ff->src.start;
	if ((buf = av_malloc(AUDIO_FF_IO_BUFFER)) == NULL)
		return AVERROR(ENOMEM);
	ff->io = avio_alloc_context(buf, AUDIO_FF_IO_BUFFER, 0, ff,
	    audio_ff_read_packet, NULL, audio_ff_seek);
	if (ff->io == NULL) {
		av_free(buf);
		return AVERROR(ENOMEM);
	}
	return 0;
}

/* The demuxer on ff->io, restricted to AUDIO_FF_DEMUXERS. */
static int
audio_ff_demuxer(struct audio_ff *ff)
{
	AVFormatContext *fmt;
	int e;

	if ((fmt = avformat_alloc_context()) == NULL)
		return AVERROR(ENOMEM);
	fmt->pb = ff->io;
	fmt->flags |= AVFMT_FLAG_CUSTOM_IO;
	fmt->io_open = audio_ff_io_open;
	if ((fmt->format_whitelist = av_strdup(AUDIO_FF_DEMUXERS)) == NULL) {
		avformat_free_context(fmt);
		return AVERROR(ENOMEM);
	}
	/* frees fmt when it fails */
	if ((e = avformat_open_input(&fmt, NULL, NULL, NULL)) < 0)
		return e;
	ff->fmt = fmt;
	return avformat_find_stream_info(fmt, NULL);
}

/* The decoder of the best audio stream; the other streams are skipped. */
static int
audio_ff_decoder(struct audio_ff *ff)
{
	const AVCodec *codec = NULL;
	unsigned i;
	int e;

	e = av_find_best_stream(ff->fmt, AVMEDIA_TYPE_AUDIO, -1, -1, &codec,
	    0);
	if (e < 0)
		return e;
	ff->stream = e;
	for (i = 0; i < ff->fmt->nb_streams; i++)
		if ((int)i != ff->stream)
			ff->fmt->streams[i]->discard = AVDISCARD_ALL;
	if ((ff->dec = avcodec_alloc_context3(codec)) == NULL)
		return AVERROR(ENOMEM);
	e = avcodec_parameters_to_context(ff->dec,
	    ff->fmt->streams[ff->stream]->codecpar);
	if (e < 0)
		return e;
	ff->dec->thread_count = 1;	/* no threads of FFmpeg's own */
	if ((e = avcodec_open2(ff->dec, codec, NULL)) < 0)
		return e;
	ff->channels = ff->dec->ch_layout.nb_channels;
	ff->rate = ff->dec->sample_rate;
	if (ff->channels <= 0 || ff->channels > AUDIO_FF_CHANNELS_MAX ||
	    ff->rate <= 0)
		return AVERROR_INVALIDDATA;
	return 0;
}

/*
 * libswresample from the first frame's sample format (some decoders
 * know it only then) to interleaved float, with the same channels (each
 * kept as it is: audio.c mixes them) and rate.
 */
static int
audio_ff_converter(struct audio_ff *ff, int sample_fmt)
{
	AVChannelLayout layout;
	int e;

	av_channel_layout_default(&layout, ff->channels);
	e = swr_alloc_set_opts2(&ff->swr, &layout, AV_SAMPLE_FMT_FLT,
	    ff->rate, &layout, sample_fmt, ff->rate, 0, NULL);
	av_channel_layout_uninit(&layout);
	if (e < 0)
		return e;
	if ((e = swr_init(ff->swr)) < 0)
		return e;
	ff->sample_fmt = sample_fmt;
	return 0;
}

static int
audio_ff_buffers(struct audio_ff *ff)
{
	ff->pkt = av_packet_alloc();
	ff->frame = av_frame_alloc();
	return ff->pkt != NULL && ff->frame != NULL ? 0 : AVERROR(ENOMEM);
}

/* The header's length in samples, unless it is a guess from the bit rate. */
static int64_t
audio_ff_frames(const struct audio_ff *ff)
{
	const AVStream *st = ff->fmt->streams[ff->stream];

	if (ff->fmt->duration_estimation_method == AVFMT_DURATION_FROM_BITRATE)
		return AUDIO_FRAMES_UNKNOWN;
	if (st->duration != AV_NOPTS_VALUE && st->duration > 0)
		return av_rescale_q(st->duration, st->time_base,
		    (AVRational){ 1, ff->rate });
	if (ff->fmt->duration != AV_NOPTS_VALUE && ff->fmt->duration > 0)
		return av_rescale(ff->fmt->duration, ff->rate, AV_TIME_BASE);
	return AUDIO_FRAMES_UNKNOWN;
}

static void
audio_ff_close(void *p)
{
	struct audio_ff *ff = p;

	if (ff == NULL)
		return;
	av_frame_free(&ff->frame);
	av_packet_free(&ff->pkt);
	swr_free(&ff->swr);
	avcodec_free_context(&ff->dec);
	avformat_close_input(&ff->fmt);
	if (ff->io != NULL)
		av_freep(&ff->io->buffer);
	avio_context_free(&ff->io);
	free(ff);
}

int
audio_ff_open(const struct audio_src *src, void **ret,
    struct audio_info *info, char *err, size_t errlen)
{
	struct audio_ff *ff;
	int e;

	*ret = NULL;
	pthread_once(&audio_ff_once, audio_ff_init);
	if ((ff = calloc(1, sizeof(*ff))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	ff->src = *src;
	if ((e = audio_ff_io_new(ff)) < 0 || (e = audio_ff_demuxer(ff)) < 0 ||
	    (e = audio_ff_decoder(ff)) < 0 || (e = audio_ff_buffers(ff)) < 0) {
		if (e == AVERROR_STREAM_NOT_FOUND)
			snprintf(err, errlen, "FFmpeg: no audio stream");
		else
			audio_ff_strerror(e, err, errlen);
		audio_ff_close(ff);
		return -1;
	}
	info->channels = ff->channels;
	info->rate = ff->rate;
	info->frames = audio_ff_frames(ff);
	*ret = ff;
	return 0;
}

/* A packet that did not decode: skipped, the first one remembered. */
static void
audio_ff_bad_packet(struct audio_ff *ff, int e)
{
	if (ff->n_bad++ == 0) {
		ff->bad_at = (double)ff->decoded / ff->rate;
		audio_ff_strerror(e, ff->bad_why, sizeof(ff->bad_why));
	}
}

/* Give the decoder the next packet of our stream, or the end. */
static int
audio_ff_send(struct audio_ff *ff)
{
	int e;

	for (;;) {
		e = av_read_frame(ff->fmt, ff->pkt);
		if (e == AVERROR_EOF) {
			/* flush: what it holds comes out, then AVERROR_EOF */
			ff->draining = 1;
			avcodec_send_packet(ff->dec, NULL);
			return 0;
		}
		if (e < 0)
			return e;
		if (ff->pkt->stream_index != ff->stream) {
			av_packet_unref(ff->pkt);
			continue;
		}
		e = avcodec_send_packet(ff->dec, ff->pkt);
		av_packet_unref(ff->pkt);
		if (e < 0)
			audio_ff_bad_packet(ff, e);
		return 0;
	}
}

/*
 * The next decoded frame into ff->frame: 1, 0 at the end, or a negative
 * AVERROR reading the file. A frame whose rate or channels changed ends
 * the file: audio.c converts one layout from start to end.
 */
static int
audio_ff_next_frame(struct audio_ff *ff)
{
	int e;

	for (;;) {
		e = avcodec_receive_frame(ff->dec, ff->frame);
		if (e == 0 && (ff->frame->sample_rate != ff->rate ||
		    ff->frame->ch_layout.nb_channels != ff->channels ||
		    (ff->swr != NULL &&
		    ff->frame->format != ff->sample_fmt))) {
			av_frame_unref(ff->frame);
			return AVERROR_INPUT_CHANGED;
		}
		if (e == 0) {
			ff->frame_pos = 0;
			return 1;
		}
		if (e == AVERROR_EOF || ff->draining)
			return 0;
		if (e != AVERROR(EAGAIN))
			audio_ff_bad_packet(ff, e);
		if ((e = audio_ff_send(ff)) < 0)
			return e;
	}
}

/* Up to max samples of ff->frame, from frame_pos, as floats into out. */
static int
audio_ff_convert(struct audio_ff *ff, float *out, int max)
{
	const uint8_t *in[AUDIO_FF_CHANNELS_MAX];
	const AVFrame *fr = ff->frame;
	int bps = av_get_bytes_per_sample(fr->format);
	int n = fr->nb_samples - ff->frame_pos, c, got;
	uint8_t *o = (uint8_t *)out;

	if (ff->swr == NULL && (got = audio_ff_converter(ff, fr->format)) < 0)
		return got;
	n = n < max ? n : max;
	/* the samples from frame_pos on, planar or interleaved */
	if (av_sample_fmt_is_planar(fr->format))
		for (c = 0; c < ff->channels; c++)
			in[c] = fr->extended_data[c] + (size_t)ff->frame_pos *
			    bps;
	else
		in[0] = fr->extended_data[0] + (size_t)ff->frame_pos * bps *
		    ff->channels;
	/* no resampling: as many out as in, nothing held back */
	got = swr_convert(ff->swr, &o, n, in, n);
	if (got < 0)
		return got;
	ff->frame_pos += n;
	return got;
}

static long
audio_ff_read(void *p, float *buf, size_t max, char *err, size_t errlen)
{
	struct audio_ff *ff = p;
	size_t given = 0;
	int e;

	if (ff->failed) {
		snprintf(err, errlen, "%s", ff->why);
		return -1;
	}
	max = max > INT32_MAX ? INT32_MAX : max;
	while (given < max) {
		if (ff->frame->nb_samples > ff->frame_pos) {
			e = audio_ff_convert(ff, buf + given * ff->channels,
			    (int)(max - given));
		} else {
			av_frame_unref(ff->frame);
			e = audio_ff_next_frame(ff);
			if (e == 0)
				break;
			if (e > 0)
				continue;
		}
		if (e < 0) {
			/* the frames before the error are given first */
			ff->failed = 1;
			if (e == AVERROR_INPUT_CHANGED)
				snprintf(ff->why, sizeof(ff->why), "the audio "
				    "changes its rate or channels");
			else
				audio_ff_strerror(e, ff->why, sizeof(ff->why));
			return given > 0 ? (long)given :
			    audio_ff_read(p, buf, max, err, errlen);
		}
		given += (size_t)e;
		ff->decoded += e;
	}
	return (long)given;
}

static const char *
audio_ff_problem(void *p, double seconds, char *buf, size_t len)
{
	struct audio_ff *ff = p;

	if (ff->n_bad == 0)
		return NULL;
	snprintf(buf, len, "%ld damaged packet%s, the first at %.2f s (%s)",
	    ff->n_bad, ff->n_bad == 1 ? "" : "s", ff->bad_at, ff->bad_why);
	return buf;
}

const struct audio_dec_ops audio_ff_ops = {
	audio_ff_read, audio_ff_problem, audio_ff_close,
};
