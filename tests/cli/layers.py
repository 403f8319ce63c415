"""layers.py BUILD SRC - the include rules of tests/cli/test_layers.sh, checked with the
compiler: each file's real include closure comes from `cc -MM` run with the build's own
flags (compile_commands.json). Prints one line per finding ("ok: ..." / "FAIL: ...")."""
import json
import os
import re
import shlex
import subprocess
import sys

build, src = sys.argv[1], os.path.realpath(sys.argv[2])
cmds = json.load(open(os.path.join(build, "compile_commands.json")))
by_file = {os.path.realpath(e["file"]): e for e in cmds}

LUA = r"(/lua5\.[0-9]/|/lua\.h$|/lauxlib\.h$|/lualib\.h$|^%s/lua/)" % re.escape(src)
# Below the worker: the call, transport, loop, retry, SSE, decoders, timeline, Redis and
# the base they stand on -- every core file but the worker and what sits beside it (ABOVE),
# so a new file is checked unless it is named here. They may not reach Lua, nor the
# worker, history (conversation), tools, ledgers or budgets, nor the umbrella agenthost.h
# that includes all of those.
UPPER = r"/agenthost/(worker|tool|conversation|ledger|budget)\.h$|/include/agenthost\.h$"
ABOVE = re.compile(r"^(worker|client_opts|tool_call|conversation|encode.*|provider_.*|ledger.*|budget|"
                   r"event_.*|capabilities|overlap)\.c$")


def closure(path):
    e = by_file.get(os.path.realpath(path))
    if e is None:
        return None
    args, out, skip = shlex.split(e["command"]), [], False
    for a in args:
        if skip:
            skip = False
        elif a in ("-o", "-MF", "-MT", "-MQ"):
            skip = True
        elif a not in ("-c", "-MD", "-MMD"):
            out.append(a)
    r = subprocess.run(out + ["-MM"], cwd=e["directory"], capture_output=True, text=True)
    if r.returncode:
        return None
    deps = r.stdout.replace("\\\n", " ").split()[1:]
    return [os.path.realpath(os.path.join(e["directory"], d)) for d in deps]


def rel(p):
    return os.path.relpath(p, src) if p.startswith(src) else p


fails = 0


def check(files, pattern, what):
    global fails
    bad, n = [], 0
    for f in files:
        deps = closure(f)
        if deps is None:
            bad.append("%s (not in compile_commands.json or -MM failed)" % rel(f))
            continue
        n += 1
        hits = [rel(d) for d in deps if re.search(pattern, d)]
        if hits:
            bad.append("%s -> %s" % (rel(f), " ".join(hits)))
    if bad:
        fails += 1
        print("FAIL: %s: %s" % (what, "; ".join(bad)))
    else:
        print("ok: %s (%d files)" % (what, n))


core = sorted(os.path.join(src, "core", f) for f in os.listdir(os.path.join(src, "core"))
              if f.endswith(".c"))
mock = sorted(os.path.join(src, "core", "mock", f)
              for f in os.listdir(os.path.join(src, "core", "mock")) if f.endswith(".c"))
check(core + mock, LUA, "no core or mock file includes a Lua header or one from lua/")
below = [f for f in core if not ABOVE.match(os.path.basename(f))]
check(below, LUA + "|" + UPPER,
      "nothing below the worker includes Lua, worker.h, tool.h, conversation.h, ledger.h, "
      "budget.h or agenthost.h")
# MCP sits above the tool-call machine (core/mcp/ drives tool_call.c): no file of the
# core outside core/mcp/ reaches agenthost/mcp.h or core/mcp/'s own header.
MCP = r"/agenthost/mcp\.h$|/core/mcp/"
check(core, MCP, "nothing below the MCP client (core/*.c: the tool-call machine, the worker "
      "and all beneath them) includes agenthost/mcp.h or core/mcp/")
mcpdir = os.path.join(src, "core", "mcp")
mcp = sorted(os.path.join(mcpdir, f) for f in os.listdir(mcpdir) if f.endswith(".c"))
check(mcp, LUA + r"|/agenthost/worker\.h$|/agenthost/conversation\.h$|/include/agenthost\.h$",
      "core/mcp/ includes no Lua header, worker.h, conversation.h or agenthost.h")
sys.exit(1 if fails else 0)
