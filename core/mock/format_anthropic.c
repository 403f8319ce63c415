/* format_anthropic.c - the mock's Anthropic Messages API (POST /v1/messages): its
 * request reader, SSE events, JSON body and error shapes, behind one ah__mock_format.
 *
 * The events of a reply are planned here (a ping right after the first content block
 * starts, as the API sends it) and written by core/writer/writer_anthropic.c, the writer
 * the proxy uses too. Shares no code with the client's codec. */
#include "mock_internal.h"

#include <string.h>

#define PUT AH__MOCK_PUT
#define get ah__mock_get
#define get_str ah__mock_get_str
#define str_is ah__mock_str_is

/* ---- the request ------------------------------------------------------------------- */

/* Is there a block of `type` in content whose `key` is id? */
static int has_block_id(const cJSON *content, const char *type, const char *key,
                        const char *id)
{
    const cJSON *b;
    const cJSON *list = cJSON_IsArray(content) ? content : NULL;
    cJSON_ArrayForEach(b, list)
    {
        if (str_is(b, "type", type) && str_is(b, key, id))
            return 1;
    }
    return 0;
}

/* The API's pairing rule, with its 400s (docs/mock.md): every tool_use of an assistant
 * message is answered by a tool_result in the message right after it, and every
 * tool_result answers a tool_use of the message right before it. `prev` is message i-1
 * (NULL for the first), `m` message i. A trailing assistant message is a prefill and
 * not checked here. -1 with err set. */
static int check_pairing(const cJSON *prev, const cJSON *m, int i, char *err,
                         size_t errsize)
{
    const cJSON *next = str_is(m, "role", "user") ? get(m, "content") : NULL;
    if (prev && str_is(prev, "role", "assistant")) {
        ah__mock_buf missing = {0};
        const cJSON *b, *calls = get(prev, "content");
        if (!cJSON_IsArray(calls))
            calls = NULL;
        cJSON_ArrayForEach(b, calls)
        {
            const char *id = get_str(b, "id");
            if (str_is(b, "type", "tool_use") && id &&
                !has_block_id(next, "tool_result", "tool_use_id", id)) {
                if (missing.len)
                    ah__mock_buf_puts(&missing, ", ");
                ah__mock_buf_puts(&missing, id);
            }
        }
        if (missing.len) {
            ah__bufprintf(err, errsize,
                          "messages.%d: `tool_use` ids were found without `tool_result` "
                          "blocks immediately after: %s. Each `tool_use` block must have "
                          "a corresponding `tool_result` block in the next message.",
                          i - 1, missing.data);
            ah__mock_buf_free(&missing);
            return -1;
        }
        ah__mock_buf_free(&missing);
    }
    int j = 0;
    const cJSON *b, *results = cJSON_IsArray(next) ? next : NULL;
    cJSON_ArrayForEach(b, results)
    {
        const char *id = get_str(b, "tool_use_id");
        if (str_is(b, "type", "tool_result") &&
            (!id || !prev || !str_is(prev, "role", "assistant") ||
             !has_block_id(get(prev, "content"), "tool_use", "id", id))) {
            ah__bufprintf(
                err, errsize,
                "messages.%d.content.%d: unexpected `tool_use_id` found in "
                "`tool_result` blocks: %s. Each `tool_result` block must have a "
                "corresponding `tool_use` block in the previous message.",
                i, j, id ? id : "");
            return -1;
        }
        j++;
    }
    return 0;
}

