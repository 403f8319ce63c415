// modern_server.mjs - an MCP server that speaks the stateless 2026-07-28 era, written
// with the official v2 SDK (@modelcontextprotocol/server 2.4.0), whose tools fail the way
// real servers do and count their side effects in a file, as fault_server.mjs's do:
//
//   node modern_server.mjs stdio        serveStdio: the era is chosen by the opening
//                                       message (server/discover: 2026-07-28)
//   node modern_server.mjs http PORT    createMcpHandler, a fresh McpServer per request,
//   node modern_server.mjs PORT         on 127.0.0.1:PORT over plain node:http
// Environment: COUNT_FILE (one line "<tool> <key>" per effect applied), STATE_DIR (where
// "this fault already happened for this key" is remembered).
//
// Tools: charge (no annotations: not safe to repeat), lookup (readOnlyHint), slow
// (progress, then the answer), declined (isError: true), route (x-mcp-header on four
// parameters: answers with the Mcp-Param-* headers it got), bad_header (x-mcp-header on
// a number: invalid, left out by clients over HTTP), route2 (the declaration on
// `region` appears once STATE_DIR/modern-route2-v2 exists). The `fault` argument of charge /
// lookup, each once per idempotency key:
//   crash_before  the process exits before the effect
//   crash_after   the effect, then the process exits before answering
//   hang          the effect, then no answer (a cancel is recorded as "cancelled <key>")
//   cut           (http) the effect, then the connection is destroyed (the 2026 era has
//                 no resumable streams: the answer is lost)
//   busy          (http) 503 with Retry-After: 1 before the request is accepted
import { createMcpHandler, McpServer } from "@modelcontextprotocol/server";
import { serveStdio } from "@modelcontextprotocol/server/stdio";
import * as z from "zod/v4";
import fs from "node:fs";
import http from "node:http";

const mode = /^\d+$/.test(process.argv[2] ?? "") ? "http" : (process.argv[2] || "stdio");
const COUNT = process.env.COUNT_FILE || "/dev/null";
const STATE = process.env.STATE_DIR || "/tmp";
let lastRes = null; // the HTTP response of the request being handled
let lastParams = null; // the Mcp-Param-* headers of the request being handled

