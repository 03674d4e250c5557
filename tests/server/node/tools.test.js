// Tool calling through the official `openai` npm client against `tessera serve` on a gen-model file (random
// weights) with a Hermes-style tool template: tool_choice "required" makes every answer a valid call (20 of 20,
// arguments checked against the schema), streamed calls assemble into the same shape, and the tool result sent
// back in the history is accepted.
'use strict';

const {test, before, after} = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const {execFileSync} = require('node:child_process');
const OpenAI = require('openai');
const {startServer, bin} = require('./serve.js');

const schema = {
  type: 'object',
  properties: {
    city: {type: 'string', maxLength: 16},
    unit: {type: 'string', enum: ['celsius', 'fahrenheit']},
    days: {type: 'integer'},
  },
  required: ['city', 'unit'],
  additionalProperties: false,
};
const tools = [{type: 'function', function: {name: 'get_weather', description: 'The weather in a city.', parameters: schema}}];

// The checks this schema needs: the object's keys, required ones, each value's type, enum and length.
function invalid(args) {
  if (typeof args !== 'object' || args === null || Array.isArray(args)) return 'not an object';
  for (const key of schema.required) if (!(key in args)) return `missing ${key}`;
  for (const [key, value] of Object.entries(args)) {
    const p = schema.properties[key];
    if (!p) return `unexpected ${key}`;
    if (p.type === 'string' && typeof value !== 'string') return `${key} is not a string`;
    if (p.type === 'integer' && !Number.isInteger(value)) return `${key} is not an integer`;
    if (p.enum && !p.enum.includes(value)) return `${key} is not one of ${p.enum}`;
    if (p.maxLength !== undefined && [...value].length > p.maxLength) return `${key} is too long`;
  }
  return '';
}

let dir;
let server;
let client;

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-tools-'));
  const model = path.join(dir, 'tiny.gguf');
  execFileSync(bin, ['gen-model', '-o', model, '--preset', 'tiny', '--seed', '7', '-t', '1'], {stdio: 'ignore'});
  server = await startServer(['-t', '1', '-c', '2048', '--chat-template', path.join(__dirname, 'hermes_tools.jinja')],
      {modelPath: model});
  client = new OpenAI({baseURL: server.url + '/v1', apiKey: 'unused', maxRetries: 0, timeout: 60000});
});

after(async () => {
  if (server) assert.equal(await server.stop(), 0, server.log());
  if (dir) fs.rmSync(dir, {recursive: true, force: true});
});

const ask = (seed) => ({
  model: 'tiny',
  messages: [{role: 'user', content: 'What is the weather in Paris?'}],
  tools,
  tool_choice: 'required',
  parallel_tool_calls: false,
  max_tokens: 300,
  temperature: 1.0,
  seed,
});

test('tool_choice required: 20 of 20 calls valid against the schema', async () => {
  const ids = new Set();
  let valid = 0;
  for (let seed = 1; seed <= 20; seed++) {
    const r = await client.chat.completions.create(ask(seed));
    const c = r.choices[0];
    assert.equal(c.finish_reason, 'tool_calls', JSON.stringify(r));
    assert.equal(c.message.content, null);
    assert.equal(c.message.tool_calls.length, 1);
    const call = c.message.tool_calls[0];
    assert.match(call.id, /^call_/);
    assert.ok(!ids.has(call.id), 'ids are unique');
    ids.add(call.id);
    assert.equal(call.type, 'function');
    assert.equal(call.function.name, 'get_weather');
    const args = JSON.parse(call.function.arguments);
    assert.equal(invalid(args), '', call.function.arguments);
    valid++;
  }
  assert.equal(valid, 20);
});

test('streamed tool call assembles into the same call', async () => {
  const whole = await client.chat.completions.create(ask(5));
  const stream = await client.chat.completions.create({...ask(5), stream: true});
  const calls = [];
  let finish = null;
  let content = '';
  for await (const chunk of stream) {
    const ch = chunk.choices[0];
    if (!ch) continue;
    finish = ch.finish_reason || finish;
    content += ch.delta.content || '';
    for (const d of ch.delta.tool_calls || []) {
      if (d.id) {
        assert.equal(d.index, calls.length);
        assert.equal(d.type, 'function');
        calls.push({id: d.id, name: d.function.name, arguments: d.function.arguments});
      } else {
        calls[d.index].arguments += d.function.arguments;
      }
    }
  }
  assert.equal(finish, 'tool_calls');
  assert.equal(content, '');
  assert.equal(calls.length, 1);
  assert.equal(calls[0].name, 'get_weather');
  assert.equal(calls[0].arguments, whole.choices[0].message.tool_calls[0].function.arguments);
  assert.equal(invalid(JSON.parse(calls[0].arguments)), '');

  // The client's own stream helper reads the deltas the same way.
  const runner = client.chat.completions.stream({...ask(5)});
  const final = await runner.finalChatCompletion();
  assert.equal(final.choices[0].message.tool_calls[0].function.arguments, calls[0].arguments);
});

test('the tool result goes back in the history', async () => {
  const first = await client.chat.completions.create(ask(11));
  const call = first.choices[0].message.tool_calls[0];
  const r = await client.chat.completions.create({
    model: 'tiny',
    messages: [
      {role: 'user', content: 'What is the weather in Paris?'},
      first.choices[0].message,
      {role: 'tool', tool_call_id: call.id, content: JSON.stringify({temperature: 18, condition: 'sunny'})},
    ],
    tools,
    max_tokens: 8,
    seed: 1,
  });
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].message.role, 'assistant');
  // A bad tool_choice surfaces as the client's typed 400.
  await assert.rejects(
      client.chat.completions.create({...ask(1), tool_choice: {type: 'function', function: {name: 'nope'}}}),
      (e) => e instanceof OpenAI.BadRequestError && e.param === 'tool_choice');
});
