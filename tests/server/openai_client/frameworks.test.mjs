// The frameworks apps are built with, against the demo model: the Vercel AI SDK (its default
// openai() provider speaks the Responses API; generateText, streamText, generateObject with a zod
// schema, tools) and LangChain's ChatOpenAI (withStructuredOutput with a zod schema, bindTools and
// a tool result turn). With constrained decoding the objects and calls are valid whatever the
// model's quality; the demo model's context is 512 of its short tokens, so the tools are small.
// Sampled calls have a seed: after the tool prompt about 150 tokens are left, which the grammar's
// whitespace (bounded per place, as llama.cpp's) can use up on some draws, truncating the call.
import { before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createOpenAI } from '@ai-sdk/openai';
import { embedMany, generateObject, generateText, streamText, tool } from 'ai';
import { ChatOpenAI, OpenAIEmbeddings } from '@langchain/openai';
import { HumanMessage, ToolMessage } from '@langchain/core/messages';
import { tool as langchainTool } from '@langchain/core/tools';
import { z } from 'zod';
import { serveDuringTests } from './server.mjs';

const Verse = z.object({ book: z.enum(['Genesis', 'Exodus']), chapter: z.number().int().min(1).max(50) });

describe('the Vercel AI SDK and LangChain', () => {
  const served = serveDuringTests();
  let openai;
  let chat;
  before(() => {
    openai = createOpenAI({ baseURL: `${served.base}/v1`, apiKey: 'unused' });
    chat = (options = {}) => new ChatOpenAI({
      model: 'kjv-llama', apiKey: 'unused', configuration: { baseURL: `${served.base}/v1` }, maxRetries: 0, ...options,
    });
  });

  test('AI SDK: generateText and streamText through /v1/responses agree', async () => {
    const request = { model: openai('kjv-llama'), prompt: 'In the beginning', maxOutputTokens: 16, temperature: 0 };
    const whole = await generateText(request);
    assert.ok(whole.text.length > 0);
    assert.equal(whole.finishReason, 'length');
    assert.equal(whole.usage.outputTokens, 16);
    const streamed = streamText(request);
    let text = '';
    for await (const delta of streamed.textStream) text += delta;
    assert.equal(text, whole.text);
  });

  test('AI SDK: generateObject gives an object of the zod schema', async () => {
    const { object } = await generateObject({
      model: openai('kjv-llama'), schema: Verse, prompt: 'Name a chapter.', maxOutputTokens: 200, seed: 3,
    });
    assert.deepEqual(Verse.parse(object), object);
  });

  test('AI SDK: generateText with a required tool calls it with valid input', async () => {
    const calls = [];
    const result = await generateText({
      model: openai('kjv-llama'),
      prompt: 'Which chapter?',
      tools: { look_up: tool({ description: 'Look a chapter up', inputSchema: Verse, execute: async (input) => { calls.push(input); return 'found'; } }) },
      toolChoice: 'required',
      maxOutputTokens: 300,
      seed: 4,
      providerOptions: { openai: { parallelToolCalls: false } },
    });
    assert.equal(result.toolCalls.length, 1);
    assert.equal(result.toolCalls[0].toolName, 'look_up');
    assert.equal(calls.length, 1);
    assert.deepEqual(Verse.parse(calls[0]), calls[0]);
    assert.equal(result.toolResults[0].output, 'found');
  });

  test('AI SDK and LangChain embeddings agree', async () => {
    const texts = ['In the beginning', 'Let there be light'];
    const { embeddings } = await embedMany({ model: openai.textEmbeddingModel('kjv-llama'), values: texts });
    const langchain = new OpenAIEmbeddings({ model: 'kjv-llama', apiKey: 'unused', configuration: { baseURL: `${served.base}/v1` } });
    const vectors = await langchain.embedDocuments(texts);
    assert.equal(embeddings.length, 2);
    for (let i = 0; i < 2; i++) {
      assert.equal(vectors[i].length, embeddings[i].length);
      assert.ok(vectors[i].every((v, j) => Math.abs(v - embeddings[i][j]) < 1e-6));
    }
  });

  test('LangChain: withStructuredOutput with a zod schema', async () => {
    const verse = await chat({ maxTokens: 200, temperature: 1 }).withStructuredOutput(Verse, { name: 'verse' })
      .invoke('Name a chapter.', { seed: 5 });
    assert.deepEqual(Verse.parse(verse), verse);
  });

  test('LangChain: bindTools, the call, and a tool result turn', async () => {
    const lookUp = langchainTool(async () => 'found', { name: 'look_up', description: 'Look a chapter up', schema: Verse });
    const model = chat({ maxTokens: 300, temperature: 1 }).bindTools([lookUp], { tool_choice: 'any', parallel_tool_calls: false, seed: 6 });
    const question = new HumanMessage('Which chapter?');
    const reply = await model.invoke([question]);
    assert.equal(reply.tool_calls.length, 1);
    assert.equal(reply.tool_calls[0].name, 'look_up');
    assert.deepEqual(Verse.parse(reply.tool_calls[0].args), reply.tool_calls[0].args);
    const result = new ToolMessage({ content: 'found', tool_call_id: reply.tool_calls[0].id });
    const answer = await chat({ maxTokens: 24 }).bindTools([lookUp]).invoke([question, reply, result]);
    assert.equal(answer._getType(), 'ai');
  });
});
