// sdk_matrix.mjs - the official SDKs (@anthropic-ai/sdk, openai; maxRetries: 0) as
// clients of `agenthost proxy` in front of the built-in mock, for every fault kind x wire
// format x cut position, with and without tools, with a model that takes a prefill and
// one that refuses it, with restatements: the SDK's final message must equal the
// fault-free one (text, text blocks, each tool call once with complete arguments, stop
// reason) and the events the SDK yields must show no protocol anomaly (a second
// message_start, an index out of order, sequence numbers that do not increase). The same
// clients straight against the mock are the baseline: how many of the cases an
// unmodified SDK survives without the proxy.
//
//   node sdk_matrix.mjs NODE_DIR AGENTHOST [ci|full]
//
// NODE_DIR holds node_modules (install.sh). ci: a representative matrix (about half a
// minute on 2 cores); full: every cut position of every case. Ends with the line
// "N passed, M failed" and exits 1 on any failure.
import { readFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { sdks, start as startProcess } from './lib.mjs';

const [nodeDir, agenthost, mode = 'ci'] = process.argv.slice(2);
if (!nodeDir || !agenthost) {
  console.error('usage: node sdk_matrix.mjs NODE_DIR AGENTHOST [ci|full]');
  process.exit(2);
}
const here = path.dirname(fileURLToPath(import.meta.url));
const { Anthropic, OpenAI } = sdks(nodeDir);
const SECRET = 'sk-SECRET-sdk-matrix-0123456789';
const start = (args) => startProcess(agenthost, args);

const mock = start([path.join(here, 'mock_ctl.lua')]);
const mockUrl = await mock.line();
const evdir = mkdtempSync(path.join(tmpdir(), 'ah-proxy-sdk-'));
const evfile = path.join(evdir, 'events.jsonl');
const proxy = start(['proxy', '--listen', '127.0.0.1:0', '--anthropic-url', mockUrl,
  '--openai-url', mockUrl, '--policy', path.join(here, 'policy.lua'), '--events', evfile]);
const proxyUrl = await proxy.line();
async function setPlan(plan) {
  mock.p.stdin.write((plan ? JSON.stringify(plan) : 'none') + '\n');
  await mock.line();
}

// ---- clients and what they end with ---------------------------------------------------
const tools = {
  anthropic: [{ name: 'add', description: 'Add two integers.', input_schema: { type: 'object',
    required: ['a', 'b'], properties: { a: { type: 'integer' }, b: { type: 'integer' } } } }],
  openai: [{ type: 'function', function: { name: 'add', parameters: { type: 'object',
    required: ['a', 'b'], properties: { a: { type: 'integer' }, b: { type: 'integer' } } } } }],
  responses: [{ type: 'function', name: 'add', parameters: { type: 'object',
    required: ['a', 'b'], properties: { a: { type: 'integer' }, b: { type: 'integer' } } } }],
};

function client(wire, base) {
  return wire === 'anthropic'
    ? new Anthropic({ apiKey: SECRET, baseURL: base, maxRetries: 0, timeout: 20000, logLevel: 'off' })
    : new OpenAI({ apiKey: SECRET, baseURL: `${base}/v1`, maxRetries: 0, timeout: 20000, logLevel: 'off' });
}

// One streamed request with the SDK's own stream helper; returns the normalised final
// message and the anomalies its events showed.
async function run(wire, base, c) {
  const cl = client(wire, base);
  const anomalies = [];
  const prompt = c.tool ? 'What is 2 + 3?' : 'Tell me about retries and streams, please.';
  if (wire === 'anthropic') {
    const s = cl.messages.stream({ model: c.model, max_tokens: 256,
      messages: [{ role: 'user', content: prompt }], ...(c.tool ? { tools: tools.anthropic } : {}) });
    let starts = 0, next = 0;
    for await (const ev of s) {
      if (ev.type === 'message_start' && ++starts > 1) anomalies.push('second message_start');
      if (ev.type === 'content_block_start' && ev.index !== next++) anomalies.push(`index ${ev.index}`);
    }
    const m = await s.finalMessage();
    return { anomalies, msg: {
      text: m.content.filter((b) => b.type === 'text').map((b) => b.text).join(''),
      textBlocks: m.content.filter((b) => b.type === 'text').length,
      tools: m.content.filter((b) => b.type === 'tool_use').map((b) => ({ name: b.name, input: b.input })),
      stop: m.stop_reason } };
  }
  if (wire === 'openai') {
    const s = cl.chat.completions.stream({ model: c.model, stream_options: { include_usage: true },
      messages: [{ role: 'user', content: prompt }], ...(c.tool ? { tools: tools.openai } : {}) });
    let finishes = 0, seen = 0;
    for await (const ch of s) {
      for (const choice of ch.choices) {
        if (choice.index !== 0) anomalies.push(`choice ${choice.index}`);
        if (choice.finish_reason && ++finishes > 1) anomalies.push('second finish chunk');
        for (const tc of choice.delta?.tool_calls ?? []) {
          if (tc.index > seen) anomalies.push(`tool index ${tc.index}`);
          if (tc.index === seen) seen++;
        }
      }
    }
    const f = await s.finalChatCompletion();
    const msg = f.choices[0].message;
    return { anomalies, msg: {
      text: msg.content ?? '', textBlocks: msg.content ? 1 : 0,
      tools: (msg.tool_calls ?? []).map((t) => ({ name: t.function.name, input: JSON.parse(t.function.arguments) })),
      stop: f.choices[0].finish_reason } };
  }
  const s = cl.responses.stream({ model: c.model, input: prompt, ...(c.tool ? { tools: tools.responses } : {}) });
  let seq = -1, created = 0, next = 0;
  for await (const ev of s) {
    if (ev.sequence_number <= seq) anomalies.push(`sequence_number ${ev.sequence_number} after ${seq}`);
    seq = ev.sequence_number;
    if (ev.type === 'response.created' && ++created > 1) anomalies.push('second response.created');
    if (ev.type === 'response.output_item.added' && ev.output_index !== next++) anomalies.push(`output_index ${ev.output_index}`);
  }
  const r = await s.finalResponse();
  const items = r.output ?? [];
  return { anomalies, msg: {
    text: r.output_text ?? '', textBlocks: items.filter((i) => i.type === 'message').length,
    tools: items.filter((i) => i.type === 'function_call').map((i) => ({ name: i.name, input: JSON.parse(i.arguments) })),
    stop: r.status } };
}

// ---- the matrix -----------------------------------------------------------------------
const cases = [
  { wire: 'anthropic', model: 'claude-test', tool: false, restate: false },
  { wire: 'anthropic', model: 'claude-opus-4-6', tool: false, restate: true }, // refuses prefill
  { wire: 'anthropic', model: 'claude-test', tool: true, restate: false },
  { wire: 'openai', model: 'gpt-test', tool: false, restate: true },
  { wire: 'openai', model: 'gpt-test', tool: true, restate: false },
  { wire: 'responses', model: 'gpt-test', tool: false, restate: 'last_sentence' },
  { wire: 'responses', model: 'gpt-test', tool: true, restate: false },
];
const kinds = ['cut_after_events', 'error_event_after', 'malformed_event_after', 'stall_after_events'];
const events = { anthropic: 22, openai: 20, responses: 26 }; // at least the streams' lengths

let passed = 0, failed = 0, directOk = 0, directAll = 0;
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
for (const c of cases) {
  await setPlan(null);
  const want = (await run(c.wire, mockUrl, c)).msg;
  const n = events[c.wire];
  for (const kind of kinds) {
    for (let k = 0; k <= n; k++) {
      // ci: every cut position; the other kinds at every third one
      if (mode !== 'full' && kind !== 'cut_after_events' && k % 3 !== 1) continue;
      const step = { [kind]: k };
      if (c.restate) step.restate = c.restate;
      if (c.tool && c.wire !== 'anthropic') step.tool_calls = 2;
      const label = `${c.wire} ${c.model}${c.tool ? ' +tool' : ''} ${JSON.stringify(step)}`;
      // the baseline: the SDK straight against the mock
      if (kind !== 'stall_after_events') {
        await setPlan([step]);
        directAll++;
        try {
          const d = await run(c.wire, mockUrl, c);
          if (same(d.msg, want) && !d.anomalies.length) directOk++;
        } catch { /* thrown: not survived */ }
      }
      await setPlan([step]);
      let got;
      try {
        got = await run(c.wire, proxyUrl, c);
      } catch (e) {
        failed++;
        console.log(`FAIL ${label}: threw ${e?.message ?? e}`);
        continue;
      }
      if (got.anomalies.length || !same(got.msg, want)) {
        failed++;
        console.log(`FAIL ${label}: ${got.anomalies.join(', ')}\n  want ${JSON.stringify(want)}\n  got  ${JSON.stringify(got.msg)}`);
      } else {
        passed++;
      }
    }
  }
}

mock.p.stdin.end();
proxy.p.kill('SIGTERM');
await new Promise((r) => proxy.p.on('exit', r));
const evs = readFileSync(evfile, 'utf8');
for (const [what, text] of [['events', evs], ['proxy stderr', proxy.stderr()]]) {
  if (text.includes('SECRET')) {
    failed++;
    console.log(`FAIL the client's API key appears in the proxy's ${what}`);
  } else {
    passed++;
  }
}
console.log(`direct (no proxy): the SDKs survived ${directOk} of ${directAll} fault cases`);
console.log(`through agenthost proxy: ${passed - 2} of ${passed + failed - 2} fault cases exact`);
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
