/* mcp.c - ah.mcp{...}: MCP tool servers from Lua (docs/mcp.md), over core/mcp
 * (agenthost/mcp.h). The waits are Lua (lua/waits.lua, "MCP servers"): server:tools()
 * and server:call() wait for the server to settle (ready, failed or closed) and then for
 * the call, over primitives here that never wait: mcp_settle, mcp_tools,
 * mcp_call_start, mcp_call_result.
 *
 * Invariants:
 *   - a server userdata owns its ah_mcp; a call userdata owns its ah_mcp_call and keeps
 *     its server (uservalue), ledger and budget alive, so a call is freed before its
 *     server on every runtime;
 *   - the server's hooks (on_event, the agents that listen, per-tool overrides, its own
 *     ledger) live in a table the registry holds, not in the userdata, so the C callback
 *     of the core reaches them while the userdata stays collectable;
 *   - a call started from an agent's tool coroutine is cancelled when that coroutine is
 *     ended (lah_mcp_cancel_started_on): the server is told at once.
 */
#include "lah.h"
#include "tools.h"
#include "internal.h"

#include "agenthost/mcp.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define MCP_MT "agenthost.mcp"
#define CALL_MT "agenthost.mcpcall"

typedef struct mcp_ud {
    lah_wait wait; /* first: ready once the server settled (ready, failed, closed) */
    ah_mcp *s;
    lua_State *main;
    int hooks_ref; /* { on_event =, agents = weak set, tools = overrides, ledger = } */
    int has_on_event;
    int is_http; /* server:close() waits for the session's DELETE */
} mcp_ud;

typedef struct call_ud {
    lah_wait wait; /* first: ready once the call ended */
    ah_mcp_call *c;
    mcp_ud *server;
    lua_State *main;
    lua_State *started_on; /* the coroutine that started it (an agent's tool call) */
    int into;              /* an agent's: results for C */
    int on_event_ref;      /* a Lua hook, or a lah_tool_sink userdata */
    const lah_tool_sink *sink;
    char id[128], name[160];
    int listed;                  /* on in_flight */
    struct call_ud *prev, *next; /* the calls in flight */
} call_ud;

static call_ud *in_flight; /* loop thread only */
static atomic_int bare_count; /* calls of in_flight not an agent's (the watcher reads it) */

static void unlist(call_ud *c)
{
    if (!c->listed)
        return;
    c->listed = 0;
    if (!c->into)
        atomic_fetch_sub(&bare_count, 1);
    if (c->prev)
        c->prev->next = c->next;
    else if (in_flight == c)
        in_flight = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->prev = c->next = NULL;
}

ah_mcp *lah_mcp_test(lua_State *L, int idx)
{
    mcp_ud *u = luaL_testudata(L, idx, MCP_MT);
    return u ? u->s : NULL;
}

static mcp_ud *check_mcp(lua_State *L, int idx)
{
    mcp_ud *u = luaL_checkudata(L, idx, MCP_MT);
    if (!u->s)
        luaL_error(L, "the MCP server was freed");
    return u;
}

static void push_hooks(lua_State *L, const mcp_ud *u)
{
    lua_rawgeti(L, LUA_REGISTRYINDEX, u->hooks_ref);
}

static int settled(ah_mcp_state st)
{
    return st == AH_MCP_READY || st == AH_MCP_FAILED || st == AH_MCP_CLOSED;
}

/* ---- events ------------------------------------------------------------------------ */

/* An mcp_server event: to the host's sink, ah.mcp{ on_event }, and every agent that
 * uses the server (its on_event or status display). */
static void server_event(void *ud, const ah_event *ev)
{
    mcp_ud *u = ud;
    if (ev->type == AH_EV_MCP_SERVER) {
        /* from the event, not u->s: the first one comes from inside ah_mcp_new */
        const char *st = ev->u.mcp_server.state;
        u->wait.ready = strcmp(st, "ready") == 0 || strcmp(st, "failed") == 0 ||
                        strcmp(st, "closed") == 0;
    }
    ah_event_fn fn = NULL;
    void *sud = NULL;
    lua_State *L = lah_running(u->main);
    lah_event_sink(L, &fn, &sud);
    if (fn)
        fn(sud, ev);
    if (u->hooks_ref == LUA_NOREF || !lua_checkstack(L, 8))
        return;
    int top = lua_gettop(L);
    push_hooks(L, u);
    int hooks = lua_gettop(L);
    if (lua_getfield(L, hooks, "on_event") == LUA_TFUNCTION) {
        lah_push_event(L, ev);
        lah_pcall(L, 1, 0, "ah.mcp on_event");
    }
    lua_settop(L, hooks);
    if (lua_getfield(L, hooks, "agents") == LUA_TTABLE) {
        int agents = lua_gettop(L);
        lua_pushnil(L);
        while (lua_next(L, agents)) {
            lua_pop(L, 1);
            lah_agent_mcp_event(L, lua_gettop(L), ev);
        }
    }
    lua_settop(L, top);
}

