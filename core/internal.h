/* internal.h - helpers shared across core files (ah__ prefix), never installed.
 * It includes only what its own declarations use (not agenthost.h): each core file
 * includes the public headers it uses, so a file below the worker cannot reach the
 * worker, history, tools or ledgers by accident (tests/cli/test_layers.sh checks). */
#ifndef AH_INTERNAL_H
#define AH_INTERNAL_H

#include "agenthost/error.h"
#include "agenthost/log.h"
#include "agenthost/loop.h"
#include "agenthost/status.h"

#include <stdarg.h>
#include <stddef.h>

#if defined(__GNUC__)
#define AH__PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define AH__PRINTF(a, b)
#endif

/* util.c: log one line through the embedder's handler (no-op when none is set). */
void ah__log(ah_log_level level, const char *fmt, ...) AH__PRINTF(2, 3);
/* The same for a line that restates an event of type `event` (see ah_log_fn). */
void ah__log_event(ah_log_level level, int event, const char *fmt, ...) AH__PRINTF(3, 4);
int ah__log_enabled(ah_log_level level);

/* loop.c: 1 when ah_loop_run_once() may be called on the loop now (its own backend, and
 * not from inside one of its steps: a blocking driver called from a callback must not
 * step the loop that called it). */
int ah__loop_steppable(const ah_loop *loop);

/* strdup/strndup that return NULL on allocation failure (C11 has neither). */
char *ah__strdup(const char *s);
char *ah__strndup(const char *s, size_t n);

/* The name in a table closest to `name` (at most two edits away), or NULL: for "did you
 * mean" hints on unknown field names. Entry i's name is the `const char *` at
 * (const char *)table + i * stride, so it works on a plain array of names
 * (stride sizeof(char *)) and on an array of structs whose first member is the name. */
const char *ah__did_you_mean(const char *name, const void *table, size_t count,
                             size_t stride);

/* ---- UTF-8 at the boundary (utf8.c) ---------------------------------------------------
 * Text from the provider or from tools is made valid UTF-8 where it enters: each byte
 * that does not start a valid sequence (overlong forms, surrogates and code points past
 * U+10FFFF included) becomes U+FFFD. */

/* Length of the valid UTF-8 sequence at s[0..n), or 0 when s does not start one. */
size_t ah__utf8_seq_len(const unsigned char *s, size_t n);
/* 1 when s[0..n) is valid UTF-8 (NUL bytes allowed). */
int ah__utf8_valid(const char *s, size_t n);
/* A malloc'd NUL-terminated copy of s[0..n) with invalid bytes replaced by U+FFFD;
 * *outlen (may be NULL) gets its length. NULL when out of memory. */
char *ah__utf8_dup(const char *s, size_t n, size_t *outlen);
/* JSON text s[0..n) as received (an event's data): invalid UTF-8 bytes and lone
 * surrogate escapes ("\udc00", a "\ud83d" not followed by a low surrogate) replaced by
 * U+FFFD, so the JSON parses and its strings are valid. Returns 0 when nothing needed
 * replacing (*out untouched), 1 with a malloc'd copy in *out / *outlen, -1 when out of
 * memory. */
int ah__json_text_fix(const char *s, size_t n, char **out, size_t *outlen);

/* json_print.c: v as compact JSON text, byte for byte cJSON_PrintUnformatted's, in one
 * malloc'd buffer (free()); its length in *len when len is not NULL. NULL when out of
 * memory or for what cJSON would not print (a Raw without text, a bad type). */
struct cJSON;
char *ah__json_print(const struct cJSON *v, size_t *len);

/* url.c: where a URL's path ends (the index of its first '?' or '#', else its length). */
size_t ah__url_path_end(const char *url);
/* A malloc'd copy of url with `path` appended to its path (trailing '/' of the path
 * trimmed first) and `query` ("a=1&b=2", without '?') added to its query; a fragment is
 * dropped. path and query may be NULL. NULL when out of memory. */
char *ah__url_append(const char *url, const char *path, const char *query);

/* wire.c: wire w's request path with "{model}" replaced by the model id
 * (percent-encoded), and its query (the provider's, e.g. Gemini's "alt=sse") followed by
 * `query` (the client's, may be NULL); both malloc'd, NULL when out of memory. The wire
 * is a valid ah_wire. */
char *ah__wire_request_path(int wire, const char *model);
char *ah__wire_request_query(int wire, const char *query);

/* error_hints.c: the retryDelay of a google.rpc.RetryInfo among error.details[] of a
 * parsed error body ({"error": google.rpc.Status}, or a one-element array of it), as
 * ms; -1 when there is none. A protobuf Duration: decimal seconds, "s" ("17s",
 * "45.837906927s"). */
struct cJSON;
int64_t ah__retry_info_ms(const struct cJSON *root);

/* snprintf into a fixed buffer, always NUL-terminated, truncating safely. */
void ah__bufprintf(char *buf, size_t size, const char *fmt, ...) AH__PRINTF(3, 4);
/* ah__bufprintf(buf, size, "%s", s) without the formatting: s cut to size - 1 bytes. */
void ah__bufcpy(char *buf, size_t size, const char *s);

/* error_hints.c: from a response's rate-limit headers (anthropic-ratelimit-*,
 * x-ratelimit-*), the ms until the reset of an exhausted (remaining 0) request limit and
 * of an exhausted token limit; -1 each when none is exhausted or its reset is unknown.
 * A reset instant is measured from the server's Date when the local clock is off by more
 * than 2 s (see ah_error_apply_headers). */
void ah__ratelimit_exhausted(const ah_header *h, size_t n, int64_t now_wall_ms,
                             int64_t *req_hold_ms, int64_t *tok_hold_ms);
#endif
