#!/usr/bin/env python3
"""cg_selfcost.py A.out B.out N [--main NAME] [--top K] [--rest LABEL]

Self cost per request from two callgrind profiles of one program, run at two request
counts: (B - A) / N per function, grouped by library or area, then the top K functions
(their source file, or their library when it has no symbols). Used by latency.sh and
proxy_latency.sh. NAME labels functions of the main executable (no object shown by
callgrind_annotate); LABEL is the group of agenthost code not in a named area."""
import argparse
import re
import subprocess

ap = argparse.ArgumentParser()
ap.add_argument("a")
ap.add_argument("b")
ap.add_argument("n", type=int)
ap.add_argument("--main", default="agenthost")
ap.add_argument("--top", type=int, default=25)
ap.add_argument("--rest", default="agenthost: worker, call, loop, transport, events, encoder")
args = ap.parse_args()


def selfcost(path):
    out = subprocess.run(["callgrind_annotate", "--threshold=100", path],
                         capture_output=True, text=True, check=True).stdout
    costs = {}
    lines = out.splitlines()
    # the function table only: from its "Ir  file:function" header to the next rule
    start = next(i for i, l in enumerate(lines) if l.rstrip().endswith("file:function"))
    end = next((i for i in range(start + 2, len(lines)) if lines[i].startswith("----")),
               len(lines))
    for line in lines[start + 2:end]:
        m = re.match(r"\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(\S.*?)(?:\s+\[([^\]]*)\])?$", line)
        if not m or ":" not in m.group(2):
            continue
        f, fn = m.group(2).split(":", 1)
        obj = (m.group(3) or "").split("/")[-1]
        where = f.split("/")[-1] if f != "???" else obj
        key = (fn, where or "?", obj or args.main)
        costs[key] = costs.get(key, 0) + int(m.group(1).replace(",", ""))
    return costs


PROXY_FILES = ("server.c", "splice.c", "out_anthropic.c", "out_openai.c", "out_responses.c")


def group(k):
    fn, where, obj = k
    if obj.startswith("libcurl"):
        return "libcurl"
    if obj.startswith("libmicrohttpd"):
        return "libmicrohttpd"
    if obj.startswith("libcjson"):
        return "cJSON"
    if obj.startswith("libc.so") and ("malloc" in where or fn in ("malloc", "free", "calloc", "realloc")):
        return "malloc/free"
    if obj.startswith("libc.so"):
        return "libc (mem*, str*, printf, ...)"
    if obj.startswith(("libssl", "libcrypto", "libnghttp", "libz", "libidn", "libpsl")):
        return "TLS, compression, IDN libraries"
    if obj.startswith("ld-linux"):
        return "dynamic linker"
    if obj.startswith(("liblua", "libluajit")):
        return "Lua"
    if where in PROXY_FILES:
        return "agenthost: core/proxy"
    if where.startswith(("decode", "sse.c", "timeline.c", "utf8.c")):
        return "agenthost: SSE + decoder + timeline"
    if where == obj:
        return "agenthost (no -g: not split by file)"
    return args.rest


a, b = selfcost(args.a), selfcost(args.b)
diff = {k: (b.get(k, 0) - a.get(k, 0)) / args.n for k in b}
total = sum(v for v in diff.values() if v > 0)
g = {}
for k, v in diff.items():
    g[group(k)] = g.get(group(k), 0) + v
for k, v in sorted(g.items(), key=lambda kv: -kv[1]):
    print(f"{v:10.0f} {100 * v / total:5.1f}%  {k}")
print(f"{total:10.0f}        total")
print()
for k, v in sorted(diff.items(), key=lambda kv: -kv[1])[:args.top]:
    print(f"{v:10.0f} {100 * v / total:5.1f}%  {k[0]}  ({k[1]})")