void lah_mcp_listen(lua_State *L, int server, int agent)
{
    mcp_ud *u = check_mcp(L, server);
    agent = lua_absindex(L, agent);
    push_hooks(L, u);
    lua_getfield(L, -1, "agents");
    lua_pushvalue(L, agent);
    lua_pushboolean(L, 1);
    lua_rawset(L, -3);
    lua_pop(L, 2);
}

/* ---- ah.mcp{...} ------------------------------------------------------------------- */

static const char *const mcp_fields[] = {
    "name",     "command",   "env",        "cwd",             "url",     "headers",
    "protocol", "trust",     "policy",     "timeout_ms",      "restart", "tools",
    "on_event", "init_timeout_ms", NULL};
static const char *const tool_fields[] = {"enabled", "idempotent", "policy", NULL};
static const char *const restart_fields[] = {"max", "window_s", NULL};

/* A list of strings at idx (a table), as a NULL-terminated array of Lua strings kept
 * on the stack in the table itself; where names the field. */
static const char **strv(lua_State *L, int idx, const char *where, int map)
{
    idx = lua_absindex(L, idx);
    size_t n = 0;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        n++;
        lua_pop(L, 1);
    }
    const char **v = lua_newuserdatauv(L, (n + 1) * sizeof *v, 1); /* freed with the GC */
    lua_newtable(L); /* the strings, anchored */
    lua_setiuservalue(L, -2, 1);
    size_t k = 0;
    if (map) {
        lua_pushnil(L);
        while (lua_next(L, idx)) {
            if (lua_type(L, -2) != LUA_TSTRING || !lua_isstring(L, -1))
                luaL_error(L, "%s: keys and values must be strings", where);
            lua_pushfstring(L, "%s=%s", lua_tostring(L, -2), lua_tostring(L, -1));
            lah_check_no_nul(L, -1, where);
            lua_getiuservalue(L, -4, 1);
            lua_pushvalue(L, -2);
            lua_rawseti(L, -2, (lua_Integer)k + 1);
            lua_pop(L, 1);
            v[k++] = lua_tostring(L, -1);
            lua_pop(L, 2);
        }
    } else {
        for (size_t i = 1; i <= n; i++) {
            if (lua_rawgeti(L, idx, (lua_Integer)i) != LUA_TSTRING)
                luaL_error(L, "%s[%d] must be a string", where, (int)i);
            lah_check_no_nul(L, -1, where);
            lua_getiuservalue(L, -2, 1);
            lua_pushvalue(L, -2);
            lua_rawseti(L, -2, (lua_Integer)i);
            lua_pop(L, 1);
            v[k++] = lua_tostring(L, -1);
            lua_pop(L, 1);
        }
    }
    v[k] = NULL;
    return v;
}

static int64_t opt_ms(lua_State *L, int t, const char *field, const char *where, int64_t dflt)
{
    if (lua_getfield(L, t, field) == LUA_TNIL) {
        lua_pop(L, 1);
        return dflt;
    }
    int64_t v = (int64_t)lah_check_whole(L, -1, where, field, 1, LUA_MAXINTEGER);
    lua_pop(L, 1);
    return v;
}

