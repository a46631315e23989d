// sse.js: the `data:` payloads of a Server-Sent Events stream read with fetch (EventSource cannot POST).

// Yields each event's data (its data: lines joined by "\n") as the bytes arrive. TextDecoderStream
// keeps a UTF-8 character that straddles two network chunks whole (Chinese text does that often).
export async function* sseEvents(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let data = [];
  let finished = false;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) { finished = true; break; }
      buffer += value;
      for (;;) {
        const m = /\r\n|\r|\n/.exec(buffer);
        // A lone "\r" at the end may be the first half of "\r\n": wait for the next chunk.
        if (!m || (m[0] === "\r" && m.index === buffer.length - 1)) break;
        const line = buffer.slice(0, m.index);
        buffer = buffer.slice(m.index + m[0].length);
        if (line === "") {
          if (data.length) yield data.join("\n");
          data = [];
        } else if (line.startsWith("data:")) {
          data.push(line.slice(line[5] === " " ? 6 : 5));
        } // comments (":...") and the event:, id:, retry: fields mean nothing here
      }
    }
    if (buffer.startsWith("data:")) data.push(buffer.slice(buffer[5] === " " ? 6 : 5));
    if (data.length) yield data.join("\n"); // a stream that ended without its blank line
  } finally {
    if (!finished) reader.cancel().catch(() => {});
  }
}
