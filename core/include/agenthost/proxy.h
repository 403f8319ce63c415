/* agenthost/proxy.h - a local endpoint that gives unmodified clients (the official SDKs,
 * Claude Code, Codex) agenthost's retries and cut-stream continuation (docs/proxy.md).
 *
 * An HTTP server on loopback (libmicrohttpd, on the caller's loop) that forwards
 *   POST /v1/messages                  to the Anthropic upstream,
 *   POST /v1/chat/completions, /v1/responses   to the OpenAI upstream,
 * through the call machine (agenthost/call.h): retries before the stream opens, and a
 * stream cut after it opened is continued (resume, prefill or prompt, with a restatement
 * trimmed) and spliced into one well-formed response per format. Other paths are passed
 * through (one request, its bytes as they come). The client's headers and credentials go
 * upstream unchanged and are never logged or put in an event.
 *
 * Everything runs on the caller's loop (cfg.loop), on the thread that steps it
 * (ah_loop_run_once): the server is fd watchers and timers of that loop (no thread of its
 * own), and the upstream requests are the loop's transfers. The watchers do not keep the
 * loop alive (ah_loop_alive): a program that serves until told to stop holds an
 * ah_loop_ref, or steps the loop itself. Library: libagenthost_proxy (static, beside the static core
 * and libagenthost_mock, whose wire writers it shares).
 */
#ifndef AGENTHOST_PROXY_H
#define AGENTHOST_PROXY_H

#include "agenthost/export.h"

#include "agenthost/event.h"
#include "agenthost/loop.h"
#include "agenthost/policy.h"
#include "agenthost/status.h"
#include "agenthost/transport.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ah_proxy ah_proxy;

typedef struct ah_proxy_config {
    ah_loop *loop;            /* required; borrowed, outlives the proxy */
    const char *listen_host;  /* NULL = "127.0.0.1" (a numeric IPv4 address) */
    int port;                 /* 0 = any free port */
    const char *anthropic_url; /* NULL = https://api.anthropic.com (no /v1) */
    const char *openai_url;    /* NULL = https://api.openai.com */
    const ah_policy *policy;   /* copied; NULL = defaults */
    ah_retry_budget *retry_budget;   /* optional, borrowed */
    struct ah_rate_limit *rate_limit; /* optional, borrowed */
    const char *continue_prompt;      /* NULL = AH_CONTINUE_PROMPT_DEFAULT */
    const ah_transport *transport;    /* NULL = libcurl */
    /* Every event (llm_call_start, llm_retry, llm_gave_up, llm_continuation,
     * llm_call_end) of every proxied request, on the loop thread; run_id is the
     * request's id ("px_..."). Optional. */
    ah_event_fn on_event;
    void *event_ud;
    /* At most this many requests in flight (0 = no bound): a request arriving at the bound
     * is answered at once with the format's overload error (Anthropic 529
     * overloaded_error, OpenAI 503), not queued, so that under more load than the process
     * can serve the requests it takes still finish in time. */
    unsigned max_in_flight;
} ah_proxy_config;

typedef struct ah_proxy_stats {
    uint64_t requests;      /* requests taken */
    uint64_t spliced;       /* streaming LLM requests */
    uint64_t retries;       /* llm_retry events */
    uint64_t continuations; /* llm_continuation events */
    uint64_t failed;        /* answered with an error (upstream's, 502, or in-band) */
    uint64_t in_flight;     /* requests not finished yet */
    uint64_t shed;          /* answered 529 / 503 at max_in_flight, not forwarded */
} ah_proxy_stats;

/* Start listening. AH_OK with *out set; else *out = NULL, a message in err and
 * AH_ERR_INVALID (a bad URL or address, named), AH_ERR_IO (cannot listen: the address and
 * why) or AH_ERR_NOMEM. */
AH_EXPORT ah_status ah_proxy_new(const ah_proxy_config *cfg, ah_proxy **out, char *err,
                                 size_t errsize);
/* Stop listening, end every request in flight (its client sees its connection close),
 * free everything. Loop thread; not from inside a proxy callback. NULL is a no-op. */
AH_EXPORT void ah_proxy_free(ah_proxy *p);

AH_EXPORT const char *ah_proxy_url(const ah_proxy *p); /* "http://127.0.0.1:PORT" */
AH_EXPORT int ah_proxy_port(const ah_proxy *p);
AH_EXPORT void ah_proxy_get_stats(const ah_proxy *p, ah_proxy_stats *out);

#ifdef __cplusplus
}
#endif
#endif
