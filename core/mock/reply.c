/* reply.c - the mock's per-format writers: SSE events, JSON bodies, error shapes.
 *
 * The byte layout follows the real APIs as recorded in tests/fixtures/real-streams
 * (field order, `event:` lines, Anthropic's `{"type": "ping"}` spacing, Chat's usage-only
 * chunk and `[DONE]`, Responses' sequence_number), so a decoder that reads the mock reads
 * the providers. This file shares no code with the client's encoders/decoders on purpose.
 *
 * A writer's stream is a short table of segments (event kind x count), so event i is
 * generated on demand in O(1) amortised: a 200k-delta reply never exists as a whole. */
#include "mock_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CREATED_AT "1700000000"

/* clang-format off */
typedef enum {
    A_MSG_START, A_TEXT_START, A_PING, A_TEXT_DELTA, A_TEXT_STOP, A_TOOL_START,
    A_TOOL_DELTA, A_TOOL_STOP, A_MSG_DELTA, A_MSG_STOP,
    C_ROLE, C_TEXT_DELTA, C_TOOL_START, C_TOOL_DELTA, C_FINISH, C_USAGE, C_DONE,
    R_CREATED, R_IN_PROGRESS, R_MSG_ADDED, R_PART_ADDED, R_TEXT_DELTA, R_TEXT_DONE,
    R_PART_DONE, R_MSG_DONE, R_FC_ADDED, R_ARGS_DELTA, R_ARGS_DONE, R_FC_DONE,
    R_COMPLETED
} ev_kind;
/* clang-format on */

typedef struct seg {
    ev_kind kind;
    size_t count;
    size_t call; /* which tool call a tool segment belongs to */
} seg;

struct ah__mock_writer {
    ah_wire wire;
    const ah__mock_reply *r;
    char request_id[48];
    seg segs[16 + 4 * AH__MOCK_MAX_TOOL_CALLS];
    size_t nsegs, total;
    size_t seg_i, in_seg; /* position of the next event */
    size_t seq;           /* events emitted so far (Responses sequence_number) */
    ah__mock_buf chunk;   /* Chat: the chunk prefix up to "choices":[ */
    ah__mock_buf scratch;
};

/* How many tool calls the reply makes (0, 1, or `tool_calls` parallel ones). */
static size_t ncalls(const ah__mock_reply *r)
{
    return r->has_tool ? (r->ntools ? r->ntools : 1) : 0;
}

static void add_call_seg(ah__mock_writer *w, ev_kind k, size_t count, size_t call)
{
    if (count == 0)
        return;
    w->segs[w->nsegs].kind = k;
    w->segs[w->nsegs].count = count;
    w->segs[w->nsegs].call = call;
    w->nsegs++;
    w->total += count;
}

static void add_seg(ah__mock_writer *w, ev_kind k, size_t count)
{
    add_call_seg(w, k, count, 0);
}

