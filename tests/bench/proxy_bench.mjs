// proxy_bench.mjs - what `agenthost proxy` adds (docs/performance.md, "agenthost proxy"):
//   node proxy_bench.mjs AGENTHOST [N]
// 1. time to the first text delta of an Anthropic stream (POST /v1/messages, stream:
//    true) through the proxy minus straight to the mock, p50 / p99, at concurrency 1
//    (N requests one after the other, direct and proxied interleaved) and 64 (64 at once,
//    N/8 rounds); the client is Node's fetch, the same for both;
//    with the proxy process's CPU time and context switches (all its threads) per request;
// 2. events per CPU-second spliced: one reply of 200 000 deltas through the proxy, the
//    proxy process's CPU (utime + stime from /proc) around it.
// Prints one line per number. Not a test: nothing is asserted.
import { spawn } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';

const [agenthost, nArg = '400'] = process.argv.slice(2);
const N = Number(nArg);
function start(args) {
  const p = spawn(agenthost, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((res) => {
    let buf = '';
    p.stdout.on('data', (d) => {
      buf += d;
      const i = buf.indexOf('\n');
      if (i >= 0) res({ p, url: buf.slice(0, i) });
    });
  });
}
const cpu = (pid) => {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(f[11]) + Number(f[12])) / 100; // utime + stime, clock ticks of 10 ms
};
// context switches of every thread of pid (voluntary + involuntary)
const switches = (pid) => readdirSync(`/proc/${pid}/task`).reduce((n, t) => {
  const st = readFileSync(`/proc/${pid}/task/${t}/status`, 'utf8');
  return n + [...st.matchAll(/ctxt_switches:\s+(\d+)/g)].reduce((a, m) => a + Number(m[1]), 0);
}, 0);
const body = JSON.stringify({ model: 'claude-test', max_tokens: 64, stream: true,
  messages: [{ role: 'user', content: 'hello there' }] });
const headers = { 'content-type': 'application/json', 'x-api-key': 'bench',
  'anthropic-version': '2023-06-01' };

async function ttfd(base) {
  const t0 = process.hrtime.bigint();
  const r = await fetch(`${base}/v1/messages`, { method: 'POST', headers, body });
  const rd = r.body.getReader();
  const dec = new TextDecoder();
  let seen = '', t = null, events = 0;
  for (;;) {
    const { value, done } = await rd.read();
    if (done) break;
    const s = dec.decode(value, { stream: true });
    if (t === null) {
      seen += s;
      if (seen.includes('text_delta')) t = Number(process.hrtime.bigint() - t0) / 1e6;
    }
    events += s.split('\n\n').length - 1;
  }
  return { ms: t, events };
}
const pct = (a, p) => { const s = [...a].sort((x, y) => x - y); return s[Math.min(s.length - 1, Math.floor(p * s.length))]; };

const mock = await start(['mock']);
const proxy = await start(['proxy', '--listen', '127.0.0.1:0', '--anthropic-url', mock.url]);
for (let i = 0; i < 20; i++) { await ttfd(mock.url); await ttfd(proxy.url); } // warm up

for (const conc of [1, 64]) {
  const direct = [], through = [];
  const rounds = conc === 1 ? N : Math.max(1, Math.floor(N / 8));
  // the proxy is idle while the direct requests run: its CPU over the rounds is theirs
  const cpu0 = cpu(proxy.p.pid), sw0 = switches(proxy.p.pid);
  for (let r = 0; r < rounds; r++) {
    const d = await Promise.all(Array.from({ length: conc }, () => ttfd(mock.url)));
    const p = await Promise.all(Array.from({ length: conc }, () => ttfd(proxy.url)));
    direct.push(...d.map((x) => x.ms));
    through.push(...p.map((x) => x.ms));
  }
  const f = (x) => x.toFixed(3);
  console.log(`concurrency ${conc}: ${direct.length} requests each; first text delta ` +
    `direct p50 ${f(pct(direct, 0.5))} ms p99 ${f(pct(direct, 0.99))} ms, ` +
    `through the proxy p50 ${f(pct(through, 0.5))} ms p99 ${f(pct(through, 0.99))} ms; ` +
    `added p50 ${f(pct(through, 0.5) - pct(direct, 0.5))} ms p99 ${f(pct(through, 0.99) - pct(direct, 0.99))} ms; ` +
    `proxy CPU ${((cpu(proxy.p.pid) - cpu0) * 1e6 / through.length).toFixed(0)} us and ` +
    `${((switches(proxy.p.pid) - sw0) / through.length).toFixed(1)} context switches per request`);
}
proxy.p.kill('SIGTERM');
mock.p.kill('SIGTERM');

// events per CPU-second: a long reply through the proxy
const big = await start(['mock', '--text-deltas', '200000']);
const px = await start(['proxy', '--listen', '127.0.0.1:0', '--anthropic-url', big.url]);
const c0 = cpu(px.p.pid);
const t0 = process.hrtime.bigint();
const { events } = await ttfd(px.url);
const wall = Number(process.hrtime.bigint() - t0) / 1e9;
const c1 = cpu(px.p.pid);
console.log(`splice: ${events} events through the proxy in ${wall.toFixed(2)} s wall, ` +
  `proxy CPU ${(c1 - c0).toFixed(2)} s: ${Math.round(events / Math.max(c1 - c0, 0.01))} events per CPU-second`);
px.p.kill('SIGTERM');
big.p.kill('SIGTERM');
