# cmake -DIN=file.lua -DOUT=file.h -DNAME=symbol -P embed_lua.cmake
# Turns a Lua source into a C array (no NUL: its size is the source's), so the module
# carries the Lua it runs at load (lua/waits.lua) without reading any file.
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" n)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" body "${body}")
file(WRITE "${OUT}.tmp"
  "/* generated from ${IN} by cmake/embed_lua.cmake: do not edit */\n"
  "static const unsigned char ${NAME}[] = {\n${body}\n};\n")
file(RENAME "${OUT}.tmp" "${OUT}")
