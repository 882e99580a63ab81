/*
 * What operators poll: GET /health for a load balancer, and GET /metrics,
 * sottod's state in the Prometheus text format (0.0.4), for a scraper.
 * Gauges are read at the request; counters (_total) run from the start.
 * docs/http.md lists them.
 */
#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <json-c/json.h>

#include "core.h"
#include "http.h"
#include "httpd.h"
#include "proto.h"
#include "session.h"

/* One metric: its HELP and TYPE lines, then the sample. */
static void
http_metric(struct evbuffer *b, const char *name, const char *type,
    const char *help, double value)
{
	evbuffer_add_printf(b, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n",
	    name, help, name, type, name, value);
}

/* The label value v, escaped as the text format wants. */
static void
http_label(char *buf, size_t len, const char *v)
{
	size_t n = 0;

	for (; *v != '\0' && n + 3 < len; v++) {
		if (*v == '\\' || *v == '"')
			buf[n++] = '\\';
		if (*v == '\n') {
			buf[n++] = '\\';
			buf[n++] = 'n';
			continue;
		}
		buf[n++] = *v;
	}
	buf[n] = '\0';
}

static void
http_metrics_requests(struct evbuffer *b)
{
	static const char *const classes[] = { "2xx", "4xx", "5xx" };
	uint64_t counts[3];
	size_t i;

	httpd_reply_counts(counts);
	evbuffer_add_printf(b, "# HELP sottod_http_responses_total HTTP "
	    "responses sent, by status class.\n"
	    "# TYPE sottod_http_responses_total counter\n");
	for (i = 0; i < 3; i++)
		evbuffer_add_printf(b, "sottod_http_responses_total{code=\"%s\"}"
		    " %llu\n", classes[i], (unsigned long long)counts[i]);
}

/* Error events sent to clients, by code (every code, 0 included). */
static void
http_metrics_errors(struct evbuffer *b, const struct core_stats *st)
{
	const char *name;
	int i;

	evbuffer_add_printf(b, "# HELP sottod_errors_total Error events "
	    "sent to clients, by code.\n# TYPE sottod_errors_total counter\n");
	for (i = 1; i < CORE_ERROR_CODES; i++) {
		/* codes past the last one are named "internal" */
		name = proto_error_name((enum proto_error)i);
		if (name == NULL || (strcmp(name, "internal") == 0 &&
		    i != PROTO_E_INTERNAL))
			continue;
		evbuffer_add_printf(b, "sottod_errors_total{code=\"%s\"} "
		    "%llu\n", name, (unsigned long long)st->errors[i]);
	}
}

/* Sessions opened, by the door that opened them. */
static void
http_metrics_opened(struct evbuffer *b, const struct core_stats *st)
{
	size_t i;

	evbuffer_add_printf(b, "# HELP sottod_sessions_opened_total Sessions "
	    "opened, by door (socket, ws, wyoming, mic).\n"
	    "# TYPE sottod_sessions_opened_total counter\n");
	for (i = 0; i < sizeof(st->opened) / sizeof(st->opened[0]) &&
	    st->opened[i].door != NULL; i++)
		evbuffer_add_printf(b, "sottod_sessions_opened_total{door=\"%s\"}"
		    " %llu\n", st->opened[i].door,
		    (unsigned long long)st->opened[i].n);
}

/* The compute time of stream steps, as a histogram. */
static void
http_metrics_steps(struct evbuffer *b, const struct core_stats *st)
{
	uint64_t n = 0;
	int i;

	evbuffer_add_printf(b, "# HELP sottod_step_seconds Compute time of "
	    "each decoding step of a stream (what a partial waits for).\n"
	    "# TYPE sottod_step_seconds histogram\n");
	for (i = 0; i <= CORE_STEP_BUCKETS; i++) {
		n += st->step_n[i];
		if (i < CORE_STEP_BUCKETS)
			evbuffer_add_printf(b, "sottod_step_seconds_bucket"
			    "{le=\"%g\"} %llu\n", st->step_le[i],
			    (unsigned long long)n);
		else
			evbuffer_add_printf(b, "sottod_step_seconds_bucket"
			    "{le=\"+Inf\"} %llu\n", (unsigned long long)n);
	}
	evbuffer_add_printf(b, "sottod_step_seconds_sum %.17g\n"
	    "sottod_step_seconds_count %llu\n", st->step_s,
	    (unsigned long long)n);
}

/*
 * GET /health: 200 while the model is loaded, the compute thread runs
 * and sottod is not stopping; else 503. Load balancers poll it.
 */
