#!/usr/bin/env python3
"""The inputs of the encode benchmarks (bench/media/run.sh), from the standard library alone:
photo.png   1280x960 RGB (a phone photo's aspect), gradients, shapes and noise: the resize and the tower
            do the same work for any content of this size;
speech5.wav / speech30.wav  16 kHz mono int16, 5 s and 30 s of voiced-like tones with pauses.
  make_inputs.py OUT_DIR
"""
import math, os, random, struct, sys, wave, zlib  # noqa: E401


def png(path, w, h, seed=7):
    rnd = random.Random(seed)
    rows = bytearray()
    for y in range(h):
        rows.append(0)
        for x in range(w):
            r = int(255 * x / (w - 1))
            g = int(255 * y / (h - 1))
            b = int(128 + 100 * math.sin(x / 23.0 + y / 37.0))
            if (x - 0.6 * w) ** 2 + (y - 0.4 * h) ** 2 < (0.2 * h) ** 2:
                r, g, b = 220, 40, 50
            n = rnd.randint(-8, 8)
            rows += bytes((min(255, max(0, r + n)), min(255, max(0, g + n)), min(255, max(0, b + n))))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(bytes(rows), 6)) + chunk(b"IEND", b""))


def wav(path, seconds, rate=16000, seed=11):
    rnd = random.Random(seed)
    out = bytearray()
    for i in range(int(seconds * rate)):
        t = i / rate
        voiced = math.sin(2 * math.pi * 1.3 * t) > -0.4          # syllable-like bursts with pauses
        f0 = 140 + 30 * math.sin(2 * math.pi * 0.7 * t)
        s = sum(math.sin(2 * math.pi * f0 * k * t) / k for k in range(1, 6)) * 0.2 if voiced else 0.0
        s += 0.01 * rnd.uniform(-1, 1)
        out += struct.pack("<h", int(max(-1.0, min(1.0, s)) * 32767))
    with wave.open(path, "wb") as f:
        f.setnchannels(1)
        f.setsampwidth(2)
        f.setframerate(rate)
        f.writeframes(bytes(out))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    os.makedirs(sys.argv[1], exist_ok=True)
    png(os.path.join(sys.argv[1], "photo.png"), 1280, 960)
    wav(os.path.join(sys.argv[1], "speech5.wav"), 5.0)
    wav(os.path.join(sys.argv[1], "speech30.wav"), 30.0)