ah__mock_writer *ah__mock_writer_new(ah_wire wire, const ah__mock_reply *r,
                                     const char *request_id)
{
    ah__mock_writer *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->wire = wire;
    w->r = r;
    ah__bufprintf(w->request_id, sizeof w->request_id, "%s", request_id);
    int text = r->ndeltas > 0;
    switch (wire) {
    case AH_WIRE_ANTHROPIC:
        /* The API sends a ping right after the first content block starts. */
        add_seg(w, A_MSG_START, 1);
        if (text) {
            add_seg(w, A_TEXT_START, 1);
            add_seg(w, A_PING, 1);
            add_seg(w, A_TEXT_DELTA, r->ndeltas);
            add_seg(w, A_TEXT_STOP, 1);
        }
        for (size_t c = 0; c < ncalls(r); c++) {
            add_call_seg(w, A_TOOL_START, 1, c);
            add_seg(w, A_PING, !text && c == 0);
            /* the first partial_json is "" */
            add_call_seg(w, A_TOOL_DELTA, r->nargs + 1, c);
            add_call_seg(w, A_TOOL_STOP, 1, c);
        }
        add_seg(w, A_PING, !text && !r->has_tool);
        add_seg(w, A_MSG_DELTA, 1);
        add_seg(w, A_MSG_STOP, 1);
        break;
    case AH_WIRE_OPENAI:
        /* A tool-only reply carries the role in the tool call's first chunk. */
        add_seg(w, C_ROLE, text || !r->has_tool);
        add_seg(w, C_TEXT_DELTA, r->ndeltas);
        for (size_t c = 0; c < ncalls(r); c++) {
            add_call_seg(w, C_TOOL_START, 1, c);
            add_call_seg(w, C_TOOL_DELTA, r->nargs, c);
        }
        add_seg(w, C_FINISH, 1);
        add_seg(w, C_USAGE, r->include_usage);
        add_seg(w, C_DONE, 1);
        ah__mock_buf_puts(&w->chunk, "{\"id\":");
        ah__mock_buf_json_cstr(&w->chunk, r->msg_id);
        ah__mock_buf_puts(&w->chunk,
                          ",\"object\":\"chat.completion.chunk\",\"created\":" CREATED_AT
                          ",\"model\":");
        ah__mock_buf_json_cstr(&w->chunk, r->model);
        ah__mock_buf_puts(&w->chunk, ",\"service_tier\":\"default\","
                                     "\"system_fingerprint\":\"fp_mock\",\"choices\":[");
        if (w->chunk.failed) {
            ah__mock_writer_free(w);
            return NULL;
        }
        break;
    default:
        add_seg(w, R_CREATED, 1);
        add_seg(w, R_IN_PROGRESS, 1);
        if (text) {
            add_seg(w, R_MSG_ADDED, 1);
            add_seg(w, R_PART_ADDED, 1);
            add_seg(w, R_TEXT_DELTA, r->ndeltas);
            add_seg(w, R_TEXT_DONE, 1);
            add_seg(w, R_PART_DONE, 1);
            add_seg(w, R_MSG_DONE, 1);
        }
        for (size_t c = 0; c < ncalls(r); c++) {
            add_call_seg(w, R_FC_ADDED, 1, c);
            add_call_seg(w, R_ARGS_DELTA, r->nargs, c);
            add_call_seg(w, R_ARGS_DONE, 1, c);
            add_call_seg(w, R_FC_DONE, 1, c);
        }
        add_seg(w, R_COMPLETED, 1);
        break;
    }
    return w;
}

void ah__mock_writer_free(ah__mock_writer *w)
{
    if (!w)
        return;
    ah__mock_buf_free(&w->chunk);
    ah__mock_buf_free(&w->scratch);
    free(w);
}

size_t ah__mock_writer_event_count(const ah__mock_writer *w)
{
    return w->total;
}

/* ---- shared pieces ----------------------------------------------------------------- */

static void put_delta(ah__mock_buf *o, const ah__mock_reply *r, size_t i)
{
    ah__mock_buf_json_str(o, r->text + r->cuts[i], r->cuts[i + 1] - r->cuts[i]);
}

static void put_arg(ah__mock_buf *o, const ah__mock_reply *r, size_t i)
{
    ah__mock_buf_json_str(o, r->tool_args + r->arg_cuts[i],
                          r->arg_cuts[i + 1] - r->arg_cuts[i]);
}

static void put_int(ah__mock_buf *o, long long v)
{
    ah__mock_buf_printf(o, "%lld", v);
}

static void put_size(ah__mock_buf *o, size_t v)
{
    /* Hot path (sequence numbers): avoid printf. */
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    if (ah__mock_buf_reserve(o, n) != 0)
        return;
    while (n)
        o->data[o->len++] = tmp[--n];
    o->data[o->len] = '\0';
}

#define PUT(o, lit) ah__mock_buf_put((o), lit, sizeof(lit) - 1)

static void anthropic_usage(ah__mock_buf *o, const ah__mock_reply *r, long long output)
{
    PUT(o, "\"usage\":{\"input_tokens\":");
    put_int(o, r->input_tokens);
    PUT(o, ",\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":0,"
           "\"output_tokens\":");
    put_int(o, output);
}