function once(tag, key) {
  const f = `${STATE}/modern-${tag}-${String(key).replace(/[^A-Za-z0-9_.-]/g, "_")}`;
  if (fs.existsSync(f)) return false;
  fs.writeFileSync(f, "");
  return true;
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const keyOf = (ctx) => ctx?.mcpReq?._meta?.["io.agenthost/idempotency-key"] ?? "nokey";

async function withFaults(tool, args, ctx) {
  const key = keyOf(ctx);
  const fault = args.fault ?? "none";
  if (fault === "crash_before" && once("crash_before", key)) process.exit(3);
  fs.appendFileSync(COUNT, `${tool} ${key}\n`);
  if (fault === "crash_after" && once("crash_after", key)) process.exit(3);
  if (fault === "hang" && once("hang", key)) {
    await new Promise(() => {
      ctx.mcpReq.signal?.addEventListener("abort", () => fs.appendFileSync(COUNT, `cancelled ${key}\n`));
    });
  }
  if (fault === "cut" && once("cut", key) && lastRes) {
    lastRes.socket?.destroy();
    await sleep(50);
  }
  return { content: [{ type: "text", text: `${tool} done for ${key}` }] };
}

function makeServer() {
  const server = new McpServer({ name: "modern", version: "1.0.0" });
  const schema = z.object({ fault: z.string().optional(), amount: z.number().optional() });
  server.registerTool("charge", { description: "Charge a card (counted)", inputSchema: schema },
    (args, ctx) => withFaults("charge", args, ctx));
  server.registerTool("lookup", { description: "Look a price up (counted, read-only)",
    inputSchema: schema, annotations: { readOnlyHint: true } },
    (args, ctx) => withFaults("lookup", args, ctx));
  server.registerTool("slow", { description: "Report progress, then answer",
    inputSchema: z.object({ steps: z.number().optional() }) },
    async (args, ctx) => {
      const n = args.steps ?? 3;
      for (let i = 1; i <= n; i++) {
        await ctx.mcpReq.notify({ method: "notifications/progress",
          params: { progressToken: ctx.mcpReq._meta?.progressToken ?? 0, progress: i, total: n,
                    message: `step ${i}` } });
        await sleep(10);
      }
      return { content: [{ type: "text", text: `slow done after ${n} steps` }] };
    });
  // parameters mirrored into Mcp-Param-* headers (the SDK checks them against the body
  // over HTTP); `bad_header` declares one on a number, which clients must leave out
  server.registerTool("route", { description: "Answers with the headers it was routed by",
    inputSchema: z.object({
      region: z.string().meta({ "x-mcp-header": "Region" }),
      shard: z.number().int().optional().meta({ "x-mcp-header": "Shard" }),
      dry: z.boolean().optional().meta({ "x-mcp-header": "Dry" }),
      where: z.object({ zone: z.string().optional().meta({ "x-mcp-header": "Zone" }) }).optional(),
      note: z.string().optional() }) },
    async (args, ctx) => ({ content: [{ type: "text", text: JSON.stringify(lastParams ?? {}) }] }));
  // route2 starts without a declaration and gains one on `region` once STATE_DIR has
  // the file modern-route2-v2 (a tool whose inputSchema changed since it was listed)
  const v2 = fs.existsSync(`${STATE}/modern-route2-v2`);
  server.registerTool("route2", { description: "Its x-mcp-header declaration comes later",
    inputSchema: z.object({ region: v2 ? z.string().meta({ "x-mcp-header": "Region" }) : z.string() }) },
    async () => ({ content: [{ type: "text", text: JSON.stringify(lastParams ?? {}) }] }));
  server.registerTool("bad_header", { description: "An invalid x-mcp-header declaration",
    inputSchema: z.object({ amount: z.number().meta({ "x-mcp-header": "Amount" }) }) },
    async () => ({ content: [{ type: "text", text: "never offered" }] }));
  server.registerTool("declined", { description: "Always declines", inputSchema: z.object({}) },
    async () => ({ isError: true, content: [{ type: "text", text: "card declined" }] }));
  return server;
}

if (mode === "stdio") {
  serveStdio(makeServer);
} else {
  const port = Number(mode === "http" ? process.argv[3] : process.argv[2]) || Number(process.env.PORT);
  const handler = createMcpHandler(makeServer);
  http.createServer(async (req, res) => {
    lastRes = res;
    lastParams = Object.fromEntries(Object.entries(req.headers).filter(([k]) => k.startsWith("mcp-param-")));
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const body = Buffer.concat(chunks);
    let msg;
    try { msg = JSON.parse(body.toString() || "null"); } catch { msg = null; }
    const key = msg?.params?._meta?.["io.agenthost/idempotency-key"];
    if (msg?.method === "tools/call" && msg.params?.arguments?.fault === "busy" && once("busy", key)) {
      res.writeHead(503, { "Retry-After": "1" }).end("busy");
      return;
    }
    // the client closing the connection aborts the request (the 2026 era's cancel)
    const ac = new AbortController();
    res.on("close", () => { if (!res.writableFinished) ac.abort(); });
    const request = new Request(`http://127.0.0.1:${port}${req.url}`, {
      method: req.method, headers: req.headers, signal: ac.signal,
      body: req.method === "GET" || req.method === "HEAD" ? undefined : body });
    try {
      const response = await handler.fetch(request);
      res.writeHead(response.status, Object.fromEntries(response.headers));
      if (response.body) for await (const c of response.body) res.write(c);
      res.end();
    } catch {
      res.destroy();
    }
  }).listen(port, "127.0.0.1");
}
