/* format_gemini.c - the mock's Gemini API (POST /v1beta/models/{model}:
 * streamGenerateContent?alt=sse and :generateContent; the model comes from the path,
 * which mock.c puts in the request as "model"): its request reader, SSE chunks, JSON
 * body and google.rpc.Status errors, behind one ah__mock_format.
 *
 * The chunks of a reply are planned here (one per text delta, one per whole
 * functionCall, the finish chunk with the usage) and written by
 * core/writer/writer_gemini.c. An error_event is written as the API writes a failure
 * after its head: raw JSON after the events, not an SSE event. Shares no code with the
 * client's codec. */
#include "mock_internal.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define get ah__mock_get
#define get_str ah__mock_get_str

/* What the real API answers a request ending with a model turn on the models that
 * refuse one (docs/providers-gemini.md). */
#define GEMINI_MODEL_TURN_REFUSAL "Requests ending with a model turn are not supported."

/* ---- the request ------------------------------------------------------------------- */

static void first_tool(const cJSON *req, ah__mock_conv *c)
{
    const cJSON *mode = get(get(get(req, "toolConfig"), "functionCallingConfig"), "mode");
    if (cJSON_IsString(mode) && strcmp(mode->valuestring, "NONE") == 0)
        return;
    const cJSON *t, *f;
    cJSON_ArrayForEach(t, get(req, "tools"))
    {
        cJSON_ArrayForEach(f, get(t, "functionDeclarations"))
        {
            if (get_str(f, "name")) {
                c->tool_name = get_str(f, "name");
                c->tool_schema = get(f, "parametersJsonSchema");
                if (!c->tool_schema)
                    c->tool_schema = get(f, "parameters");
                return;
            }
        }
    }
}

static int read_request(const cJSON *req, ah__mock_conv *c, ah__mock_reply *out, char *err,
                        size_t errsize)
{
    (void)out;
    const cJSON *contents = get(req, "contents");
    if (!cJSON_IsArray(contents) || !contents->child) {
        ah__bufprintf(err, errsize, "* GenerateContentRequest.contents: contents is not "
                                    "specified");
        return -1;
    }
    c->items = contents;
    for (const cJSON *m = contents->child; m; m = m->next) {
        const char *role = get_str(m, "role");
        const cJSON *parts = get(m, "parts");
        if (role && strcmp(role, "user") != 0 && strcmp(role, "model") != 0) {
            ah__bufprintf(err, errsize, "Please use a valid role: user, model.");
            return -1;
        }
        if (!cJSON_IsArray(parts) || !parts->child) {
            ah__bufprintf(err, errsize,
                          "* GenerateContentRequest.contents.parts: contents.parts must not "
                          "be empty.");
            return -1;
        }
        int model = role && strcmp(role, "model") == 0;
        int results = 0;
        const cJSON *p;
        cJSON_ArrayForEach(p, parts)
        {
            results |= get(p, "functionResponse") != NULL;
        }
        ah__mock_nmsg *n = ah__mock_conv_push(
            c, model ? AH__MOCK_M_ASSISTANT : results ? AH__MOCK_M_TOOL_RESULTS : AH__MOCK_M_USER,
            m);
        if (!n)
            return -2;
        cJSON_ArrayForEach(p, parts)
        {
            const cJSON *fr = get(p, "functionResponse");
            const char *text = get_str(p, "text");
            if (fr) {
                const cJSON *resp = get(fr, "response");
                const char *r = get_str(resp, "result");
                if (!r)
                    r = get_str(resp, "error");
                char *printed = r ? NULL : cJSON_PrintUnformatted(resp);
                ah__mock_add_result(n, r ? r : printed ? printed : "");
                cJSON_free(printed);
            } else if (text && !results && !cJSON_IsTrue(get(p, "thought"))) {
                ah__mock_buf_puts(&n->text, text);
            }
        }
    }
    first_tool(req, c);
    return 0;
}

/* Gemini 3.5-flash-lite, 3.6 and later refuse a request ending with a model turn. */
static int refuses_prefill(const cJSON *req, const ah__mock_nmsg *last, char *err,
                           size_t errsize)
{
    (void)last;
    const char *m = get_str(req, "model");
    const char *p = m ? strstr(m, "gemini-") : NULL;
    if (!p || p[7] < '0' || p[7] > '9')
        return 0;
    char *end;
    long maj = strtol(p + 7, &end, 10), min = 0;
    if (*end == '.')
        min = strtol(end + 1, &end, 10);
    int refuses = maj > 3 || (maj == 3 && min >= 5);
    if (maj == 3 && min == 5 && strncmp(end, "-flash", 6) == 0 &&
        strncmp(end, "-flash-lite", 11) != 0)
        refuses = 0;
    if (refuses)
        ah__bufprintf(err, errsize, "%s", GEMINI_MODEL_TURN_REFUSAL);
    return refuses;
}

/* ---- the stream -------------------------------------------------------------------- */

/* The finishReason: a plan's stop_reason in Gemini's words (max_tokens: MAX_TOKENS,
 * refusal: SAFETY, with the category as the safety rating's category when one is
 * given); anything else, and a tool call, is STOP (docs/providers-gemini.md). */
static const char *finish_reason(const ah__mock_reply *r)
{
    const char *sr = r->stop_reason;
    if (sr && strcmp(sr, "max_tokens") == 0)
        return "MAX_TOKENS";
    if (sr && strcmp(sr, "refusal") == 0)
        return "SAFETY";
    return "STOP";
}

