/* tools.h - shared by lua/tools*.c, the Lua surface of docs/tools-and-ledger.md: ah.tool (tools.c),
 * ah.ledger and ah.budget (tools_ledger.c), ah.batch (tools_batch.c), canonical JSON
 * (tools_json.c). The entry point, lah_tools_open(), and the seam with agent.c are in
 * lah.h; docs/tools.md describes the Lua API and its rules.
 */
#ifndef LAH_TOOLS_H
#define LAH_TOOLS_H

#include "lah.h"

#define LAH_TOOL_MT   "agenthost.tool"
#define LAH_LEDGER_MT "agenthost.ledger"
#define LAH_BUDGET_MT "agenthost.budget"

/* ---- canonical JSON (tools_json.c) ------------------------------------------------- */

/* The largest JSON text the encoder writes (a tool's arguments or result): past it the
 * encoding is an error, not a copy of any size (docs/tools.md). */
#define LAH_JSON_MAX_BYTES (16u << 20)

/* Canonical JSON of the value at idx (object keys sorted bytewise, integral numbers
 * without a fraction, no spaces) pushed as a string. strict: a value JSON cannot hold
 * (function, userdata, NaN, a cycle, a key that is neither string nor integer) raises an
 * error naming where it is ("$.items[2].fn"); lenient: it is written as its tostring()
 * text instead. Both raise for a cycle and for a text over LAH_JSON_MAX_BYTES. */
void lah_push_canonical_json(lua_State *L, int idx, int strict);

/* Decode JSON text and push the value (objects and arrays become tables; null becomes the
 * light userdata NULL, which is lua-cjson's cjson.null, except a top-level null, which
 * becomes nil). Returns 1, or 0 with nothing pushed when the text is not JSON. */
int lah_push_json_decoded(lua_State *L, const char *json, size_t len);

/* ---- events (tools.c) ----------------------------------------------------------------
 */

/* Deliver an event of a tool call or a batch: to the host's sink (agenthost --events)
 * when to_sink, then to the Lua function at stack index on_event (if it is one) as a
 * table with the docs/lua.md fields, under a protected call (a failing hook is logged). */
void lah_tools_emit(lua_State *L, int on_event, int to_sink, const ah_event *ev);

/* ---- ledger and budget handles (tools_ledger.c) ------------------------------------ */

typedef struct lah_ledger_ud {
    ah_ledger *l; /* NULL once closed */
    char *path;   /* NULL for memory */
    int busy;     /* tool calls in flight that borrow l */
} lah_ledger_ud;

typedef struct lah_budget_ud {
    ah_budget *b; /* one reference */
} lah_budget_ud;

lah_ledger_ud *lah_ledger_test(lua_State *L, int idx);
/* Push a new ledger handle: memory when path is NULL, else SQLite (raises when the file
 * cannot be used). */
lah_ledger_ud *lah_ledger_push_new(lua_State *L, const char *path);
/* Resolve a ledger option at idx (a handle, a path string, nil or false) and push the
 * handle (nil for none). Raises for a closed handle, a bad type or a file that cannot be
 * opened. */
lah_ledger_ud *lah_ledger_push_arg(lua_State *L, int idx);
/* scale.c: ah.ledger{ redis = URL, prefix, ttl_s, lease_ms } (the table at idx) pushes a
 * Redis ledger handle; raises on a bad field. */
int lah_ledger_push_redis(lua_State *L, int idx);

lah_budget_ud *lah_budget_test(lua_State *L, int idx);
/* Push a new budget handle of `limit` executions (raises when limit < 0). */
lah_budget_ud *lah_budget_push_new(lua_State *L, lua_Integer limit);

/* Set ledger and budget (tools_ledger.c), batch (tools_batch.c) in the module table at
 * the top of the stack. */
void lah_open_ledger_budget(lua_State *L);
void lah_open_batch(lua_State *L);

#endif
