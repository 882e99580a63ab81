/*
 * libsotto: Whisper speech recognition in the ANE layout, on the CPU.
 *
 * A struct sotto_model is loaded once, is read-only afterwards and may be
 * shared by any number of struct sotto_state (one per stream or file).
 * Several threads may compute with one model at once, each with its own
 * states (a state, stream or result: one thread at a time). Each call
 * runs an OpenMP team of the model's threads (sotto_model_params), or
 * fewer (sotto_thread_share): threads that compute at once should share
 * the cores out (sottod's compute threads do).
 *
 * Errors: functions return 0 or a negative SOTTO_E* code; functions that
 * take `char *err` write a message a user can act on into it (a buffer of
 * SOTTO_ERR_MAX bytes, or NULL).
 */
#ifndef SOTTO_H
#define SOTTO_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SOTTO_API	__attribute__((visibility("default")))

#define SOTTO_ERR_MAX		256
#define SOTTO_SAMPLE_RATE	16000

enum sotto_status {
	SOTTO_OK = 0,
	SOTTO_EINVAL = -1,	/* bad argument or option */
	SOTTO_ENOMEM = -2,	/* out of memory */
	SOTTO_EIO = -3,		/* cannot open or read a file */
	SOTTO_EFORMAT = -4,	/* malformed model or input */
	SOTTO_ECOMPUTE = -5,	/* the compute backend failed */
	SOTTO_ECANCELED = -6,	/* a callback asked to stop */
};

enum sotto_precision {
	SOTTO_PRECISION_AUTO = 0,	/* bf16 where the CPU has it, else fp32 */
	SOTTO_PRECISION_FP32,
	SOTTO_PRECISION_BF16,
	/*
	 * bf16, with the encoder's and decoder's products from int8
	 * weights (a scale per row): faster windows and steps, at a small
	 * cost in accuracy (docs/architecture.md, "Numerics"); needs
	 * AVX512-VNNI. Never chosen by AUTO.
	 */
	SOTTO_PRECISION_INT8,
};

enum sotto_task {
	SOTTO_TASK_TRANSCRIBE = 0,
	SOTTO_TASK_TRANSLATE,
};

struct sotto_model;
struct sotto_state;

struct sotto_model_params {
	enum sotto_precision precision;	/* default AUTO */
	int threads;			/* compute threads; 0 = all cores */
};

SOTTO_API void	sotto_model_params_init(struct sotto_model_params *);

/*
 * Load a GGUF model. On success *ret owns the model; free it with
 * sotto_model_free() after every state made from it.
 */
SOTTO_API int	sotto_model_load(const char *path, const struct sotto_model_params *,
	    struct sotto_model **ret, char *err);
SOTTO_API void	sotto_model_free(struct sotto_model *);

/*
 * At most n of a model's threads for the calls the calling thread makes
 * from now on (0: all of them, as at start). For a program that computes
 * in several threads at once: sottod's compute threads share the cores
 * out this way while more than one is busy.
 */
SOTTO_API void	sotto_thread_share(int n);

/*
 * Check a model file without loading its weights: path is a GGUF file
 * whose Whisper metadata sotto reads (hyper-parameters, tokenizer, special
 * tokens, mel filters), and language (a code, or NULL/"auto") and task are
 * possible with it. Returns 0; SOTTO_EIO or SOTTO_EFORMAT for the file;
 * SOTTO_EINVAL for the language or task. Reads the whole file.
 */
SOTTO_API int	sotto_model_check(const char *path, const char *language,
	    enum sotto_task task, char *err);

/* What the model is and how it computes. Strings live as long as it. */
struct sotto_model_info {
	const char *name;		/* e.g. "tiny.en", from the file */
	int n_mels, n_audio_state, n_audio_layer, n_audio_head;
	int n_text_state, n_text_layer, n_text_head, n_vocab;
	int multilingual;
	enum sotto_precision precision;	/* what AUTO resolved to */
	int threads;
	const char *compute;		/* the products' path, e.g. "int8
					   on AVX2, fp32 encoder q/k/v" */
};
SOTTO_API void	sotto_model_info(const struct sotto_model *,
	    struct sotto_model_info *ret);