static int l_mcp(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    lah_check_fields(L, 1, "ah.mcp", mcp_fields);
    lua_settop(L, 1);
    if (lua_getfield(L, 1, "name") != LUA_TSTRING)
        return luaL_error(L, "ah.mcp: name must be a string");
    const char *name = lah_check_no_nul(L, -1, "ah.mcp: name");
    char where[96];
    ah__bufprintf(where, sizeof where, "ah.mcp '%s'", name);
    ah_mcp_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.loop = lah_loop(L);
    cfg.name = name;
    int ty = lua_getfield(L, 1, "command");
    if (ty == LUA_TTABLE)
        cfg.command = strv(L, -1, "ah.mcp: command", 0);
    else if (ty != LUA_TNIL)
        return luaL_error(L, "%s: command must be a list of strings", where);
    if ((ty = lua_getfield(L, 1, "env")) == LUA_TTABLE)
        cfg.env = strv(L, -1, "ah.mcp: env", 1);
    else if (ty != LUA_TNIL)
        return luaL_error(L, "%s: env must be a table of NAME = value", where);
    if (lua_getfield(L, 1, "cwd") != LUA_TNIL)
        cfg.cwd = lah_check_no_nul(L, -1, "ah.mcp: cwd");
    if (lua_getfield(L, 1, "url") != LUA_TNIL)
        cfg.url = lah_check_no_nul(L, -1, "ah.mcp: url");
    ah_header hdr[16];
    if ((ty = lua_getfield(L, 1, "headers")) == LUA_TTABLE) {
        int t = lua_gettop(L);
        lua_pushnil(L);
        while (lua_next(L, t)) {
            if (cfg.n_headers >= 16 || lua_type(L, -2) != LUA_TSTRING || !lua_isstring(L, -1))
                return luaL_error(L, "%s: headers must be at most 16 NAME = value strings",
                                  where);
            hdr[cfg.n_headers].name = lua_tostring(L, -2);
            hdr[cfg.n_headers].value = lua_tostring(L, -1);
            cfg.n_headers++;
            lua_pop(L, 1);
        }
        cfg.headers = hdr;
    } else if (ty != LUA_TNIL) {
        return luaL_error(L, "%s: headers must be a table", where);
    }
    if (lua_getfield(L, 1, "protocol") != LUA_TNIL)
        cfg.protocol = lah_check_no_nul(L, -1, "ah.mcp: protocol");
    lua_getfield(L, 1, "trust");
    cfg.trust = lua_toboolean(L, -1);
    ah_policy pol;
    ah_policy_init(&pol);
    lua_getfield(L, 1, "policy");
    if (lah_policy_from_table(L, -1, where, &pol))
        return luaL_error(L, "%s: policy.retry_on is not supported for MCP servers", where);
    cfg.policy = &pol;
    cfg.timeout_ms = opt_ms(L, 1, "timeout_ms", where, 60000);
    cfg.init_timeout_ms = opt_ms(L, 1, "init_timeout_ms", where, 30000);
    if ((ty = lua_getfield(L, 1, "restart")) == LUA_TTABLE) {
        lah_check_fields(L, -1, "ah.mcp restart", restart_fields);
        if (lua_getfield(L, -1, "max") != LUA_TNIL)
            cfg.restart_max = (int)lah_check_whole(L, -1, where, "restart.max", 1, 15);
        lua_pop(L, 1);
        cfg.restart_window_ms = opt_ms(L, lua_gettop(L), "window_s", where, 60) * 1000;
    } else if (ty != LUA_TNIL) {
        return luaL_error(L, "%s: restart must be a table { max =, window_s = }", where);
    }
    /* the hooks table */
    lua_createtable(L, 0, 4);
    int hooks = lua_gettop(L);
    if ((ty = lua_getfield(L, 1, "on_event")) == LUA_TFUNCTION)
        lua_setfield(L, hooks, "on_event");
    else if (ty != LUA_TNIL)
        return luaL_error(L, "%s: on_event must be a function", where);
    else
        lua_pop(L, 1);
    lua_newtable(L); /* agents: a weak set */
    lua_createtable(L, 0, 1);
    lua_pushliteral(L, "k");
    lua_setfield(L, -2, "__mode");
    lua_setmetatable(L, -2);
    lua_setfield(L, hooks, "agents");
    if ((ty = lua_getfield(L, 1, "tools")) == LUA_TTABLE) {
        int t = lua_gettop(L);
        lua_pushnil(L);
        while (lua_next(L, t)) {
            if (lua_type(L, -2) != LUA_TSTRING || !lua_istable(L, -1))
                return luaL_error(L, "%s: tools must map tool names to tables", where);
            lua_pushfstring(L, "%s tools.%s", where, lua_tostring(L, -2));
            lah_check_fields(L, -2, lua_tostring(L, -1), tool_fields);
            if (lua_getfield(L, -2, "policy") != LUA_TNIL) {
                ah_policy tp;
                ah_policy_init(&tp);
                if (lah_policy_from_table(L, -1, lua_tostring(L, -2), &tp))
                    return luaL_error(L, "%s: retry_on is not supported", lua_tostring(L, -3));
            }
            lua_pop(L, 3);
        }
        lua_setfield(L, hooks, "tools");
    } else if (ty != LUA_TNIL) {
        return luaL_error(L, "%s: tools must be a table", where);
    } else {
        lua_pop(L, 1);
    }

    mcp_ud *u = lua_newuserdatauv(L, sizeof *u, 1);
    memset(u, 0, sizeof *u);
    u->hooks_ref = LUA_NOREF;
    luaL_setmetatable(L, MCP_MT);
    lua_pushvalue(L, hooks);
    u->hooks_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    u->main = lah_main(L);
    u->is_http = cfg.url != NULL;
    cfg.on_event = server_event;
    cfg.event_ud = u;
    char err[320];
    lua_State *prev = lah_enter(L);
    ah_status st = ah_mcp_new(&cfg, &u->s, err, sizeof err);
    lah_leave(L, prev);
    if (st != AH_OK)
        return luaL_error(L, "%s", err);
    u->wait.ready = settled(ah_mcp_state_of(u->s));
    return 1;
}

static int mcp_gc(lua_State *L)
{
    mcp_ud *u = luaL_checkudata(L, 1, MCP_MT);
    ah_mcp_free(u->s);
    u->s = NULL;
    if (u->hooks_ref != LUA_NOREF)
        luaL_unref(L, LUA_REGISTRYINDEX, u->hooks_ref);
    u->hooks_ref = LUA_NOREF;
    return 0;
}