static int read_request(const cJSON *req, ah__mock_conv *c, ah__mock_reply *out, char *err,
                        size_t errsize)
{
    (void)out;
    const cJSON *msgs = get(req, "messages");
    if (!cJSON_IsNumber(get(req, "max_tokens"))) {
        ah__bufprintf(err, errsize, "max_tokens: Field required");
        return -1;
    }
    if (!cJSON_IsArray(msgs)) {
        ah__bufprintf(err, errsize, "messages: Field required");
        return -1;
    }
    if (!msgs->child) {
        ah__bufprintf(err, errsize, "messages: at least one message is required");
        return -1;
    }
    c->items = msgs;
    int i = 0;
    const cJSON *prev = NULL;
    for (const cJSON *m = msgs->child; m; prev = m, m = m->next, i++) {
        const cJSON *content = get(m, "content");
        int user = str_is(m, "role", "user");
        if (!user && !str_is(m, "role", "assistant")) {
            ah__bufprintf(err, errsize,
                          "messages.%d.role: Input should be 'user' or 'assistant'", i);
            return -1;
        }
        if (check_pairing(prev, m, i, err, errsize) != 0)
            return -1;
        int results = 0;
        const cJSON *b;
        if (user && cJSON_IsArray(content)) {
            cJSON_ArrayForEach(b, content)
            {
                results |= str_is(b, "type", "tool_result");
            }
        }
        ah__mock_nmsg *n = ah__mock_conv_push(c,
                                              !user     ? AH__MOCK_M_ASSISTANT
                                              : results ? AH__MOCK_M_TOOL_RESULTS
                                                        : AH__MOCK_M_USER,
                                              m);
        if (!n)
            return -2;
        if (!results) {
            ah__mock_append_parts(&n->text, content, "text");
            continue;
        }
        cJSON_ArrayForEach(b, content)
        {
            if (!str_is(b, "type", "tool_result"))
                continue;
            ah__mock_buf one = {0};
            ah__mock_append_parts(&one, get(b, "content"), "text");
            ah__mock_add_result(n, one.data ? one.data : "");
            ah__mock_buf_free(&one);
        }
    }
    /* Server tools (web search, ...) have no input_schema: only client tools count. */
    const cJSON *t;
    if (!str_is(get(req, "tool_choice"), "type", "none")) {
        cJSON_ArrayForEach(t, get(req, "tools"))
        {
            if (get_str(t, "name") && cJSON_IsObject(get(t, "input_schema"))) {
                c->tool_name = get_str(t, "name");
                c->tool_schema = get(t, "input_schema");
                break;
            }
        }
    }
    return 0;
}

/* A trailing assistant message: refused outright for Claude 4.6 and later and with
 * thinking on, and for older models when it ends in whitespace. */
static int refuses_prefill(const cJSON *req, const ah__mock_nmsg *last, char *err,
                           size_t errsize)
{
    int maj, min;
    const cJSON *th = get(req, "thinking");
    if ((ah_claude_version(get_str(req, "model"), &maj, &min) &&
         (maj > 4 || (maj == 4 && min >= 6))) ||
        (cJSON_IsObject(th) && !str_is(th, "type", "disabled"))) {
        ah__bufprintf(err, errsize, "%s", AH__MOCK_PREFILL_REFUSAL);
        return 1;
    }
    if (last->text.len) {
        char e = last->text.data[last->text.len - 1];
        if (e == ' ' || e == '\n' || e == '\t' || e == '\r') {
            ah__bufprintf(err, errsize,
                          "messages: final assistant content cannot end with trailing "
                          "whitespace");
            return 1;
        }
    }
    return 0;
}

/* ---- the stream -------------------------------------------------------------------- */

/* clang-format off */
enum {
    A_MSG_START, A_TEXT_START, A_PING, A_TEXT_DELTA, A_TEXT_STOP, A_TOOL_START,
    A_TOOL_DELTA, A_TOOL_STOP, A_MSG_DELTA, A_MSG_STOP
};
/* clang-format on */

static int plan(ah__mock_writer *w)
{
    const ah__mock_reply *r = w->r;
    int text = r->ndeltas > 0;
    /* The API sends a ping right after the first content block starts. */
    ah__mock_writer_add(w, A_MSG_START, 1, 0);
    if (text) {
        ah__mock_writer_add(w, A_TEXT_START, 1, 0);
        ah__mock_writer_add(w, A_PING, 1, 0);
        ah__mock_writer_add(w, A_TEXT_DELTA, r->ndeltas, 0);
        ah__mock_writer_add(w, A_TEXT_STOP, 1, 0);
    }
    for (size_t c = 0; c < ah__mock_ncalls(r); c++) {
        ah__mock_writer_add(w, A_TOOL_START, 1, c);
        ah__mock_writer_add(w, A_PING, !text && c == 0, 0);
        /* the first partial_json is "" */
        ah__mock_writer_add(w, A_TOOL_DELTA, r->calls[c].nargs + 1, c);
        ah__mock_writer_add(w, A_TOOL_STOP, 1, c);
    }
    ah__mock_writer_add(w, A_PING, !text && !r->has_tool, 0);
    ah__mock_writer_add(w, A_MSG_DELTA, 1, 0);
    ah__mock_writer_add(w, A_MSG_STOP, 1, 0);
    return 0;
}

static ah__wr_anthropic_head head(const ah__mock_reply *r)
{
    ah__wr_anthropic_head h = {.id = r->msg_id, .model = r->model, .service_tier = "standard"};
    return h;
}

/* The reply's stop reason: a plan's, else tool_use or end_turn. */
static const char *stop_of(const ah__mock_reply *r)
{
    return r->stop_reason ? r->stop_reason : r->has_tool ? "tool_use" : "end_turn";
}

