// mcp_host_loop.mjs - a typical host loop on the official TypeScript client
// (@modelcontextprotocol/sdk Client.callTool) through the fault matrix of
// tests/bench/mcp_bench.sh: retry any error 3 times (4 attempts), reconnect (a new
// transport and Client, initialize again) when the transport closed, the SDK's own
// timeout per request (TIMEOUT_MS; the SDK's default is 60000). Each case's key goes in
// _meta["io.agenthost/idempotency-key"] only so the fault server can tell the cases
// apart (it does not deduplicate).
//   node mcp_host_loop.mjs STDIO_CMD EVENTS_URL PLAIN_URL TIMEOUT_MS PREFIX
// Prints one line per case: "case=T/TOOL/FAULT key=K outcome=O attempts=A ms=M then=OK"
// (then: whether a plain call of the same tool on the same connection works afterwards).
// Every case starts on a fresh connection.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [stdioCmd, eventsUrl, plainUrl, timeoutArg, prefix] = process.argv.slice(2);
const TIMEOUT = Number(timeoutArg || 60000);
const env = { PATH: process.env.PATH, COUNT_FILE: process.env.COUNT_FILE ?? "/dev/null",
              STATE_DIR: process.env.STATE_DIR ?? "/tmp" };

class Host {
  constructor(kind, target) { this.kind = kind; this.target = target; this.client = null; }
  async connect() {
    let t;
    if (this.kind === "stdio") {
      const [command, ...args] = this.target.split(" ");
      t = new StdioClientTransport({ command, args, env, stderr: "ignore" });
    } else {
      t = new StreamableHTTPClientTransport(new URL(this.target));
    }
    const c = new Client({ name: "host-loop", version: "1.0.0" });
    c.onclose = () => { if (this.client === c) this.client = null; };
    c.onerror = () => {};
    await c.connect(t, { timeout: TIMEOUT });
    this.client = c;
  }
  async call(name, args, key) {
    let attempts = 0, last;
    for (let i = 0; i < 4; i++) {
      attempts++;
      try {
        if (!this.client) await this.connect();
        const r = await this.client.callTool(
          { name, arguments: args, _meta: { "io.agenthost/idempotency-key": key } },
          undefined, { timeout: TIMEOUT });
        return { outcome: r.isError ? "tool_error" : "ok", attempts };
      } catch (e) {
        last = e;
      }
    }
    return { outcome: "failed", attempts, error: String(last?.message ?? last).slice(0, 80) };
  }
  async close() { try { await this.client?.close(); } catch {} }
}

const matrix = [
  ["stdio", stdioCmd, ["none", "crash_before", "crash_after", "hang"]],
  ["http-events", eventsUrl, ["none", "cut", "busy", "expire", "expire2", "hang"]],
  ["http-plain", plainUrl, ["none", "cut", "busy", "expire", "hang"]],
];
for (const [kind, target, faults] of matrix) {
  for (const tool of ["charge", "lookup"]) {
    for (const fault of faults) {
      // a fresh connection per case, so every case starts from a working one
      const host = new Host(kind === "stdio" ? "stdio" : "http", target);
      const key = `${prefix}-${kind}-${tool}-${fault}`;
      const t0 = performance.now();
      const r = await host.call(tool, { fault }, key);
      const ms = Math.round(performance.now() - t0);
      const then = await host.call(tool, {}, `${key}-then`);
      console.log(`case=${kind}/${tool}/${fault} key=${key} outcome=${r.outcome} ` +
        `attempts=${r.attempts} ms=${ms} then=${then.outcome === "ok" ? 1 : 0}`);
      await host.close();
    }
  }
}
process.exit(0);