/* Language code ("en") of a language index, or NULL when out of range. */
SOTTO_API const char *sotto_language_code(const struct sotto_model *, int index);
SOTTO_API int	sotto_language_count(const struct sotto_model *);

/* Per-stream buffers (mel, encoder output, KV caches); NULL on OOM. */
SOTTO_API struct sotto_state *sotto_state_new(const struct sotto_model *);
SOTTO_API void	sotto_state_free(struct sotto_state *);

struct sotto_segment;

/*
 * Called after each decoded window with the segments it added and the
 * seek position (samples done out of total). Return non-zero to stop.
 */
typedef int (*sotto_progress_fn)(void *user, size_t done_samples,
    size_t total_samples, const struct sotto_segment *new_segments,
    int n_new);

/* Decoding options, as openai/whisper transcribe(). */
struct sotto_transcribe_params {
	const char *language;		/* "en", or NULL/"auto" to detect */
	enum sotto_task task;
	int beam_size;			/* 1 = greedy (default 5 in the CLI) */
	int best_of;			/* samples at T > 0 (default 5) */
	float patience;			/* default 1.0 */
	const float *temperatures;	/* fallback ladder; NULL = default */
	int n_temperatures;
	float compression_ratio_threshold; /* 2.4 */
	float logprob_threshold;	/* -1.0 */
	float no_speech_threshold;	/* 0.6 */
	int condition_on_previous_text;	/* default 1 */
	const char *initial_prompt;	/* NULL or text for <|startofprev|> */
	int without_timestamps;		/* default 0 */
	float silence_threshold_db;	/* skip windows quieter than this
					   RMS (dBFS) unseen; -60; <= -200
					   decodes every window */
	uint64_t seed;			/* for sampling at T > 0 */
	/*
	 * Word timestamps, as openai/whisper's word_timestamps=True: each
	 * window's text is aligned to its audio by the cross-attention of
	 * the model's alignment heads and dynamic time warping; segments
	 * get words, their times become their words' (as openai's), and
	 * the seek follows the last word.
	 */
	int word_timestamps;		/* default 0 */
	/* merged into the next / previous word; NULL = openai's defaults */
	const char *prepend_punctuations;	/* "\"'“¿([{-" */
	const char *append_punctuations;	/* "\"'.。,，!！?？:：”)]}、" */
	sotto_progress_fn progress;
	void *progress_user;
};

SOTTO_API void	sotto_transcribe_params_init(struct sotto_transcribe_params *);

/* A word and its time (word timestamps). */
struct sotto_word {
	double start, end;		/* seconds from the start of the audio */
	char *word;			/* UTF-8 with its leading space and
					   merged punctuation; owned by the
					   segment */
	float probability;		/* mean of its tokens' probabilities */
	int speaker;			/* sotto_diarize(): 1 is "S1", ...;
					   0 without speaker labels */
	int token_index;		/* its first token's index in the
					   segment's tokens */
};

struct sotto_segment {
	double start, end;		/* seconds from the start of the audio */
	char *text;			/* UTF-8, owned by the result */
	int32_t *tokens;		/* text and timestamp tokens */
	int n_tokens;
	float avg_logprob;
	float no_speech_prob;
	float temperature;
	float compression_ratio;
	struct sotto_word *words;	/* owned; NULL without word timestamps */
	int n_words;
	int speaker;			/* as its words' (sotto_diarize()) */
};

/* A transcript; owns its segments. Free with sotto_result_free(). */
struct sotto_result {
	struct sotto_segment *segments;
	int n_segments;
	char *language;			/* detected or given, e.g. "en" */
	float language_prob;
};

/*
 * Transcribe 16 kHz mono audio (float, [-1, 1]: sotto_pcm_mix() makes
 * outside samples so) of any length, seeking through it in 30 s windows
 * as openai/whisper transcribe() does.
 */
SOTTO_API int	sotto_transcribe(struct sotto_state *, const float *pcm, size_t n,
	    const struct sotto_transcribe_params *, struct sotto_result **ret,
	    char *err);

/*
 * Audio that a caller cannot (or need not) hold whole, read in pieces:
 * read() puts the next samples (16 kHz mono, as for sotto_transcribe())
 * into buf, at most max > 0 of them, and returns how many, 0 at the end,
 * or a negative SOTTO_E* with a message in err. rewind() starts again at
 * the first sample; the samples must be the same the second time.
 */
