// `rocmforge serve` with the demo image model driven by the official openai npm client's images API:
// images.generate and images.edit unchanged, and the errors it maps to its exception classes.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI, { toFile } from 'openai';
import { serveDuringTests } from './server.mjs';

const demo = new URL('../../../models/sd-demo', import.meta.url).pathname;

// A PNG's size from its IHDR chunk.
function pngSize(base64) {
  const bytes = Buffer.from(base64, 'base64');
  assert.equal(bytes.subarray(1, 4).toString('latin1'), 'PNG');
  return { width: bytes.readUInt32BE(16), height: bytes.readUInt32BE(20) };
}

describe('rocmforge serve (an image model) with the openai client', () => {
  const served = serveDuringTests(['-m', demo, '--device', 'cpu']);

  test('lists the image model', async () => {
    const models = await served.client.models.list();
    assert.deepEqual(models.data.map((m) => [m.id, m.kind]), [['sd-demo', 'image']]);
  });

  test('images.generate gives n images of the size asked', async () => {
    const result = await served.client.images.generate({
      model: 'sd-demo', prompt: 'a red apple', n: 2, size: '64x64', response_format: 'b64_json', seed: 4, steps: 4,
    });
    assert.equal(typeof result.created, 'number');
    assert.equal(result.data.length, 2);
    for (const image of result.data) assert.deepEqual(pngSize(image.b64_json), { width: 64, height: 64 });
  });

  test('images.edit repaints an uploaded image, keeping its size', async () => {
    const source = await served.client.images.generate({ prompt: 'a green pear', size: '64x64', seed: 8, steps: 4 });
    const image = await toFile(Buffer.from(source.data[0].b64_json, 'base64'), 'pear.png', { type: 'image/png' });
    const edited = await served.client.images.edit({ image, prompt: 'a red pear', seed: 1, steps: 4, strength: 0.6 });
    assert.equal(edited.data.length, 1);
    assert.deepEqual(pngSize(edited.data[0].b64_json), { width: 64, height: 64 });
    assert.notEqual(edited.data[0].b64_json, source.data[0].b64_json);
  });

  test('what it cannot do is a BadRequestError naming the field', async () => {
    await assert.rejects(served.client.images.generate({ prompt: 'x', response_format: 'url' }), (error) => {
      assert.ok(error instanceof OpenAI.BadRequestError);
      assert.equal(error.param, 'response_format');
      return true;
    });
    await assert.rejects(served.client.images.generate({ prompt: 'x', size: '1001x1000' }), (error) => {
      assert.ok(error instanceof OpenAI.BadRequestError);
      assert.equal(error.param, 'size');
      return true;
    });
    await assert.rejects(served.client.chat.completions.create({ model: 'sd-demo', messages: [{ role: 'user', content: 'hi' }] }),
      OpenAI.BadRequestError);
  });
});
