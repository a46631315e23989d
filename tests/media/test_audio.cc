// Test clips and tone measurements for the audio tests (see test_audio.h).
#include "test_audio.h"

#include <sndfile.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>
#include <numbers>

namespace gemlet::media::testing {
namespace {

void Put16(Bytes& out, uint32_t v) {
  out.push_back(static_cast<uint8_t>(v));
  out.push_back(static_cast<uint8_t>(v >> 8));
}
void Put32(Bytes& out, uint32_t v) {
  Put16(out, v & 0xffff);
  Put16(out, v >> 16);
}
void PutTag(Bytes& out, const char* tag) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(tag[i]));
}

int64_t QuantizedInt(double v, int bits) {
  const double scale = std::ldexp(1.0, bits - 1);
  const double lo = -scale, hi = scale - 1.0;
  return static_cast<int64_t>(std::clamp(std::nearbyint(v * scale), lo, hi));
}

// libsndfile's view of a growing buffer, for writing.
struct Sink {
  Bytes bytes;
  sf_count_t position = 0;

  static Sink& Of(void* user) { return *static_cast<Sink*>(user); }
  static sf_count_t Length(void* user) { return static_cast<sf_count_t>(Of(user).bytes.size()); }
  static sf_count_t Tell(void* user) { return Of(user).position; }
  static sf_count_t Seek(sf_count_t offset, int whence, void* user) {
    Sink& s = Of(user);
    const sf_count_t end = static_cast<sf_count_t>(s.bytes.size());
    const sf_count_t base = whence == SEEK_CUR ? s.position : whence == SEEK_END ? end : 0;
    s.position = std::max<sf_count_t>(0, base + offset);
    return s.position;
  }
  static sf_count_t Read(void* out, sf_count_t count, void* user) {
    Sink& s = Of(user);
    const sf_count_t n = std::clamp<sf_count_t>(static_cast<sf_count_t>(s.bytes.size()) - s.position, 0, count);
    if (n > 0) std::memcpy(out, s.bytes.data() + s.position, static_cast<size_t>(n));
    s.position += n;
    return n;
  }
  static sf_count_t Write(const void* data, sf_count_t count, void* user) {
    Sink& s = Of(user);
    const size_t end = static_cast<size_t>(s.position + count);
    if (s.bytes.size() < end) s.bytes.resize(end);
    std::memcpy(s.bytes.data() + s.position, data, static_cast<size_t>(count));
    s.position += count;
    return count;
  }
};

// sum x[n] w[n] e^{-i 2 pi hz n / rate} over the middle 80% of x, with a Hann window w, and sum w.
std::complex<double> Project(std::span<const float> x, int rate, double hz, double* weight) {
  const size_t begin = x.size() / 10, end = x.size() - x.size() / 10;
  const double n = static_cast<double>(end - begin);
  const std::complex<double> step = std::polar(1.0, -2.0 * std::numbers::pi * hz / rate);
  std::complex<double> phasor = std::polar(1.0, -2.0 * std::numbers::pi * hz * static_cast<double>(begin) / rate);
  std::complex<double> sum = 0.0;
  double w_sum = 0.0;
  for (size_t i = begin; i < end; ++i) {
    const double w = 0.5 - 0.5 * std::cos(2.0 * std::numbers::pi * static_cast<double>(i - begin) / n);
    sum += static_cast<double>(x[i]) * w * phasor;
    w_sum += w;
    phasor *= step;
  }
  *weight = w_sum;
  return sum;
}

}  // namespace

std::vector<double> Tone(int rate, double seconds, double hz, double amplitude, int channels,
                         std::span<const double> channel_gain) {
  const size_t frames = static_cast<size_t>(std::llround(seconds * rate));
  std::vector<double> out(frames * channels);
  for (size_t i = 0; i < frames; ++i) {
    const double v = amplitude * std::sin(2.0 * std::numbers::pi * hz * static_cast<double>(i) / rate);
    for (int c = 0; c < channels; ++c) out[i * channels + c] = v * (channel_gain.empty() ? 1.0 : channel_gain[c]);
  }
  return out;
}

double Quantize(double v, int bits) {
  if (bits == 8) return static_cast<double>(std::clamp<int64_t>(std::lround(v * 128.0) + 128, 0, 255) - 128) / 128.0;
  return static_cast<double>(QuantizedInt(v, bits)) / std::ldexp(1.0, bits - 1);
}

