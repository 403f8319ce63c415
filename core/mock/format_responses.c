/* format_responses.c - the mock's OpenAI Responses API (POST /v1/responses): its
 * request reader (with background mode), SSE events with sequence numbers, JSON body and
 * error shapes, behind one ah__mock_format. The background endpoints themselves
 * (GET /v1/responses/{id}, POST .../cancel) are served by mock.c.
 *
 * Byte layout as recorded in tests/fixtures/real-streams: `event:` lines, every event
 * numbered, the closing events repeating the whole answer. Shares no code with the
 * client's codec. */
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
        if (str_is(t, "type", "function") && get_str(t, "name")) {
            c->tool_name = get_str(t, "name");
            c->tool_schema = get(t, "parameters");
            return;
        }
    }
}

/* Is there an item of `type` with this call_id among [from, to)? */
static int has_call_item(const cJSON *from, const cJSON *to, const char *type,
                         const char *call_id)
{
    for (const cJSON *it = from; it && it != to; it = it->next)
        if (str_is(it, "type", type) && str_is(it, "call_id", call_id))
            return 1;
    return 0;
}

/* The API's pairing rule, with its 400s (docs/mock.md): every function_call item has a
 * function_call_output of the same call_id after it, and every output a call before
 * it. -1 with err set. */
static int check_pairing(const cJSON *input, char *err, size_t errsize)
{
    for (const cJSON *it = input->child; it; it = it->next) {
        const char *id = get_str(it, "call_id");
        if (!id)
            continue;
        if (str_is(it, "type", "function_call") &&
            !has_call_item(it->next, NULL, "function_call_output", id)) {
            ah__bufprintf(err, errsize, "No tool output found for function call %s.", id);
            return -1;
        }
        if (str_is(it, "type", "function_call_output") &&
            !has_call_item(input->child, it, "function_call", id)) {
            ah__bufprintf(err, errsize,
                          "No tool call found for function call output with call_id %s.",
                          id);
            return -1;
        }
    }
    return 0;
}

static int read_request(const cJSON *req, ah__mock_conv *c, ah__mock_reply *out, char *err,
                        size_t errsize)
{
    if (cJSON_IsTrue(get(req, "background"))) {
        /* store defaults to true in this API; an explicit false cannot run in the
         * background (docs/mock.md: the text is ours, not OpenAI's verbatim). */
        const cJSON *store = get(req, "store");
        if (store && !cJSON_IsTrue(store)) {
            ah__bufprintf(err, errsize,
                          "Background mode requires store to be true: set 'store' to "
                          "true (or leave it out) when 'background' is true.");
            return -1;
        }
        out->background = 1;
    }
    const cJSON *input = get(req, "input");
    if (cJSON_IsString(input)) {
        ah__mock_nmsg *n = ah__mock_conv_push(c, AH__MOCK_M_USER, NULL);
        if (!n)
            return -2;
        ah__mock_buf_puts(&n->text, input->valuestring);
        first_tool(req, c);
        return 0;
    }
    if (!cJSON_IsArray(input)) {
        ah__bufprintf(err, errsize, "Missing required parameter: 'input'.");
        return -1;
    }
    if (check_pairing(input, err, errsize) != 0)
        return -1;
    c->items = input;
    for (const cJSON *it = input->child; it; it = it->next) {
        const char *type = get_str(it, "type");
        const char *role = get_str(it, "role");
        if (type && strcmp(type, "function_call_output") == 0) {
            ah__mock_nmsg *n = ah__mock_conv_push(c, AH__MOCK_M_TOOL_RESULTS, it);
            if (!n)
                return -2;
            const cJSON *o = get(it, "output");
            ah__mock_buf one = {0};
            ah__mock_append_parts(&one, o, "input_text output_text text");
            ah__mock_add_result(n, one.data ? one.data : "");
            ah__mock_buf_free(&one);
        } else if ((!type || strcmp(type, "message") == 0) && role) {
            ah__mock_msg_kind kind;
            if (strcmp(role, "user") == 0)
                kind = AH__MOCK_M_USER;
            else if (strcmp(role, "assistant") == 0)
                kind = AH__MOCK_M_ASSISTANT;
            else
                continue; /* system / developer */
            ah__mock_nmsg *n = ah__mock_conv_push(c, kind, it);
            if (!n)
                return -2;
            ah__mock_append_parts(&n->text, get(it, "content"),
                                  "input_text output_text text");
        }
        /* function_call, reasoning and other items carry no text the model answers */
    }
    if (c->n == 0) {
        ah__bufprintf(err, errsize, "Invalid 'input': no message to answer.");
        return -1;
    }
    first_tool(req, c);
    return 0;
}

/* ---- the response object and its items --------------------------------------------- */

