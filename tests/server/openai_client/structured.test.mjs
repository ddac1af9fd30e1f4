// Structured output through the official openai client: every schema of schemas.json (a corpus of
// nested, enum-heavy, recursive, nullable and formatted schemas) gives JSON that ajv, an
// independent validator, accepts, whatever the demo model would have written on its own. The
// demo model never saw a double quote (the King James Bible has none), so the tests bias '"', ']'
// and '}' up through logit_bias: a grammar-blind model would then write broken JSON quickly,
// and strings end within the token limit.
import { before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import Ajv from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { serveDuringTests } from './server.mjs';

const schemas = JSON.parse(readFileSync(new URL('./schemas.json', import.meta.url)));
const ajv = new Ajv({ strict: false });
addFormats(ajv);

describe('structured output with the openai client', () => {
  const served = serveDuringTests();
  let closers;
  before(async () => {
    const ids = {};
    for (const text of ['"', ']', '}']) {
      const res = await fetch(`${served.base}/tokenize`, { method: 'POST', body: JSON.stringify({ content: text }) });
      ids[(await res.json()).tokens[0]] = 20;
    }
    closers = ids;
  });

  const ask = (schema, name, seed, extra = {}) => served.client.chat.completions.create({
    model: 'kjv-llama',
    messages: [{ role: 'user', content: 'Answer in JSON.' }],
    max_tokens: 400,
    temperature: 1,
    seed,
    logit_bias: closers,
    response_format: { type: 'json_schema', json_schema: { name, schema, strict: true } },
    ...extra,
  });

  test('every schema of the corpus gives JSON that validates', async () => {
    const failures = [];
    for (const [i, { name, schema }] of schemas.entries()) {
      const reply = await ask(schema, name, i);
      const { content } = reply.choices[0].message;
      let value;
      try {
        value = JSON.parse(content);
      } catch (e) {
        failures.push(`${name}: not JSON (${reply.choices[0].finish_reason}): ${content}`);
        continue;
      }
      if (reply.choices[0].finish_reason !== 'stop') failures.push(`${name}: finished by ${reply.choices[0].finish_reason}`);
      if (!ajv.validate(schema, value)) failures.push(`${name}: ${ajv.errorsText()}: ${content}`);
    }
    console.log(`${schemas.length - failures.length} of ${schemas.length} schemas validated (tolerance: all)`);
    assert.deepEqual(failures, []);
  });

  test('json_schema streamed gives the same JSON as whole', async () => {
    const { name, schema } = schemas.find((s) => s.name === 'any_of_shapes');
    const whole = await ask(schema, name, 7);
    const stream = await ask(schema, name, 7, { stream: true });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
    assert.equal(text, whole.choices[0].message.content);
    assert.ok(ajv.validate(schema, JSON.parse(text)), ajv.errorsText());
  });

  test('json_object gives a JSON object', async () => {
    const reply = await served.client.chat.completions.create({
      model: 'kjv-llama', messages: [{ role: 'user', content: 'JSON please' }], max_tokens: 400, temperature: 1, seed: 3,
      logit_bias: closers, response_format: { type: 'json_object' },
    });
    const value = JSON.parse(reply.choices[0].message.content);
    assert.equal(typeof value, 'object');
    assert.ok(value !== null && !Array.isArray(value));
  });

  test('constrained requests batched with free ones get their solo answers', async () => {
    const { name, schema } = schemas.find((s) => s.name === 'enum_heavy');
    const free = () => served.client.chat.completions.create({
      model: 'kjv-llama', messages: [{ role: 'user', content: 'Tell me' }], max_tokens: 40, temperature: 0,
    });
    const solo = [(await ask(schema, name, 1)).choices[0].message.content, (await free()).choices[0].message.content];
    const together = await Promise.all([ask(schema, name, 1), free(), ask(schema, name, 1), free()]);
    assert.deepEqual(together.map((r) => r.choices[0].message.content), [...solo, ...solo]);
  });

  test('a schema keyword that cannot be enforced is a 400 naming the field', async () => {
    await assert.rejects(ask({ type: 'array', uniqueItems: true }, 'p', 0), (e) => {
      assert.equal(e.status, 400);
      assert.equal(e.param, 'response_format.json_schema.schema');
      assert.match(e.message, /'uniqueItems' is not supported/);
      return true;
    });
  });

  test("llama-server's grammar field constrains completions", async () => {
    const res = await fetch(`${served.base}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: 'And God said', max_tokens: 50, temperature: 1, seed: 5,
        grammar: 'root ::= ("yea" | "nay") ", " [0-9]{3} "!"' }),
    });
    assert.equal(res.status, 200);
    const body = await res.json();
    assert.match(body.choices[0].text, /^(yea|nay), [0-9]{3}!$/);
    assert.equal(body.choices[0].finish_reason, 'stop');
  });
});