static void chat_usage(ah__mock_buf *o, const ah__mock_reply *r)
{
    PUT(o, "\"usage\":{\"prompt_tokens\":");
    put_int(o, r->input_tokens);
    PUT(o, ",\"completion_tokens\":");
    put_int(o, r->output_tokens);
    PUT(o, ",\"total_tokens\":");
    put_int(o, r->input_tokens + r->output_tokens);
    PUT(o, ",\"prompt_tokens_details\":{\"cached_tokens\":0,\"audio_tokens\":0},"
           "\"completion_tokens_details\":{\"reasoning_tokens\":0,\"audio_tokens\":0,"
           "\"accepted_prediction_tokens\":0,\"rejected_prediction_tokens\":0}}");
}

/* The id of parallel call `call`: the base id (the reply's tool id or call id), then
 * <id>_1, <id>_2, ... */
static void put_call_id(ah__mock_buf *o, const char *base, size_t call)
{
    if (call == 0) {
        ah__mock_buf_json_cstr(o, base);
        return;
    }
    char id[72];
    snprintf(id, sizeof id, "%.47s_%zu", base, call);
    ah__mock_buf_json_cstr(o, id);
}

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
    put_call_id(o, r->tool_id, call);
    PUT(o, ",\"type\":\"function_call\",\"status\":");
    if (done) {
        PUT(o, "\"completed\",\"arguments\":");
        ah__mock_buf_json_str(o, r->tool_args, r->args_len);
    } else {
        PUT(o, "\"in_progress\",\"arguments\":\"\"");
    }
    PUT(o, ",\"call_id\":");
    put_call_id(o, r->call_id, call);
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
    PUT(o, ",\"object\":\"response\",\"created_at\":" CREATED_AT ",\"status\":\"");
    ah__mock_buf_puts(o, status[st]);
    ah__mock_buf_puts(o, r->background ? "\",\"background\":true,\"completed_at\":"
                                       : "\",\"background\":false,\"completed_at\":");
    if (st == RS_COMPLETED)
        PUT(o, CREATED_AT);
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
        for (size_t c = 0; c < ncalls(r); c++) {
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
        put_int(o, r->input_tokens);
        PUT(o, ",\"input_tokens_details\":{\"cached_tokens\":0},\"output_tokens\":");
        put_int(o, r->output_tokens);
        PUT(o, ",\"output_tokens_details\":{\"reasoning_tokens\":0},\"total_tokens\":");
        put_int(o, r->input_tokens + r->output_tokens);
        PUT(o, "}");
    } else {
        PUT(o, "null");
    }
    PUT(o, ",\"user\":null,\"metadata\":{}}");
}

/* "event: NAME\ndata: " (Chat has no event lines). */
static void begin(ah__mock_writer *w, ah__mock_buf *o, const char *name)
{
    if (w->wire != AH_WIRE_OPENAI) {
        PUT(o, "event: ");
        ah__mock_buf_puts(o, name);
        PUT(o, "\n");
    }
    PUT(o, "data: ");
}

static void end_seq(ah__mock_buf *o, size_t seq)
{
    PUT(o, ",\"sequence_number\":");
    put_size(o, seq);
    PUT(o, "}\n\n");
}

static void chat_choice_end(ah__mock_writer *w, ah__mock_buf *o)
{
    PUT(o, ",\"logprobs\":null,\"finish_reason\":null}]");
    if (w->r->include_usage)
        PUT(o, ",\"usage\":null");
    PUT(o, "}\n\n");
}

/* ---- one event --------------------------------------------------------------------- */

