/* writer_responses.c - the OpenAI Responses API's SSE events, response object and items.
 *
 * Byte layout as recorded in tests/fixtures/real-streams/responses: `event:` lines, every
 * event numbered (sequence_number), the closing events repeating the whole answer
 * (output_text.done, content_part.done, output_item.done, response.completed). Used by
 * the mock (format_responses.c) and the proxy. */
#include "writer.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#define PUT AH__WR_PUT

static long long known(long long v)
{
    return v < 0 ? 0 : v;
}

static void end_seq(ah__wbuf *o, size_t seq)
{
    PUT(o, ",\"sequence_number\":");
    ah__wbuf_size(o, seq);
    PUT(o, "}\n\n");
}

void ah__wr_r_item(ah__wbuf *o, const ah__wr_block *b, int done)
{
    switch (b->kind) {
    case AH__WR_TEXT:
        PUT(o, "{\"id\":");
        ah__wbuf_json_cstr(o, b->id);
        if (!done) {
            PUT(o, ",\"type\":\"message\",\"status\":\"in_progress\",\"content\":[],"
                   "\"role\":\"assistant\"}");
            return;
        }
        PUT(o, ",\"type\":\"message\",\"status\":\"completed\",\"content\":[{\"type\":"
               "\"output_text\",\"annotations\":[],\"logprobs\":[],\"text\":");
        ah__wbuf_json_str(o, b->text ? b->text : "", b->text_len);
        PUT(o, "}],\"role\":\"assistant\"}");
        return;
    case AH__WR_TOOL:
    case AH__WR_SERVER_TOOL:
        PUT(o, "{\"id\":");
        ah__wbuf_json_cstr(o, b->id);
        PUT(o, ",\"type\":\"function_call\",\"status\":");
        if (done) {
            PUT(o, "\"completed\",\"arguments\":");
            ah__wbuf_json_str(o, b->text ? b->text : "", b->text_len);
        } else {
            PUT(o, "\"in_progress\",\"arguments\":\"\"");
        }
        PUT(o, ",\"call_id\":");
        ah__wbuf_json_cstr(o, b->call_id);
        PUT(o, ",\"name\":");
        ah__wbuf_json_cstr(o, b->name);
        PUT(o, "}");
        return;
    case AH__WR_THINKING:
    case AH__WR_REDACTED:
        PUT(o, "{\"id\":");
        ah__wbuf_json_cstr(o, b->id);
        PUT(o, ",\"type\":\"reasoning\",\"summary\":[");
        if (done && b->text_len) {
            PUT(o, "{\"type\":\"summary_text\",\"text\":");
            ah__wbuf_json_str(o, b->text, b->text_len);
            PUT(o, "}");
        }
        PUT(o, "]");
        if (b->encrypted_len) {
            PUT(o, ",\"encrypted_content\":");
            ah__wbuf_json_str(o, b->encrypted, b->encrypted_len);
        }
        PUT(o, "}");
        return;
    case AH__WR_RAW:
        if (b->raw_len)
            ah__wbuf_put(o, b->raw, b->raw_len);
        else
            PUT(o, "{}");
        return;
    }
}

static const char *const status_name[] = {"in_progress", "completed", "failed", "incomplete"};

/* The values the writer owns in a response object. */
static void put_completed_at(ah__wbuf *o, const ah__wr_resp_head *h, ah__wr_resp_status st)
{
    if (st == AH__WR_RS_COMPLETED)
        ah__wbuf_int(o, h->created_at);
    else
        PUT(o, "null");
}

static void put_error(ah__wbuf *o, ah__wr_resp_status st, const ah__wr_resp_end *end)
{
    if (st == AH__WR_RS_FAILED && end) {
        PUT(o, "{\"code\":");
        ah__wbuf_json_cstr(o, end->error_code);
        PUT(o, ",\"message\":");
        ah__wbuf_json_cstr(o, end->error_message);
        PUT(o, "}");
    } else {
        PUT(o, "null");
    }
}

static void put_incomplete(ah__wbuf *o, ah__wr_resp_status st, const ah__wr_resp_end *end)
{
    if (st == AH__WR_RS_INCOMPLETE) {
        PUT(o, "{\"reason\":");
        ah__wbuf_json_cstr(o, end && end->incomplete_reason ? end->incomplete_reason
                                                            : "interrupted");
        PUT(o, "}");
    } else {
        PUT(o, "null");
    }
}

static void put_output(ah__wbuf *o, const ah__wr_resp_end *end)
{
    PUT(o, "[");
    for (size_t i = 0; end && i < end->n_items; i++) {
        if (i)
            PUT(o, ",");
        ah__wr_r_item(o, &end->items[i], 1);
    }
    PUT(o, "]");
}

static void put_usage(ah__wbuf *o, const ah__wr_resp_end *end)
{
    const ah__wr_usage *u = end ? end->usage : NULL;
    if (!u) {
        PUT(o, "null");
        return;
    }
    long long in = known(u->input), out = known(u->output);
    PUT(o, "{\"input_tokens\":");
    ah__wbuf_int(o, in);
    PUT(o, ",\"input_tokens_details\":{\"cached_tokens\":");
    ah__wbuf_int(o, known(u->cache_read));
    PUT(o, "},\"output_tokens\":");
    ah__wbuf_int(o, out);
    PUT(o, ",\"output_tokens_details\":{\"reasoning_tokens\":0},\"total_tokens\":");
    ah__wbuf_int(o, in + out);
    PUT(o, "}");
}