void
http_health(struct evhttp_request *req)
{
	const char *why = core_unhealthy();
	struct json_object *o;

	if ((o = json_object_new_object()) == NULL) {
		evhttp_send_error(req, HTTP_INTERNAL, NULL);
		return;
	}
	json_object_object_add(o, "status", json_object_new_string(why ==
	    NULL ? "ok" : "unavailable"));
	if (why != NULL)
		json_object_object_add(o, "reason",
		    json_object_new_string(why));
	json_object_object_add(o, "model",
	    json_object_new_string(core_model_name()));
	json_object_object_add(o, "sessions",
	    json_object_new_int(session_count()));
	httpd_reply_object(req, why == NULL ? HTTP_OK : 503, o);
}

void
http_metrics(struct evhttp_request *req)
{
	struct core_stats st;
	struct evbuffer *b = evbuffer_new();
	char model[2 * PROTO_NAME_MAX];

	if (b == NULL) {
		evhttp_send_error(req, HTTP_INTERNAL, NULL);
		return;
	}
	core_stats(&st);
	http_label(model, sizeof(model), core_model_name());
	evbuffer_add_printf(b, "# HELP sottod_info The version and the "
	    "model loaded.\n# TYPE sottod_info gauge\n"
	    "sottod_info{version=\"%s\",model=\"%s\"} 1\n", SOTTO_VERSION,
	    model);
	http_metric(b, "sottod_up", "gauge", "1 while GET /health says ok.",
	    st.healthy);
	http_metric(b, "sottod_uptime_seconds", "gauge", "Seconds since "
	    "sottod started.", st.uptime_s);
	http_metric(b, "sottod_sessions", "gauge", "Sessions decoding now: "
	    "client streams, HTTP files and the microphone's.",
	    st.sessions + (session_mic() != NULL));
	http_metric(b, "sottod_sessions_max", "gauge", "max_sessions (the "
	    "microphone's session is not counted against it).",
	    core_config()->max_sessions);
	http_metric(b, "sottod_clients", "gauge", "Connections of every door "
	    "but HTTP requests: the Unix socket, /ws and Wyoming.",
	    st.clients);
	http_metric(b, "sottod_http_connections", "gauge", "HTTP connections "
	    "open (what [http] max_connections bounds).", httpd_connections());
	http_metric(b, "sottod_http_requests_in_progress", "gauge", "HTTP "
	    "transcriptions waiting, decoding or being sent.", http_busy());
	http_metric(b, "sottod_queue_depth", "gauge", "Jobs waiting for the "
	    "compute thread.", st.queue_depth);
	http_metric(b, "sottod_lag_seconds", "gauge", "The largest lag of a "
	    "stream: audio received but not decoded yet.", st.max_lag_s);
	http_metric(b, "sottod_real_time_factor", "gauge", "Compute time per "
	    "decoding step over the step's audio (recent average; under 1 "
	    "keeps up).", st.rtf);
	http_metric(b, "sottod_audio_received_seconds_total", "counter",
	    "Seconds of audio received: streams and files.", st.audio_in_s);
	http_metric(b, "sottod_audio_decoded_seconds_total", "counter",
	    "Seconds of audio decoded.", st.audio_done_s);
	http_metric(b, "sottod_sessions_total", "counter", "Streams opened.",
	    (double)st.sessions_total);
	http_metric(b, "sottod_files_total", "counter", "Files transcribed "
	    "over HTTP.", (double)st.files_total);
	http_metric(b, "sottod_files_compute_seconds_total", "counter",
	    "Compute seconds the files took (over their audio seconds: their "
	    "real-time factor).", st.files_compute_s);
	http_metric(b, "sottod_dropped_partials_total", "counter", "Partial "
	    "results not sent to slow readers.",
	    (double)st.dropped_partials);
	http_metrics_requests(b);
	http_metrics_errors(b, &st);
	http_metrics_opened(b, &st);
	http_metrics_steps(b, &st);
	http_metric(b, "sottod_reloads_total", "counter", "Configurations "
	    "applied by SIGHUP.", (double)st.reloads);
	http_metric(b, "sottod_mic_state", "gauge", "The microphone: -1 "
	    "off ([mic] enabled = no), 0 down (reopening), 1 capturing.",
	    st.mic);
	http_metric(b, "sottod_mic_xruns_total", "counter", "Capture "
	    "overruns of the microphone (audio lost at the sound card).",
	    (double)st.mic_xruns);
	http_metric(b, "sottod_overload_seconds_total", "counter", "Seconds "
	    "of the microphone's audio skipped because decoding fell behind.",
	    st.overload_s);
	evhttp_add_header(evhttp_request_get_output_headers(req),
	    "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
	httpd_count_reply(HTTP_OK);
	evhttp_send_reply(req, HTTP_OK, NULL, b);
	evbuffer_free(b);
}