/* Responses output items. */
static void resp_msg_item(ah__mock_buf *o, const ah__mock_reply *r, int done)
{
    PUT(o, "{\"id\":");
    ah__mock_buf_json_cstr(o, r->item_id);
    if (!done) {
        PUT(o, ",\"type\":\"message\",\"status\":\"in_progress\",\"content\":[],"
               "\"role\":\"assistant\"}");
        return;
    }
    PUT(o, ",\"type\":\"message\",\"status\":\"completed\",\"content\":[{\"type\":"
           "\"output_text\",\"annotations\":[],\"logprobs\":[],\"text\":");
    ah__mock_buf_json_str(o, r->text, r->text_len);
    PUT(o, "}],\"role\":\"assistant\"}");
}

static void resp_fc_item(ah__mock_buf *o, const ah__mock_reply *r, int done, size_t call)
{
    PUT(o, "{\"id\":");
    ah__mock_put_call_id(o, r->tool_id, call);
    PUT(o, ",\"type\":\"function_call\",\"status\":");
    if (done) {
        PUT(o, "\"completed\",\"arguments\":");
        ah__mock_buf_json_str(o, r->tool_args, r->args_len);
    } else {
        PUT(o, "\"in_progress\",\"arguments\":\"\"");
    }
    PUT(o, ",\"call_id\":");
    ah__mock_put_call_id(o, r->call_id, call);
    PUT(o, ",\"name\":");
    ah__mock_buf_json_cstr(o, r->tool_name);
    PUT(o, "}");
}

typedef enum { RS_IN_PROGRESS, RS_COMPLETED, RS_FAILED } resp_state;

static void resp_object(ah__mock_buf *o, const ah__mock_reply *r, resp_state st,
                        const char *err_code, const char *err_msg)
{
    static const char *const status[] = {"in_progress", "completed", "failed"};
    PUT(o, "{\"id\":");
    ah__mock_buf_json_cstr(o, r->msg_id);
    PUT(o, ",\"object\":\"response\",\"created_at\":" AH__MOCK_CREATED_AT ",\"status\":\"");
    ah__mock_buf_puts(o, status[st]);
    ah__mock_buf_puts(o, r->background ? "\",\"background\":true,\"completed_at\":"
                                       : "\",\"background\":false,\"completed_at\":");
    if (st == RS_COMPLETED)
        PUT(o, AH__MOCK_CREATED_AT);
    else
        PUT(o, "null");
    PUT(o, ",\"error\":");
    if (st == RS_FAILED) {
        PUT(o, "{\"code\":");
        ah__mock_buf_json_cstr(o, err_code);
        PUT(o, ",\"message\":");
        ah__mock_buf_json_cstr(o, err_msg);
        PUT(o, "}");
    } else {
        PUT(o, "null");
    }
    PUT(o,
        ",\"incomplete_details\":null,\"instructions\":null,\"max_output_tokens\":null,"
        "\"model\":");
    ah__mock_buf_json_cstr(o, r->model);
    PUT(o, ",\"output\":[");
    if (st == RS_COMPLETED) {
        int any = 0;
        if (r->ndeltas) {
            resp_msg_item(o, r, 1);
            any = 1;
        }
        for (size_t c = 0; c < ah__mock_ncalls(r); c++) {
            if (any)
                PUT(o, ",");
            resp_fc_item(o, r, 1, c);
            any = 1;
        }
    }
    PUT(o,
        "],\"parallel_tool_calls\":true,\"previous_response_id\":null,"
        "\"reasoning\":{\"effort\":null,\"summary\":null},\"service_tier\":\"default\","
        "\"store\":");
    ah__mock_buf_puts(o, r->background ? "true" : "false");
    PUT(o, ",\"temperature\":1.0,\"text\":{\"format\":{\"type\":\"text\"}},"
           "\"tool_choice\":\"auto\",\"tools\":");
    ah__mock_buf_puts(o, r->tools_json);
    PUT(o, ",\"top_p\":1.0,\"truncation\":\"disabled\",\"usage\":");
    if (st == RS_COMPLETED) {
        PUT(o, "{\"input_tokens\":");
        ah__mock_put_int(o, r->input_tokens);
        PUT(o, ",\"input_tokens_details\":{\"cached_tokens\":0},\"output_tokens\":");
        ah__mock_put_int(o, r->output_tokens);
        PUT(o, ",\"output_tokens_details\":{\"reasoning_tokens\":0},\"total_tokens\":");
        ah__mock_put_int(o, r->input_tokens + r->output_tokens);
        PUT(o, "}");
    } else {
        PUT(o, "null");
    }
    PUT(o, ",\"user\":null,\"metadata\":{}}");
}

/* ---- the stream -------------------------------------------------------------------- */