enum { G_TEXT, G_CALL, G_FINISH };

static ah__wr_gemini_head head(const ah__mock_reply *r)
{
    ah__wr_gemini_head h = {.model = r->model, .response_id = r->msg_id};
    return h;
}

static int plan(ah__mock_writer *w)
{
    const ah__mock_reply *r = w->r;
    ah__mock_writer_add(w, G_TEXT, r->ndeltas, 0);
    for (size_t c = 0; c < ah__mock_ncalls(r); c++)
        ah__mock_writer_add(w, G_CALL, 1, c);
    ah__mock_writer_add(w, G_FINISH, 1, 0);
    return 0;
}

static void emit(ah__mock_writer *w, ah__mock_buf *o, int k, size_t j, size_t call)
{
    const ah__mock_reply *r = w->r;
    ah__wr_gemini_head h = head(r);
    /* every chunk carries the usage so far: the prompt, no output until the end */
    ah__wr_usage u = ah__mock_usage(r, 0);
    switch (k) {
    case G_TEXT:
        ah__wr_g_text(o, &h, AH__MOCK_DELTA(r, j), 0, &u);
        break;
    case G_CALL: {
        /* a signature on the first call of a step, as Gemini 3 sends one */
        ah__wr_g_call(o, &h, r->calls[call].name, r->calls[call].args,
                      r->calls[call].args_len, call == 0 ? "c2lnX21vY2s" : NULL, &u);
        break;
    }
    case G_FINISH: {
        ah__wr_usage fu = ah__mock_usage(r, r->output_tokens);
        ah__wr_g_finish(o, &h, finish_reason(r), &fu);
        break;
    }
    }
}

/* The google.rpc.Status of an error type: a Status name as is, the mock's shared names
 * (overloaded_error, rate_limit_error, ...) as the codes they mean. */
static int type_code(const char *type)
{
    int code = ah__wr_g_status_code(type);
    if (code)
        return code;
    if (strcmp(type, "overloaded_error") == 0)
        return 503;
    code = ah__mock_error_status(AH_WIRE_ANTHROPIC, type);
    return code ? code : 500;
}

static void error_event(ah__mock_writer *w, ah__mock_buf *out, const char *type,
                        const char *message)
{
    (void)w;
    int code = type_code(type);
    const char *status = ah__wr_g_status_code(type) ? type : NULL;
    /* what the API does: the error as raw JSON after the events, not an SSE event */
    ah__wr_g_error_tail(out, code, status, message);
}

/* ---- bodies ------------------------------------------------------------------------ */

static void body(const ah__mock_reply *r, ah__mock_buf *o)
{
    ah__wr_block calls[AH__MOCK_MAX_TOOL_CALLS];
    size_t n = ah__mock_ncalls(r);
    for (size_t c = 0; c < n && c < AH__MOCK_MAX_TOOL_CALLS; c++)
        calls[c] = (ah__wr_block){.kind = AH__WR_TOOL,
                                  .name = r->calls[c].name,
                                  .text = r->calls[c].args,
                                  .text_len = r->calls[c].args_len};
    ah__wr_gemini_head h = head(r);
    ah__wr_usage u = ah__mock_usage(r, r->output_tokens);
    ah__wr_g_body(o, &h, r->ndeltas ? r->text : NULL, r->text_len, calls,
                  n < AH__MOCK_MAX_TOOL_CALLS ? n : AH__MOCK_MAX_TOOL_CALLS, finish_reason(r),
                  &u);
}

static void error_body(int status, const char *type, const char *message,
                       const char *request_id, ah__mock_buf *out)
{
    (void)request_id;
    const char *name = type && ah__wr_g_status_code(type) ? type : NULL;
    ah__wr_g_error_body(out, status, name, message, NULL);
}

/* What extra_after_end: true sends after the finish chunk: a functionCall (to a tool
 * named extra_after_end) and a second finish, which a client must ignore. */
static const char extra[] =
    "data: {\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{\"name\":"
    "\"extra_after_end\",\"args\":{}}}],\"role\":\"model\"},\"index\":0}],"
    "\"modelVersion\":\"m\",\"responseId\":\"extra\"}\r\n\r\n"
    "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"\"}],\"role\":\"model\"},"
    "\"finishReason\":\"STOP\",\"index\":0}],\"modelVersion\":\"m\",\"responseId\":"
    "\"extra\"}\r\n\r\n";

const ah__mock_format ah__mock_format_GEMINI = {
    .path = "/v1beta/models/{model}:generateContent",
    .stream_path = "/v1beta/models/{model}:streamGenerateContent",
    .request_id_header = "x-goog-request-id",
    .signature_headers = {"x-goog-api-key", "x-goog-api-client"},
    .not_found_type = "NOT_FOUND",
    .bad_method_type = "INVALID_ARGUMENT",
    .bad_json_message = "Invalid JSON payload received.",
    .missing_model = "model is required in the request path",
    .default_error_type = "UNAVAILABLE",
    .overloaded_status = 503,
    .extra_after_end = extra,
    .msg_id = "resp-mock",
    .tool_id = "gc_mock",
    .read = read_request,
    .refuses_prefill = refuses_prefill,
    .plan = plan,
    .emit = emit,
    .error_event = error_event,
    .body = body,
    .error_body = error_body,
};
