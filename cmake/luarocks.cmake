# Rock mode (-DAH_LUAROCKS=ON), included by CMakeLists.txt for agenthost-dev-1.rockspec:
# only the Lua module for ONE Lua and the shipped scripts, nothing else (no program, no
# shared library, no tests, no fuzzers, no pkg-config). luarocks' cmake backend sets no
# install prefix, so the rockspec passes every path (the way luv's rockspec does):
#   LUA_INCDIR            the Lua headers luarocks uses ($(LUA_INCDIR)); the Lua version
#                         is read from its lua.h (LUA_VERSION_NUM), so one rockspec serves
#                         `luarocks --lua-version 5.1 ... 5.4` and LuaJIT (through 5.1)
#   LIBDIR, LUADIR        where agenthost.so and agenthost/<script>.lua are installed
#                         ($(LIBDIR), $(LUADIR): luarocks deploys them to lib/lua/<V>/
#                         and share/lua/<V>/ of its tree)
#   <DEP>_INCDIR/_LIBDIR  the external_dependencies luarocks found (CURL, CJSON, SQLITE,
#                         HIREDIS, MHD, ZLIB); optional hints, the compiler's default paths are
#                         searched too (Debian keeps curl/curl.h under
#                         /usr/include/<multiarch>/, which gcc searches by default)
#   AH_LUA_VERSIONS       optional: if set, the one version it names must match lua.h
# The core is linked statically into the module (hidden visibility, cmake/lua_module.map:
# only luaopen_agenthost is exported), so the installed agenthost.so needs no
# libagenthost.so and has no run path: it depends on system libraries alone.

set(LUA_INCDIR "" CACHE PATH "Lua headers (luarocks: $(LUA_INCDIR))")
set(LIBDIR "" CACHE PATH "Install directory of agenthost.so (luarocks: $(LIBDIR))")
set(LUADIR "" CACHE PATH "Install directory of the agenthost/*.lua scripts (luarocks: $(LUADIR))")
foreach(v LUA_INCDIR LIBDIR LUADIR)
  if(NOT ${v})
    message(FATAL_ERROR "AH_LUAROCKS=ON needs -D${v}=<dir> (agenthost-dev-1.rockspec passes it)")
  endif()
endforeach()
if(NOT EXISTS ${LUA_INCDIR}/lua.h)
  message(FATAL_ERROR "LUA_INCDIR=${LUA_INCDIR} has no lua.h")
endif()

# The Lua version of the headers: 501 (PUC 5.1 and LuaJIT), 502, 503, 504.
file(STRINGS ${LUA_INCDIR}/lua.h ah_lua_num REGEX "^#define[ \t]+LUA_VERSION_NUM[ \t]+[0-9]+")
string(REGEX REPLACE ".*[ \t]([0-9]+)$" "\\1" ah_lua_num "${ah_lua_num}")
if(NOT ah_lua_num MATCHES "^50[1-4]$")
  message(FATAL_ERROR "${LUA_INCDIR}/lua.h: Lua 5.1 to 5.4 needed (LUA_VERSION_NUM '${ah_lua_num}')")
endif()
math(EXPR ah_lua_minor "${ah_lua_num} - 500")
set(ah_abi 5.${ah_lua_minor})
if(AH_LUA_VERSIONS)
  set(ah_want "${AH_LUA_VERSIONS}")
  if(ah_want STREQUAL "luajit")
    set(ah_want 5.1)
  endif()
  if(NOT ah_want STREQUAL ah_abi)
    message(FATAL_ERROR "AH_LUA_VERSIONS=${AH_LUA_VERSIONS}, but ${LUA_INCDIR}/lua.h is Lua ${ah_abi}")
  endif()
endif()
message(STATUS "agenthost rock: the module for Lua ${ah_abi} (${LUA_INCDIR}) -> ${LIBDIR}, scripts -> ${LUADIR}/agenthost")

# The system libraries, at the directories luarocks found (if any) or the default ones.
set(AH_ROCK_LIBS)
foreach(dep CURL:curl CJSON:cjson SQLITE:sqlite3 HIREDIS:hiredis MHD:microhttpd ZLIB:z)
  string(REPLACE ":" ";" dep "${dep}")
  list(GET dep 0 var)
  list(GET dep 1 lib)
  find_library(AH_ROCK_LIB_${var} NAMES ${lib} HINTS ${${var}_LIBDIR})
  if(NOT AH_ROCK_LIB_${var})
    message(FATAL_ERROR "lib${lib} not found (give ${var}_LIBDIR=<dir> to luarocks)")
  endif()
  list(APPEND AH_ROCK_LIBS ${AH_ROCK_LIB_${var}})
  if(${var}_INCDIR)
    list(APPEND AH_ROCK_INCDIRS ${${var}_INCDIR})
  endif()
