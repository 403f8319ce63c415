// fault_server.mjs - an MCP server, written with the official SDK, whose tools fail the
// way real servers do, and count their side effects in a file (tests/mcp/).
//
//   node fault_server.mjs stdio            one JSON-RPC message per line
//   node fault_server.mjs http PORT        streamable HTTP on 127.0.0.1:PORT (sessions;
//                                          EVENTS=1: resumable streams, event store)
// Environment: COUNT_FILE (one line "<tool> <key>" per effect applied), STATE_DIR
// (where "this fault already happened for this key" is remembered, so a fault happens
// on the first attempt only and a retry or resume can succeed).
//
// Tools: charge (no annotations: not safe to repeat), lookup (readOnlyHint: safe when
// the server is trusted), slow (progress, then the answer), declined (isError: true).
// The `fault` argument of charge / lookup, each once per idempotency key:
//   crash_before  the process exits before the effect
//   crash_after   the effect, then the process exits before answering
//   hang          the effect, then no answer at all
//   cut           the effect, then the answer's stream is closed (EVENTS=1: after an
//                 event id, the answer kept for a resume; else the socket is destroyed)
//   expire        (http) 404 for the session before the request is accepted
//   expire2       (http) 404 twice in a row
//   busy          (http) 503 with Retry-After: 1 before the request is accepted
// A DELETE of a session (the client ending it) is counted as "session deleted", or, with
// ?nodelete in the URL, answered 405 and counted as "session refused".
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { z } from "zod";
import fs from "node:fs";
import http from "node:http";
import { randomUUID } from "node:crypto";

const mode = process.argv[2] || "stdio";
const COUNT = process.env.COUNT_FILE || "/dev/null";
const STATE = process.env.STATE_DIR || "/tmp";
const EVENTS = process.env.EVENTS === "1";
let lastRes = null; // the HTTP response of the request being handled

function once(tag, key) {
  const f = `${STATE}/${tag}-${String(key).replace(/[^A-Za-z0-9_.-]/g, "_")}`;
  if (fs.existsSync(f)) return false;
  fs.writeFileSync(f, "");
  return true;
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function withFaults(tool, args, extra) {
  const key = extra._meta?.["io.agenthost/idempotency-key"] ?? "nokey";
  const fault = args.fault ?? "none";
  if (fault === "crash_before" && once("crash_before", key)) process.exit(3);
  fs.appendFileSync(COUNT, `${tool} ${key}\n`);
  if (fault === "crash_after" && once("crash_after", key)) process.exit(3);
  if (fault === "hang" && once("hang", key)) {
    // no answer; a cancel from the client (notifications/cancelled) is recorded
    await new Promise(() => {
      extra.signal?.addEventListener("abort", () => fs.appendFileSync(COUNT, `cancelled ${key}\n`));
    });
  }
  if (fault === "cut" && once("cut", key)) {
    if (EVENTS && extra.closeSSEStream) {
      await extra.sendNotification({
        method: "notifications/progress",
        params: { progressToken: extra._meta?.progressToken ?? 0, progress: 1, total: 2 },
      });
      extra.closeSSEStream();
      await sleep(100);
    } else if (lastRes) {
      lastRes.socket?.destroy();
      await sleep(50);
    }
  }
  return { content: [{ type: "text", text: `${tool} done for ${key}` }] };
}

function makeServer() {
  const server = new McpServer({ name: "fault", version: "1.0.0" });
  const schema = { fault: z.string().optional(), amount: z.number().optional() };
  server.registerTool("charge", { description: "Charge a card (counted)", inputSchema: schema },
    (args, extra) => withFaults("charge", args, extra));
  server.registerTool("lookup",
    { description: "Look a price up (counted, read-only)", inputSchema: schema,
      annotations: { readOnlyHint: true } },
    (args, extra) => withFaults("lookup", args, extra));
  server.registerTool("slow", { description: "Report progress, then answer",
      inputSchema: { steps: z.number().optional() } },
    async (args, extra) => {
      const n = args.steps ?? 3;
      for (let i = 1; i <= n; i++) {
        await extra.sendNotification({ method: "notifications/progress",
          params: { progressToken: extra._meta?.progressToken ?? 0, progress: i, total: n,
                    message: `step ${i}` } });
        await sleep(10);
      }
      return { content: [{ type: "text", text: `slow done after ${n} steps` }] };
    });
  server.registerTool("declined", { description: "Always declines", inputSchema: {} },
    async () => ({ isError: true, content: [{ type: "text", text: "card declined" }] }));
  return server;
}

class MemoryEventStore {
  events = new Map();
  async storeEvent(streamId, message) {
    const id = `${streamId}_${randomUUID()}`;
    this.events.set(id, { streamId, message });
    return id;
  }
  async getStreamIdForEventId(id) {
    return this.events.get(id)?.streamId;
  }
  async replayEventsAfter(lastId, { send }) {
    const all = [...this.events.entries()];
    const at = all.findIndex(([id]) => id === lastId);
    if (at < 0) return "";
    const stream = all[at][1].streamId;
    for (const [id, e] of all.slice(at + 1)) if (e.streamId === stream) await send(id, e.message);
    return stream;
  }
}

if (mode === "stdio") {
  await makeServer().connect(new StdioServerTransport());
} else {
  const port = Number(process.argv[3] || process.env.PORT);
  const sessions = new Map();
  const hits = new Map();
  const readBody = (req) => new Promise((ok) => {
    let b = "";
    req.on("data", (c) => (b += c));
    req.on("end", () => ok(b ? JSON.parse(b) : undefined));
  });
  http.createServer(async (req, res) => {
    lastRes = res;
    const sid = req.headers["mcp-session-id"];
    const body = req.method === "POST" ? await readBody(req) : undefined;
    const fault = body?.method === "tools/call" ? body.params?.arguments?.fault : undefined;
    const key = body?.params?._meta?.["io.agenthost/idempotency-key"];
    if (fault === "busy" && once("busy", key)) {
      res.writeHead(503, { "Retry-After": "1" }).end("busy");
      return;
    }
    const n = (hits.get(key) ?? 0) + 1;
    if ((fault === "expire" && n === 1) || (fault === "expire2" && n <= 2)) {
      hits.set(key, n);
      if (sid) sessions.delete(sid);
      res.writeHead(404, { "Content-Type": "application/json" })
        .end(JSON.stringify({ jsonrpc: "2.0", id: body.id, error: { code: -32001, message: "Session not found" } }));
      return;
    }
    if (req.method === "DELETE" && sid && sessions.has(sid)) {
      if (req.url.includes("nodelete")) {
        fs.appendFileSync(COUNT, "session refused\n");
        res.writeHead(405, { Allow: "GET, POST" }).end();
        return;
      }
      fs.appendFileSync(COUNT, "session deleted\n");
      await sessions.get(sid).handleRequest(req, res); // the SDK ends the session
      sessions.delete(sid);
      return;
    }
    let t = sid ? sessions.get(sid) : undefined;
    if (!t && sid) {
      res.writeHead(404).end();
      return;
    }
    if (!t) {
      t = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        eventStore: EVENTS ? new MemoryEventStore() : undefined,
        retryInterval: EVENTS ? 100 : undefined,
        onsessioninitialized: (id) => sessions.set(id, t),
      });
      await makeServer().connect(t);
    }
    await t.handleRequest(req, res, body);
  }).listen(port, "127.0.0.1", () => console.error(`fault server on 127.0.0.1:${port}`));
}
