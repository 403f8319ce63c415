/* format_responses.c - the mock's OpenAI Responses API (POST /v1/responses): its
 * request reader (with background mode), SSE events with sequence numbers, JSON body and
 * error shapes, behind one ah__mock_format. The background endpoints themselves
 * (GET /v1/responses/{id}, POST .../cancel) are served by mock.c.
 *
 * The events of a reply are planned here and written by core/writer/writer_responses.c,
 * the writer the proxy uses too. Shares no code with the client's codec. */
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

static ah__wr_resp_head head(const ah__mock_reply *r)
{
    ah__wr_resp_head h = {.id = r->msg_id,
                          .model = r->model,
                          .created_at = AH__MOCK_CREATED,
                          .background = r->background,
                          .store = r->background,
                          .tools_json = r->tools_json};
    return h;
}

static ah__wr_block msg_item(const ah__mock_reply *r)
{
    ah__wr_block b = {.kind = AH__WR_TEXT, .id = r->item_id, .text = r->text,
                      .text_len = r->text_len};
    return b;
}

static ah__wr_block fc_item(const ah__mock_reply *r, size_t call, char *id, char *cid,
                            size_t size)
{
    ah__wr_block b = {.kind = AH__WR_TOOL,
                      .id = ah__mock_call_id(id, size, r->tool_id, call),
                      .call_id = ah__mock_call_id(cid, size, r->call_id, call),
                      .name = r->calls[call].name,
                      .text = r->calls[call].args,
                      .text_len = r->calls[call].args_len};
    return b;
}

/* The completed response object: the message item, then each call's item. */
static void completed(const ah__mock_reply *r, ah__mock_buf *o, size_t seq, int event)
{
    enum { MAX = 1 + AH__MOCK_MAX_TOOL_CALLS };
    ah__wr_block items[MAX];
    char ids[MAX][72], cids[MAX][72];
    size_t n = 0;
    if (r->ndeltas)
        items[n++] = msg_item(r);
    for (size_t c = 0; c < ah__mock_ncalls(r) && n < MAX; c++, n++)
        items[n] = fc_item(r, c, ids[n], cids[n], sizeof ids[n]);
    ah__wr_usage u = ah__mock_usage(r, r->output_tokens);
    ah__wr_resp_end end = {.items = items, .n_items = n, .usage = &u};
    ah__wr_resp_head h = head(r);
    /* a plan's max_tokens / refusal: an incomplete response saying why */
    ah__wr_resp_status st = AH__WR_RS_COMPLETED;
    if (r->stop_reason && strcmp(r->stop_reason, "max_tokens") == 0)
        end.incomplete_reason = "max_output_tokens";
    else if (r->stop_reason && strcmp(r->stop_reason, "refusal") == 0)
        end.incomplete_reason = "content_filter";
    if (end.incomplete_reason)
        st = AH__WR_RS_INCOMPLETE;
    if (event)
        ah__wr_r_terminal(o, &h, st, &end, seq);
    else
        ah__wr_r_object(o, &h, st, &end);
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
        ah__mock_writer_add(w, R_ARGS_DELTA, r->calls[c].nargs, c);
        ah__mock_writer_add(w, R_ARGS_DONE, 1, c);
        ah__mock_writer_add(w, R_FC_DONE, 1, c);
    }
    ah__mock_writer_add(w, R_COMPLETED, 1, 0);
    return 0;
}

static void emit(ah__mock_writer *w, ah__mock_buf *o, int k, size_t j, size_t call)
{
    const ah__mock_reply *r = w->r;
    /* the tool item follows the text one; parallel calls follow each other */
    size_t tool_index = (size_t)(r->ndeltas > 0) + call;
    ah__wr_resp_head h = head(r);
    ah__wr_block msg = msg_item(r);
    char id[72], cid[72];
    switch (k) {
    case R_CREATED:
    case R_IN_PROGRESS:
        ah__wr_r_lifecycle(o, k == R_CREATED ? "response.created" : "response.in_progress",
                           &h, w->seq);
        break;
    case R_MSG_ADDED:
    case R_MSG_DONE:
        ah__wr_r_item_event(o, k == R_MSG_DONE, &msg, 0, w->seq);
        break;
    case R_PART_ADDED:
    case R_PART_DONE:
        ah__wr_r_part_event(o, k == R_PART_DONE, r->item_id, 0, r->text, r->text_len, w->seq);
        break;
    case R_TEXT_DELTA:
        ah__wr_r_text_delta(o, r->item_id, 0, AH__MOCK_DELTA(r, j), w->seq);
        break;
    case R_TEXT_DONE:
        ah__wr_r_text_done(o, r->item_id, 0, r->text, r->text_len, w->seq);
        break;
    case R_FC_ADDED:
    case R_FC_DONE: {
        ah__wr_block b = fc_item(r, call, id, cid, sizeof id);
        ah__wr_r_item_event(o, k == R_FC_DONE, &b, tool_index, w->seq);
        break;
    }
    case R_ARGS_DELTA:
        ah__wr_r_args_delta(o, ah__mock_call_id(id, sizeof id, r->tool_id, call), tool_index,
                            AH__MOCK_ARG(r, call, j), w->seq);
        break;
    case R_ARGS_DONE:
        ah__wr_r_args_done(o, ah__mock_call_id(id, sizeof id, r->tool_id, call), tool_index,
                           r->calls[call].args, r->calls[call].args_len, w->seq);
        break;
    case R_COMPLETED:
        completed(r, o, w->seq, 1);
        break;
    }
}

static void error_event(ah__mock_writer *w, ah__mock_buf *out, const char *type,
                        const char *message)
{
    /* the API follows an error event with response.failed */
    ah__wr_r_error(out, type, message, w->seq++);
    ah__wr_resp_head h = head(w->r);
    ah__wr_resp_end end = {.error_code = type, .error_message = message};
    ah__wr_r_terminal(out, &h, AH__WR_RS_FAILED, &end, w->seq++);
}

/* ---- bodies ------------------------------------------------------------------------ */

static void body(const ah__mock_reply *r, ah__mock_buf *o)
{
    completed(r, o, 0, 0);
}

static void error_body(int status, const char *type, const char *message,
                       const char *request_id, ah__mock_buf *out)
{
    (void)request_id;
    ah__wr_openai_error_body(out, status, type, message);
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
    .error_body = error_body,
};
