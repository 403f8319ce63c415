// modern_server.mjs - a stateless MCP server of the 2026-07-28 era, written with the
// official v2 SDK (@modelcontextprotocol/server: createMcpHandler, a fresh McpServer per
// request), on 127.0.0.1:PORT over plain node:http. Its tool `charge` counts its effect
// in COUNT_FILE like fault_server.mjs's.
import { createMcpHandler, McpServer } from "@modelcontextprotocol/server";
import * as z from "zod/v4";
import fs from "node:fs";
import http from "node:http";

const port = Number(process.argv[2] || process.env.PORT);
const COUNT = process.env.COUNT_FILE || "/dev/null";
const handler = createMcpHandler(() => {
  const server = new McpServer({ name: "modern", version: "1.0.0" });
  server.registerTool("charge", { description: "Charge a card (counted)",
    inputSchema: z.object({ amount: z.number().optional() }) },
    async (args, ctx) => {
      const key = ctx?.mcpReq?._meta?.["io.agenthost/idempotency-key"] ??
        ctx?._meta?.["io.agenthost/idempotency-key"] ?? "nokey";
      fs.appendFileSync(COUNT, `charge ${key}\n`);
      return { content: [{ type: "text", text: `charged ${args.amount ?? 0}` }] };
    });
  return server;
});
http.createServer(async (req, res) => {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  const body = Buffer.concat(chunks);
  const request = new Request(`http://127.0.0.1:${port}${req.url}`, {
    method: req.method, headers: req.headers,
    body: req.method === "GET" || req.method === "HEAD" ? undefined : body });
  const response = await handler.fetch(request);
  res.writeHead(response.status, Object.fromEntries(response.headers));
  if (response.body) for await (const c of response.body) res.write(c);
  res.end();
}).listen(port, "127.0.0.1");