static void emit(ah__mock_writer *w, ah__mock_buf *o, int k, size_t j, size_t call)
{
    const ah__mock_reply *r = w->r;
    /* the tool block follows the text one; parallel calls follow each other */
    size_t tool_index = (size_t)(r->ndeltas > 0) + call;
    char id[72];
    switch (k) {
    case A_MSG_START: {
        ah__wr_anthropic_head h = head(r);
        ah__wr_usage u = ah__mock_usage(r, 1);
        ah__wr_a_message_start(o, &h, &u);
        break;
    }
    case A_TEXT_START: {
        ah__wr_block b = {.kind = AH__WR_TEXT};
        ah__wr_a_block_start(o, 0, &b);
        break;
    }
    case A_PING:
        ah__wr_a_ping(o);
        break;
    case A_TEXT_DELTA:
        ah__wr_a_delta(o, 0, AH__WR_A_TEXT, AH__MOCK_DELTA(r, j));
        break;
    case A_TEXT_STOP:
    case A_TOOL_STOP:
        ah__wr_a_block_stop(o, k == A_TEXT_STOP ? 0 : tool_index);
        break;
    case A_TOOL_START: {
        ah__wr_block b = {.kind = AH__WR_TOOL,
                          .id = ah__mock_call_id(id, sizeof id, r->tool_id, call),
                          .name = r->calls[call].name};
        ah__wr_a_block_start(o, tool_index, &b);
        break;
    }
    case A_TOOL_DELTA:
        /* the first partial_json is "" */
        if (j == 0)
            ah__wr_a_delta(o, tool_index, AH__WR_A_JSON, "", 0);
        else
            ah__wr_a_delta(o, tool_index, AH__WR_A_JSON, AH__MOCK_ARG(r, call, j - 1));
        break;
    case A_MSG_DELTA: {
        ah__wr_usage u = ah__mock_usage(r, r->output_tokens);
        ah__wr_a_message_delta_details(o, stop_of(r), r->stop_category, &u);
        break;
    }
    case A_MSG_STOP:
        ah__wr_a_message_stop(o);
        break;
    }
}

static void error_event(ah__mock_writer *w, ah__mock_buf *out, const char *type,
                        const char *message)
{
    ah__wr_a_error(out, type, message, w->request_id);
}

/* ---- bodies ------------------------------------------------------------------------ */

static void body(const ah__mock_reply *r, ah__mock_buf *o)
{
    ah__wr_block b[2];
    size_t n = 0;
    if (r->ndeltas)
        b[n++] = (ah__wr_block){.kind = AH__WR_TEXT, .text = r->text, .text_len = r->text_len};
    if (r->has_tool)
        b[n++] = (ah__wr_block){.kind = AH__WR_TOOL,
                                .id = r->tool_id,
                                .name = r->calls[0].name,
                                .text = r->calls[0].args,
                                .text_len = r->calls[0].args_len};
    ah__wr_anthropic_head h = head(r);
    ah__wr_usage u = ah__mock_usage(r, r->output_tokens);
    ah__wr_a_body(o, &h, b, n, stop_of(r), &u);
}

static void error_body(int status, const char *type, const char *message,
                       const char *request_id, ah__mock_buf *out)
{
    ah__wr_a_error_body(out, status, type, message, request_id);
}

/* What extra_after_end: true sends after the final event: a tool call (to a tool named
 * extra_after_end) and a second end, which a client must ignore. */
static const char extra[] =
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":7,"
    "\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_extra\",\"name\":"
    "\"extra_after_end\",\"input\":{}}}\n\n"
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":7}\n\n"
    "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":"
    "\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":1}}\n\n"
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";

const ah__mock_format ah__mock_format_ANTHROPIC = {
    .path = "/v1/messages",
    .request_id_header = "request-id",
    .signature_headers = {"anthropic-version", "x-api-key"},
    .not_found_type = "not_found_error",
    .bad_method_type = "invalid_request_error",
    .bad_json_message = "There was an error parsing the body of your request: invalid JSON",
    .missing_model = "model: Field required",
    .default_error_type = "overloaded_error",
    .overloaded_status = 529,
    .extra_after_end = extra,
    .msg_id = "msg_mock",
    .tool_id = "toolu_mock",
    .read = read_request,
    .refuses_prefill = refuses_prefill,
    .plan = plan,
    .emit = emit,
    .error_event = error_event,
    .body = body,
    .error_body = error_body,
};
