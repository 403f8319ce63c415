/* format_openai.c - the mock's OpenAI Chat Completions API (POST /v1/chat/completions,
 * wire name "openai"): its request reader, SSE chunks, JSON body and error shapes,
 * behind one ah__mock_format.
 *
 * Byte layout as recorded in tests/fixtures/real-streams: no `event:` lines, every chunk
 * repeats the id/model prefix, a usage-only chunk when stream_options.include_usage,
 * then `data: [DONE]`. Shares no code with the client's codec. */
#include "mock_internal.h"

#include <string.h>

#define PUT AH__MOCK_PUT
#define get ah__mock_get
#define get_str ah__mock_get_str
#define str_is ah__mock_str_is

/* ---- the request ------------------------------------------------------------------- */

static void first_tool(const cJSON *req, ah__mock_conv *c)
{
    const cJSON *t;
    const cJSON *tc = get(req, "tool_choice");
    if (cJSON_IsString(tc) && strcmp(tc->valuestring, "none") == 0)
        return;
    cJSON_ArrayForEach(t, get(req, "tools"))
    {
        const cJSON *fn = get(t, "function");
        if (str_is(t, "type", "function") && get_str(fn, "name")) {
            c->tool_name = get_str(fn, "name");
            c->tool_schema = get(fn, "parameters");
            return;
        }
    }
}

/* Is a role "tool" message for call `id` among the messages after `asst` up to `end`? */
static int answered(const cJSON *asst, const cJSON *end, const char *id)
{
    for (const cJSON *m = asst->next; m && m != end; m = m->next)
        if (str_is(m, "role", "tool") && str_is(m, "tool_call_id", id))
            return 1;
    return 0;
}

/* The API's pairing rule, with its 400s (docs/mock.md): the assistant message `asst`
 * (with tool_calls) must be followed, before `end` (the next message that is not a tool
 * message, or NULL), by a tool message for each of its calls. -1 with err set. */
static int check_answered(const cJSON *asst, const cJSON *end, char *err, size_t errsize)
{
    ah__mock_buf missing = {0};
    const cJSON *call;
    cJSON_ArrayForEach(call, get(asst, "tool_calls"))
    {
        const char *id = get_str(call, "id");
        if (id && !answered(asst, end, id)) {
            if (missing.len)
                ah__mock_buf_puts(&missing, ", ");
            ah__mock_buf_puts(&missing, id);
        }
    }
    int rc = 0;
    if (missing.len) {
        ah__bufprintf(err, errsize,
                      "An assistant message with 'tool_calls' must be followed by tool "
                      "messages responding to each 'tool_call_id'. The following "
                      "tool_call_ids did not have response messages: %s",
                      missing.data);
        rc = -1;
    }
    ah__mock_buf_free(&missing);
    return rc;
}