static void emit(ah__mock_writer *w, ah__mock_buf *o, ev_kind k, size_t j, size_t call)
{
    const ah__mock_reply *r = w->r;
    /* the tool block / item follows the text one; parallel calls follow each other */
    size_t tool_index = (size_t)(r->ndeltas > 0) + call;
    switch (k) {
    case A_MSG_START:
        begin(w, o, "message_start");
        PUT(o, "{\"type\":\"message_start\",\"message\":{\"id\":");
        ah__mock_buf_json_cstr(o, r->msg_id);
        PUT(o, ",\"type\":\"message\",\"role\":\"assistant\",\"model\":");
        ah__mock_buf_json_cstr(o, r->model);
        PUT(o, ",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,");
        anthropic_usage(o, r, 1);
        PUT(o, ",\"service_tier\":\"standard\"}}}\n\n");
        break;
    case A_TEXT_START:
        begin(w, o, "content_block_start");
        PUT(o, "{\"type\":\"content_block_start\",\"index\":0,"
               "\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n");
        break;
    case A_PING:
        begin(w, o, "ping");
        PUT(o, "{\"type\": \"ping\"}\n\n");
        break;
    case A_TEXT_DELTA:
        PUT(o, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\","
               "\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":");
        put_delta(o, r, j);
        PUT(o, "}}\n\n");
        break;
    case A_TEXT_STOP:
    case A_TOOL_STOP:
        begin(w, o, "content_block_stop");
        PUT(o, "{\"type\":\"content_block_stop\",\"index\":");
        put_size(o, k == A_TEXT_STOP ? 0 : tool_index);
        PUT(o, "}\n\n");
        break;
    case A_TOOL_START:
        begin(w, o, "content_block_start");
        PUT(o, "{\"type\":\"content_block_start\",\"index\":");
        put_size(o, tool_index);
        PUT(o, ",\"content_block\":{\"type\":\"tool_use\",\"id\":");
        put_call_id(o, r->tool_id, call);
        PUT(o, ",\"name\":");
        ah__mock_buf_json_cstr(o, r->tool_name);
        PUT(o, ",\"input\":{}}}\n\n");
        break;
    case A_TOOL_DELTA:
        begin(w, o, "content_block_delta");
        PUT(o, "{\"type\":\"content_block_delta\",\"index\":");
        put_size(o, tool_index);
        PUT(o, ",\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":");
        if (j == 0)
            PUT(o, "\"\"");
        else
            put_arg(o, r, j - 1);
        PUT(o, "}}\n\n");
        break;
    case A_MSG_DELTA:
        begin(w, o, "message_delta");
        PUT(o, "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":");
        if (r->has_tool)
            PUT(o, "\"tool_use\"");
        else
            PUT(o, "\"end_turn\"");
        PUT(o, ",\"stop_sequence\":null},");
        anthropic_usage(o, r, r->output_tokens);
        PUT(o, "}}\n\n");
        break;
    case A_MSG_STOP:
        begin(w, o, "message_stop");
        PUT(o, "{\"type\":\"message_stop\"}\n\n");
        break;

    case C_ROLE:
        PUT(o, "data: ");
        ah__mock_buf_put(o, w->chunk.data, w->chunk.len);
        PUT(o, "{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\","
               "\"refusal\":null}");
        chat_choice_end(w, o);
        break;
    case C_TEXT_DELTA:
        PUT(o, "data: ");
        ah__mock_buf_put(o, w->chunk.data, w->chunk.len);
        PUT(o, "{\"index\":0,\"delta\":{\"content\":");
        put_delta(o, r, j);
        PUT(o, "}");
        chat_choice_end(w, o);
        break;
    case C_TOOL_START:
        PUT(o, "data: ");
        ah__mock_buf_put(o, w->chunk.data, w->chunk.len);
        PUT(o, "{\"index\":0,\"delta\":{");
        if (!r->ndeltas && call == 0)
            PUT(o, "\"role\":\"assistant\",\"content\":null,");
        PUT(o, "\"tool_calls\":[{\"index\":");
        put_size(o, call);
        PUT(o, ",\"id\":");
        put_call_id(o, r->tool_id, call);
        PUT(o, ",\"type\":\"function\",\"function\":{\"name\":");
        ah__mock_buf_json_cstr(o, r->tool_name);
        PUT(o, ",\"arguments\":\"\"}}]");
        if (!r->ndeltas && call == 0)
            PUT(o, ",\"refusal\":null");
        PUT(o, "}");
        chat_choice_end(w, o);
        break;
    case C_TOOL_DELTA:
        PUT(o, "data: ");
        ah__mock_buf_put(o, w->chunk.data, w->chunk.len);
        PUT(o, "{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":");
        put_size(o, call);
        PUT(o, ",\"function\":{\"arguments\":");
        put_arg(o, r, j);
        PUT(o, "}}]}");
        chat_choice_end(w, o);
        break;
    case C_FINISH:
        PUT(o, "data: ");
        ah__mock_buf_put(o, w->chunk.data, w->chunk.len);
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
        PUT(o, "data: ");
        ah__mock_buf_put(o, w->chunk.data, w->chunk.len);
        PUT(o, "],");
        chat_usage(o, r);
        PUT(o, "}\n\n");
        break;
    case C_DONE:
        PUT(o, "data: [DONE]\n\n");
        break;

    case R_CREATED:
    case R_IN_PROGRESS:
        begin(w, o, k == R_CREATED ? "response.created" : "response.in_progress");
        PUT(o, "{\"type\":");
        ah__mock_buf_puts(o, k == R_CREATED ? "\"response.created\""
                                            : "\"response.in_progress\"");
        PUT(o, ",\"response\":");
        resp_object(o, r, RS_IN_PROGRESS, NULL, NULL);
        end_seq(o, w->seq);
        break;
    case R_MSG_ADDED:
    case R_MSG_DONE:
        begin(w, o,
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
        begin(w, o,
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
        put_delta(o, r, j);
        PUT(o, ",\"item_id\":");
        ah__mock_buf_json_cstr(o, r->item_id);
        PUT(o, ",\"logprobs\":[],\"output_index\":0");
        end_seq(o, w->seq);
        break;
    case R_TEXT_DONE:
        begin(w, o, "response.output_text.done");
        PUT(o,
            "{\"type\":\"response.output_text.done\",\"content_index\":0,\"item_id\":");
        ah__mock_buf_json_cstr(o, r->item_id);
        PUT(o, ",\"logprobs\":[],\"output_index\":0,\"sequence_number\":");
        put_size(o, w->seq);
        PUT(o, ",\"text\":");
        ah__mock_buf_json_str(o, r->text, r->text_len);
        PUT(o, "}\n\n");
        break;
    case R_FC_ADDED:
    case R_FC_DONE:
        begin(w, o,
              k == R_FC_ADDED ? "response.output_item.added"
                              : "response.output_item.done");
        PUT(o, "{\"type\":");
        ah__mock_buf_puts(o, k == R_FC_ADDED ? "\"response.output_item.added\""
                                             : "\"response.output_item.done\"");
        PUT(o, ",\"item\":");
        resp_fc_item(o, r, k == R_FC_DONE, call);
        PUT(o, ",\"output_index\":");
        put_size(o, tool_index);
        end_seq(o, w->seq);
        break;
    case R_ARGS_DELTA:
        begin(w, o, "response.function_call_arguments.delta");
        PUT(o, "{\"type\":\"response.function_call_arguments.delta\",\"delta\":");
        put_arg(o, r, j);
        PUT(o, ",\"item_id\":");
        put_call_id(o, r->tool_id, call);
        PUT(o, ",\"output_index\":");
        put_size(o, tool_index);
        end_seq(o, w->seq);
        break;
    case R_ARGS_DONE:
        begin(w, o, "response.function_call_arguments.done");
        PUT(o, "{\"type\":\"response.function_call_arguments.done\",\"arguments\":");
        ah__mock_buf_json_str(o, r->tool_args, r->args_len);
        PUT(o, ",\"item_id\":");
        put_call_id(o, r->tool_id, call);
        PUT(o, ",\"output_index\":");
        put_size(o, tool_index);
        end_seq(o, w->seq);
        break;
    case R_COMPLETED:
        begin(w, o, "response.completed");
        PUT(o, "{\"type\":\"response.completed\",\"response\":");
        resp_object(o, r, RS_COMPLETED, NULL, NULL);
        end_seq(o, w->seq);
        break;
    }
}

int ah__mock_writer_next(ah__mock_writer *w, ah__mock_buf *out)
{
    while (w->seg_i < w->nsegs && w->in_seg >= w->segs[w->seg_i].count) {
        w->seg_i++;
        w->in_seg = 0;
    }
    if (w->seg_i >= w->nsegs)
        return 0;
    emit(w, out, w->segs[w->seg_i].kind, w->in_seg, w->segs[w->seg_i].call);
    w->in_seg++;
    w->seq++;
    return 1;
}

void ah__mock_writer_malformed(ah__mock_writer *w, ah__mock_buf *out)
{
    /* The next event with its data cut in half: any strict prefix of a JSON object (or
     * of "[DONE]") is not JSON. */
    ah__mock_buf *s = &w->scratch;
    ah__mock_buf_reset(s);
    if (!ah__mock_writer_next(w, s) || s->failed) {
        PUT(out, "data: {\"type\":\n\n");
        return;
    }
    const char *data = strstr(s->data, "data: ");
    size_t head = (size_t)(data - s->data) + 6;
    size_t json = s->len - head - 2; /* without the blank line */
    size_t half = ah__mock_utf8_floor(s->data + head, json / 2);
    ah__mock_buf_put(out, s->data, head + half);
    PUT(out, "\n\n");
}

static const char *default_message(const char *type)
{
    static const struct {
        const char *type, *message;
    } t[] = {
        {"overloaded_error", "Overloaded"},
        {"rate_limit_error", "Number of requests has exceeded your rate limit"},
        {"api_error", "Internal server error"},
        {"timeout_error", "Request timed out"},
        {"invalid_request_error", "Invalid request"},
        {"authentication_error", "invalid x-api-key"},
        {"permission_error", "Your API key does not have permission to use the specified "
                             "resource."},
        {"not_found_error", "Not found"},
        {"billing_error", "Your credit balance is too low"},
        {"request_too_large", "Request exceeds the maximum allowed number of bytes."},
        {"server_error", "The server had an error while processing your request. Sorry "
                         "about that!"},
        {"requests", "Rate limit reached for requests"},
        {"insufficient_quota", "You exceeded your current quota, please check your plan "
                               "and billing details."},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (strcmp(type, t[i].type) == 0)
            return t[i].message;
    return "Mock provider error";
}

void ah__mock_writer_error(ah__mock_writer *w, ah__mock_buf *out, const char *type,
                           const char *message)
{
    if (!type)
        type = ah__mock_default_error_type(w->wire);
    if (!message)
        message = default_message(type);
    switch (w->wire) {
    case AH_WIRE_ANTHROPIC:
        PUT(out, "event: error\ndata: {\"type\":\"error\",\"error\":{\"details\":null,"
                 "\"type\":");
        ah__mock_buf_json_cstr(out, type);
        PUT(out, ",\"message\":");
        ah__mock_buf_json_cstr(out, message);
        PUT(out, "},\"request_id\":");
        ah__mock_buf_json_cstr(out, w->request_id);
        PUT(out, "}\n\n");
        break;
    case AH_WIRE_OPENAI:
        PUT(out, "data: {\"error\":{\"message\":");
        ah__mock_buf_json_cstr(out, message);
        PUT(out, ",\"type\":");
        ah__mock_buf_json_cstr(out, type);
        PUT(out, ",\"param\":null,\"code\":null}}\n\ndata: [DONE]\n\n");
        break;
    default:
        PUT(out, "event: error\ndata: {\"type\":\"error\",\"sequence_number\":");
        put_size(out, w->seq++);
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
        break;
    }
}

/* ---- non-streaming bodies ---------------------------------------------------------- */

void ah__mock_reply_body(ah_wire wire, const ah__mock_reply *r, ah__mock_buf *o)
{
    switch (wire) {
    case AH_WIRE_ANTHROPIC:
        PUT(o, "{\"id\":");
        ah__mock_buf_json_cstr(o, r->msg_id);
        PUT(o, ",\"type\":\"message\",\"role\":\"assistant\",\"model\":");
        ah__mock_buf_json_cstr(o, r->model);
        PUT(o, ",\"content\":[");
        if (r->ndeltas) {
            PUT(o, "{\"type\":\"text\",\"text\":");
            ah__mock_buf_json_str(o, r->text, r->text_len);
            PUT(o, "}");
        }
        if (r->has_tool) {
            if (r->ndeltas)
                PUT(o, ",");
            PUT(o, "{\"type\":\"tool_use\",\"id\":");
            ah__mock_buf_json_cstr(o, r->tool_id);
            PUT(o, ",\"name\":");
            ah__mock_buf_json_cstr(o, r->tool_name);
            PUT(o, ",\"input\":");
            ah__mock_buf_put(o, r->tool_args, r->args_len);
            PUT(o, "}");
        }
        PUT(o, "],\"stop_reason\":");
        if (r->has_tool)
            PUT(o, "\"tool_use\"");
        else
            PUT(o, "\"end_turn\"");
        PUT(o, ",\"stop_sequence\":null,");
        anthropic_usage(o, r, r->output_tokens);
        PUT(o, ",\"service_tier\":\"standard\"}}");
        break;
    case AH_WIRE_OPENAI:
        PUT(o, "{\"id\":");
        ah__mock_buf_json_cstr(o, r->msg_id);
        PUT(o, ",\"object\":\"chat.completion\",\"created\":" CREATED_AT ",\"model\":");
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
        chat_usage(o, r);
        PUT(o, ",\"service_tier\":\"default\",\"system_fingerprint\":\"fp_mock\"}");
        break;
    default:
        resp_object(o, r, RS_COMPLETED, NULL, NULL);
        break;
    }
}

/* ---- HTTP error bodies ------------------------------------------------------------- */

/* clang-format off */
static const char *anthropic_type(int status)
{
    switch (status) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 402: return "billing_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 504: return "timeout_error";
    case 529: return "overloaded_error";
    default: return status >= 500 ? "api_error" : "invalid_request_error";
    }
}

static const char *openai_type(int status)
{
    if (status == 429)
        return "requests";
    return status >= 500 ? "server_error" : "invalid_request_error";
}

static const char *openai_message(int status)
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

void ah__mock_error_body(ah_wire wire, int status, const char *type, const char *message,
                         const char *request_id, ah__mock_buf *out)
{
    if (wire == AH_WIRE_ANTHROPIC) {
        if (!type)
            type = anthropic_type(status);
        PUT(out, "{\"type\":\"error\",\"error\":{\"type\":");
        ah__mock_buf_json_cstr(out, type);
        PUT(out, ",\"message\":");
        ah__mock_buf_json_cstr(out, message ? message : default_message(type));
        PUT(out, "},\"request_id\":");
        ah__mock_buf_json_cstr(out, request_id);
        PUT(out, "}");
        return;
    }
    const char *code = NULL;
    if (!type) {
        type = openai_type(status);
        code = status == 429   ? "rate_limit_exceeded"
               : status == 401 ? "invalid_api_key"
                               : NULL;
        if (!message)
            message = openai_message(status);
    }
    PUT(out, "{\"error\":{\"message\":");
    ah__mock_buf_json_cstr(out, message ? message : default_message(type));
    PUT(out, ",\"type\":");
    ah__mock_buf_json_cstr(out, type);
    PUT(out, ",\"param\":null,\"code\":");
    ah__mock_buf_json_cstr(out, code);
    PUT(out, "}}");
}

const char *ah__mock_default_error_type(ah_wire wire)
{
    return wire == AH_WIRE_ANTHROPIC ? "overloaded_error" : "server_error";
}

int ah__mock_error_status(ah_wire wire, const char *type)
{
    static const struct {
        const char *type;
        int status;
    } t[] = {
        {"invalid_request_error", 400},
        {"authentication_error", 401},
        {"billing_error", 402},
        {"permission_error", 403},
        {"not_found_error", 404},
        {"request_too_large", 413},
        {"rate_limit_error", 429},
        {"requests", 429},
        {"tokens", 429},
        {"rate_limit_exceeded", 429},
        {"insufficient_quota", 429},
        {"api_error", 500},
        {"server_error", 500},
        {"timeout_error", 504},
    };
    if (!type)
        type = ah__mock_default_error_type(wire);
    if (strcmp(type, "overloaded_error") == 0)
        return wire == AH_WIRE_ANTHROPIC ? 529 : 503;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (strcmp(type, t[i].type) == 0)
            return t[i].status;
    return 500;
}
