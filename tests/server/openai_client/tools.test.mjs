// Tool calls through the official openai client, against the demo model (whose template knows no
// tools, so the server teaches it the generic JSON format and holds it there with a grammar): a
// required call comes back valid whole and streamed (the client's own stream helper accumulates
// the delta.tool_calls chunks), and a tool's result goes back for the next turn.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Ajv from 'ajv/dist/2020.js';
import { serveDuringTests } from './server.mjs';

const weather = {
  type: 'object',
  properties: { city: { enum: ['Paris', 'Lyon', 'Nice'] }, days: { type: 'integer', minimum: 1, maximum: 7 } },
  required: ['city', 'days'],
  additionalProperties: false,
};
const tools = [
  { type: 'function', function: { name: 'get_weather', description: 'The weather in a city', parameters: weather, strict: true } },
  { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: {}, additionalProperties: false } } },
];
const validate = new Ajv({ strict: false }).compile(weather);
const question = [{ role: 'user', content: 'What will the weather be in Paris?' }];

function checkCall(call) {
  assert.equal(call.type, 'function');
  assert.match(call.id, /^call_[A-Za-z0-9]{24}$/);
  const args = JSON.parse(call.function.arguments);
  if (call.function.name === 'get_weather') assert.ok(validate(args), JSON.stringify(validate.errors));
  else assert.deepEqual([call.function.name, args], ['get_time', {}]);
}

describe('tool calls with the openai client', () => {
  const served = serveDuringTests();

  const ask = (extra) => served.client.chat.completions.create({
    model: 'kjv-llama', messages: question, tools, max_tokens: 400, temperature: 1, seed: 11, ...extra,
  });

  test('a required call is a valid call', async () => {
    for (let seed = 0; seed < 5; seed++) {
      const reply = await ask({ tool_choice: 'required', parallel_tool_calls: false, seed });
      const { message, finish_reason } = reply.choices[0];
      assert.equal(finish_reason, 'tool_calls');
      assert.equal(message.content, null);
      assert.equal(message.tool_calls.length, 1);
      checkCall(message.tool_calls[0]);
    }
  });

  test('a named function is the one called', async () => {
    const reply = await ask({ tool_choice: { type: 'function', function: { name: 'get_weather' } } });
    assert.equal(reply.choices[0].message.tool_calls[0].function.name, 'get_weather');
    checkCall(reply.choices[0].message.tool_calls[0]);
  });

  test('streamed calls add up to the whole reply in the client', async () => {
    const whole = await ask({ tool_choice: 'required', parallel_tool_calls: false });
    const stream = served.client.chat.completions.stream({
      model: 'kjv-llama', messages: question, tools, max_tokens: 400, temperature: 1, seed: 11, tool_choice: 'required',
      parallel_tool_calls: false,
    });
    const final = await stream.finalChatCompletion();
    const streamed = final.choices[0].message.tool_calls;
    assert.equal(final.choices[0].finish_reason, 'tool_calls');
    const named = (calls) => calls.map(({ function: f }) => [f.name, f.arguments]);
    assert.deepEqual(named(streamed), named(whole.choices[0].message.tool_calls));
    streamed.forEach(checkCall);
  });

  test("a tool's result goes back into the conversation", async () => {
    // One tool: the demo model's context is 512 of its short tokens.
    const one = [tools[1]];
    const first = (await ask({ tools: one, tool_choice: 'required', parallel_tool_calls: false })).choices[0].message;
    const messages = [...question, first, { role: 'tool', tool_call_id: first.tool_calls[0].id, content: '{"sky": "clear"}' }];
    const reply = await served.client.chat.completions.create({ model: 'kjv-llama', messages, tools: one, max_tokens: 32, seed: 1 });
    assert.equal(reply.choices[0].message.role, 'assistant');
    assert.ok(typeof reply.choices[0].message.content === 'string' || reply.choices[0].message.tool_calls);
  });

  test('mistakes are 400s naming the field', async () => {
    await assert.rejects(ask({ tool_choice: { type: 'function', function: { name: 'nope' } } }),
      (e) => e instanceof OpenAI.BadRequestError && e.param === 'tool_choice.function.name');
    await assert.rejects(served.client.chat.completions.create({ model: 'kjv-llama', messages: question, tool_choice: 'required' }),
      (e) => e instanceof OpenAI.BadRequestError && e.param === 'tool_choice');
  });
});
