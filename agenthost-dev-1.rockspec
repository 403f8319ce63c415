-- agenthost's Lua module for the Lua luarocks runs for, built from this checkout:
--   luarocks --lua-version 5.4 make            (5.1, 5.2, 5.3 alike; --tree DIR for a tree)
-- LuaJIT uses the 5.1 module: docs/luarocks.md has the commands, what goes where, and how
-- to set LUA_PATH/LUA_CPATH. Nothing is fetched: the one dependency is Lua itself, and the
-- C libraries are the system's (Debian: libcurl4-openssl-dev libcjson-dev libsqlite3-dev zlib1g-dev
-- libhiredis-dev libmicrohttpd-dev, and cmake).
rockspec_format = "3.0"
package = "agenthost"
version = "dev-1"

source = {
   -- `luarocks make` builds the checkout it runs in and never fetches this.
   url = "git+https://example.invalid/agenthost.git",
}

description = {
   summary = "Resilient LLM agents: retries, resumed streams, budgets, tools, for Lua 5.1-5.4 and LuaJIT",
   detailed = [[
agenthost runs LLM agents (Anthropic, OpenAI) that survive what providers do: 429/5xx with
Retry-After, overloaded errors, streams cut mid-text or mid-tool-call, all retried and resumed
with exact text. The module `agenthost` includes an in-process mock provider (ah.mock) with
fault plans; the scripts agenthost.status and agenthost.policy come with it.
]],
   labels = { "llm", "agents", "http" },
}

dependencies = {
   "lua >= 5.1, < 5.5",
}

-- Debian keeps curl/curl.h in /usr/include/<multiarch>/ (the compiler's default path, but
-- not one luarocks searches): libcurl is found by its library alone.
external_dependencies = {
   CURL = { library = "curl" },
   CJSON = { header = "cjson/cJSON.h", library = "cjson" },
   SQLITE = { header = "sqlite3.h", library = "sqlite3" },
   HIREDIS = { header = "hiredis/hiredis.h", library = "hiredis" },
   MHD = { header = "microhttpd.h", library = "microhttpd" },
   ZLIB = { header = "zlib.h", library = "z" },
}

build = {
   type = "cmake",
   -- luarocks' cmake backend passes no paths of its own: every one is given here
   -- (CMakeLists.txt, rock mode: cmake/luarocks.cmake).
   variables = {
      AH_LUAROCKS = "ON",
      CMAKE_C_FLAGS = "$(CFLAGS)",
      CMAKE_INSTALL_PREFIX = "$(PREFIX)",
      LUA_INCDIR = "$(LUA_INCDIR)",
      LIBDIR = "$(LIBDIR)",
      LUADIR = "$(LUADIR)",
      CURL_LIBDIR = "$(CURL_LIBDIR)",
      CJSON_INCDIR = "$(CJSON_INCDIR)",
      CJSON_LIBDIR = "$(CJSON_LIBDIR)",
      SQLITE_INCDIR = "$(SQLITE_INCDIR)",
      SQLITE_LIBDIR = "$(SQLITE_LIBDIR)",
      HIREDIS_INCDIR = "$(HIREDIS_INCDIR)",
      HIREDIS_LIBDIR = "$(HIREDIS_LIBDIR)",
      MHD_INCDIR = "$(MHD_INCDIR)",
      MHD_LIBDIR = "$(MHD_LIBDIR)",
      ZLIB_INCDIR = "$(ZLIB_INCDIR)",
      ZLIB_LIBDIR = "$(ZLIB_LIBDIR)",
   },
   copy_directories = { "docs" },
}