endforeach()
find_package(Threads REQUIRED)

add_compile_options(-Wall -Wextra -Wno-unused-parameter)
if(AH_WERROR)
  add_compile_options(-Werror)
endif()
# _FILE_OFFSET_BITS: what hiredis.pc asks of its users.
add_compile_definitions(_POSIX_C_SOURCE=200809L _FILE_OFFSET_BITS=64)
set(CMAKE_C_VISIBILITY_PRESET hidden)

# lua/waits.lua, compiled into the module (as in the full build).
set(AH_GENERATED_DIR ${PROJECT_BINARY_DIR}/generated)
add_custom_command(OUTPUT ${AH_GENERATED_DIR}/waits_lua.h
  COMMAND ${CMAKE_COMMAND} -DIN=${PROJECT_SOURCE_DIR}/lua/waits.lua
          -DOUT=${AH_GENERATED_DIR}/waits_lua.h -DNAME=lah_waits_lua
          -P ${PROJECT_SOURCE_DIR}/cmake/embed_lua.cmake
  DEPENDS ${PROJECT_SOURCE_DIR}/lua/waits.lua ${PROJECT_SOURCE_DIR}/cmake/embed_lua.cmake
  VERBATIM)

# One module: the core, the mock provider (ah.mock; its extra copy of core/util.c is for
# the shared core only) and the binding. The Lua symbols come from the interpreter. The
# core's objects do not depend on the Lua version: a second `luarocks make` for another
# Lua in the same checkout (build.luarocks/) reuses them and compiles lua/*.c alone.
# The same source lists as the full build (CMakeLists.txt): the core with its MCP client,
# the mock with the shared SSE writers, the binding without the program's files.
file(GLOB ah_core CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/core/*.c
     ${PROJECT_SOURCE_DIR}/core/mcp/*.c ${PROJECT_SOURCE_DIR}/core/mock/*.c
     ${PROJECT_SOURCE_DIR}/core/writer/*.c)
file(GLOB ah_lua CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/lua/*.c)
list(REMOVE_ITEM ah_lua ${PROJECT_SOURCE_DIR}/lua/main.c ${PROJECT_SOURCE_DIR}/lua/proxy.c)
add_library(agenthost_rock_core OBJECT ${ah_core})
target_include_directories(agenthost_rock_core PRIVATE ${PROJECT_SOURCE_DIR}/core
  ${PROJECT_SOURCE_DIR}/core/include ${AH_ROCK_INCDIRS})
add_library(agenthost_rock MODULE ${ah_lua} ${AH_GENERATED_DIR}/waits_lua.h
            $<TARGET_OBJECTS:agenthost_rock_core>)
target_include_directories(agenthost_rock PRIVATE ${PROJECT_SOURCE_DIR}/core
  ${PROJECT_SOURCE_DIR}/core/include ${PROJECT_SOURCE_DIR}/lua ${AH_GENERATED_DIR}
  ${LUA_INCDIR} ${AH_ROCK_INCDIRS})
# The scripts are found relative to the module too (lua/scripts_path.c): a luarocks tree
# has lib/lua/<V>/agenthost.so beside share/lua/<V>/agenthost/.
target_compile_definitions(agenthost_rock PRIVATE AH_REL_BIN_TO_LMOD="../share/lua/${ah_abi}"
  AH_REL_CMOD_TO_LMOD="../../../share/lua/${ah_abi}")
target_link_libraries(agenthost_rock PRIVATE ${AH_ROCK_LIBS} Threads::Threads m
                      ${CMAKE_DL_LIBS})
target_link_options(agenthost_rock PRIVATE
  -Wl,--version-script=${PROJECT_SOURCE_DIR}/cmake/lua_module.map)
set_target_properties(agenthost_rock PROPERTIES OUTPUT_NAME agenthost PREFIX ""
  LINK_DEPENDS ${PROJECT_SOURCE_DIR}/cmake/lua_module.map SKIP_BUILD_RPATH ON
  INSTALL_RPATH "")

install(TARGETS agenthost_rock LIBRARY DESTINATION ${LIBDIR})
file(GLOB ah_scripts CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/scripts/*.lua)
install(FILES ${ah_scripts} DESTINATION ${LUADIR}/agenthost)
