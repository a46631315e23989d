// Images through OpenAI's official Node.js client: image_url content parts as data URLs (detail
// given, as clients send it), streamed and not; the next turn resends the image and finds it in the
// slot's cache; a remote URL is an APIError 400 that says nothing leaves the device.
// Usage: node images.test.mjs --server-cmd "gemlet serve -m MODEL --mmproj MMPROJ ..." --image FILE.png
import { readFileSync } from 'node:fs';
import OpenAI from 'openai';
import { assert, check, finish, serverCommand, startServer } from './harness.mjs';

const args = process.argv.slice(2);
const imagePath = args[args.indexOf('--image') + 1];
const dataUrl = 'data:image/png;base64,' + readFileSync(imagePath).toString('base64');

const apiKey = 'test-key-' + process.pid;
const server = await startServer(serverCommand(), apiKey);
const client = new OpenAI({ baseURL: server.baseURL + '/v1', apiKey, maxRetries: 0, timeout: 120000 });
const withImage = (url) => [{ role: 'user', content: [
  { type: 'text', text: 'What is in this picture?' },
  { type: 'image_url', image_url: { url, detail: 'low' } },
] }];

await check('models.list says the model takes images', async () => {
  const page = await client.models.list();
  const m = page.data[0];
  assert(JSON.stringify(m.input_modalities) === '["text","image"]', JSON.stringify(m));
});

let firstAnswer = '', firstPrompt = 0;
await check('chat.completions.create with an image_url data URL, streamed and not', async () => {
  const body = { model: 'any', messages: withImage(dataUrl), max_tokens: 8, temperature: 0 };
  const r = await client.chat.completions.create(body);
  firstAnswer = r.choices[0].message.content;
  firstPrompt = r.usage.prompt_tokens;
  assert(typeof firstAnswer === 'string' && r.usage.completion_tokens > 0, JSON.stringify(r));
  const stream = await client.chat.completions.create({ ...body, stream: true, stream_options: { include_usage: true } });
  let text = '', usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    if (chunk.choices[0]?.delta?.content) text += chunk.choices[0].delta.content;
  }
  assert(text === firstAnswer, `streamed ${JSON.stringify(text)} != ${JSON.stringify(firstAnswer)}`);
  assert(usage && usage.prompt_tokens === firstPrompt, JSON.stringify(usage));
});

await check('the next turn resends the image and reuses its cache', async () => {
  const messages = [...withImage(dataUrl), { role: 'assistant', content: firstAnswer }, { role: 'user', content: 'And the colours?' }];
  const r = await client.chat.completions.create({ model: 'any', messages, max_tokens: 8, temperature: 0 });
  const cached = r.usage.prompt_tokens_details?.cached_tokens ?? 0;
  assert(cached >= firstPrompt - 1, `cached ${cached} of the first turn's ${firstPrompt}: ${JSON.stringify(r.usage)}`);
  const metrics = await (await fetch(server.baseURL + '/metrics', { headers: { Authorization: `Bearer ${apiKey}` } })).text();
  assert(/gemlet_image_encodes_total 1\n/.test(metrics), metrics.match(/gemlet_image.*\n/g)?.join(''));
});

await check('a remote image URL is an APIError 400: nothing leaves the device', async () => {
  try {
    await client.chat.completions.create({ model: 'any', messages: withImage('https://example.com/cat.png'), max_tokens: 4 });
    assert(false, 'no error');
  } catch (e) {
    assert(e instanceof OpenAI.APIError && e.status === 400, String(e));
    assert(/nothing leaves this device/.test(e.message) && e.param === 'messages[0].content', `${e.message} (param ${e.param})`);
  }
});

await finish(server);