/* clang-format off */
enum {
    R_CREATED, R_IN_PROGRESS, R_MSG_ADDED, R_PART_ADDED, R_TEXT_DELTA, R_TEXT_DONE,
    R_PART_DONE, R_MSG_DONE, R_FC_ADDED, R_ARGS_DELTA, R_ARGS_DONE, R_FC_DONE,
    R_COMPLETED
};
/* clang-format on */

static int plan(ah__mock_writer *w)
{
    const ah__mock_reply *r = w->r;
    ah__mock_writer_add(w, R_CREATED, 1, 0);
    ah__mock_writer_add(w, R_IN_PROGRESS, 1, 0);
    if (r->ndeltas > 0) {
        ah__mock_writer_add(w, R_MSG_ADDED, 1, 0);
        ah__mock_writer_add(w, R_PART_ADDED, 1, 0);
        ah__mock_writer_add(w, R_TEXT_DELTA, r->ndeltas, 0);
        ah__mock_writer_add(w, R_TEXT_DONE, 1, 0);
        ah__mock_writer_add(w, R_PART_DONE, 1, 0);
        ah__mock_writer_add(w, R_MSG_DONE, 1, 0);
    }
    for (size_t c = 0; c < ah__mock_ncalls(r); c++) {
        ah__mock_writer_add(w, R_FC_ADDED, 1, c);
        ah__mock_writer_add(w, R_ARGS_DELTA, r->nargs, c);
        ah__mock_writer_add(w, R_ARGS_DONE, 1, c);
        ah__mock_writer_add(w, R_FC_DONE, 1, c);
    }
    ah__mock_writer_add(w, R_COMPLETED, 1, 0);
    return 0;
}

static void end_seq(ah__mock_buf *o, size_t seq)
{
    PUT(o, ",\"sequence_number\":");
    ah__mock_put_size(o, seq);
    PUT(o, "}\n\n");
}

static void emit(ah__mock_writer *w, ah__mock_buf *o, int k, size_t j, size_t call)
{
    const ah__mock_reply *r = w->r;
    /* the tool item follows the text one; parallel calls follow each other */
    size_t tool_index = (size_t)(r->ndeltas > 0) + call;
    switch (k) {
    case R_CREATED:
    case R_IN_PROGRESS:
        ah__mock_begin_event(o, k == R_CREATED ? "response.created" : "response.in_progress");
        PUT(o, "{\"type\":");
        ah__mock_buf_puts(o, k == R_CREATED ? "\"response.created\""
                                            : "\"response.in_progress\"");
        PUT(o, ",\"response\":");
        resp_object(o, r, RS_IN_PROGRESS, NULL, NULL);
        end_seq(o, w->seq);
        break;
    case R_MSG_ADDED:
    case R_MSG_DONE:
        ah__mock_begin_event(o,
              k == R_MSG_ADDED ? "response.output_item.added"
                               : "response.output_item.done");
        PUT(o, "{\"type\":");
        ah__mock_buf_puts(o, k == R_MSG_ADDED ? "\"response.output_item.added\""
                                              : "\"response.output_item.done\"");
        PUT(o, ",\"item\":");
        resp_msg_item(o, r, k == R_MSG_DONE);
        PUT(o, ",\"output_index\":0");
        end_seq(o, w->seq);
        break;
    case R_PART_ADDED:
    case R_PART_DONE:
        ah__mock_begin_event(o,
              k == R_PART_ADDED ? "response.content_part.added"
                                : "response.content_part.done");
        PUT(o, "{\"type\":");
        ah__mock_buf_puts(o, k == R_PART_ADDED ? "\"response.content_part.added\""
                                               : "\"response.content_part.done\"");
        PUT(o, ",\"content_index\":0,\"item_id\":");
        ah__mock_buf_json_cstr(o, r->item_id);
        PUT(o,
            ",\"output_index\":0,\"part\":{\"type\":\"output_text\",\"annotations\":[],"
            "\"logprobs\":[],\"text\":");
        if (k == R_PART_DONE)
            ah__mock_buf_json_str(o, r->text, r->text_len);
        else
            PUT(o, "\"\"");
        PUT(o, "}");
        end_seq(o, w->seq);
        break;
    case R_TEXT_DELTA:
        PUT(o, "event: response.output_text.delta\ndata: {\"type\":"
               "\"response.output_text.delta\",\"content_index\":0,\"delta\":");
        ah__mock_put_delta(o, r, j);
        PUT(o, ",\"item_id\":");
        ah__mock_buf_json_cstr(o, r->item_id);
        PUT(o, ",\"logprobs\":[],\"output_index\":0");
        end_seq(o, w->seq);
        break;
    case R_TEXT_DONE:
        ah__mock_begin_event(o, "response.output_text.done");
        PUT(o,
            "{\"type\":\"response.output_text.done\",\"content_index\":0,\"item_id\":");
        ah__mock_buf_json_cstr(o, r->item_id);
        PUT(o, ",\"logprobs\":[],\"output_index\":0,\"sequence_number\":");
        ah__mock_put_size(o, w->seq);
        PUT(o, ",\"text\":");
        ah__mock_buf_json_str(o, r->text, r->text_len);
        PUT(o, "}\n\n");
        break;
    case R_FC_ADDED:
    case R_FC_DONE:
        ah__mock_begin_event(o,
              k == R_FC_ADDED ? "response.output_item.added"
                              : "response.output_item.done");
        PUT(o, "{\"type\":");
        ah__mock_buf_puts(o, k == R_FC_ADDED ? "\"response.output_item.added\""
                                             : "\"response.output_item.done\"");
        PUT(o, ",\"item\":");
        resp_fc_item(o, r, k == R_FC_DONE, call);
        PUT(o, ",\"output_index\":");
        ah__mock_put_size(o, tool_index);
        end_seq(o, w->seq);
        break;
    case R_ARGS_DELTA:
        ah__mock_begin_event(o, "response.function_call_arguments.delta");
        PUT(o, "{\"type\":\"response.function_call_arguments.delta\",\"delta\":");
        ah__mock_put_arg(o, r, j);
        PUT(o, ",\"item_id\":");
        ah__mock_put_call_id(o, r->tool_id, call);
        PUT(o, ",\"output_index\":");
        ah__mock_put_size(o, tool_index);
        end_seq(o, w->seq);
        break;
    case R_ARGS_DONE:
        ah__mock_begin_event(o, "response.function_call_arguments.done");
        PUT(o, "{\"type\":\"response.function_call_arguments.done\",\"arguments\":");
        ah__mock_buf_json_str(o, r->tool_args, r->args_len);
        PUT(o, ",\"item_id\":");
        ah__mock_put_call_id(o, r->tool_id, call);
        PUT(o, ",\"output_index\":");
        ah__mock_put_size(o, tool_index);
        end_seq(o, w->seq);
        break;
    case R_COMPLETED:
        ah__mock_begin_event(o, "response.completed");
        PUT(o, "{\"type\":\"response.completed\",\"response\":");
        resp_object(o, r, RS_COMPLETED, NULL, NULL);
        end_seq(o, w->seq);
        break;
    }
}