/* mcp_close(server) -> the server (wait for it: an HTTP session's DELETE is in flight,
 * bounded in the core) or nil */
static int p_mcp_close(lua_State *L)
{
    mcp_ud *u = check_mcp(L, 1);
    lua_State *prev = lah_enter(L);
    ah_mcp_close(u->s);
    lah_leave(L, prev);
    u->wait.ready = ah_mcp_state_of(u->s) == AH_MCP_CLOSED || !u->is_http;
    if (u->wait.ready)
        lua_pushnil(L);
    else
        lua_pushvalue(L, 1);
    return 1;
}

static int mcp_tostring(lua_State *L)
{
    mcp_ud *u = luaL_checkudata(L, 1, MCP_MT);
    lua_pushfstring(L, "ah.mcp '%s' (%s)", u->s ? ah_mcp_name(u->s) : "?",
                    u->s ? ah_mcp_state_name(ah_mcp_state_of(u->s)) : "freed");
    return 1;
}

/* server.name, .state, .protocol, .reason, .server_info; methods (close, tools and
 * call from lua/waits.lua) from the table in the upvalue */
static int mcp_index(lua_State *L)
{
    mcp_ud *u = luaL_checkudata(L, 1, MCP_MT);
    const char *k = luaL_checkstring(L, 2);
    if (!u->s) {
        lua_pushnil(L);
    } else if (strcmp(k, "name") == 0) {
        lua_pushstring(L, ah_mcp_name(u->s));
    } else if (strcmp(k, "state") == 0) {
        lua_pushstring(L, ah_mcp_state_name(ah_mcp_state_of(u->s)));
    } else if (strcmp(k, "protocol") == 0) {
        lua_pushstring(L, ah_mcp_protocol(u->s));
    } else if (strcmp(k, "reason") == 0) {
        lua_pushstring(L, ah_mcp_reason(u->s));
    } else if (strcmp(k, "server_info") == 0) {
        lua_pushstring(L, ah_mcp_server_info(u->s));
    } else if (strcmp(k, "restarts") == 0) {
        lua_pushinteger(L, ah_mcp_restarts(u->s));
    } else {
        lua_getfield(L, lua_upvalueindex(1), k);
    }
    return 1;
}

/* ---- overrides ------------------------------------------------------------------ */

/* Push the override table of tool `name` (nil when none). */
static int push_override(lua_State *L, mcp_ud *u, const char *name)
{
    push_hooks(L, u);
    if (lua_getfield(L, -1, "tools") != LUA_TTABLE) {
        lua_pop(L, 2);
        lua_pushnil(L);
        return 0;
    }
    lua_getfield(L, -1, name);
    lua_remove(L, -2);
    lua_remove(L, -2);
    return lua_istable(L, -1);
}

static int tool_enabled(lua_State *L, mcp_ud *u, const char *name)
{
    int en = 1;
    if (push_override(L, u, name)) {
        lua_getfield(L, -1, "enabled");
        en = lua_isnil(L, -1) || lua_toboolean(L, -1);
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return en;
}

/* ---- the primitives of lua/waits.lua ---------------------------------------------- */

/* mcp_settle(server) -> the server (wait for it) or nil when it has settled */
static int p_mcp_settle(lua_State *L)
{
    mcp_ud *u = check_mcp(L, 1);
    ah_mcp_state st = ah_mcp_state_of(u->s);
    u->wait.ready = settled(st);
    if (u->wait.ready)
        lua_pushnil(L);
    else
        lua_pushvalue(L, 1);
    return 1;
}

static void push_json(lua_State *L, const char *json)
{
    if (!json || !lah_push_json_decoded(L, json, strlen(json)))
        lua_pushnil(L);
}

/* mcp_tools(server) -> { {name, title, description, schema, annotations}, ... } (the
 * enabled tools, the server's own names); a failed server raises its reason */
static int p_mcp_tools(lua_State *L)
{
    mcp_ud *u = check_mcp(L, 1);
    ah_mcp_state st = ah_mcp_state_of(u->s);
    if (st == AH_MCP_FAILED)
        return luaL_error(L, "MCP server '%s' failed: %s", ah_mcp_name(u->s),
                          ah_mcp_reason(u->s) ? ah_mcp_reason(u->s) : "?");
    size_t n = ah_mcp_tool_count(u->s);
    lua_createtable(L, (int)n, 0);
    int k = 0;
    for (size_t i = 0; i < n; i++) {
        const ah_mcp_tool *t = ah_mcp_tool_at(u->s, i);
        if (!tool_enabled(L, u, t->name))
            continue;
        lua_createtable(L, 0, 5);
        lua_pushstring(L, t->name);
        lua_setfield(L, -2, "name");
        if (t->title) {
            lua_pushstring(L, t->title);
            lua_setfield(L, -2, "title");
        }
        if (t->description) {
            lua_pushstring(L, t->description);
            lua_setfield(L, -2, "description");
        }
        push_json(L, t->schema_json);
        lua_setfield(L, -2, "schema");
        push_json(L, t->annotations_json);
        lua_setfield(L, -2, "annotations");
        lua_rawseti(L, -2, ++k);
    }
    return 1;
}

static int call_gc(lua_State *L)
{
    call_ud *c = luaL_checkudata(L, 1, CALL_MT);
    if (c->c) {
        unlist(c);
        ah_mcp_call_free(c->c);
        c->c = NULL;
    }
    if (c->on_event_ref != LUA_NOREF)
        luaL_unref(L, LUA_REGISTRYINDEX, c->on_event_ref);
    c->on_event_ref = LUA_NOREF;
    return 0;
}

/* The call's events (mcp_progress, budget_exhausted): an agent's go to its run in C;
 * a bare call's to the host's sink and the call's on_event (else the server's). */
static void call_event(void *ud, const ah_event *ev)
{
    call_ud *c = ud;
    lua_State *L = lah_running(c->main);
    if (c->sink) {
        c->sink->fn(c->sink->ud, L, ev);
        return;
    }
    if (!lua_checkstack(L, 6))
        return;
    int top = lua_gettop(L);
    if (c->on_event_ref != LUA_NOREF) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, c->on_event_ref);
    } else {
        push_hooks(L, c->server);
        lua_getfield(L, -1, "on_event");
        lua_remove(L, -2);
    }
    lah_tools_emit(L, lua_gettop(L), 1, ev);
    lua_settop(L, top);
}

