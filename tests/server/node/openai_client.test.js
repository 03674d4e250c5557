// tessera serve through the official `openai` npm client: chat, streaming chat, completion (equal to `tessera run`
// for the same seed and settings), the models list, and errors surfacing as the client's typed exceptions.
'use strict';

const {test, before, after} = require('node:test');
const assert = require('node:assert/strict');
const OpenAI = require('openai');
const {startServer, tesseraRun} = require('./serve.js');

let server;
let client;

before(async () => {
  server = await startServer(['--api-key', 'node-test-key', '--parallel', '2', '-t', '1']);
  client = new OpenAI({baseURL: server.url + '/v1', apiKey: 'node-test-key', maxRetries: 0, timeout: 30000});
});

after(async () => {
  if (server) assert.equal(await server.stop(), 0, server.log());
});

test('models list', async () => {
  const page = await client.models.list();
  const ids = page.data.map((m) => m.id);
  assert.deepEqual(ids, ['stories260K']);
  const one = await client.models.retrieve('stories260K');
  assert.equal(one.object, 'model');
});

test('chat completion', async () => {
  const r = await client.chat.completions.create({
    model: 'stories260K',
    messages: [{role: 'system', content: 'You tell short stories.'}, {role: 'user', content: 'A cat and a dog'}],
    max_tokens: 24,
    seed: 4,
  });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices.length, 1);
  const c = r.choices[0];
  assert.equal(c.message.role, 'assistant');
  assert.equal(typeof c.message.content, 'string');
  assert.ok(c.message.content.length > 0);
  assert.ok(['stop', 'length'].includes(c.finish_reason));
  assert.ok(r.usage.prompt_tokens > 0);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  // The same request through `tessera run --chat` (chatml: the bundled model has no template of its own).
  const want = tesseraRun(['--chat', '--chat-template', 'chatml', '--system-prompt', 'You tell short stories.', '-p',
    'A cat and a dog', '-n', '24', '--seed', '4']);
  assert.equal(c.message.content + '\n', want);
});

test('streaming chat', async () => {
  const ask = {model: 'stories260K', messages: [{role: 'user', content: 'Tell me a story'}], max_tokens: 40, seed: 9};
  const whole = await client.chat.completions.create(ask);
  const stream = await client.chat.completions.create({...ask, stream: true, stream_options: {include_usage: true}});
  let text = '';
  let chunks = 0;
  let finish = null;
  let usage = null;
  for await (const chunk of stream) {
    chunks++;
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (chunk.usage) usage = chunk.usage;
    if (!chunk.choices.length) continue;
    text += chunk.choices[0].delta.content || '';
    finish = chunk.choices[0].finish_reason || finish;
  }
  assert.ok(chunks > 3, 'streamed in pieces');
  assert.equal(text, whole.choices[0].message.content);
  assert.equal(finish, whole.choices[0].finish_reason);
  assert.deepEqual(usage, whole.usage);
});

test('completion equals tessera run', async () => {
  const r = await client.completions.create({
    model: 'stories260K',
    prompt: 'Once upon a time',
    max_tokens: 32,
    seed: 21,
    temperature: 0.9,
  });
  assert.equal(r.object, 'text_completion');
  const want = tesseraRun(['-p', 'Once upon a time', '-n', '32', '--seed', '21', '--temp', '0.9']);
  assert.equal('Once upon a time' + r.choices[0].text + '\n', want);
  assert.equal(r.usage.completion_tokens, 32);
  assert.equal(r.choices[0].finish_reason, 'length');
});

test('errors', async () => {
  await assert.rejects(
      client.chat.completions.create({model: 'gpt-4o', messages: [{role: 'user', content: 'hi'}]}),
      (e) => e instanceof OpenAI.NotFoundError && e.status === 404 && e.code === 'model_not_found');
  await assert.rejects(
      client.chat.completions.create({model: 'stories260K', messages: [{role: 'user', content: 'hi'}], temperature: 7}),
      (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === 'temperature');
  const wrongKey = new OpenAI({baseURL: server.url + '/v1', apiKey: 'nope', maxRetries: 0, timeout: 30000});
  await assert.rejects(wrongKey.models.list(),
      (e) => e instanceof OpenAI.AuthenticationError && e.status === 401 && e.code === 'invalid_api_key');
});