struct sotto_reader {
	long	(*read)(void *user, float *buf, size_t max, char *err);
	int	(*rewind)(void *user, char *err);
	void	*user;
};

/*
 * sotto_transcribe() of audio from a reader, in memory for one 30 s
 * window whatever its length. The audio is read twice: openai/whisper
 * normalises every window's log-mel by the maximum over the whole file,
 * so a first pass finds that maximum (and the length, in *ret_n if not
 * NULL), a second decodes. The result is the one sotto_transcribe()
 * gives for the same samples.
 */
SOTTO_API int	sotto_transcribe_reader(struct sotto_state *,
	    const struct sotto_reader *, const struct sotto_transcribe_params *,
	    struct sotto_result **ret, size_t *ret_n, char *err);
SOTTO_API void	sotto_result_free(struct sotto_result *);

/*
 * Voice activity detection with Silero VAD (v5/v6, 16 kHz), the network
 * faster-whisper and whisper.cpp use, from its own GGUF (scripts/
 * fetch-model silero-vad). A struct sotto_vad is read-only once loaded
 * and may be shared; a struct sotto_vad_state is one audio stream's
 * recurrent state. Plain C on the calling thread (no oneDNN): ~0.1 ms per
 * 32 ms chunk.
 */
#define SOTTO_VAD_CHUNK		512	/* samples per probability */

struct sotto_vad;
struct sotto_vad_state;

SOTTO_API int	sotto_vad_load(const char *path, struct sotto_vad **ret,
	    char *err);
SOTTO_API void	sotto_vad_free(struct sotto_vad *);
/* NULL on OOM; starts reset. Free before the sotto_vad. */
SOTTO_API struct sotto_vad_state *sotto_vad_state_new(const struct sotto_vad *);
SOTTO_API void	sotto_vad_state_free(struct sotto_vad_state *);
/* Forget the audio so far (a new stream). */
SOTTO_API void	sotto_vad_reset(struct sotto_vad_state *);
/* Speech probability of the next SOTTO_VAD_CHUNK samples of the stream. */
SOTTO_API float	sotto_vad_chunk(struct sotto_vad_state *, const float *pcm);
/*
 * Probabilities of pcm[n], chunk after chunk, into probs[(n + 511) / 512]
 * (a last partial chunk is padded with zeros); returns how many.
 */
SOTTO_API size_t sotto_vad_probs(struct sotto_vad_state *, const float *pcm,
	    size_t n, float *probs);

/* Speech regions from probabilities: faster-whisper's VadOptions. */
struct sotto_vad_params {
	float threshold;		/* speech at or above; 0.5 */
	float neg_threshold;		/* silence below; < 0 (default):
					   threshold - 0.15, at least 0.01 */
	int min_speech_ms;		/* shorter regions dropped; 0 */
	float max_speech_s;		/* longer ones split; INFINITY */
	int min_silence_ms;		/* silence that ends a region; 2000 */
	int speech_pad_ms;		/* added on each side; 400 */
};

SOTTO_API void	sotto_vad_params_init(struct sotto_vad_params *);

struct sotto_vad_span {
	size_t start, end;		/* samples, [start, end) */
};

/*
 * The speech regions of audio of n_samples whose probabilities (one per
 * SOTTO_VAD_CHUNK, as sotto_vad_probs() gives them) are probs[n_probs],
 * as faster-whisper's get_speech_timestamps() finds them. *ret is a
 * malloc'd array (NULL when none) the caller frees with free().
 */
SOTTO_API int	sotto_vad_speech(const float *probs, size_t n_probs,
	    size_t n_samples, const struct sotto_vad_params *,
	    struct sotto_vad_span **ret, size_t *ret_n, char *err);

/*
 * sotto_transcribe_reader() of the speech only, as faster-whisper's
 * vad_filter: the audio is read once more first for the probabilities,
 * the speech regions (vp, NULL = defaults) are transcribed as one audio,
 * and every time in the result (and in the progress callback) is mapped
 * back to the original audio. *ret_n is the original length.
 */