static void call_done(void *ud, ah_mcp_call *mc)
{
    call_ud *c = ud;
    c->wait.ready = 1;
    unlist(c);
    if (ah_mcp_call_budget_first_refusal(mc)) {
        ah_event ev;
        memset(&ev, 0, sizeof ev);
        ev.type = AH_EV_BUDGET_EXHAUSTED;
        ev.u.budget_exhausted.budget = "tool_calls";
        call_event(c, &ev);
    }
    if (!c->into) { /* an agent emits tool_call_end itself */
        ah_event ev;
        ah_mcp_call_end_event(mc, c->id, c->name, &ev);
        call_event(c, &ev);
    }
}

static const char *const call_fields[] = {"key",          "ledger", "budget",     "run_id",
                                          "tool_call_id", "name",   "on_event",   "timeout_ms",
                                          "idempotent",   NULL};

/* mcp_call_start(server, name, args, opts, into) -> call (waitable) */
static int p_mcp_call_start(lua_State *L)
{
    mcp_ud *u = check_mcp(L, 1);
    const char *name = lah_check_no_nul(L, 2, "server:call: the tool's name");
    int into = lua_toboolean(L, 5);
    lua_settop(L, 4);
    if (!lua_isnil(L, 3))
        luaL_checktype(L, 3, LUA_TTABLE);
    if (!lua_isnil(L, 4)) {
        luaL_checktype(L, 4, LUA_TTABLE);
        lah_check_fields(L, 4, "server:call options", call_fields);
    } else {
        lua_newtable(L);
        lua_replace(L, 4);
    }
    if (!tool_enabled(L, u, name))
        return luaL_error(L, "MCP server '%s': tool '%s' is disabled (tools.%s.enabled)",
                          ah_mcp_name(u->s), name, name);
    /* arguments: canonical JSON ({} for nil or an empty table) */
    if (lua_isnil(L, 3)) {
        lua_pushliteral(L, "{}");
    } else {
        lah_push_canonical_json(L, 3, 1);
        if (strcmp(lua_tostring(L, -1), "[]") == 0) {
            lua_pop(L, 1);
            lua_pushliteral(L, "{}");
        }
    }
    int args = lua_gettop(L); /* 5 */
    ah_mcp_call_opts o;
    memset(&o, 0, sizeof o);
    o.idempotent = -1;
    call_ud *c = lua_newuserdatauv(L, sizeof *c, 5);
    memset(c, 0, sizeof *c);
    c->on_event_ref = LUA_NOREF;
    luaL_setmetatable(L, CALL_MT);
    int cu = lua_gettop(L); /* 6 */
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, cu, 1); /* the server outlives the call */
    c->server = u;
    c->main = lah_main(L);
    c->into = into;
    ah__bufprintf(c->name, sizeof c->name, "%s", name);
    int ty = lua_getfield(L, 4, "name");
    if (ty == LUA_TSTRING)
        ah__bufprintf(c->name, sizeof c->name, "%s", lua_tostring(L, -1));
    lua_pop(L, 1);
    o.display_name = c->name;
    if (lua_getfield(L, 4, "key") != LUA_TNIL) {
        if (!lua_isstring(L, -1))
            return luaL_error(L, "server:call: key must be a string");
        lua_pushstring(L, lua_tostring(L, -1));
        lua_setiuservalue(L, cu, 4);
    }
    lua_pop(L, 1);
    lua_getiuservalue(L, cu, 4);
    o.key = lua_tostring(L, -1); /* anchored in the call */
    lua_pop(L, 1);
    if (lua_getfield(L, 4, "tool_call_id") == LUA_TSTRING)
        ah__bufprintf(c->id, sizeof c->id, "%s", lua_tostring(L, -1));
    else if (o.key)
        ah__bufprintf(c->id, sizeof c->id, "%s", o.key);
    lua_pop(L, 1);
    o.id = c->id[0] ? c->id : NULL;
    if (lua_getfield(L, 4, "run_id") == LUA_TSTRING) {
        lua_pushvalue(L, -1);
        lua_setiuservalue(L, cu, 5);
        o.run_id = lua_tostring(L, -1); /* anchored in the call */
    }
    lua_pop(L, 1);
    /* the ledger: the caller's, else the server's own (in memory), only with a key */
    if (o.key) {
        if (lua_getfield(L, 4, "ledger") == LUA_TNIL) {
            lua_pop(L, 1);
            push_hooks(L, u);
            if (lua_getfield(L, -1, "ledger") == LUA_TNIL) {
                lua_pop(L, 1);
                lah_ledger_push_new(L, NULL);
                lua_pushvalue(L, -1);
                lua_setfield(L, -3, "ledger");
            }
            lua_remove(L, -2);
        } else {
            lah_ledger_push_arg(L, -1);
            lua_remove(L, -2);
        }
        lah_ledger_ud *lu = lah_ledger_test(L, -1);
        o.ledger = lu ? lu->l : NULL;
        lua_setiuservalue(L, cu, 2);
    }
    ty = lua_getfield(L, 4, "budget");
    if (ty == LUA_TNUMBER) {
        lua_Integer n = lah_check_whole(L, -1, "server:call", "budget", 0, LUA_MAXINTEGER);
        lua_pop(L, 1);
        lah_budget_push_new(L, n);
    } else if (ty != LUA_TNIL && !lah_budget_test(L, -1)) {
        return luaL_error(L, "server:call: budget must be an ah.budget or a number");
    }
    lah_budget_ud *bu = lah_budget_test(L, -1);
    o.budget = bu ? bu->b : NULL;
    lua_setiuservalue(L, cu, 3);
    if (lua_getfield(L, 4, "timeout_ms") != LUA_TNIL)
        o.timeout_ms = (int64_t)lah_check_whole(L, -1, "server:call", "timeout_ms", 1,
                                                LUA_MAXINTEGER);
    lua_pop(L, 1);
    if (lua_getfield(L, 4, "idempotent") != LUA_TNIL)
        o.idempotent = lua_toboolean(L, -1);
    lua_pop(L, 1);
    /* the per-tool overrides of ah.mcp{ tools = ... } */
    ah_policy tpol;
    if (push_override(L, u, name)) {
        if (o.idempotent < 0 && lua_getfield(L, -1, "idempotent") != LUA_TNIL)
            o.idempotent = lua_toboolean(L, -1);
        lua_pop(L, 1);
        if (lua_getfield(L, -1, "policy") != LUA_TNIL) {
            ah_policy_init(&tpol);
            lah_policy_from_table(L, -1, "server:call policy", &tpol);
            o.policy = &tpol;
        }
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    ty = lua_getfield(L, 4, "on_event");
    if (into && ty == LUA_TUSERDATA) {
        c->sink = lua_touserdata(L, -1);
        c->on_event_ref = luaL_ref(L, LUA_REGISTRYINDEX); /* anchors the sink */
    } else if (ty == LUA_TFUNCTION) {
        c->on_event_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    } else if (ty != LUA_TNIL) {
        return luaL_error(L, "server:call: on_event must be a function");
    } else {
        lua_pop(L, 1);
    }
    o.on_event = call_event;
    o.event_ud = c;
    o.done = call_done;
    o.done_ud = c;
    char err[320];
    if (ah_mcp_call_start(u->s, name, lua_tostring(L, args), &o, &c->c, err, sizeof err) !=
        AH_OK)
        return luaL_error(L, "server:call: %s", err);
    c->started_on = L;
    c->next = in_flight;
    if (in_flight)
        in_flight->prev = c;
    in_flight = c;
    c->listed = 1;
    if (!into)
        atomic_fetch_add(&bare_count, 1);
    lua_settop(L, cu);
    return 1;
}

