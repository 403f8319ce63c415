/* provider_gemini.c - the Gemini API's ops table (POST /v1beta/models/{model}:
 * streamGenerateContent?alt=sse, key in x-goog-api-key), with its continuation rows.
 *
 * The codec lives beside it: encode_gemini.c (request body), decode_gemini.c (stream
 * chunks, the raw JSON error tail, the non-stream body). Facts and their sources:
 * docs/providers-gemini.md. */
#include "decode_internal.h"
#include "encode_internal.h"
#include "provider.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* "gemini-M.N..." / "gemini-M-..." (also inside "models/gemini-..." or a tuned model's
 * path): the version, 1 when found. */
static int gemini_version(const char *model, int *major, int *minor, const char **rest)
{
    const char *p = model;
    for (; *p; p++)
        if (strncasecmp(p, "gemini-", 7) == 0 && p[7] >= '0' && p[7] <= '9')
            break;
    if (!*p)
        return 0;
    char *end;
    *major = (int)strtol(p + 7, &end, 10);
    *minor = *end == '.' ? (int)strtol(end + 1, &end, 10) : 0;
    *rest = end;
    return 1;
}

/* Refuses a trailing model turn (HTTP 400 "Requests ending with a model turn are not
 * supported"): the Gemini 3.5+ models seen doing so, 3.5-flash excepted. */
static int refuses_model_turn(const char *model, int thinking)
{
    (void)thinking;
    int maj, min;
    const char *rest;
    if (!gemini_version(model, &maj, &min, &rest))
        return 0;
    if (maj < 3 || (maj == 3 && min < 5))
        return 0;
    if (maj == 3 && min == 5 && strncasecmp(rest, "-flash", 6) == 0 &&
        strncasecmp(rest, "-flash-lite", 11) != 0)
        return 0;
    return 1;
}

static int versioned_gemini(const char *model, int thinking)
{
    (void)thinking;
    int maj, min;
    const char *rest;
    return gemini_version(model, &maj, &min, &rest);
}

static int any_model(const char *model, int thinking)
{
    (void)model;
    (void)thinking;
    return 1;
}

/* Sources: docs/providers-gemini.md, "A trailing model turn". */
static const ah__cap_row caps[] = {
    {refuses_model_turn, 0,
     "Gemini 3.5-flash-lite, 3.6 and later (gemini-3.6-flash, gemini-3.7-flash, ...) answer "
     "a request ending with a model turn with HTTP 400"},
    {versioned_gemini, 1,
     "Gemini 2.x, 3, 3.1 and 3.5-flash continue a trailing model turn"},
    {any_model, 0, "an unversioned Gemini id (gemini-pro-latest, a tuned model): prompt"},
    {NULL, 0, NULL},
};

const ah__provider ah__provider_GEMINI = {
    .name = "gemini",
    .path = "/v1beta/models/{model}:streamGenerateContent",
    .query = "alt=sse",
    .base_url = "https://generativelanguage.googleapis.com",
    .key_env = "GEMINI_API_KEY", /* the google-genai SDKs' (GOOGLE_API_KEY too) */
    .needs_max_tokens = 0,
    .key_header = "x-goog-api-key",
    .key_prefix = "",
    .encode = ah__encode_gemini,
    .event_type = "generateContentResponse", /* chunks carry no type */
    .event = ah__gemini_event,
    .ends_at_done = 0,
    .end_marker = "a finishReason",
    .tail = ah__gemini_tail,
    .body = ah__gemini_body,
    .caps = caps,
    .prefill_refusal = {"Requests ending with a model turn are not supported"},
};