static int read_request(const cJSON *req, ah__mock_conv *c, ah__mock_reply *out, char *err,
                        size_t errsize)
{
    const cJSON *msgs = get(req, "messages");
    if (!cJSON_IsArray(msgs)) {
        ah__bufprintf(err, errsize, "Missing required parameter: 'messages'.");
        return -1;
    }
    if (!msgs->child) {
        ah__bufprintf(err, errsize,
                      "Invalid 'messages': empty array. Expected an array with minimum "
                      "length 1, but got an empty array instead.");
        return -1;
    }
    c->items = msgs;
    /* the assistant message whose tool_calls the tool messages now answer */
    const cJSON *calls = NULL;
    for (const cJSON *m = msgs->child; m; m = m->next) {
        const char *role = get_str(m, "role");
        if (!role) {
            ah__bufprintf(err, errsize, "Missing required parameter: 'messages[].role'.");
            return -1;
        }
        if (strcmp(role, "tool") == 0) {
            const char *id = get_str(m, "tool_call_id");
            int known = 0;
            const cJSON *call, *list = calls ? get(calls, "tool_calls") : NULL;
            cJSON_ArrayForEach(call, list)
            {
                known |= id && str_is(call, "id", id);
            }
            if (!known) {
                ah__bufprintf(err, errsize,
                              "Invalid parameter: messages with role 'tool' must be a "
                              "response to a preceeding message with 'tool_calls'.");
                return -1;
            }
        } else {
            if (calls && check_answered(calls, m, err, errsize) != 0)
                return -1;
            calls = strcmp(role, "assistant") == 0 &&
                            cJSON_GetArraySize(get(m, "tool_calls")) > 0
                        ? m
                        : NULL;
        }
        ah__mock_msg_kind kind;
        if (strcmp(role, "user") == 0)
            kind = AH__MOCK_M_USER;
        else if (strcmp(role, "assistant") == 0)
            kind = AH__MOCK_M_ASSISTANT;
        else if (strcmp(role, "tool") == 0)
            kind = AH__MOCK_M_TOOL_RESULTS;
        else
            continue; /* system / developer */
        ah__mock_nmsg *n = ah__mock_conv_push(c, kind, m);
        if (!n)
            return -2;
        if (kind == AH__MOCK_M_TOOL_RESULTS) {
            ah__mock_buf one = {0};
            ah__mock_append_parts(&one, get(m, "content"), "text");
            ah__mock_add_result(n, one.data ? one.data : "");
            ah__mock_buf_free(&one);
        } else {
            ah__mock_append_parts(&n->text, get(m, "content"), "text");
        }
    }
    if (calls && check_answered(calls, NULL, err, errsize) != 0)
        return -1;
    first_tool(req, c);
    out->include_usage = cJSON_IsTrue(get(get(req, "stream_options"), "include_usage"));
    return 0;
}

/* ---- the stream -------------------------------------------------------------------- */

enum { C_ROLE, C_TEXT_DELTA, C_TOOL_START, C_TOOL_DELTA, C_FINISH, C_USAGE, C_DONE };

static int plan(ah__mock_writer *w)
{
    const ah__mock_reply *r = w->r;
    int text = r->ndeltas > 0;
    /* A tool-only reply carries the role in the tool call's first chunk. */
    ah__mock_writer_add(w, C_ROLE, text || !r->has_tool, 0);
    ah__mock_writer_add(w, C_TEXT_DELTA, r->ndeltas, 0);
    for (size_t c = 0; c < ah__mock_ncalls(r); c++) {
        ah__mock_writer_add(w, C_TOOL_START, 1, c);
        ah__mock_writer_add(w, C_TOOL_DELTA, r->nargs, c);
    }
    ah__mock_writer_add(w, C_FINISH, 1, 0);
    ah__mock_writer_add(w, C_USAGE, r->include_usage, 0);
    ah__mock_writer_add(w, C_DONE, 1, 0);
    /* every chunk starts with the same prefix, up to "choices":[ */
    ah__mock_buf *p = &w->chunk;
    ah__mock_buf_puts(p, "{\"id\":");
    ah__mock_buf_json_cstr(p, r->msg_id);
    ah__mock_buf_puts(p, ",\"object\":\"chat.completion.chunk\",\"created\":" AH__MOCK_CREATED_AT
                         ",\"model\":");
    ah__mock_buf_json_cstr(p, r->model);
    ah__mock_buf_puts(p, ",\"service_tier\":\"default\","
                         "\"system_fingerprint\":\"fp_mock\",\"choices\":[");
    return p->failed ? -1 : 0;
}

static void usage(ah__mock_buf *o, const ah__mock_reply *r)
{
    PUT(o, "\"usage\":{\"prompt_tokens\":");
    ah__mock_put_int(o, r->input_tokens);
    PUT(o, ",\"completion_tokens\":");
    ah__mock_put_int(o, r->output_tokens);
    PUT(o, ",\"total_tokens\":");
    ah__mock_put_int(o, r->input_tokens + r->output_tokens);
    PUT(o, ",\"prompt_tokens_details\":{\"cached_tokens\":0,\"audio_tokens\":0},"
           "\"completion_tokens_details\":{\"reasoning_tokens\":0,\"audio_tokens\":0,"
           "\"accepted_prediction_tokens\":0,\"rejected_prediction_tokens\":0}}");
}