static call_ud *check_call(lua_State *L, int idx)
{
    call_ud *c = luaL_checkudata(L, idx, CALL_MT);
    if (!c->c)
        luaL_error(L, "server:call: internal: the call has ended");
    return c;
}

static const char *outcome_name(ah_tool_outcome o)
{
    return o == AH_TOOL_ERROR ? "failed" : ah_tool_outcome_name(o);
}

/* mcp_call_result(call) -> the record (or, for an agent: lah_tool_result, text) */
static int p_mcp_call_result(lua_State *L)
{
    call_ud *c = check_call(L, 1);
    ah_mcp_call *mc = c->c;
    ah_tool_outcome o = ah_mcp_call_outcome(mc);
    if (c->into) {
        lah_tool_result *out = lua_newuserdatauv(L, sizeof *out, 0);
        memset(out, 0, sizeof *out);
        out->outcome = o;
        out->attempts = ah_mcp_call_attempts(mc);
        out->duplicate = ah_mcp_call_duplicate(mc);
        out->error = *ah_mcp_call_error(mc);
        char *text = ah_mcp_call_text(mc);
        if (!text)
            return luaL_error(L, "out of memory");
        lua_pushstring(L, text);
        free(text);
        return 2;
    }
    lua_createtable(L, 0, 12);
    lua_pushboolean(L, o == AH_TOOL_OK);
    lua_setfield(L, -2, "ok");
    lua_pushstring(L, outcome_name(o));
    lua_setfield(L, -2, "outcome");
    lua_pushinteger(L, ah_mcp_call_attempts(mc));
    lua_setfield(L, -2, "attempts");
    lua_pushboolean(L, ah_mcp_call_duplicate(mc));
    lua_setfield(L, -2, "duplicate");
    lua_pushstring(L, c->name);
    lua_setfield(L, -2, "tool");
    lua_pushstring(L, ah_mcp_name(c->server->s));
    lua_setfield(L, -2, "server");
    if (ah_mcp_call_key(mc)) {
        lua_pushstring(L, ah_mcp_call_key(mc));
        lua_setfield(L, -2, "key");
    }
    if (ah_mcp_call_seq(mc) > 0) {
        lua_pushinteger(L, (lua_Integer)ah_mcp_call_seq(mc));
        lua_setfield(L, -2, "seq");
    }
    lua_pushboolean(L, ah_mcp_call_is_error(mc));
    lua_setfield(L, -2, "is_error");
    const char *json = ah_mcp_call_result_json(mc);
    if (json) {
        push_json(L, json);
        if (lua_istable(L, -1)) {
            lua_getfield(L, -1, "content");
            lua_setfield(L, -3, "content");
            lua_getfield(L, -1, "structuredContent");
            lua_setfield(L, -3, "structured");
        }
        lua_setfield(L, -2, "receipt");
        char *text = ah_mcp_call_text(mc);
        if (text) {
            lua_pushstring(L, text);
            lua_setfield(L, -2, "text");
            free(text);
        }
    }
    if (o != AH_TOOL_OK) {
        lah_push_error(L, ah_mcp_call_error(mc));
        lua_setfield(L, -2, "error");
    }
    unlist(c);
    ah_mcp_call_free(c->c);
    c->c = NULL;
    return 1;
}

