// Tool calls and thinking through OpenAI's official Node.js client, on the scripted Gemma 4
// (tests/server/scripted/gemma4_tools.json: it thinks and answers "2 + 2 = 4", then calls
// get_weather, then answers with the result). The client's own stream helper assembles the
// streamed deltas, so what it builds is what any OpenAI app would see.
// Usage: node tools.test.mjs --server-cmd "gemlet serve -m scripted-gemma4.gguf --port 0"
import OpenAI from 'openai';
import { assert, check, finish, serverCommand, startServer } from './harness.mjs';

const apiKey = 'test-key-' + process.pid;
const server = await startServer(serverCommand(), apiKey);
const client = new OpenAI({ baseURL: server.baseURL + '/v1', apiKey, maxRetries: 0, timeout: 60000 });

const tools = [{ type: 'function', function: { name: 'get_weather', description: 'The weather in a city',
  parameters: { type: 'object', properties: { city: { type: 'string' }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } }, required: ['city'] } } }];
const thought = '先算：2 + 2 = 4。';
const weather = 'Paris: sunny, 21 °C. 巴黎今天晴，21 °C。';
const first = [{ role: 'user', content: 'What is 2 + 2?' }];
const second = [...first, { role: 'assistant', content: '2 + 2 = 4' }, { role: 'user', content: 'And the weather in Paris?' }];
const json = (v) => JSON.stringify(v);
const same = (a, b) => json(a) === json(b);

await check('thinking: reasoning_content apart from content, streamed and not', async () => {
  const r = await client.chat.completions.create({ model: 'any', messages: first, tools, reasoning_effort: 'low' });
  const m = r.choices[0].message;
  assert(m.reasoning_content === thought && m.content === '2 + 2 = 4' && r.choices[0].finish_reason === 'stop', json(r.choices[0]));
  let reasoning = '', content = '';
  const stream = await client.chat.completions.create({ model: 'any', messages: first, tools, stream: true });
  for await (const chunk of stream) {
    reasoning += chunk.choices[0]?.delta?.reasoning_content ?? '';
    content += chunk.choices[0]?.delta?.content ?? '';
  }
  assert(reasoning === thought && content === '2 + 2 = 4', json({ reasoning, content }));
});

let call;
await check('a tool call: finish_reason tool_calls, arguments as JSON text', async () => {
  const r = await client.chat.completions.create({ model: 'any', messages: second, tools });
  const m = r.choices[0].message;
  assert(r.choices[0].finish_reason === 'tool_calls' && m.content === null, json(r.choices[0]));
  assert(m.tool_calls.length === 1 && m.tool_calls[0].type === 'function' && typeof m.tool_calls[0].id === 'string', json(m.tool_calls));
  assert(m.tool_calls[0].function.name === 'get_weather', json(m.tool_calls));
  assert(same(JSON.parse(m.tool_calls[0].function.arguments), { city: 'Paris', unit: 'celsius' }), m.tool_calls[0].function.arguments);
  call = m;
});

await check('a streamed tool call, assembled by the client\'s stream helper', async () => {
  const stream = client.chat.completions.stream({ model: 'any', messages: second, tools });
  const done = await stream.finalChatCompletion();
  const m = done.choices[0].message;
  assert(done.choices[0].finish_reason === 'tool_calls', json(done.choices[0]));
  assert(m.tool_calls?.length === 1 && m.tool_calls[0].function.name === 'get_weather', json(m));
  assert(same(JSON.parse(m.tool_calls[0].function.arguments), { city: 'Paris', unit: 'celsius' }), m.tool_calls[0].function.arguments);
});

await check('the tool\'s result goes back as role "tool"; the model answers with it', async () => {
  assert(call, 'no call from the check before');
  const messages = [...second, { role: 'assistant', content: null, tool_calls: call.tool_calls },
    { role: 'tool', tool_call_id: call.tool_calls[0].id, content: json({ sky: 'sunny', celsius: 21 }) }];
  const r = await client.chat.completions.create({ model: 'any', messages, tools });
  assert(r.choices[0].message.content === weather && r.choices[0].finish_reason === 'stop', json(r.choices[0]));
  assert(!r.choices[0].message.tool_calls, json(r.choices[0].message));
});

await check('tool_choice: "required" and a named function make a call, "none" refuses one', async () => {
  const required = await client.chat.completions.create({ model: 'any', messages: first, tools, tool_choice: 'required' });
  assert(required.choices[0].finish_reason === 'tool_calls' && required.choices[0].message.tool_calls.length === 1, json(required.choices[0]));
  const named = await client.chat.completions.create({ model: 'any', messages: first, tools,
    tool_choice: { type: 'function', function: { name: 'get_weather' } } });
  assert(named.choices[0].message.tool_calls?.[0]?.function?.name === 'get_weather', json(named.choices[0]));
  const none = await client.chat.completions.create({ model: 'any', messages: second, tools, tool_choice: 'none', max_tokens: 48 });
  assert(!none.choices[0].message.tool_calls && none.choices[0].finish_reason !== 'tool_calls', json(none.choices[0]));
  try {
    await client.chat.completions.create({ model: 'any', messages: first, tools, tool_choice: { type: 'function', function: { name: 'nope' } } });
    throw new Error('accepted an undeclared function');
  } catch (e) {
    assert(e instanceof OpenAI.BadRequestError, String(e));
  }
});

await finish(server);
