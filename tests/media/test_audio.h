// Test clips made in the test: WAV written here byte by byte, FLAC / Ogg Opus / Ogg Vorbis / MP3 by
// libsndfile's encoders (libFLAC, libopus, libvorbis, LAME), and the measurements the tests make on
// what decodes (a tone's frequency and amplitude).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace gemlet::media::testing {

using Bytes = std::vector<uint8_t>;

// amplitude * sin(2 pi hz t) over `seconds` at `rate`, on `channels` interleaved channels; channel c
// is scaled by channel_gain[c] when given.
std::vector<double> Tone(int rate, double seconds, double hz, double amplitude, int channels = 1,
                         std::span<const double> channel_gain = {});

// A WAV of interleaved samples in [-1, 1]: integer PCM (tag 1) of 8, 16, 24 or 32 bits, quantized as
// Quantize does, or float (tag 3) of 32 or 64 bits; `extensible` writes WAVE_FORMAT_EXTENSIBLE.
struct WavSpec {
  int rate = 16000;
  int channels = 1;
  int tag = 1;
  int bits = 16;
  bool extensible = false;
};
Bytes EncodeWav(const WavSpec& spec, std::span<const double> interleaved);

// The value a decoder must return for `v` stored as `bits`-bit integer PCM: the stored integer over
// 2^(bits-1) (8-bit: unsigned with offset 128).
double Quantize(double v, int bits);

// A clip through libsndfile's encoder into memory: `format` is SF_FORMAT_* major | subtype (e.g.
// SF_FORMAT_OGG | SF_FORMAT_OPUS). With int_bits, the samples go in as the integers Quantize stores
// (libsndfile's own float-to-int scaling is by 2^(bits-1) - 1). Empty if libsndfile cannot write it.
Bytes EncodeWithSndfile(int format, int rate, int channels, std::span<const double> interleaved, int int_bits = 0);

// The amplitude of the component at `hz` over the middle of `x` (Hann-weighted projection: exact for
// a pure tone, a few 1e-4 for a tone among others far away).
double ToneAmplitude(std::span<const float> x, int rate, double hz);

// The frequency (Hz) of the strongest tone in `x` between lo and hi, to about 0.001 Hz.
double DominantFrequency(std::span<const float> x, int rate, double lo, double hi);

}  // namespace gemlet::media::testing
