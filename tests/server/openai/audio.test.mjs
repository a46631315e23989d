// Audio through OpenAI's official Node.js client: audio.transcriptions.create with a file upload as
// json, text and verbose_json (a 70 s clip in pieces: its segments at the split's times, one after
// another), the same text each way; input_audio in a chat; a clip too long is an APIError 413, an
// unknown language a 400 naming it. The model's words are noise (a placeholder vocabulary): the
// checks hold the protocol and the plumbing.
// Usage: node audio.test.mjs --server-cmd "gemlet serve -m MODEL --mmproj MMPROJ --max-audio-seconds 100 ..." --clip FILE.wav
import { readFileSync } from 'node:fs';
import OpenAI, { toFile } from 'openai';
import { assert, check, finish, serverCommand, startServer } from './harness.mjs';

const args = process.argv.slice(2);
const clip = readFileSync(args[args.indexOf('--clip') + 1]);

// The clip (16 kHz mono int16 WAV with a 44-byte header) repeated with 0.4 s pauses to `seconds`.
function longWav(seconds) {
  const one = clip.subarray(44);
  const total = Math.round(seconds * 16000) * 2;
  const data = Buffer.alloc(total);
  for (let at = 0; at < total;) {
    at += one.copy(data, at, 0, Math.min(one.length, total - at));
    at += Math.min(0.4 * 16000 * 2, total - at);  // the pause: zeros
  }
  const header = Buffer.alloc(44);
  header.write('RIFF', 0); header.writeUInt32LE(36 + total, 4); header.write('WAVEfmt ', 8);
  header.writeUInt32LE(16, 16); header.writeUInt16LE(1, 20); header.writeUInt16LE(1, 22);
  header.writeUInt32LE(16000, 24); header.writeUInt32LE(32000, 28); header.writeUInt16LE(2, 32);
  header.writeUInt16LE(16, 34); header.write('data', 36); header.writeUInt32LE(total, 40);
  return Buffer.concat([header, data]);
}

const apiKey = 'test-key-' + process.pid;
const server = await startServer(serverCommand(), apiKey);
const client = new OpenAI({ baseURL: server.baseURL + '/v1', apiKey, maxRetries: 0, timeout: 120000 });

await check('models.list says the model hears', async () => {
  const m = (await client.models.list()).data[0];
  assert(JSON.stringify(m.input_modalities) === '["text","image","audio"]', JSON.stringify(m));
});

let jsonText = '';
await check('audio.transcriptions.create: json, text and verbose_json give the same text', async () => {
  const file = () => toFile(clip, 'clip.wav', { type: 'audio/wav' });
  const asJson = await client.audio.transcriptions.create({ file: await file(), model: 'whisper-1' });
  jsonText = asJson.text;
  assert(typeof jsonText === 'string' && jsonText.length > 0, JSON.stringify(asJson));
  assert(asJson.usage?.type === 'tokens' && asJson.usage.output_tokens > 0, JSON.stringify(asJson.usage));
  const asText = await client.audio.transcriptions.create({ file: await file(), model: 'whisper-1', response_format: 'text' });
  assert(typeof asText === 'string' && asText.trim() === jsonText, `text ${JSON.stringify(asText)} != ${JSON.stringify(jsonText)}`);
  const verbose = await client.audio.transcriptions.create({ file: await file(), model: 'whisper-1', response_format: 'verbose_json',
                                                            temperature: 0 });
  assert(verbose.text === jsonText, JSON.stringify(verbose));
  assert(Math.abs(verbose.duration - 27237 / 16000) < 1e-6, `duration ${verbose.duration}`);
  assert(typeof verbose.language === 'string', JSON.stringify(verbose));
  assert(verbose.segments.length === 1 && verbose.segments[0].start === 0 && verbose.segments[0].end === verbose.duration,
         JSON.stringify(verbose.segments));
  assert(!('words' in verbose), 'no word timings are invented');
});

await check('a 70 s clip is transcribed in pieces, its segments at the split\'s times', async () => {
  const file = await toFile(longWav(70), 'long.wav', { type: 'audio/wav' });
  const v = await client.audio.transcriptions.create({ file, model: 'whisper-1', response_format: 'verbose_json',
                                                     timestamp_granularities: ['segment'], language: 'en' });
  assert(v.duration === 70 && v.language === 'en', JSON.stringify({ duration: v.duration, language: v.language }));
  assert(v.segments.length >= 3, `${v.segments.length} segments`);
  v.segments.forEach((s, i) => {
    assert(s.id === i && s.end - s.start <= 30 && s.end > s.start, JSON.stringify(s));
    assert(i === 0 ? s.start === 0 : s.start === v.segments[i - 1].end, `segment ${i} starts at ${s.start}`);
  });
  assert(v.segments.at(-1).end === 70, JSON.stringify(v.segments.at(-1)));
  assert(v.text === v.segments.map((s) => s.text).filter((t) => t).join(' '), v.text);
});

await check('input_audio in a chat', async () => {
  const r = await client.chat.completions.create({
    model: 'any', max_tokens: 6, temperature: 0,
    messages: [{ role: 'user', content: [{ type: 'text', text: 'What is said?' },
                                          { type: 'input_audio', input_audio: { data: clip.toString('base64'), format: 'wav' } }] }],
  });
  assert(typeof r.choices[0].message.content === 'string' && r.usage.prompt_tokens > 40, JSON.stringify(r));
});

await check('a clip over --max-audio-seconds is an APIError 413; an unknown language a 400 naming it', async () => {
  try {
    await client.audio.transcriptions.create({ file: await toFile(longWav(110), 'long.wav'), model: 'whisper-1' });
    assert(false, 'no error');
  } catch (e) {
    assert(e instanceof OpenAI.APIError && e.status === 413, String(e));
    assert(/110\.0 s/.test(e.message) && /100 s/.test(e.message), e.message);
  }
  try {
    await client.audio.transcriptions.create({ file: await toFile(clip, 'clip.wav'), model: 'whisper-1', language: 'xx' });
    assert(false, 'no error');
  } catch (e) {
    assert(e instanceof OpenAI.APIError && e.status === 400 && e.param === 'language', `${e} (param ${e.param})`);
  }
});

await finish(server);
