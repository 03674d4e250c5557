// tessera serve's web page in headless Chromium (Debian's /usr/bin/chromium, never a downloaded browser): it
// loads, a message sent from the chat box streams back piece by piece, and the cluster view shows each replica's
// node with its layers, memory and live figures.
'use strict';

const {test, before, after} = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const puppeteer = require('puppeteer-core');
const {startServer} = require('./serve.js');

const chromium = process.env.CHROMIUM || '/usr/bin/chromium';
let server;
let browser;
let profile;

before(async () => {
  server = await startServer(['--replicas', '2', '--parallel', '2', '-t', '1']);
  profile = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-chromium-'));
  browser = await puppeteer.launch({
    executablePath: chromium,
    headless: true,
    userDataDir: profile,
    timeout: 60000,
    protocolTimeout: 60000,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
      '--disable-sync', '--no-first-run', '--disable-dev-shm-usage', '--no-default-browser-check'],
  });
});

after(async () => {
  if (browser) await browser.close();
  if (profile) fs.rmSync(profile, {recursive: true, force: true});
  if (server) assert.equal(await server.stop(), 0, server.log());
});

test('chat streams and the cluster view shows the nodes', async () => {
  const page = await browser.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  // The page may talk only to this server: anything else would be a CDN or a leak.
  await page.setRequestInterception(true);
  const foreign = [];
  page.on('request', (r) => {
    if (r.url().startsWith(server.url)) return r.continue();
    foreign.push(r.url());
    return r.abort();
  });
  await page.goto(server.url + '/', {waitUntil: 'load', timeout: 30000});
  await page.waitForFunction(() => document.getElementById('status').textContent === 'ready', {timeout: 15000});

  // The cluster view: two replicas, each one node "local" holding layers 0-4 of 5 with a memory bar.
  await page.waitForFunction(() => document.querySelectorAll('.node[data-name="local"]').length === 2,
      {timeout: 15000});
  const nodes = await page.$$eval('.node', (els) => els.map((e) => ({
    name: e.dataset.name,
    status: e.dataset.status,
    layers: e.querySelector('.layer-text').textContent,
    held: e.querySelectorAll('.cell.held').length,
    memWidth: parseFloat(e.querySelector('.membar .weights').style.width),
    memText: e.querySelector('.mem-text').textContent,
  })));
  assert.equal(nodes.length, 2);
  for (const n of nodes) {
    assert.equal(n.status, 'up');
    assert.match(n.layers, /^layers 0–4 of 5 · embedding · head$/);
    assert.equal(n.held, 5);
    assert.ok(n.memWidth > 0, 'memory bar drawn');
    assert.match(n.memText, /MiB used of/);
  }

  // Record every change of the answer's text while it streams.
  await page.evaluate(() => {
    window.__seen = [];
    new MutationObserver(() => {
      const last = document.querySelector('.msg.assistant:last-child .content');
      if (last) window.__seen.push(last.textContent.length);
    }).observe(document.getElementById('messages'), {subtree: true, childList: true, characterData: true});
  });
  await page.$eval('#max-tokens', (e) => { e.value = '120'; });
  await page.$eval('#temperature', (e) => { e.value = '0'; });  // greedy: the same answer every run
  // The bundled model writes a whole answer in tens of milliseconds; a slow link (about 8 KB/s) spreads its
  // events over a few seconds, so the page is seen showing part of the answer while the rest is on its way.
  await page.emulateNetworkConditions({download: 8000, upload: 1e6, latency: 0});
  await page.type('#prompt', 'Tell me about a little dog');
  await page.click('#send');
  await page.waitForSelector('.msg.assistant.done', {timeout: 60000});
  await page.emulateNetworkConditions(null);
  const answer = await page.$eval('.msg.assistant .content', (e) => e.textContent);
  const finish = await page.$eval('.msg.assistant', (e) => e.dataset.finish);
  const seen = await page.evaluate(() => window.__seen);
  assert.ok(answer.length > 20, 'an answer: ' + answer);
  assert.ok(['stop', 'length'].includes(finish), 'finish reason ' + finish);
  const growing = new Set(seen.filter((n) => n > 0 && n < answer.length));
  assert.ok(growing.size >= 3, 'text arrived in pieces: ' + JSON.stringify(seen));
  assert.equal(await page.$eval('.msg.user .content', (e) => e.textContent), 'Tell me about a little dog');

  // Live figures: the generation shows up as decode tokens/s in the header within a few polls.
  await page.waitForFunction(() => /^[1-9][0-9.]* tok\/s decode/.test(document.getElementById('throughput').textContent),
      {timeout: 15000});
  assert.deepEqual(foreign, []);
  assert.deepEqual(errors, []);
});