void lah_mcp_cancel_started_on(lua_State *co)
{
    for (call_ud *c = in_flight; c;) {
        call_ud *next = c->next;
        if (c->started_on == co && c->c && !ah_mcp_call_finished(c->c))
            ah_mcp_call_cancel(c->c, "the run was cancelled");
        c = next;
    }
}

int lah_mcp_cancel_bare(lua_State *L, const char *reason)
{
    void *state = lah_state_id(L);
    int n = 0;
    for (call_ud *c = in_flight; c;) {
        call_ud *next = c->next;
        if (!c->into && c->c && !ah_mcp_call_finished(c->c) &&
            lah_state_id(c->main) == state) {
            ah_mcp_call_cancel(c->c, reason);
            n++;
        }
        c = next;
    }
    return n;
}

int lah_mcp_bare_in_flight(void)
{
    return atomic_load(&bare_count);
}

/* ---- an agent's tools from its servers -------------------------------------------- */

/* name fitted to ^[A-Za-z0-9_-]{1,64}$ */
static void fit_name(char *out, size_t outsize, const char *server, const char *tool)
{
    char full[512];
    ah__bufprintf(full, sizeof full, "%s__%s", server, tool);
    for (char *p = full; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
              (*p >= '0' && *p <= '9') || *p == '_' || *p == '-'))
            *p = '_';
    size_t n = strlen(full);
    if (n <= 64) {
        ah__bufprintf(out, outsize, "%s", full);
        return;
    }
    unsigned long h = 5381; /* a long name: its first 55 bytes and a hash of the rest */
    for (const char *p = full; *p; p++)
        h = h * 33 + (unsigned char)*p;
    ah__bufprintf(out, outsize, "%.55s_%08lx", full, h & 0xffffffffUL);
}