SOTTO_API int	sotto_transcribe_vad(struct sotto_state *,
	    const struct sotto_vad *, const struct sotto_vad_params *vp,
	    const struct sotto_reader *, const struct sotto_transcribe_params *,
	    struct sotto_result **ret, size_t *ret_n, char *err);

/*
 * Speaker embeddings with CAM++ (3D-Speaker, trained on Chinese and
 * English), from its own GGUF (scripts/fetch-model campplus): a vector
 * per piece of speech whose cosine with another piece's is high when the
 * same person speaks (docs/speakers.md). A struct sotto_speaker is
 * read-only once loaded and may be shared by threads; each call
 * allocates its own buffers (21 MB, and 0.7 MB per second of audio) and
 * uses oneDNN's threads for its products. ~13 ms per second of audio on
 * one core.
 */
#define SOTTO_SPEAKER_DIM	192
#define SOTTO_SPEAKER_MAX_S	300	/* longest audio of one embedding */

struct sotto_speaker;

SOTTO_API int	sotto_speaker_load(const char *path, struct sotto_speaker **ret,
	    char *err);
SOTTO_API void	sotto_speaker_free(struct sotto_speaker *);
/*
 * The embedding of pcm[n] (16 kHz mono, 720 samples to SOTTO_SPEAKER_MAX_S
 * seconds) into out[SOTTO_SPEAKER_DIM], L2-normalised: the dot product of
 * two is their cosine. SOTTO_EINVAL for a length out of range.
 */
SOTTO_API int	sotto_speaker_embed(const struct sotto_speaker *,
	    const float *pcm, size_t n, float *out, char *err);

/*
 * Speaker labels for a transcript (diarization): the speech regions
 * Silero VAD finds in the audio, cut at word boundaries into pieces of
 * about 3 s, each embedded with CAM++ and the pieces clustered
 * (lib/speaker/cluster.c; docs/speakers.md). Every word and segment of
 * res gets `speaker`, numbered 1, 2, ... in order of first appearance;
 * a segment whose words have two speakers is split at each
 * change (the parts' text is their words', their tokens the segment's
 * from their first word's token_index).
 */
struct sotto_diarize_params {
	int n_speakers;			/* exactly this many; 0 (default):
					   estimated */
	int min_speakers;		/* estimated: at least; 0 = 1 */
	int max_speakers;		/* estimated: at most; 0: no limit */
	float threshold;		/* cosine at which two groups of
					   pieces are one speaker; 0.5 */
	/*
	 * Called after each piece or window is embedded (about 1.5-3 s of
	 * audio; NULL: never): non-zero
	 * stops the labelling with SOTTO_ECANCELED. A daemon runs its
	 * other work there (sottod's live streams).
	 */
	int (*progress)(void *user);
	void *progress_user;
};

SOTTO_API void	sotto_diarize_params_init(struct sotto_diarize_params *);

/*
 * Label res (a transcript of the reader's audio with word timestamps) in
 * place. The reader is rewound and read twice (the VAD, then the pieces
 * as they pass, so memory holds a piece at a time). SOTTO_EINVAL when res
 * has no words (transcribe with word_timestamps). After a failure res
 * is as it was, without labels.
 */
SOTTO_API int	sotto_diarize(const struct sotto_speaker *,
	    const struct sotto_vad *, const struct sotto_diarize_params *,
	    const struct sotto_reader *, struct sotto_result *res, char *err);

/*
 * Live speaker labels (docs/speakers.md, "Live"): a stream's pieces
 * (its finals) labelled as they come, against the running centroids of
 * the speakers seen so far; a label once given is never changed, a new
 * voice gets the next number. Feed it the stream's audio (the same
 * samples as sotto_stream_push(): it keeps the last 45 s) and ask for the
 * speaker of each final by its times in seconds from the first sample
 * pushed. One embedding per call: ~13 ms per second of the piece, at
 * most 10 s of it. A track borrows the model (outlive the track); one
 * thread at a time.
 */
struct sotto_speaker_track;

/* threshold: the cosine at which a piece joins a speaker; 0: 0.5 */
SOTTO_API int	sotto_speaker_track_new(const struct sotto_speaker *,
	    float threshold, struct sotto_speaker_track **ret, char *err);
