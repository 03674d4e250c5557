#!/usr/bin/env node
// Load test for `tessera serve` from a second process, loopback only and bounded in time and count: N concurrent
// clients stream chat completions for S seconds; every response must be complete and well formed; the server's
// memory must stay flat. Prints requests/s, time to first token (p50/p99) and tokens/s. Plain Node, no packages.
//
//   node bench/serve_load.js --tessera build/src/cli/tessera [--model M] [--clients 16] [--seconds 60]
//   node bench/serve_load.js --url http://127.0.0.1:8080 [--pid PID] ...
'use strict';

const http = require('node:http');
const fs = require('node:fs');
const {spawn} = require('node:child_process');

function parseArgs(argv) {
  const o = {clients: 16, seconds: 60, maxTokens: 64, maxRequests: 100000, parallel: 0, threads: 0, url: '', pid: 0,
    tessera: '', model: '', json: '', memoryGrowthMiB: 16, serveArgs: []};
  for (let i = 2; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) throw new Error(a + ' needs a value');
      return argv[++i];
    };
    if (a === '--clients') o.clients = Number(next());
    else if (a === '--seconds') o.seconds = Number(next());
    else if (a === '--max-tokens') o.maxTokens = Number(next());
    else if (a === '--max-requests') o.maxRequests = Number(next());
    else if (a === '--parallel') o.parallel = Number(next());
    else if (a === '--threads') o.threads = Number(next());
    else if (a === '--url') o.url = next();
    else if (a === '--pid') o.pid = Number(next());
    else if (a === '--tessera') o.tessera = next();
    else if (a === '--model') o.model = next();
    else if (a === '--json') o.json = next();
    else if (a === '--memory-growth-mib') o.memoryGrowthMiB = Number(next());
    else if (a === '--') o.serveArgs = argv.slice(i + 1), i = argv.length;
    else throw new Error('unknown argument ' + a);
  }
  if (!(o.clients >= 1 && o.clients <= 1024)) throw new Error('--clients must be in [1, 1024]');
  if (!(o.seconds > 0 && o.seconds <= 3600)) throw new Error('--seconds must be in (0, 3600]');
  if (!o.url && !o.tessera) throw new Error('give --tessera BIN (the script starts the server) or --url URL');
  return o;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function rssBytes(pid) {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : 0;
  } catch (e) {
    return 0;
  }
}

async function startServer(o) {
  const args = ['serve', '--port', '0', '--parallel', String(o.parallel || o.clients), '--queue', String(o.clients)];
  if (o.model) args.push('-m', o.model);
  if (o.threads) args.push('-t', String(o.threads));
  args.push(...o.serveArgs);
  const child = spawn(o.tessera, args, {stdio: ['ignore', 'ignore', 'pipe']});
  // The server must not outlive this script, however it ends.
  process.on('exit', () => { if (child.exitCode === null) child.kill('SIGKILL'); });
  for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => process.exit(130));
  let log = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (d) => { log += d; });
  const deadline = Date.now() + 60000;
  while (Date.now() < deadline) {
    const m = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(log);
    if (m && log.includes('tessera serve: ready')) return {child, url: m[1], log: () => log, args};
    if (child.exitCode !== null) throw new Error('tessera serve exited:\n' + log);
    await sleep(20);
  }
  child.kill('SIGKILL');
  throw new Error('tessera serve did not start:\n' + log);
}

// One streamed chat completion; resolves with its figures or the reason it is broken.
function streamOnce(agent, url, body, timeoutMs) {
  return new Promise((resolve) => {
    const start = process.hrtime.bigint();
    const ms = () => Number(process.hrtime.bigint() - start) / 1e6;
    const payload = JSON.stringify(body);
    const req = http.request(url + '/v1/chat/completions', {
      method: 'POST', agent, timeout: timeoutMs,
      headers: {'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(payload)},
    }, (res) => {
      let buffer = '';
      let ttft = -1;
      let text = '';
      let finish = null;
      let usage = null;
      let done = false;
      let events = 0;
      let problem = res.statusCode === 200 ? '' : 'HTTP ' + res.statusCode;
      if (!problem && !String(res.headers['content-type']).startsWith('text/event-stream')) problem = 'content type';
      res.setEncoding('utf8');
      res.on('data', (chunk) => {
        buffer += chunk;
        let end;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const event = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          if (!event.startsWith('data: ') || event.includes('\n')) { problem = problem || 'bad framing'; continue; }
          const data = event.slice(6);
          if (done) { problem = problem || 'event after [DONE]'; continue; }
          if (data === '[DONE]') { done = true; continue; }
          let j;
          try { j = JSON.parse(data); } catch (e) { problem = problem || 'bad JSON'; continue; }
          events++;
          if (j.error) { problem = problem || 'error event: ' + j.error.message; continue; }
          if (events === 1 && !(j.choices[0] && j.choices[0].delta.role === 'assistant')) problem = problem || 'no role';
          if (j.usage) usage = j.usage;
          const c = j.choices[0];
          if (!c) continue;
          if (c.delta.content) {
            if (ttft < 0) ttft = ms();
            text += c.delta.content;
          }
          if (c.finish_reason) finish = c.finish_reason;
        }
      });
      res.on('end', () => {
        if (!problem && !done) problem = 'no [DONE]';
        if (!problem && buffer.length) problem = 'trailing bytes';
        if (!problem && !finish) problem = 'no finish_reason';
        if (!problem && !(usage && usage.completion_tokens >= 1 && usage.completion_tokens <= body.max_tokens)) {
          problem = 'bad usage';
        }
        resolve({problem, ttft, total: ms(), tokens: usage ? usage.completion_tokens : 0, chars: text.length});
      });
      res.on('error', (e) => resolve({problem: 'response: ' + e.message}));
    });
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', (e) => resolve({problem: 'request: ' + e.message}));
    req.end(payload);
  });
}