Bytes EncodeWav(const WavSpec& spec, std::span<const double> interleaved) {
  const int width = spec.bits / 8;
  const uint32_t data_size = static_cast<uint32_t>(interleaved.size() * width);
  const uint32_t fmt_size = spec.extensible ? 40 : 16;
  Bytes out;
  PutTag(out, "RIFF");
  Put32(out, 4 + 8 + fmt_size + 8 + data_size);
  PutTag(out, "WAVE");
  PutTag(out, "fmt ");
  Put32(out, fmt_size);
  Put16(out, spec.extensible ? 0xfffe : spec.tag);
  Put16(out, spec.channels);
  Put32(out, spec.rate);
  Put32(out, spec.rate * spec.channels * width);
  Put16(out, spec.channels * width);
  Put16(out, spec.bits);
  if (spec.extensible) {
    Put16(out, 22);
    Put16(out, spec.bits);                          // valid bits
    Put32(out, spec.channels == 1 ? 0x4 : 0x3);     // front centre, or front left + right
    Put16(out, spec.tag);                           // the sub-format GUID: the tag, then KSDATAFORMAT's suffix
    for (uint8_t b : {0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xaa, 0x00, 0x38, 0x9b, 0x71}) {
      out.push_back(b);
    }
  }
  PutTag(out, "data");
  Put32(out, data_size);
  for (double v : interleaved) {
    if (spec.tag == 3 && spec.bits == 32) {
      const float f = static_cast<float>(v);
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      Put32(out, bits);
    } else if (spec.tag == 3) {
      uint64_t bits;
      std::memcpy(&bits, &v, 8);
      Put32(out, static_cast<uint32_t>(bits));
      Put32(out, static_cast<uint32_t>(bits >> 32));
    } else if (spec.bits == 8) {
      out.push_back(static_cast<uint8_t>(std::lround(Quantize(v, 8) * 128.0) + 128));
    } else {
      const uint64_t q = static_cast<uint64_t>(QuantizedInt(v, spec.bits));
      for (int b = 0; b < width; ++b) out.push_back(static_cast<uint8_t>(q >> (8 * b)));
    }
  }
  return out;
}

Bytes EncodeWithSndfile(int format, int rate, int channels, std::span<const double> interleaved, int int_bits) {
  Sink sink;
  SF_VIRTUAL_IO io{&Sink::Length, &Sink::Seek, &Sink::Read, &Sink::Write, &Sink::Tell};
  SF_INFO info{};
  info.samplerate = rate;
  info.channels = channels;
  info.format = format;
  SNDFILE* file = sf_open_virtual(&io, SFM_WRITE, &info, &sink);
  if (file == nullptr) return {};
  const sf_count_t frames = static_cast<sf_count_t>(interleaved.size() / channels);
  bool written = false;
  if (int_bits > 0) {
    // libsndfile's int samples are left-justified 32-bit: a 16-bit codec stores v >> 16.
    std::vector<int> ints(interleaved.size());
    for (size_t i = 0; i < ints.size(); ++i) {
      ints[i] = static_cast<int>(QuantizedInt(interleaved[i], int_bits) * (int64_t{1} << (32 - int_bits)));
    }
    written = sf_writef_int(file, ints.data(), frames) == frames;
  } else {
    written = sf_writef_double(file, interleaved.data(), frames) == frames;
  }
  sf_close(file);
  return written ? sink.bytes : Bytes{};
}

double ToneAmplitude(std::span<const float> x, int rate, double hz) {
  double weight = 0.0;
  const std::complex<double> sum = Project(x, rate, hz, &weight);
  return 2.0 * std::abs(sum) / weight;
}

double DominantFrequency(std::span<const float> x, int rate, double lo, double hi) {
  double best = lo, best_level = -1.0;
  for (double hz = lo; hz <= hi; hz += 1.0) {
    const double level = ToneAmplitude(x, rate, hz);
    if (level > best_level) best_level = level, best = hz;
  }
  // The peak of the Hann-weighted projection is smooth: a golden-section search within a bin of it.
  double a = best - 1.0, b = best + 1.0;
  const double g = (std::sqrt(5.0) - 1.0) / 2.0;
  while (b - a > 1e-4) {
    const double c = b - g * (b - a), d = a + g * (b - a);
    if (ToneAmplitude(x, rate, c) > ToneAmplitude(x, rate, d)) {
      b = d;
    } else {
      a = c;
    }
  }
  return (a + b) / 2.0;
}

}  // namespace gemlet::media::testing