SOTTO_API void	sotto_speaker_track_free(struct sotto_speaker_track *);
SOTTO_API int	sotto_speaker_track_push(struct sotto_speaker_track *,
	    const float *pcm, size_t n, char *err);
/*
 * *speaker: 1 for "S1", ... of the audio from start to end (seconds),
 * in order: a stream's finals, one call each. next_start, next_end: the
 * speech known to follow (the next final, or the partial), which a short
 * final that begins a turn is heard with; next_end <= next_start when
 * there is none. A piece heard under 1 s takes the nearest speaker
 * already known and starts none (except the first). SOTTO_EINVAL when
 * its audio is no longer kept (*speaker is then 0).
 */
SOTTO_API int	sotto_speaker_track_label(struct sotto_speaker_track *,
	    double start, double end, double next_start, double next_end,
	    int *speaker, char *err);
/* Speakers so far. */
SOTTO_API int	sotto_speaker_track_count(const struct sotto_speaker_track *);

/*
 * Mix frames of interleaved samples (channels per frame) to mono in out,
 * as every input should be before it is resampled or transcribed: a
 * sample that is not a number (NaN, infinite) counts as 0 and the mix is
 * clipped to [-1, 1]. out may be in (out[i] is written after frame i is
 * read). Returns how many samples were not numbers. sottod and `sotto
 * transcribe` both use it, so a file and a stream of the same samples
 * give the engine the same audio.
 */
SOTTO_API size_t sotto_pcm_mix(const float *in, size_t frames, int channels,
	    float *out);

/*
 * Streaming: audio arrives in pieces; every step (default 1 s of new
 * audio) the current window (<= 30 s) is decoded again. Words on which
 * consecutive hypotheses agree become final, the rest is partial; the
 * window slides past committed segments. One stream owns one state.
 */
struct sotto_stream;

struct sotto_stream_params {
	const char *language;		/* "en", or NULL/"auto" */
	enum sotto_task task;
	int step_ms;			/* new audio per step, default 1000 */
	int beam_size;			/* default 1 */
	const struct sotto_vad *vad;	/* NULL (default): no VAD; else a
					   window without speech is not
					   decoded (borrowed: outlive the
					   stream) */
	float vad_threshold;		/* speech probability, 0.5 */
	/*
	 * Finals carry words (struct sotto_segment words): each time
	 * something becomes final, the window's text is aligned to its
	 * audio as sotto_transcribe_params.word_timestamps does; default 0.
	 */
	int word_timestamps;
	/*
	 * Vocabulary for the whole stream (names, terms; NULL or "" for
	 * none), as faster-whisper's hotwords: its tokens are the
	 * <|startofprev|> context of every window (the committed text
	 * before the window is not: its sparse punctuation taught the
	 * decoder to leave punctuation out). Unlike
	 * faster-whisper it stays when the committed words in the window
	 * are forced as the prefix, since a stream has such a prefix
	 * nearly always. Tokenized by sotto_stream_new() (the string is
	 * not kept); at most SOTTO_STREAM_PROMPT_MAX tokens, the rest cut.
	 */
	const char *prompt;
};

#define SOTTO_STREAM_PROMPT_MAX	111	/* half the decoder's context */

SOTTO_API void	sotto_stream_params_init(struct sotto_stream_params *);

/* What one step changed. Borrowed until the next call on the stream. */
struct sotto_stream_update {
	const struct sotto_segment *finals;	/* newly final, in order */
	int n_finals;
	uint64_t first_id;		/* id of finals[0]; ids go up by one */
	const char *partial;		/* the current tentative text, "" if none */
	double partial_start, partial_end;	/* stream seconds */
	double audio_time;		/* seconds of audio received */
	/*
	 * With language "auto" on a multilingual model, once a window was
	 * decoded: the language detected (a code; NULL before, and for a
	 * given language or an English-only model) and its probability.
	 * It is detected again at each step until 3 s of audio were heard
	 * (or the stream ended): then language_settled is 1 and it no
	 * longer changes.
	 */
	const char *language;
	float language_prob;
	int language_settled;
};

SOTTO_API int	sotto_stream_new(const struct sotto_model *,
	    const struct sotto_stream_params *, struct sotto_stream **ret,
	    char *err);
