// `rocmforge serve` (the real binary, on 127.0.0.1) driven by the official openai npm client:
// streaming and not, chat and completions, concurrency, and the errors the client maps to its
// exception classes. ROCMFORGE_BINARY names the binary (ctest sets it).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { serveDuringTests, startServer, stopServer } from './server.mjs';

const greedy = { temperature: 0, max_tokens: 24 };

describe('rocmforge serve with the openai client', () => {
  const served = serveDuringTests();  // no -m: the bundled demo model

  test('lists the model', async () => {
    const models = await served.client.models.list();
    assert.deepEqual(models.data.map((m) => m.id), ['kjv-llama']);
  });

  test('completions, whole and streamed, agree', async () => {
    const whole = await served.client.completions.create({ model: 'kjv-llama', prompt: 'In the beginning', ...greedy });
    assert.equal(whole.object, 'text_completion');
    assert.equal(whole.choices[0].finish_reason, 'length');
    assert.equal(whole.usage.completion_tokens, 24);
    const stream = await served.client.completions.create({ model: 'kjv-llama', prompt: 'In the beginning', ...greedy, stream: true });
    let text = '';
    let finish = null;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.text ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    assert.equal(text, whole.choices[0].text);
    assert.equal(finish, 'length');
  });

  test('chat completions, whole and streamed with usage, agree', async () => {
    const messages = [
      { role: 'system', content: 'Answer in the words of the King James Bible.' },
      { role: 'user', content: 'What did God create in the beginning?' },
    ];
    const whole = await served.client.chat.completions.create({ model: 'kjv-llama', messages, ...greedy });
    assert.equal(whole.object, 'chat.completion');
    assert.equal(whole.choices[0].message.role, 'assistant');
    assert.ok(whole.choices[0].message.content.length > 0);
    const stream = await served.client.chat.completions.create({
      model: 'kjv-llama', messages, ...greedy, stream: true, stream_options: { include_usage: true },
    });
    let content = '';
    let usage = null;
    let role = null;
    for await (const chunk of stream) {
      role = chunk.choices[0]?.delta?.role ?? role;
      content += chunk.choices[0]?.delta?.content ?? '';
      usage = chunk.usage ?? usage;
    }
    assert.equal(role, 'assistant');
    assert.equal(content, whole.choices[0].message.content);
    assert.equal(usage.prompt_tokens, whole.usage.prompt_tokens);
    assert.equal(usage.completion_tokens, whole.usage.completion_tokens);
    // The same conversation again: its prompt's full KV blocks come from the prefix cache.
    assert.ok(usage.prompt_tokens_details.cached_tokens >= 16);
  });

  test('concurrent greedy streams each get what they get alone', async () => {
    const prompts = ['In the beginning', 'And the LORD said unto Moses,', 'Blessed are the', 'The kingdom of heaven is like',
      'And it came to pass', 'Thou shalt not', 'For God so loved', 'Then Jesus answered and said unto them,'];
    const alone = [];
    for (const prompt of prompts) {
      alone.push((await served.client.completions.create({ model: 'kjv-llama', prompt, ...greedy })).choices[0].text);
    }
    const together = await Promise.all(prompts.map(async (prompt) => {
      let text = '';
      for await (const chunk of await served.client.completions.create({ model: 'kjv-llama', prompt, ...greedy, stream: true })) {
        text += chunk.choices[0]?.text ?? '';
      }
      return text;
    }));
    assert.deepEqual(together, alone);
  });

  test('logprobs come back in the chat shape', async () => {
    const r = await served.client.chat.completions.create({
      model: 'kjv-llama', messages: [{ role: 'user', content: 'Hello' }], ...greedy, max_tokens: 4, logprobs: true, top_logprobs: 3,
    });
    const content = r.choices[0].logprobs.content;
    assert.equal(content.length, r.usage.completion_tokens);
    assert.equal(content[0].top_logprobs.length, 3);
    assert.ok(content[0].logprob <= 0);
  });

  test('embeddings, as the client asks for them (base64) and as floats, agree', async () => {
    const input = ['In the beginning', 'And God said'];
    const encoded = await served.client.embeddings.create({ model: 'kjv-llama', input });
    const floats = await served.client.embeddings.create({ model: 'kjv-llama', input, encoding_format: 'float' });
    assert.equal(encoded.data.length, 2);
    for (const [i, item] of floats.data.entries()) {
      assert.deepEqual(Array.from(encoded.data[i].embedding, Math.fround), item.embedding.map(Math.fround));
      const norm = Math.hypot(...item.embedding);
      assert.ok(Math.abs(norm - 1) < 1e-5, `norm ${norm}`);
    }
    assert.ok(floats.usage.prompt_tokens > 2);
  });

  test('errors map to the client exception classes', async () => {
    await assert.rejects(served.client.chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] }),
      (e) => e instanceof OpenAI.NotFoundError && e.code === 'model_not_found');
    await assert.rejects(served.client.chat.completions.create({ model: 'kjv-llama', messages: [] }),
      (e) => e instanceof OpenAI.BadRequestError && e.param === 'messages');
    await assert.rejects(served.client.completions.create({ model: 'kjv-llama', prompt: 'hi', temperature: 'hot' }),
      (e) => e instanceof OpenAI.BadRequestError && e.param === 'temperature');
    await assert.rejects(served.client.completions.create({ model: 'kjv-llama', prompt: 'and the LORD said '.repeat(300) }),
      (e) => e instanceof OpenAI.BadRequestError && e.code === 'context_length_exceeded');
  });
});

describe('rocmforge serve with an API key', () => {
  let server;
  before(async () => { server = await startServer(['--api-key', 'sesame']); });
  after(() => stopServer(server));

  test('needs the key on the API, not on /health', async () => {
    const wrong = new OpenAI({ baseURL: `${server.base}/v1`, apiKey: 'wrong', maxRetries: 0 });
    await assert.rejects(wrong.models.list(), (e) => e instanceof OpenAI.AuthenticationError);
    const right = new OpenAI({ baseURL: `${server.base}/v1`, apiKey: 'sesame', maxRetries: 0 });
    assert.equal((await right.models.list()).data[0].id, 'kjv-llama');
    assert.equal((await fetch(`${server.base}/health`)).status, 200);
  });
});
