// audio.js: clips for the chat page: a file read as the server takes it (WAV, FLAC, Ogg, MP3 as they
// are; anything else the browser can decode, such as a phone's M4A or a recording's WebM, turned into
// 16 kHz mono WAV here), and recordings from the microphone (MediaRecorder).

// The format of audio bytes the server reads, by their first bytes as the server sniffs them; null
// for any other.
function sniff(bytes) {
  const ascii = (at, text) => [...text].every((c, i) => bytes[at + i] === c.charCodeAt(0));
  if (ascii(0, "RIFF") && ascii(8, "WAVE")) return "wav";
  if (ascii(0, "fLaC")) return "flac";
  if (ascii(0, "OggS")) return "ogg";
  if (ascii(0, "ID3") || (bytes[0] === 0xff && (bytes[1] & 0xe0) === 0xe0 && (bytes[1] & 0x06) !== 0)) return "mp3";
  return null;
}

// The base64 of a blob's bytes (FileReader's data URL, less its head: fast for long clips).
function base64Of(blob) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result).replace(/^data:[^,]*,/, ""));
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(blob);
  });
}

const RATE = 16000; // the models' rate: the WAV the page makes is as small as the model needs

// Audio the browser can decode, as a 16 kHz mono 16-bit WAV (decodeAudioData resamples to its
// context's rate; the channels are averaged).
export async function toWav(blob) {
  const context = new OfflineAudioContext(1, 1, RATE);
  const decoded = await context.decodeAudioData(await blob.arrayBuffer());
  const channels = [...Array(decoded.numberOfChannels)].map((_, c) => decoded.getChannelData(c));
  const n = decoded.length;
  const wav = new DataView(new ArrayBuffer(44 + 2 * n));
  const text = (at, s) => [...s].forEach((c, i) => wav.setUint8(at + i, c.charCodeAt(0)));
  text(0, "RIFF"); wav.setUint32(4, 36 + 2 * n, true); text(8, "WAVEfmt ");
  wav.setUint32(16, 16, true); wav.setUint16(20, 1, true); wav.setUint16(22, 1, true);
  wav.setUint32(24, RATE, true); wav.setUint32(28, 2 * RATE, true); wav.setUint16(32, 2, true); wav.setUint16(34, 16, true);
  text(36, "data"); wav.setUint32(40, 2 * n, true);
  for (let i = 0; i < n; i++) {
    let sum = 0;
    for (const data of channels) sum += data[i];
    const v = Math.max(-1, Math.min(1, sum / channels.length));
    wav.setInt16(44 + 2 * i, Math.round(v * 32767), true);
  }
  return new Blob([wav.buffer], { type: "audio/wav" });
}

// A clip for the composer: {name, blob (what the player plays), data (base64), format}.
export async function readClip(file) {
  const head = new Uint8Array(await file.slice(0, 16).arrayBuffer());
  let blob = file;
  let format = sniff(head);
  if (!format) {
    try {
      blob = await toWav(file);
    } catch (err) {
      throw new Error(`the browser cannot decode it (${err?.message ?? err}); the server reads WAV, FLAC, Ogg and MP3`);
    }
    format = "wav";
  }
  return { name: file.name, blob, data: await base64Of(blob), format };
}

// Whether this browser can record from a microphone.
export const canRecord = () => Boolean(globalThis.MediaRecorder && navigator.mediaDevices?.getUserMedia);

// Starts recording; the returned stop() ends it and resolves with the recording as a clip (WAV).
export async function startRecording() {
  const stream = await navigator.mediaDevices.getUserMedia({ audio: true });
  const recorder = new MediaRecorder(stream);
  const parts = [];
  recorder.addEventListener("dataavailable", (event) => { if (event.data.size) parts.push(event.data); });
  const stopped = new Promise((resolve) => recorder.addEventListener("stop", resolve, { once: true }));
  recorder.start();
  return async function stop() {
    if (recorder.state !== "inactive") recorder.stop();
    await stopped;
    for (const track of stream.getTracks()) track.stop();
    const recording = new Blob(parts, { type: recorder.mimeType || "audio/webm" });
    // WebM (Chrome) or Ogg (Firefox) Opus, or MP4 (Safari): WAV, which every server reads.
    const wav = await toWav(recording);
    return { name: "recording.wav", blob: wav, data: await base64Of(wav), format: "wav" };
  };
}
