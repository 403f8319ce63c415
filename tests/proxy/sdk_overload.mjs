// sdk_overload.mjs - what the official SDKs make of `agenthost proxy --max-in-flight`:
// with the bound's one request held open upstream (a stream the mock stalls, the proxy's
// idle time-out at 10 minutes), a request past the bound is answered with the format's
// overload error, and each SDK reads it as its own error class for that status with the
// body's error type (maxRetries: 0); an SDK with its retries on gets its answer once the
// held request has ended (its retry of the 529 goes through). The client's key appears
// in none of the proxy's output.
//
//   node sdk_overload.mjs NODE_DIR AGENTHOST
//
// Ends with the line "N passed, M failed" and exits 1 on any failure.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { sdks, start as startProcess } from './lib.mjs';

const [nodeDir, agenthost] = process.argv.slice(2);
if (!nodeDir || !agenthost) {
  console.error('usage: node sdk_overload.mjs NODE_DIR AGENTHOST');
  process.exit(2);
}
const here = path.dirname(fileURLToPath(import.meta.url));
const { Anthropic, OpenAI } = sdks(nodeDir);
const SECRET = 'sk-SECRET-sdk-overload-0123456789';
const start = (args) => startProcess(agenthost, args);

let passed = 0, failed = 0;
function check(what, cond, detail = '') {
  if (cond) { passed++; console.log(`ok: ${what}`); } else { failed++; console.log(`FAIL: ${what} ${detail}`); }
}

const mock = start([path.join(here, 'mock_ctl.lua')]);
const mockUrl = await mock.line();
const dir = mkdtempSync(path.join(tmpdir(), 'ah-proxy-overload-'));
const policy = path.join(dir, 'policy.lua');
writeFileSync(policy, 'return { policy = { idle_timeout_ms = 600000, attempt_timeout_ms = 600000 } }\n');
const proxy = start(['proxy', '--listen', '127.0.0.1:0', '--anthropic-url', mockUrl,
  '--openai-url', mockUrl, '--policy', policy, '--max-in-flight', '1']);
const base = await proxy.line();
mock.p.stdin.write(JSON.stringify({ steps: [{ stall_after_events: 4 }] }) + '\n');
await mock.line();

// the held request: a raw stream, read until its first text delta (it is in flight)
const hold = new AbortController();
const held = await fetch(`${base}/v1/messages`, {
  method: 'POST', signal: hold.signal,
  headers: { 'content-type': 'application/json', 'x-api-key': SECRET, 'anthropic-version': '2023-06-01' },
  body: JSON.stringify({ model: 'claude-test', max_tokens: 64, stream: true,
    messages: [{ role: 'user', content: 'hold' }] }),
});
const reader = held.body.getReader();
let got = '';
while (!got.includes('content_block_delta')) {
  const { value, done } = await reader.read();
  if (done) break;
  got += Buffer.from(value).toString();
}
check('the held stream is open', got.includes('content_block_delta'));

const anthropic = (retries, fetchFn) => new Anthropic({ apiKey: SECRET, baseURL: base,
  maxRetries: retries, timeout: 60000, logLevel: 'off', ...(fetchFn ? { fetch: fetchFn } : {}) });
const openai = new OpenAI({ apiKey: SECRET, baseURL: `${base}/v1`, maxRetries: 0, timeout: 60000, logLevel: 'off' });
const msg = { model: 'claude-test', max_tokens: 64, messages: [{ role: 'user', content: 'hi' }] };
async function thrown(f) { try { await f(); return null; } catch (e) { return e; } }

let e = await thrown(() => anthropic(0).messages.create(msg));
check('Anthropic SDK: an APIError with status 529', e instanceof Anthropic.APIError && e.status === 529, String(e));
check('Anthropic SDK: the body is an overloaded_error', e?.error?.error?.type === 'overloaded_error', JSON.stringify(e?.error));
check('Anthropic SDK: naming the bound', /--max-in-flight 1 reached/.test(e?.message ?? ''), e?.message);
e = await thrown(async () => {
  const s = anthropic(0).messages.stream(msg);
  for await (const ev of s) void ev;
});
check('Anthropic SDK, streamed: status 529 too', e instanceof Anthropic.APIError && e.status === 529, String(e));
e = await thrown(() => openai.chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] }));
check('OpenAI SDK, Chat: an InternalServerError with status 503', e instanceof OpenAI.InternalServerError && e.status === 503, String(e));
check('OpenAI SDK, Chat: the body\'s type is server_error', e?.type === 'server_error', e?.type);
e = await thrown(() => openai.responses.create({ model: 'gpt-test', input: 'hi' }));
check('OpenAI SDK, Responses: status 503', e instanceof OpenAI.APIError && e.status === 503, String(e));

// retries on: the first attempt meets the bound; the held request is then let go, and a
// retry gets the mock's answer
const statuses = [];
const watching = async (url, init) => {
  const r = await fetch(url, init);
  statuses.push(r.status);
  if (r.status === 529) hold.abort();
  return r;
};
const m = await anthropic(8, watching).messages.create(msg).catch((err) => err);
check('Anthropic SDK with retries: answered after the 529', m?.content?.[0]?.type === 'text', String(m));
check('its first attempt was the 529, its last a 200', statuses[0] === 529 && statuses.at(-1) === 200, JSON.stringify(statuses));

proxy.p.kill('SIGTERM');
await new Promise((r) => proxy.p.on('exit', r));
mock.p.stdin.end();
const err = proxy.stderr();
check('the proxy says how many it turned away', /requests answered overloaded at --max-in-flight 1/.test(err), err);
check('the key is in none of its output', !err.includes('SECRET'));
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
