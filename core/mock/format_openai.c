/* format_openai.c - the mock's OpenAI Chat Completions API (POST /v1/chat/completions,
 * wire name "openai"): its request reader, SSE chunks, JSON body and error shapes,
 * behind one ah__mock_format.
 *
 * The chunks of a reply are planned here (a tool-only reply carries the role in the tool
 * call's first chunk) and written by core/writer/writer_openai.c, the writer the proxy
 * uses too. Shares no code with the client's codec. */
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

static ah__wr_chat_head head(const ah__mock_reply *r)
{
    ah__wr_chat_head h = {.id = r->msg_id,
                          .model = r->model,
                          .created = AH__MOCK_CREATED,
                          .service_tier = "default",
                          .system_fingerprint = "fp_mock",
                          .include_usage = r->include_usage};
    return h;
}

static int plan(ah__mock_writer *w)
{
    const ah__mock_reply *r = w->r;
    int text = r->ndeltas > 0;
    /* A tool-only reply carries the role in the tool call's first chunk. */
    ah__mock_writer_add(w, C_ROLE, text || !r->has_tool, 0);
    ah__mock_writer_add(w, C_TEXT_DELTA, r->ndeltas, 0);
    for (size_t c = 0; c < ah__mock_ncalls(r); c++) {
        ah__mock_writer_add(w, C_TOOL_START, 1, c);
        ah__mock_writer_add(w, C_TOOL_DELTA, r->calls[c].nargs, c);
    }
    ah__mock_writer_add(w, C_FINISH, 1, 0);
    ah__mock_writer_add(w, C_USAGE, r->include_usage, 0);
    ah__mock_writer_add(w, C_DONE, 1, 0);
    /* every chunk starts with the same prefix, up to "choices":[ */
    ah__wr_chat_head h = head(r);
    ah__wr_c_prefix(&w->chunk, &h);
    return w->chunk.failed ? -1 : 0;
}

/* The finish_reason: a plan's stop_reason in Chat's words (max_tokens: length, refusal:
 * content_filter), else tool_calls or stop. */
static const char *finish_of(const ah__mock_reply *r)
{
    const char *sr = r->stop_reason;
    if (!sr)
        return r->has_tool ? "tool_calls" : "stop";
    return strcmp(sr, "max_tokens") == 0                      ? "length"
           : strcmp(sr, "refusal") == 0                       ? "content_filter"
           : strcmp(sr, "tool_use") == 0                      ? "tool_calls"
                                                              : "stop";
}

static void emit(ah__mock_writer *w, ah__mock_buf *o, int k, size_t j, size_t call)
{
    const ah__mock_reply *r = w->r;
    int iu = r->include_usage;
    char id[72];
    switch (k) {
    case C_ROLE:
        ah__wr_c_role(o, &w->chunk, iu);
        break;
    case C_TEXT_DELTA:
        ah__wr_c_text(o, &w->chunk, iu, AH__MOCK_DELTA(r, j));
        break;
    case C_TOOL_START:
        ah__wr_c_tool_start(o, &w->chunk, iu, call,
                            ah__mock_call_id(id, sizeof id, r->tool_id, call),
                            r->calls[call].name,
                            !r->ndeltas && call == 0);
        break;
    case C_TOOL_DELTA:
        ah__wr_c_tool_args(o, &w->chunk, iu, call, AH__MOCK_ARG(r, call, j));
        break;
    case C_FINISH:
        ah__wr_c_finish(o, &w->chunk, iu, finish_of(r));
        break;
    case C_USAGE: {
        ah__wr_usage u = ah__mock_usage(r, r->output_tokens);
        ah__wr_c_usage(o, &w->chunk, &u);
        break;
    }
    case C_DONE:
        ah__wr_c_done(o);
        break;
    }
}

static void error_event(ah__mock_writer *w, ah__mock_buf *out, const char *type,
                        const char *message)
{
    (void)w;
    /* the API ends an errored stream with [DONE] too */
    ah__wr_c_error(out, type, message);
    ah__wr_c_done(out);
}

/* ---- bodies ------------------------------------------------------------------------ */

static void body(const ah__mock_reply *r, ah__mock_buf *o)
{
    ah__wr_block tool = {.kind = AH__WR_TOOL, .id = r->tool_id};
    if (r->has_tool) {
        tool.name = r->calls[0].name;
        tool.text = r->calls[0].args;
        tool.text_len = r->calls[0].args_len;
    }
    ah__wr_chat_head h = head(r);
    ah__wr_usage u = ah__mock_usage(r, r->output_tokens);
    ah__wr_c_body(o, &h, r->ndeltas ? r->text : NULL, r->text_len, &tool, r->has_tool ? 1 : 0,
                  finish_of(r), &u);
}

static void error_body(int status, const char *type, const char *message,
                       const char *request_id, ah__mock_buf *out)
{
    (void)request_id;
    ah__wr_openai_error_body(out, status, type, message);
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
    .error_body = error_body,
};
