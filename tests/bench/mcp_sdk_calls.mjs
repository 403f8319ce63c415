// mcp_sdk_calls.mjs - the same sequential calls as mcp_calls.lua through the official
// TypeScript SDK client (@modelcontextprotocol/sdk, Client.callTool), for
// tests/bench/mcp_bench.sh:
//   node mcp_sdk_calls.mjs stdio|http TARGET N [CONC]   (CONC calls in flight, default 1)
// Prints "calls=N wall_ms=W cpu_ms=C" (process.cpuUsage: this process alone, user +
// system); exits 1 if any call failed.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [mode, target, nArg, concArg] = process.argv.slice(2);
const n = Number(nArg || 2000);
const conc = Number(concArg || 1);
const WARM = 50;
let transport;
if (mode === "stdio") {
  const [command, ...args] = target.split(" ");
  transport = new StdioClientTransport({ command, args,
    env: { PATH: process.env.PATH, NODE_PATH: process.env.NODE_PATH ?? "",
           COUNT_FILE: "/dev/null", STATE_DIR: process.env.STATE_DIR ?? "/tmp" } });
} else {
  transport = new StreamableHTTPClientTransport(new URL(target));
}
const client = new Client({ name: "bench", version: "1.0.0" });
await client.connect(transport);
await client.listTools();
for (let i = 0; i < WARM; i++) await client.callTool({ name: "lookup", arguments: { amount: 1 } });
const c0 = process.cpuUsage();
const w0 = performance.now();
async function worker(from) {
  for (let i = from; i <= n; i += conc) {
    const r = await client.callTool({ name: "lookup", arguments: { amount: i } });
    if (r.isError) {
      console.error(`mcp_sdk_calls.mjs: call ${i} failed`);
      process.exit(1);
    }
  }
}
await Promise.all(Array.from({ length: conc }, (_, k) => worker(k + 1)));
const w1 = performance.now();
const c1 = process.cpuUsage(c0);
console.log(`calls=${n} wall_ms=${(w1 - w0).toFixed(1)} cpu_ms=${((c1.user + c1.system) / 1000).toFixed(1)}`);
await client.close();
process.exit(0);