SOTTO_API void	sotto_stream_free(struct sotto_stream *);
/* Append 16 kHz mono samples; any amount, any time. */
SOTTO_API int	sotto_stream_push(struct sotto_stream *, const float *pcm,
	    size_t n, char *err);
/* Non-zero when at least one step of new audio waits. */
SOTTO_API int	sotto_stream_due(const struct sotto_stream *);
/*
 * Decode the window once and report finals and the partial. An energy
 * gate (every 100 ms block under -50 dBFS) skips silent windows, and
 * with a VAD so do windows where no 32 ms chunk is speech.
 */
SOTTO_API int	sotto_stream_step(struct sotto_stream *,
	    struct sotto_stream_update *ret, char *err);
/*
 * sotto_stream_step() for n streams (each due, as a server steps the
 * streams due at one time): the decoders of the greedy ones (beam_size 1)
 * of one model run as one batch, a column per stream, so each token
 * reads the weights once for all of them; consecutive streams of one
 * model form a batch. The results are those of n sotto_stream_step()
 * calls. Per stream: ret[i], rc[i] (0 or SOTTO_E*)
 * and err[i]. Returns how many failed.
 */
SOTTO_API int	sotto_stream_step_many(struct sotto_stream *const *s, int n,
	    struct sotto_stream_update *ret, int *rc,
	    char (*err)[SOTTO_ERR_MAX]);
/*
 * Decode the window as sotto_stream_step() would, for its partial alone
 * (ret has no finals): nothing a step depends on changes, so the next
 * step commits what it would have without this call. For a caller with
 * time to spare between steps (sottod with one stream and nothing else
 * to do): the words show sooner, the finals are those of steps at
 * step_ms. Silence, no speech, or a language not yet detected decode
 * nothing, and ret's partial is the last step's.
 */
SOTTO_API int	sotto_stream_preview(struct sotto_stream *,
	    struct sotto_stream_update *ret, char *err);
/* End of stream: decode what is left and make all of it final. */
SOTTO_API int	sotto_stream_finish(struct sotto_stream *,
	    struct sotto_stream_update *ret, char *err);

/*
 * Lower-level entry points, used by the numerics tests.
 */

/* Log-mel of pcm into mel[n_mels][n_frames], n_frames = n / 160. */
SOTTO_API int	sotto_log_mel(const struct sotto_model *, const float *pcm, size_t n,
	    float *mel, size_t n_frames, char *err);

/*
 * Run the encoder on mel[n_mels][3000] (one 30 s window, normalised).
 * The output [n_audio_state][1500] (channels-first) stays in the state;
 * if out is not NULL it is copied there too.
 */
SOTTO_API int	sotto_encode(struct sotto_state *, const float *mel, float *out,
	    char *err);

/*
 * The SOT sequence windows are decoded after, as openai's
 * sot_sequence(_including_notimestamps): <|startoftranscript|>, for a
 * multilingual model the language (a code; NULL means "en") and task
 * tokens, then <|notimestamps|> if without_timestamps. out has room for
 * 4 tokens. Returns how many it wrote, or SOTTO_EINVAL for a language
 * the model does not have.
 */
SOTTO_API int	sotto_sot_sequence(const struct sotto_model *,
	    const char *language, enum sotto_task, int without_timestamps,
	    int32_t *out, char *err);

/*
 * Language of the window sotto_encode() left in the state (multilingual
 * models): probs[sotto_language_count()] receives every language's
 * probability (NULL: not wanted). Returns the most likely one's index.
 */
SOTTO_API int	sotto_detect_language(struct sotto_state *, float *probs,
	    char *err);

/*
 * Teacher-forced decoding of the window sotto_encode() left in the state:
 * the first-token path over tokens[0, n_prompt), then one cached-token
 * step per token of tokens[n_prompt, n). logits [n - n_prompt + 1]
 * [n_vocab] receives the raw logits (no suppression, no timestamp rules)
 * after the prompt and after each forced token.
 */
SOTTO_API int	sotto_decode_logits(struct sotto_state *, const int32_t *tokens,
	    int n, int n_prompt, float *logits, char *err);

#ifdef __cplusplus
}
#endif

#endif