static void error_event(ah__mock_writer *w, ah__mock_buf *out, const char *type,
                        const char *message)
{
    PUT(out, "event: error\ndata: {\"type\":\"error\",\"sequence_number\":");
    ah__mock_put_size(out, w->seq++);
    PUT(out, ",\"error\":{\"type\":");
    ah__mock_buf_json_cstr(out, type);
    PUT(out, ",\"code\":");
    ah__mock_buf_json_cstr(out, type);
    PUT(out, ",\"message\":");
    ah__mock_buf_json_cstr(out, message);
    PUT(out, ",\"param\":null}}\n\nevent: response.failed\ndata: {\"type\":"
             "\"response.failed\",\"response\":");
    resp_object(out, w->r, RS_FAILED, type, message);
    end_seq(out, w->seq++);
}

/* ---- bodies ------------------------------------------------------------------------ */

static void body(const ah__mock_reply *r, ah__mock_buf *o)
{
    resp_object(o, r, RS_COMPLETED, NULL, NULL);
}

/* What extra_after_end: true sends after response.completed: a tool call (to a tool
 * named extra_after_end), which a client must ignore. */
static const char extra[] =
    "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\","
    "\"sequence_number\":9000,\"output_index\":5,\"item\":{\"type\":\"function_call\","
    "\"id\":\"fc_extra\",\"call_id\":\"call_extra\",\"name\":\"extra_after_end\","
    "\"arguments\":\"\",\"status\":\"in_progress\"}}\n\n"
    "event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\","
    "\"sequence_number\":9001,\"output_index\":5,\"item\":{\"type\":\"function_call\","
    "\"id\":\"fc_extra\",\"call_id\":\"call_extra\",\"name\":\"extra_after_end\","
    "\"arguments\":\"{}\",\"status\":\"completed\"}}\n\n";

const ah__mock_format ah__mock_format_RESPONSES = {
    .path = "/v1/responses",
    .request_id_header = "x-request-id",
    .not_found_type = "invalid_request_error",
    .bad_method_type = "invalid_request_error",
    .bad_json_message = "We could not parse the JSON body of your request.",
    .missing_model = "you must provide a model parameter",
    .default_error_type = "server_error",
    .overloaded_status = 503,
    .extra_after_end = extra,
    .msg_id = "resp_mock",
    .tool_id = "fc_mock",
    .item_id = "msg_mock",
    .call_id = "call_mock",
    .read = read_request,
    .plan = plan,
    .emit = emit,
    .error_event = error_event,
    .body = body,
    .error_body = ah__mock_openai_error_body,
};
