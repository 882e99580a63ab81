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
	    "client streams and HTTP files (what max_sessions bounds).",
	    st.sessions);
	http_metric(b, "sottod_sessions_max", "gauge", "max_sessions.",
	    core_config()->max_sessions);
	http_metric(b, "sottod_clients", "gauge", "Connections on the Unix "
	    "socket.", st.clients);
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
	evhttp_add_header(evhttp_request_get_output_headers(req),
	    "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
	httpd_count_reply(HTTP_OK);
	evhttp_send_reply(req, HTTP_OK, NULL, b);
	evbuffer_free(b);
}