/* The upstream's own object, its fields in its order, with the writer's values in place
 * of the ones that change as the spliced response goes on. */
static void object_from_template(ah__wbuf *o, const ah__wr_resp_head *h,
                                 ah__wr_resp_status st, const ah__wr_resp_end *end)
{
    static const char *const owned[] = {"status",    "completed_at", "error",
                                        "incomplete_details", "output", "usage"};
    int seen[6] = {0};
    int first = 1;
    PUT(o, "{");
    for (const cJSON *c = h->tmpl->child; c; c = c->next) {
        if (!c->string)
            continue;
        if (!first)
            PUT(o, ",");
        first = 0;
        ah__wbuf_json_cstr(o, c->string);
        PUT(o, ":");
        int k = -1;
        for (int i = 0; i < 6; i++)
            if (strcmp(c->string, owned[i]) == 0)
                k = i;
        if (k >= 0)
            seen[k] = 1;
        switch (k) {
        case 0:
            ah__wbuf_json_cstr(o, status_name[st]);
            break;
        case 1:
            put_completed_at(o, h, st);
            break;
        case 2:
            put_error(o, st, end);
            break;
        case 3:
            put_incomplete(o, st, end);
            break;
        case 4:
            put_output(o, end);
            break;
        case 5:
            put_usage(o, end);
            break;
        default: {
            char *v = cJSON_PrintUnformatted(c);
            if (v)
                ah__wbuf_puts(o, v);
            else
                o->failed = 1;
            cJSON_free(v);
        }
        }
    }
    for (int i = 0; i < 6; i++) {
        if (seen[i] || (i == 3 && st != AH__WR_RS_INCOMPLETE) ||
            (i == 2 && st != AH__WR_RS_FAILED))
            continue;
        if (!first)
            PUT(o, ",");
        first = 0;
        ah__wbuf_json_cstr(o, owned[i]);
        PUT(o, ":");
        switch (i) {
        case 0:
            ah__wbuf_json_cstr(o, status_name[st]);
            break;
        case 1:
            put_completed_at(o, h, st);
            break;
        case 2:
            put_error(o, st, end);
            break;
        case 3:
            put_incomplete(o, st, end);
            break;
        case 4:
            put_output(o, end);
            break;
        default:
            put_usage(o, end);
        }
    }
    PUT(o, "}");
}

void ah__wr_r_object(ah__wbuf *o, const ah__wr_resp_head *h, ah__wr_resp_status st,
                     const ah__wr_resp_end *end)
{
    if (h->tmpl) {
        object_from_template(o, h, st, end);
        return;
    }
    PUT(o, "{\"id\":");
    ah__wbuf_json_cstr(o, h->id);
    PUT(o, ",\"object\":\"response\",\"created_at\":");
    ah__wbuf_int(o, h->created_at);
    PUT(o, ",\"status\":\"");
    ah__wbuf_puts(o, status_name[st]);
    ah__wbuf_puts(o, h->background ? "\",\"background\":true,\"completed_at\":"
                                   : "\",\"background\":false,\"completed_at\":");
    put_completed_at(o, h, st);
    PUT(o, ",\"error\":");
    put_error(o, st, end);
    PUT(o, ",\"incomplete_details\":");
    put_incomplete(o, st, end);
    PUT(o, ",\"instructions\":null,\"max_output_tokens\":null,\"model\":");
    ah__wbuf_json_cstr(o, h->model);
    PUT(o, ",\"output\":");
    put_output(o, end);
    PUT(o,
        ",\"parallel_tool_calls\":true,\"previous_response_id\":null,"
        "\"reasoning\":{\"effort\":null,\"summary\":null},\"service_tier\":\"default\","
        "\"store\":");
    ah__wbuf_puts(o, h->store ? "true" : "false");
    PUT(o, ",\"temperature\":1.0,\"text\":{\"format\":{\"type\":\"text\"}},"
           "\"tool_choice\":\"auto\",\"tools\":");
    ah__wbuf_puts(o, h->tools_json ? h->tools_json : "[]");
    PUT(o, ",\"top_p\":1.0,\"truncation\":\"disabled\",\"usage\":");
    put_usage(o, end);
    PUT(o, ",\"user\":null,\"metadata\":{}}");
}

void ah__wr_r_lifecycle(ah__wbuf *o, const char *name, const ah__wr_resp_head *h, size_t seq)
{
    ah__wr_begin_event(o, name);
    PUT(o, "{\"type\":");
    ah__wbuf_json_cstr(o, name);
    PUT(o, ",\"response\":");
    ah__wr_r_object(o, h, AH__WR_RS_IN_PROGRESS, NULL);
    end_seq(o, seq);
}