function percentile(sorted, p) {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(p / 100 * sorted.length))];
}

async function main() {
  const o = parseArgs(process.argv);
  let server = null;
  let url = o.url;
  let pid = o.pid;
  if (o.tessera) {
    server = await startServer(o);
    url = server.url;
    pid = server.child.pid;
  }
  const host = new URL(url).hostname;
  if (!['127.0.0.1', 'localhost', '::1', '[::1]'].includes(host)) throw new Error('loopback only, got ' + host);

  const agent = new http.Agent({keepAlive: true, maxSockets: o.clients});
  const results = [];
  const rss = [];
  let started = 0;
  const t0 = Date.now();
  const stopAt = t0 + o.seconds * 1000;
  const sampler = setInterval(() => rss.push({t: (Date.now() - t0) / 1000, bytes: rssBytes(pid)}), 500);
  const topics = ['a dog', 'the sea', 'a red ball', 'two friends', 'a rainy day', 'a big tree', 'a lost cat', 'cake'];

  async function client(id) {
    for (let k = 0; Date.now() < stopAt && started < o.maxRequests; k++) {
      started++;
      const body = {
        messages: [{role: 'user', content: `Tell me a story about ${topics[(id + k) % topics.length]}.`}],
        max_tokens: 16 + ((id * 7 + k * 13) % Math.max(1, o.maxTokens - 15)),
        seed: id * 100003 + k,
        stream: true,
        stream_options: {include_usage: true},
      };
      results.push(await streamOnce(agent, url, body, 120000));
    }
  }
  await Promise.all(Array.from({length: o.clients}, (_, i) => client(i)));
  const elapsed = (Date.now() - t0) / 1000;
  clearInterval(sampler);
  rss.push({t: elapsed, bytes: rssBytes(pid)});
  agent.destroy();

  const ok = results.filter((r) => !r.problem);
  const broken = results.filter((r) => r.problem);
  const ttft = ok.map((r) => r.ttft).filter((x) => x >= 0).sort((a, b) => a - b);
  const tokens = ok.reduce((s, r) => s + r.tokens, 0);
  // Memory after the first quarter (allocations have settled) against the end.
  const settled = rss.find((s) => s.t >= elapsed / 4) || rss[0];
  const last = rss[rss.length - 1];
  const growthMiB = pid && settled ? (last.bytes - settled.bytes) / 2 ** 20 : 0;
  const report = {
    clients: o.clients,
    seconds: elapsed,
    requests: results.length,
    completed: ok.length,
    broken: broken.length,
    requests_per_second: ok.length / elapsed,
    ttft_ms_p50: percentile(ttft, 50),
    ttft_ms_p99: percentile(ttft, 99),
    completion_tokens: tokens,
    tokens_per_second: tokens / elapsed,
    rss_mib_settled: settled ? settled.bytes / 2 ** 20 : 0,
    rss_mib_end: last ? last.bytes / 2 ** 20 : 0,
    rss_mib_max: Math.max(...rss.map((s) => s.bytes)) / 2 ** 20,
    rss_growth_mib: growthMiB,
    server_args: server ? server.args.join(' ') : undefined,
  };
  console.log(`clients ${report.clients}, ${report.seconds.toFixed(1)} s: ${report.completed}/${report.requests} ` +
      `streams complete, ${report.broken} broken`);
  console.log(`requests/s ${report.requests_per_second.toFixed(2)}, time to first token p50 ` +
      `${report.ttft_ms_p50.toFixed(1)} ms, p99 ${report.ttft_ms_p99.toFixed(1)} ms, ` +
      `${report.tokens_per_second.toFixed(1)} tokens/s (${tokens} tokens)`);
  if (pid) {
    console.log(`server RSS: ${report.rss_mib_settled.toFixed(1)} MiB after warm-up, ${report.rss_mib_end.toFixed(1)} ` +
        `MiB at the end, ${report.rss_mib_max.toFixed(1)} MiB max (growth ${growthMiB.toFixed(1)} MiB)`);
  }
  for (const b of broken.slice(0, 5)) console.log('broken: ' + b.problem);
  if (o.json) fs.writeFileSync(o.json, JSON.stringify(report, null, 2) + '\n');

  let failed = broken.length > 0 || ok.length === 0 || growthMiB > o.memoryGrowthMiB;
  if (server) {
    server.child.kill('SIGTERM');
    const code = await Promise.race([new Promise((r) => server.child.on('exit', (c) => r(c))), sleep(10000)]);
    if (code !== 0) {
      console.log('tessera serve did not exit cleanly (' + code + '):\n' + server.log());
      server.child.kill('SIGKILL');
      failed = true;
    }
  }
  console.log(`${ok.length} passed, ${broken.length} failed`);
  process.exit(failed ? 1 : 0);
}

main().catch((e) => {
  console.error('serve_load: ' + e.message);
  process.exit(2);
});