static void chunk_start(ah__mock_writer *w, ah__mock_buf *o)
{
    PUT(o, "data: ");
    ah__mock_buf_put(o, w->chunk.data, w->chunk.len);
}

static void choice_end(ah__mock_writer *w, ah__mock_buf *o)
{
    PUT(o, ",\"logprobs\":null,\"finish_reason\":null}]");
    if (w->r->include_usage)
        PUT(o, ",\"usage\":null");
    PUT(o, "}\n\n");
}

static void emit(ah__mock_writer *w, ah__mock_buf *o, int k, size_t j, size_t call)
{
    const ah__mock_reply *r = w->r;
    switch (k) {
    case C_ROLE:
        chunk_start(w, o);
        PUT(o, "{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\","
               "\"refusal\":null}");
        choice_end(w, o);
        break;
    case C_TEXT_DELTA:
        chunk_start(w, o);
        PUT(o, "{\"index\":0,\"delta\":{\"content\":");
        ah__mock_put_delta(o, r, j);
        PUT(o, "}");
        choice_end(w, o);
        break;
    case C_TOOL_START:
        chunk_start(w, o);
        PUT(o, "{\"index\":0,\"delta\":{");
        if (!r->ndeltas && call == 0)
            PUT(o, "\"role\":\"assistant\",\"content\":null,");
        PUT(o, "\"tool_calls\":[{\"index\":");
        ah__mock_put_size(o, call);
        PUT(o, ",\"id\":");
        ah__mock_put_call_id(o, r->tool_id, call);
        PUT(o, ",\"type\":\"function\",\"function\":{\"name\":");
        ah__mock_buf_json_cstr(o, r->tool_name);
        PUT(o, ",\"arguments\":\"\"}}]");
        if (!r->ndeltas && call == 0)
            PUT(o, ",\"refusal\":null");
        PUT(o, "}");
        choice_end(w, o);
        break;
    case C_TOOL_DELTA:
        chunk_start(w, o);
        PUT(o, "{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":");
        ah__mock_put_size(o, call);
        PUT(o, ",\"function\":{\"arguments\":");
        ah__mock_put_arg(o, r, j);
        PUT(o, "}}]}");
        choice_end(w, o);
        break;
    case C_FINISH:
        chunk_start(w, o);
        PUT(o, "{\"index\":0,\"delta\":{},\"logprobs\":null,\"finish_reason\":");
        if (r->has_tool)
            PUT(o, "\"tool_calls\"}]");
        else
            PUT(o, "\"stop\"}]");
        if (r->include_usage)
            PUT(o, ",\"usage\":null");
        PUT(o, "}\n\n");
        break;
    case C_USAGE:
        chunk_start(w, o);
        PUT(o, "],");
        usage(o, r);
        PUT(o, "}\n\n");
        break;
    case C_DONE:
        PUT(o, "data: [DONE]\n\n");
        break;
    }
}

static void error_event(ah__mock_writer *w, ah__mock_buf *out, const char *type,
                        const char *message)
{
    (void)w;
    PUT(out, "data: {\"error\":{\"message\":");
    ah__mock_buf_json_cstr(out, message);
    PUT(out, ",\"type\":");
    ah__mock_buf_json_cstr(out, type);
    PUT(out, ",\"param\":null,\"code\":null}}\n\ndata: [DONE]\n\n");
}

/* ---- bodies ------------------------------------------------------------------------ */

static void body(const ah__mock_reply *r, ah__mock_buf *o)
{
    PUT(o, "{\"id\":");
    ah__mock_buf_json_cstr(o, r->msg_id);
    PUT(o, ",\"object\":\"chat.completion\",\"created\":" AH__MOCK_CREATED_AT ",\"model\":");
    ah__mock_buf_json_cstr(o, r->model);
    PUT(o, ",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\","
           "\"content\":");
    if (r->ndeltas)
        ah__mock_buf_json_str(o, r->text, r->text_len);
    else
        PUT(o, "null");
    if (r->has_tool) {
        PUT(o, ",\"tool_calls\":[{\"id\":");
        ah__mock_buf_json_cstr(o, r->tool_id);
        PUT(o, ",\"type\":\"function\",\"function\":{\"name\":");
        ah__mock_buf_json_cstr(o, r->tool_name);
        PUT(o, ",\"arguments\":");
        ah__mock_buf_json_str(o, r->tool_args, r->args_len);
        PUT(o, "}}]");
    }
    PUT(o, ",\"refusal\":null,\"annotations\":[]},\"logprobs\":null,"
           "\"finish_reason\":");
    if (r->has_tool)
        PUT(o, "\"tool_calls\"}],");
    else
        PUT(o, "\"stop\"}],");
    usage(o, r);
    PUT(o, ",\"service_tier\":\"default\",\"system_fingerprint\":\"fp_mock\"}");
}

/* clang-format off */
static const char *status_type(int status)
{
    if (status == 429)
        return "requests";
    return status >= 500 ? "server_error" : "invalid_request_error";
}

static const char *status_message(int status)
{
    switch (status) {
    case 401: return "Incorrect API key provided.";
    case 404: return "The requested resource was not found.";
    case 405: return "Method not allowed.";
    case 429: return "Rate limit reached for requests";
    case 503: return "The server is overloaded or not ready yet.";
    default:
        return status >= 500 ? "The server had an error while processing your request. "
                               "Sorry about that!"
                             : "Invalid request.";
    }
}
/* clang-format on */

void ah__mock_openai_error_body(int status, const char *type, const char *message,
                                const char *request_id, ah__mock_buf *out)
{
    (void)request_id;
    const char *code = NULL;
    if (!type) {
        type = status_type(status);
        code = status == 429   ? "rate_limit_exceeded"
               : status == 401 ? "invalid_api_key"
                               : NULL;
        if (!message)
            message = status_message(status);
    }
    PUT(out, "{\"error\":{\"message\":");
    ah__mock_buf_json_cstr(out, message ? message : ah__mock_default_message(type));
    PUT(out, ",\"type\":");
    ah__mock_buf_json_cstr(out, type);
    PUT(out, ",\"param\":null,\"code\":");
    ah__mock_buf_json_cstr(out, code);
    PUT(out, "}}");
}

/* What extra_after_end: true sends after [DONE]: a tool call (to a tool named
 * extra_after_end) and a second end, which a client must ignore. */
static const char extra[] =
    "data: {\"id\":\"chatcmpl-extra\",\"object\":\"chat.completion.chunk\",\"created\":"
    "1700000000,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":"
    "[{\"index\":0,\"id\":\"call_extra\",\"type\":\"function\",\"function\":{\"name\":"
    "\"extra_after_end\",\"arguments\":\"{}\"}}]},\"finish_reason\":null}]}\n\n"
    "data: {\"id\":\"chatcmpl-extra\",\"object\":\"chat.completion.chunk\",\"created\":"
    "1700000000,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},"
    "\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n";

const ah__mock_format ah__mock_format_OPENAI = {
    .path = "/v1/chat/completions",
    .request_id_header = "x-request-id",
    .guess_default = 1,
    .not_found_type = "invalid_request_error",
    .bad_method_type = "invalid_request_error",
    .bad_json_message = "We could not parse the JSON body of your request.",
    .missing_model = "you must provide a model parameter",
    .default_error_type = "server_error",
    .overloaded_status = 503,
    .extra_after_end = extra,
    .msg_id = "chatcmpl-mock",
    .tool_id = "call_mock",
    .read = read_request,
    .plan = plan,
    .emit = emit,
    .error_event = error_event,
    .body = body,
    .error_body = ah__mock_openai_error_body,
};