void ah__wr_r_item_event(ah__wbuf *o, int done, const ah__wr_block *b, size_t output_index,
                         size_t seq)
{
    const char *name = done ? "response.output_item.done" : "response.output_item.added";
    ah__wr_begin_event(o, name);
    PUT(o, "{\"type\":");
    ah__wbuf_json_cstr(o, name);
    PUT(o, ",\"item\":");
    ah__wr_r_item(o, b, done);
    PUT(o, ",\"output_index\":");
    ah__wbuf_size(o, output_index);
    end_seq(o, seq);
}

void ah__wr_r_part_event(ah__wbuf *o, int done, const char *item_id, size_t output_index,
                         const char *text, size_t text_len, size_t seq)
{
    const char *name = done ? "response.content_part.done" : "response.content_part.added";
    ah__wr_begin_event(o, name);
    PUT(o, "{\"type\":");
    ah__wbuf_json_cstr(o, name);
    PUT(o, ",\"content_index\":0,\"item_id\":");
    ah__wbuf_json_cstr(o, item_id);
    PUT(o, ",\"output_index\":");
    ah__wbuf_size(o, output_index);
    PUT(o, ",\"part\":{\"type\":\"output_text\",\"annotations\":[],\"logprobs\":[],\"text\":");
    if (done)
        ah__wbuf_json_str(o, text ? text : "", text_len);
    else
        PUT(o, "\"\"");
    PUT(o, "}");
    end_seq(o, seq);
}

void ah__wr_r_text_delta(ah__wbuf *o, const char *item_id, size_t output_index,
                         const char *s, size_t n, size_t seq)
{
    PUT(o, "event: response.output_text.delta\ndata: {\"type\":"
           "\"response.output_text.delta\",\"content_index\":0,\"delta\":");
    ah__wbuf_json_str(o, s, n);
    PUT(o, ",\"item_id\":");
    ah__wbuf_json_cstr(o, item_id);
    PUT(o, ",\"logprobs\":[],\"output_index\":");
    ah__wbuf_size(o, output_index);
    end_seq(o, seq);
}

void ah__wr_r_text_done(ah__wbuf *o, const char *item_id, size_t output_index,
                        const char *text, size_t text_len, size_t seq)
{
    ah__wr_begin_event(o, "response.output_text.done");
    PUT(o, "{\"type\":\"response.output_text.done\",\"content_index\":0,\"item_id\":");
    ah__wbuf_json_cstr(o, item_id);
    PUT(o, ",\"logprobs\":[],\"output_index\":");
    ah__wbuf_size(o, output_index);
    PUT(o, ",\"sequence_number\":");
    ah__wbuf_size(o, seq);
    PUT(o, ",\"text\":");
    ah__wbuf_json_str(o, text ? text : "", text_len);
    PUT(o, "}\n\n");
}

void ah__wr_r_args_delta(ah__wbuf *o, const char *item_id, size_t output_index,
                         const char *s, size_t n, size_t seq)
{
    ah__wr_begin_event(o, "response.function_call_arguments.delta");
    PUT(o, "{\"type\":\"response.function_call_arguments.delta\",\"delta\":");
    ah__wbuf_json_str(o, s, n);
    PUT(o, ",\"item_id\":");
    ah__wbuf_json_cstr(o, item_id);
    PUT(o, ",\"output_index\":");
    ah__wbuf_size(o, output_index);
    end_seq(o, seq);
}

void ah__wr_r_args_done(ah__wbuf *o, const char *item_id, size_t output_index,
                        const char *args, size_t len, size_t seq)
{
    ah__wr_begin_event(o, "response.function_call_arguments.done");
    PUT(o, "{\"type\":\"response.function_call_arguments.done\",\"arguments\":");
    ah__wbuf_json_str(o, args ? args : "", len);
    PUT(o, ",\"item_id\":");
    ah__wbuf_json_cstr(o, item_id);
    PUT(o, ",\"output_index\":");
    ah__wbuf_size(o, output_index);
    end_seq(o, seq);
}

void ah__wr_r_terminal(ah__wbuf *o, const ah__wr_resp_head *h, ah__wr_resp_status st,
                       const ah__wr_resp_end *end, size_t seq)
{
    const char *name = st == AH__WR_RS_COMPLETED    ? "response.completed"
                       : st == AH__WR_RS_INCOMPLETE ? "response.incomplete"
                                                    : "response.failed";
    ah__wr_begin_event(o, name);
    PUT(o, "{\"type\":");
    ah__wbuf_json_cstr(o, name);
    PUT(o, ",\"response\":");
    ah__wr_r_object(o, h, st, end);
    end_seq(o, seq);
}

void ah__wr_r_error(ah__wbuf *o, const char *type, const char *message, size_t seq)
{
    PUT(o, "event: error\ndata: {\"type\":\"error\",\"sequence_number\":");
    ah__wbuf_size(o, seq);
    PUT(o, ",\"error\":{\"type\":");
    ah__wbuf_json_cstr(o, type);
    PUT(o, ",\"code\":");
    ah__wbuf_json_cstr(o, type);
    PUT(o, ",\"message\":");
    ah__wbuf_json_cstr(o, message);
    PUT(o, ",\"param\":null}}\n\n");
}