size_t lah_mcp_offer(lua_State *L, int list, int map, const ah_tool_def *own, size_t n_own,
                     ah_tool_def **defs, const char ***servers)
{
    list = lua_absindex(L, list);
    map = lua_absindex(L, map);
    size_t total = n_own;
    int n = (int)lua_rawlen(L, list);
    for (int i = 1; i <= n; i++) {
        lua_rawgeti(L, list, i);
        mcp_ud *u = luaL_testudata(L, -1, MCP_MT);
        if (u && u->s && ah_mcp_state_of(u->s) != AH_MCP_FAILED)
            total += ah_mcp_tool_count(u->s);
        lua_pop(L, 1);
    }
    ah_tool_def *d = lua_newuserdatauv(L, (total + 1) * sizeof *d, 0);
    const char **sv = lua_newuserdatauv(L, (total + 1) * sizeof *sv, 0);
    /* both anchored in the map table under light keys */
    lua_rawsetp(L, map, (void *)sv);
    lua_rawsetp(L, map, (void *)d);
    size_t k = 0;
    for (size_t i = 0; i < n_own; i++) {
        d[k] = own[i];
        sv[k++] = NULL;
    }
    for (int i = 1; i <= n; i++) {
        lua_rawgeti(L, list, i);
        mcp_ud *u = luaL_testudata(L, -1, MCP_MT);
        int sidx = lua_gettop(L);
        if (!u || !u->s || ah_mcp_state_of(u->s) == AH_MCP_FAILED) {
            if (u && u->s)
                ah__log(AH_LOG_WARN, "MCP server '%s' failed (%s): its tools are not offered",
                        ah_mcp_name(u->s), ah_mcp_reason(u->s) ? ah_mcp_reason(u->s) : "?");
            lua_pop(L, 1);
            continue;
        }
        for (size_t t = 0; t < ah_mcp_tool_count(u->s); t++) {
            const ah_mcp_tool *tool = ah_mcp_tool_at(u->s, t);
            if (!tool_enabled(L, u, tool->name))
                continue;
            char name[80];
            fit_name(name, sizeof name, ah_mcp_name(u->s), tool->name);
            for (size_t j = 0; j < k; j++) {
                if (strcmp(d[j].name, name) != 0)
                    continue;
                const char *other = d[j].name;
                if (sv[j]) {
                    lua_pushstring(L, name);
                    lua_rawget(L, map);
                    lua_rawgeti(L, -1, 2);
                    lua_pushfstring(L, "tool '%s' of MCP server '%s'", lua_tostring(L, -1),
                                    sv[j]);
                    other = lua_tostring(L, -1);
                } else {
                    lua_pushfstring(L, "the agent's own tool '%s'", d[j].name);
                    other = lua_tostring(L, -1);
                }
                luaL_error(L, "ah.agent: two tools are both offered as '%s': %s and tool "
                              "'%s' of MCP server '%s' (disable one with ah.mcp{ tools = "
                              "{ <name> = { enabled = false } } })",
                           name, other, tool->name, ah_mcp_name(u->s));
            }
            /* map[name] = { server, tool name }; the key string is the def's name */
            lua_pushstring(L, name);
            d[k].name = lua_tostring(L, -1);
            lua_createtable(L, 2, 0);
            lua_pushvalue(L, sidx);
            lua_rawseti(L, -2, 1);
            lua_pushstring(L, tool->name);
            lua_rawseti(L, -2, 2);
            lua_rawset(L, map);
            d[k].description = tool->description;
            d[k].schema_json = tool->schema_json;
            sv[k++] = ah_mcp_name(u->s);
        }
        lua_pop(L, 1);
    }
    *defs = d;
    *servers = sv;
    return k;
}

/* ---- registration ----------------------------------------------------------------- */

void lah_open_mcp(lua_State *L)
{
    static const luaL_Reg meta[] = {{"__gc", mcp_gc}, {"__tostring", mcp_tostring}, {NULL, NULL}};
    static const luaL_Reg call_meta[] = {{"__gc", call_gc}, {NULL, NULL}};
    static const luaL_Reg priv[] = {{"mcp_settle", p_mcp_settle},
                                    {"mcp_close", p_mcp_close},
                                    {"mcp_tools", p_mcp_tools},
                                    {"mcp_call_start", p_mcp_call_start},
                                    {"mcp_call_result", p_mcp_call_result},
                                    {NULL, NULL}};
    static const luaL_Reg fns[] = {{"mcp", l_mcp}, {NULL, NULL}};
    lah_register_class(L, MCP_MT, meta);
    lah_register_class(L, CALL_MT, call_meta);
    /* server methods: in lua/waits.lua */
    lah_push_private(L);
    luaL_setfuncs(L, priv, 0);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_setfield(L, -3, "mcp_methods");
    luaL_getmetatable(L, MCP_MT);
    lua_insert(L, -2);
    lua_pushcclosure(L, mcp_index, 1);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 2);
    luaL_setfuncs(L, fns, 0);
}
