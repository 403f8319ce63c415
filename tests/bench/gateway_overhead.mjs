// gateway_overhead.mjs - what `agenthost proxy` adds, measured the way an independent
// gateway benchmark measured Bifrost, Portkey and LiteLLM (docs/performance.md §11.6):
//   node gateway_overhead.mjs AGENTHOST [ROUNDS] [PER_ROUND] [WARMUP]   (defaults 7 25 15)
//
// - The upstream is a canned OpenAI Chat Completions server in this process (node:http):
//   it reads the request and answers at once with one fixed non-streaming completion
//   ("ok", 1 completion token). No mock of ours, so nothing of agenthost is on the direct path.
// - The client is Node's fetch (undici), one request at a time; a request's time runs from
//   the call to fetch to the last byte of the body.
// - The request is a non-streaming chat completion ({"model":"mock-model","messages":[{"role":
//   "user","content":"ping"}],"max_tokens":1}) with an Authorization header.
// - WARMUP requests each way first, then ROUNDS rounds of PER_ROUND straight to the upstream
//   and then PER_ROUND through the proxy.
// - The overhead is the median over the rounds of (the proxy's round median - the direct round
//   median), with the 25th and 75th percentiles of those differences.
// With socat on the PATH (RELAY=0 to skip), a third arm goes through a plain TCP byte relay
// (`socat ... fork`, one process per kept-alive connection) in each round, between the two:
// what one extra loopback hop costs without any HTTP work, measured the same way.
// Prints one line of key=value. Nothing is asserted.
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { createServer as netServer } from 'node:net';
import { execFileSync } from 'node:child_process';

const [agenthost, roundsArg = '7', perArg = '25', warmArg = '15'] = process.argv.slice(2);
if (!agenthost) {
  console.error('usage: node gateway_overhead.mjs AGENTHOST [ROUNDS] [PER_ROUND] [WARMUP]');
  process.exit(2);
}
const ROUNDS = Number(roundsArg), PER = Number(perArg), WARM = Number(warmArg);

const answer = JSON.stringify({
  id: 'chatcmpl-mock', object: 'chat.completion', created: 0, model: 'mock-model',
  choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 8, completion_tokens: 1, total_tokens: 9 },
});
const upstream = createServer((req, res) => {
  req.on('data', () => {});
  req.on('end', () => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(answer);
  });
});
await new Promise((ok) => upstream.listen(0, '127.0.0.1', ok));
const upUrl = `http://127.0.0.1:${upstream.address().port}`;

const proxy = spawn(agenthost, ['proxy', '--listen', '127.0.0.1:0', '--openai-url', upUrl],
  { stdio: ['ignore', 'pipe', 'inherit'] });
const pxUrl = await new Promise((ok, fail) => {
  let buf = '';
  proxy.on('exit', (c) => fail(new Error(`the proxy exited (${c}) before it listened`)));
  proxy.stdout.on('data', (d) => {
    buf += d;
    const i = buf.indexOf('\n');
    if (i >= 0) ok(buf.slice(0, i).trim());
  });
});

// the byte relay: a free port (bound once to learn it), socat listening there
let relay = null, relayUrl = null;
const haveSocat = (() => {
  try { execFileSync('sh', ['-c', 'command -v socat'], { stdio: 'ignore' }); return true; } catch { return false; }
})();
if (process.env.RELAY !== '0' && haveSocat) {
  const probe = netServer();
  await new Promise((ok) => probe.listen(0, '127.0.0.1', ok));
  const port = probe.address().port;
  await new Promise((ok) => probe.close(ok));
  relay = spawn('socat', [`TCP-LISTEN:${port},bind=127.0.0.1,reuseaddr,fork`,
    `TCP:127.0.0.1:${upstream.address().port}`], { stdio: 'ignore' });
  relayUrl = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 100; i++) { // until it listens
    try { await fetch(`${relayUrl}/v1/models`); break; } catch { await new Promise((ok) => setTimeout(ok, 20)); }
  }
}

const body = JSON.stringify({ model: 'mock-model', messages: [{ role: 'user', content: 'ping' }],
  max_tokens: 1 });
const headers = { 'content-type': 'application/json', authorization: 'Bearer sk-bench' };
async function once(base) {
  const t0 = process.hrtime.bigint();
  const r = await fetch(`${base}/v1/chat/completions`, { method: 'POST', headers, body });
  const got = await r.text();
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  if (!r.ok || !got.includes('"ok"')) throw new Error(`${base}: HTTP ${r.status}: ${got.slice(0, 200)}`);
  return ms;
}
async function run(base, n) {
  const out = [];
  for (let i = 0; i < n; i++) out.push(await once(base));
  return out;
}
// linear interpolation between the two nearest ranks, p in 0..1
function q(a, p) {
  const s = [...a].sort((x, y) => x - y);
  const at = p * (s.length - 1), lo = Math.floor(at), hi = Math.ceil(at);
  return s[lo] + (s[hi] - s[lo]) * (at - lo);
}

await run(upUrl, WARM);
await run(pxUrl, WARM);
if (relayUrl) await run(relayUrl, WARM);
const dRounds = [], pRounds = [], rRounds = [];
for (let r = 0; r < ROUNDS; r++) {
  dRounds.push(await run(upUrl, PER));
  if (relayUrl) rRounds.push(await run(relayUrl, PER));
  pRounds.push(await run(pxUrl, PER));
}
const dMed = dRounds.map((x) => q(x, 0.5)), pMed = pRounds.map((x) => q(x, 0.5));
const diff = pMed.map((m, i) => m - dMed[i]);
const rDiff = rRounds.map((x, i) => q(x, 0.5) - dMed[i]);
const f = (x) => x.toFixed(3);
const all = (rs) => rs.flat();
console.log(`overhead rounds=${ROUNDS} per_round=${PER} warmup=${WARM} ` +
  `direct_ms=${f(q(dMed, 0.5))} proxy_ms=${f(q(pMed, 0.5))} overhead_ms=${f(q(diff, 0.5))} ` +
  `overhead_iqr_ms=${f(q(diff, 0.25))}..${f(q(diff, 0.75))} ` +
  `direct_p99_ms=${f(q(all(dRounds), 0.99))} proxy_p99_ms=${f(q(all(pRounds), 0.99))}` +
  (relayUrl ? ` relay_ms=${f(q(rRounds.map((x) => q(x, 0.5)), 0.5))} relay_overhead_ms=${f(q(rDiff, 0.5))}` +
    ` relay_overhead_iqr_ms=${f(q(rDiff, 0.25))}..${f(q(rDiff, 0.75))}` : ''));
proxy.kill('SIGTERM');
if (relay) relay.kill('SIGTERM');
upstream.close();
upstream.closeAllConnections();
