/* mcp_jsonrpc.c - JSON-RPC framing for MCP without I/O (docs/mcp.md, "Protocol facts"):
 * newline-delimited messages with a hard cap per line, what a message is, and the
 * request text with the 2026 era's per-request _meta. tests/unit/test_mcp_framing.c
 * feeds it split and garbled input. */
#include "mcp_internal.h"

#include <stdlib.h>
#include <string.h>

void ah__mcp_lines_init(ah__mcp_lines *l, size_t max)
{
    memset(l, 0, sizeof *l);
    l->max = max;
}

void ah__mcp_lines_free(ah__mcp_lines *l)
{
    free(l->buf);
    memset(l, 0, sizeof *l);
}

static int append(ah__mcp_lines *l, const char *p, size_t n)
{
    if (l->len + n + 1 > l->cap) {
        size_t cap = l->cap ? l->cap : 4096;
        while (cap < l->len + n + 1)
            cap *= 2;
        char *b = realloc(l->buf, cap);
        if (!b)
            return -1;
        l->buf = b;
        l->cap = cap;
    }
    memcpy(l->buf + l->len, p, n);
    l->len += n;
    return 0;
}

int ah__mcp_lines_feed(ah__mcp_lines *l, const char *buf, size_t n,
                       void (*on_line)(void *ud, const char *line, size_t len),
                       void (*on_long)(void *ud), void *ud)
{
    while (n > 0) {
        const char *nl = memchr(buf, '\n', n);
        size_t take = nl ? (size_t)(nl - buf) : n;
        if (!l->dropping) {
            if (l->len + take > l->max) {
                l->dropping = 1; /* told once, when the line goes past the cap */
                l->len = 0;
                if (on_long)
                    on_long(ud);
            } else if (append(l, buf, take) != 0) {
                return -1;
            }
        }
        if (!nl)
            return 0;
        if (!l->dropping) {
            size_t len = l->len;
            if (len && l->buf[len - 1] == '\r')
                len--;
            if (len)
                l->buf[len] = '\0';
            if (len)
                on_line(ud, l->buf, len);
        }
        l->len = 0;
        l->dropping = 0;
        buf = nl + 1;
        n -= take + 1;
    }
    return 0;
}

static int64_t number_id(const cJSON *id)
{
    if (cJSON_IsNumber(id) && id->valuedouble >= 0 && id->valuedouble < 9e15 &&
        id->valuedouble == (double)(int64_t)id->valuedouble)
        return (int64_t)id->valuedouble;
    /* our ids are numbers; a server that echoes them as strings is tolerated */
    if (cJSON_IsString(id) && id->valuestring[0]) {
        char *end;
        long long v = strtoll(id->valuestring, &end, 10);
        if (*end == '\0' && v >= 0)
            return v;
    }
    return -1;
}

mcp_kind ah__mcp_classify(const cJSON *msg, int64_t *id)
{
    *id = -1;
    if (!cJSON_IsObject(msg))
        return MCP_MSG_INVALID;
    const cJSON *jid = cJSON_GetObjectItemCaseSensitive(msg, "id");
    const cJSON *method = cJSON_GetObjectItemCaseSensitive(msg, "method");
    const cJSON *result = cJSON_GetObjectItemCaseSensitive(msg, "result");
    const cJSON *error = cJSON_GetObjectItemCaseSensitive(msg, "error");
    if (jid && !cJSON_IsNull(jid))
        *id = number_id(jid);
    if (cJSON_IsString(method))
        return jid && !cJSON_IsNull(jid) ? MCP_MSG_REQUEST : MCP_MSG_NOTIFICATION;
    if (result && jid)
        return cJSON_IsObject(result) ? MCP_MSG_RESPONSE : MCP_MSG_INVALID;
    if (cJSON_IsObject(error))
        return MCP_MSG_ERROR;
    return MCP_MSG_INVALID;
}

char *ah__mcp_encode(int64_t id, const char *method, const cJSON *params, int modern)
{
    cJSON *m = cJSON_CreateObject();
    cJSON *p = params ? cJSON_Duplicate(params, 1) : NULL;
    if (!m)
        goto fail;
    cJSON_AddStringToObject(m, "jsonrpc", "2.0");
    if (id >= 0)
        cJSON_AddNumberToObject(m, "id", (double)id);
    cJSON_AddStringToObject(m, "method", method);
    if (modern) {
        if (!p)
            p = cJSON_CreateObject();
        cJSON *meta = p ? cJSON_GetObjectItemCaseSensitive(p, "_meta") : NULL;
        if (p && !meta)
            meta = cJSON_AddObjectToObject(p, "_meta");
        if (!meta)
            goto fail;
        cJSON_AddStringToObject(meta, "io.modelcontextprotocol/protocolVersion",
                                AH_MCP_PROTOCOL_2026);
        cJSON *info = cJSON_AddObjectToObject(meta, "io.modelcontextprotocol/clientInfo");
        if (info) {
            cJSON_AddStringToObject(info, "name", "agenthost");
            cJSON_AddStringToObject(info, "version", AH_VERSION_STRING);
        }
        cJSON_AddObjectToObject(meta, "io.modelcontextprotocol/clientCapabilities");
    }
    if (p) {
        cJSON_AddItemToObject(m, "params", p);
        p = NULL;
    }
    char *out = cJSON_PrintUnformatted(m);
    cJSON_Delete(m);
    return out;
fail:
    cJSON_Delete(p);
    cJSON_Delete(m);
    return NULL;
}

int ah__mcp_modern_error(int code)
{
    return code == -32020 || code == -32021 || code == -32022;
}

int ah__mcp_is_legacy_version(const char *v)
{
    return v && (strcmp(v, "2025-11-25") == 0 || strcmp(v, "2025-06-18") == 0 ||
                 strcmp(v, "2025-03-26") == 0);
}
