// node_sdk.mjs - the official Node SDKs on the same stream, for tests/bench/run.sh:
//   node node_sdk.mjs WIRE BASE_URL [stream|startup]
// WIRE anthropic: @anthropic-ai/sdk messages.create({stream: true}); openai:
// openai chat.completions.create({stream: true}); responses: openai
// responses.create({stream: true}). Each consumes every event of the stream through the
// SDK's async iterator and appends the text deltas to one string, as an agent keeping
// the answer would (agenthost keeps it in the run's history). `startup` loads the SDK and
// builds the client only. run.sh installs the packages into build-bench/node and copies
// this file there, so the bare imports resolve. Prints "node events=N text_bytes=B".
const [wire, base, mode = 'stream'] = process.argv.slice(2);
if (!wire || !base) {
  console.error('usage: node node_sdk.mjs WIRE BASE_URL [stream|startup]');
  process.exit(2);
}
const load = async (name) => (await import(name)).default;
const request = { model: 'mock-bench', stream: true };
let events = 0;
let text = '';
let stream;
if (wire === 'anthropic') {
  const Anthropic = await load('@anthropic-ai/sdk');
  const client = new Anthropic({ apiKey: 'bench', baseURL: base, maxRetries: 0 });
  if (mode === 'startup') process.exit(0);
  stream = await client.messages.create({ ...request, max_tokens: 64000,
    messages: [{ role: 'user', content: 'stream a long answer' }] });
  for await (const ev of stream) {
    events++;
    if (ev.type === 'content_block_delta' && ev.delta.type === 'text_delta') text += ev.delta.text;
  }
} else if (wire === 'openai' || wire === 'responses') {
  const OpenAI = await load('openai');
  const client = new OpenAI({ apiKey: 'bench', baseURL: `${base}/v1`, maxRetries: 0 });
  if (mode === 'startup') process.exit(0);
  if (wire === 'openai') {
    stream = await client.chat.completions.create({ ...request, max_tokens: 64000,
      messages: [{ role: 'user', content: 'stream a long answer' }] });
    for await (const chunk of stream) {
      events++;
      const d = chunk.choices[0]?.delta?.content;
      if (d) text += d;
    }
  } else {
    stream = await client.responses.create({ ...request, max_output_tokens: 64000,
      input: 'stream a long answer' });
    for await (const ev of stream) {
      events++;
      if (ev.type === 'response.output_text.delta') text += ev.delta;
    }
  }
} else {
  console.error(`node_sdk.mjs: unknown wire '${wire}'`);
  process.exit(2);
}
console.log(`node events=${events} text_bytes=${Buffer.byteLength(text)}`);
