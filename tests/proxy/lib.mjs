// lib.mjs - what the SDK tests (sdk_matrix.mjs, sdk_overload.mjs) share: the pinned SDKs
// loaded from NODE_DIR (install.sh), and an agenthost process read a line at a time.
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';

// The SDKs' client classes from NODE_DIR/node_modules.
export function sdks(nodeDir) {
  const require = createRequire(path.join(path.resolve(nodeDir), 'x.js'));
  const a = require('@anthropic-ai/sdk');
  const o = require('openai');
  return { Anthropic: a.default ?? a.Anthropic ?? a, OpenAI: o.default ?? o.OpenAI ?? o };
}

// agenthost ARGS...: { p, line() (a promise of its next stdout line), stderr() }.
export function start(agenthost, args) {
  const p = spawn(agenthost, args, { stdio: ['pipe', 'pipe', 'pipe'] });
  let buf = '';
  let err = '';
  const waiters = [];
  p.stderr.on('data', (d) => { err += d; });
  p.stdout.on('data', (d) => {
    buf += d;
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      const w = waiters.shift();
      if (w) w(line);
    }
  });
  return { p, line: () => new Promise((res) => waiters.push(res)), stderr: () => err };
}
