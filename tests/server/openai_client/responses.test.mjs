// The Responses API (POST /v1/responses) through the official openai client, against the demo
// model: text whole and streamed (the client's stream helper checks the event sequence and builds
// the response from it), function calls and their outputs, structured output through text.format.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Ajv from 'ajv/dist/2020.js';
import { serveDuringTests } from './server.mjs';

const getTime = { type: 'function', name: 'get_time', parameters: { type: 'object', properties: {}, additionalProperties: false }, strict: true };
const verse = {
  type: 'object',
  properties: { book: { enum: ['Genesis', 'Exodus'] }, chapter: { type: 'integer', minimum: 1, maximum: 50 } },
  required: ['book', 'chapter'],
  additionalProperties: false,
};

describe('the Responses API with the openai client', () => {
  const served = serveDuringTests();

  test('text, whole and streamed, agree', async () => {
    const request = { model: 'kjv-llama', input: 'In the beginning', instructions: 'Speak as the King James Bible.', max_output_tokens: 16, temperature: 0 };
    const whole = await served.client.responses.create(request);
    assert.equal(whole.object, 'response');
    assert.match(whole.id, /^resp_/);
    assert.equal(whole.status, 'incomplete');
    assert.deepEqual(whole.incomplete_details, { reason: 'max_output_tokens' });
    assert.equal(whole.usage.output_tokens, 16);
    assert.ok(whole.output_text.length > 0);
    const stream = served.client.responses.stream(request);
    const types = [];
    let deltas = '';
    stream.on('event', (e) => types.push(e.type));
    stream.on('response.output_text.delta', (e) => { deltas += e.delta; });
    const final = await stream.finalResponse();
    assert.equal(deltas, whole.output_text);
    assert.equal(final.output_text, whole.output_text);
    assert.deepEqual([types[0], types[1], types.at(-1)], ['response.created', 'response.in_progress', 'response.incomplete']);
  });

  test('a required function call, then its output in the next turn', async () => {
    const first = await served.client.responses.create({
      model: 'kjv-llama', input: 'What time is it?', tools: [getTime], tool_choice: 'required', parallel_tool_calls: false,
      max_output_tokens: 300, seed: 5,
    });
    assert.equal(first.status, 'completed');
    const calls = first.output.filter((item) => item.type === 'function_call');
    assert.equal(calls.length, 1);
    assert.equal(calls[0].name, 'get_time');
    assert.deepEqual(JSON.parse(calls[0].arguments), {});
    assert.match(calls[0].call_id, /^call_/);
    const second = await served.client.responses.create({
      model: 'kjv-llama', tools: [getTime], max_output_tokens: 24, seed: 5,
      input: [{ role: 'user', content: 'What time is it?' }, calls[0], { type: 'function_call_output', call_id: calls[0].call_id, output: '12:00' }],
    });
    assert.ok(['completed', 'incomplete'].includes(second.status));
    assert.ok(second.output.length > 0);
  });

  test('text.format json_schema gives JSON that validates', async () => {
    const reply = await served.client.responses.create({
      model: 'kjv-llama', input: 'Name a chapter.', max_output_tokens: 200, seed: 2,
      text: { format: { type: 'json_schema', name: 'verse', schema: verse, strict: true } },
    });
    const validate = new Ajv({ strict: false }).compile(verse);
    assert.ok(validate(JSON.parse(reply.output_text)), JSON.stringify(validate.errors));
  });

  test('what cannot be honoured is a 400 naming the field', async () => {
    const refused = async (extra, param) => assert.rejects(
      served.client.responses.create({ model: 'kjv-llama', input: 'hi', ...extra }),
      (e) => e instanceof OpenAI.BadRequestError && e.param === param);
    await refused({ previous_response_id: 'resp_1' }, 'previous_response_id');
    await refused({ tools: [{ type: 'web_search' }] }, 'tools[0].type');
    await refused({ input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'x' }] }] }, 'input[0].content[0].type');
    await refused({ max_output_tokens: 0 }, 'max_output_tokens');
    await refused({ text: { format: { type: 'json_schema', name: 'x', schema: { type: 'array', uniqueItems: true } } } }, 'text.format.schema');
    await refused({ tools: [getTime], tool_choice: { type: 'function', name: 'nope' } }, 'tool_choice.name');
  });
});
