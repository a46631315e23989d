// Log-mel features the way transformers 5.17's Gemma 3n / Gemma 4 feature extractors compute them:
// truncation and padding, framing, pre-emphasis, window, a radix-2 FFT, HTK mel triangles, log, mask.
// HF keeps the waveform, frames and window in float32 and runs numpy's float32 FFT; here everything
// up to the frames is float32 in the same order, and the FFT, mel sums and log are double.
#include "media/audio_features.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <numbers>
#include <random>
#include <string>

namespace gemlet::media {
namespace {

Status CheckParams(const LogMelParams& p) {
  const auto bad = [](const std::string& what) { return Status::Error("log-mel parameters: " + what); };
  if (p.sampling_rate <= 0) return bad("sampling_rate must be positive");
  if (p.feature_size <= 0 || p.feature_size > 4096) return bad("feature_size must be 1 to 4096");
  if (p.frame_length < 2 || p.frame_length > (1 << 20)) return bad("frame_length must be 2 to 1048576");
  if (p.hop_length <= 0 || p.hop_length > (1 << 20)) return bad("hop_length must be 1 to 1048576");
  if (p.fft_length < p.frame_length || p.fft_length > (1 << 22) || (p.fft_length & (p.fft_length - 1)) != 0) {
    return bad("fft_length must be a power of two, at least frame_length (" + std::to_string(p.frame_length) + ")");
  }
  if (!(p.min_frequency >= 0.0) || !(p.max_frequency > p.min_frequency) || !std::isfinite(p.max_frequency)) {
    return bad("the mel range needs 0 <= min_frequency < max_frequency");
  }
  if (!(p.mel_floor > 0.0) || !std::isfinite(p.mel_floor)) return bad("mel_floor must be positive");
  if (!std::isfinite(p.preemphasis) || !std::isfinite(p.input_scale_factor) || !(p.dither >= 0.0) ||
      !std::isfinite(p.dither) || !std::isfinite(p.padding_value)) {
    return bad("preemphasis, input_scale_factor, dither and padding_value must be finite (dither >= 0)");
  }
  if (p.pad_to_multiple_of < 0 || p.max_samples < 0) return bad("pad_to_multiple_of and max_samples must be >= 0");
  for (const auto* bins : {&p.per_bin_mean, &p.per_bin_stddev}) {
    if (!bins->empty() && bins->size() != static_cast<size_t>(p.feature_size)) {
      return bad("per_bin_mean / per_bin_stddev need feature_size (" + std::to_string(p.feature_size) + ") values");
    }
  }
  return Status::Ok();
}

// The periodic Hann window of frame_length samples, in float32 as HF builds it. Gemma 3n computes
// 0.5 * (1 - cos(2 pi n / N)) in float32 arithmetic; Gemma 4 takes numpy.hanning(N + 1)[:-1], i.e.
// 0.5 + 0.5 cos(pi m / N) for m = -N, -N + 2, ... in float64, rounded to float32.
std::vector<float> Window(const LogMelParams& p) {
  const int n = p.frame_length;
  std::vector<float> window(n);
  for (int i = 0; i < n; ++i) {
    if (p.style == LogMelStyle::kGemma3n) {
      const float angle = static_cast<float>(2.0 * std::numbers::pi) * static_cast<float>(i) / static_cast<float>(n);
      window[i] = 0.5f * (1.0f - std::cos(angle));
    } else {
      const double m = static_cast<double>(2 * i - n);
      window[i] = static_cast<float>(0.5 + 0.5 * std::cos(std::numbers::pi * m / n));
    }
  }
  return window;
}

// One mel filter: its weights over the FFT bins [first, first + weights.size()), zero elsewhere.
struct MelFilter {
  int first = 0;
  std::vector<double> weights;
};

double HzToMel(double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); }
double MelToHz(double mel) { return 700.0 * (std::pow(10.0, mel / 2595.0) - 1.0); }

// numpy.linspace(start, stop, count)[i]: start + i * step, the last point exactly stop.
double Linspace(double start, double stop, int count, int i) {
  if (i == count - 1) return stop;
  return static_cast<double>(i) * ((stop - start) / (count - 1)) + start;
}

// HTK mel triangles without normalisation, as both extractors build them: corner frequencies evenly
// spaced on the HTK mel scale, each filter rising from corner m to m + 1 and falling to m + 2, linear
// in Hz. The FFT bins' frequencies differ in the last bits: Gemma 3n takes arange(n) * (sr / fft) in
// float32, Gemma 4 (transformers' mel_filter_bank) linspace(0, sr // 2, n) in float64.
std::vector<MelFilter> MelFilters(const LogMelParams& p) {
  const int bins = p.fft_length / 2 + 1;
  const int mels = p.feature_size;
  std::vector<double> bin_hz(bins);
  for (int k = 0; k < bins; ++k) {
    if (p.style == LogMelStyle::kGemma3n) {
      const float step = static_cast<float>(static_cast<double>(p.sampling_rate) / p.fft_length);
      bin_hz[k] = static_cast<float>(k) * step;
    } else {
      bin_hz[k] = Linspace(0.0, static_cast<double>(p.sampling_rate / 2), bins, k);
    }
  }
  const double mel_min = HzToMel(p.min_frequency), mel_max = HzToMel(p.max_frequency);
  std::vector<double> corner(mels + 2);
  for (int i = 0; i < mels + 2; ++i) corner[i] = MelToHz(Linspace(mel_min, mel_max, mels + 2, i));
  std::vector<MelFilter> filters(mels);
  for (int m = 0; m < mels; ++m) {
    const double rise = corner[m + 1] - corner[m], fall = corner[m + 2] - corner[m + 1];
    std::vector<double> weights(bins);
    int first = bins, last = -1;
    for (int k = 0; k < bins; ++k) {
      const double down = (bin_hz[k] - corner[m]) / rise;
      const double up = (corner[m + 2] - bin_hz[k]) / fall;
      weights[k] = std::max(0.0, std::min(down, up));
      if (weights[k] > 0.0) {
        first = std::min(first, k);
        last = k;
      }
    }
    if (last >= first) filters[m] = {first, std::vector<double>(weights.begin() + first, weights.begin() + last + 1)};
  }
  return filters;
}

// An in-place iterative radix-2 FFT over a power-of-two length, twiddles from a table of
// cos/sin(2 pi k / n) computed in double.
class Fft {
 public:
  explicit Fft(int n) : n_(n), twiddle_(n / 2), reversed_(n) {
    for (int k = 0; k < n / 2; ++k) {
      const double angle = -2.0 * std::numbers::pi * k / n;
      twiddle_[k] = {std::cos(angle), std::sin(angle)};
    }
    int bits = 0;
    while ((1 << bits) < n) ++bits;
    for (int i = 0; i < n; ++i) {
      int r = 0;
      for (int b = 0; b < bits; ++b) r |= ((i >> b) & 1) << (bits - 1 - b);
      reversed_[i] = r;
    }
  }

  void Forward(std::vector<std::complex<double>>& x) const {
    for (int i = 0; i < n_; ++i) {
      if (i < reversed_[i]) std::swap(x[i], x[reversed_[i]]);
    }
    for (int size = 2; size <= n_; size *= 2) {
      const int half = size / 2, stride = n_ / size;
      for (int start = 0; start < n_; start += size) {
        for (int j = 0; j < half; ++j) {
          const std::complex<double> t = twiddle_[j * stride] * x[start + j + half];
          x[start + j + half] = x[start + j] - t;
          x[start + j] += t;
        }
      }
    }
  }

 private:
  int n_;
  std::vector<std::complex<double>> twiddle_;
  std::vector<int> reversed_;
};

// The waveform the frames are cut from, and its sample mask (1 = real audio), after HF's truncation,
// padding, dither, input scaling and (Gemma 4) the semicausal zeros in front.
struct Signal {
  std::vector<float> samples;
  std::vector<uint8_t> real;
};

Signal Prepare(const std::vector<float>& clip, const LogMelParams& p) {
  int64_t length = static_cast<int64_t>(clip.size());
  // HF's _truncate rounds max_length up to the padding multiple before cutting.
  if (p.max_samples > 0) {
    int64_t max_length = p.max_samples;
    if (p.pad_to_multiple_of > 0 && max_length % p.pad_to_multiple_of != 0) {
      max_length = (max_length / p.pad_to_multiple_of + 1) * p.pad_to_multiple_of;
    }
    length = std::min(length, max_length);
  }
  int64_t padded = length;
  if (p.pad_to_multiple_of > 0 && padded % p.pad_to_multiple_of != 0) {
    padded = (padded / p.pad_to_multiple_of + 1) * p.pad_to_multiple_of;
  }
  const int64_t front = p.style == LogMelStyle::kGemma4 ? p.frame_length / 2 : 0;
  const int64_t pad_before = p.pad_left ? padded - length : 0;
  Signal s;
  s.samples.assign(front + padded, 0.0f);
  s.real.assign(front + padded, 0);
  std::fill(s.samples.begin() + front, s.samples.end(), p.padding_value);
  std::copy(clip.begin(), clip.begin() + length, s.samples.begin() + front + pad_before);
  std::fill(s.real.begin() + front + pad_before, s.real.begin() + front + pad_before + length, 1);
  // Dither and scaling reach the padding too (HF applies them to the padded batch), not the zeros in
  // front, which HF adds afterwards.
  if (p.dither > 0.0) {
    std::mt19937_64 rng(p.dither_seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const float dither = static_cast<float>(p.dither);
    for (int64_t i = front; i < front + padded; ++i) s.samples[i] += dither * normal(rng);
  }
  if (p.input_scale_factor != 1.0) {
    const float scale = static_cast<float>(p.input_scale_factor);
    for (int64_t i = front; i < front + padded; ++i) s.samples[i] *= scale;
  }
  return s;
}

// Frame `start`'s frame_length samples after pre-emphasis and the window, in float32 as HF computes
// them. The frame reads frame_length + 1 samples: with HTK-flavoured pre-emphasis the first sample is
// scaled by 1 - a and sample j > 0 becomes x[j] - a x[j - 1], both inside the frame; the plain flavour
// uses the extra sample; without pre-emphasis it is dropped.
void CutFrame(const float* x, const LogMelParams& p, const std::vector<float>& window, std::vector<float>& out) {
  const int n = p.frame_length;
  if (p.preemphasis > 0.0) {
    const float a = static_cast<float>(p.preemphasis);
    if (p.preemphasis_htk_flavor) {
      out[0] = x[0] * static_cast<float>(1.0 - p.preemphasis);
      for (int j = 1; j < n; ++j) out[j] = x[j] - a * x[j - 1];
    } else {
      for (int j = 0; j < n; ++j) out[j] = x[j + 1] - a * x[j];
    }
  } else {
    std::copy(x, x + n, out.begin());
  }
  for (int j = 0; j < n; ++j) out[j] *= window[j];
}

}  // namespace

LogMelParams Gemma3nLogMelParams() {
  LogMelParams p;
  p.style = LogMelStyle::kGemma3n;
  p.frame_length = 512;  // 32 ms at 16 kHz
  p.fft_length = 1024;   // the next power of two, doubled by fft_overdrive
  p.min_frequency = 125.0;
  p.max_frequency = 7600.0;
  p.preemphasis = 0.97;
  p.mel_floor = 1e-5;
  return p;
}

LogMelParams Gemma4LogMelParams() {
  LogMelParams p;
  p.style = LogMelStyle::kGemma4;
  return p;  // the struct's defaults are Gemma 4's: 20 ms frames, fft 512, 0-8000 Hz, floor 1e-3
}

int LogMelFeatures::NumValid() const { return static_cast<int>(std::count(mask.begin(), mask.end(), uint8_t{1})); }

Result<LogMelFeatures> ComputeLogMel(const Audio& audio, const LogMelParams& p) {
  RETURN_IF_ERROR(CheckParams(p));
  if (audio.sample_rate != p.sampling_rate) {
    ASSIGN_OR_RETURN(const Audio resampled, ResampleAudio(audio, p.sampling_rate));
    return ComputeLogMel(resampled, p);
  }
  const Signal s = Prepare(audio.samples, p);
  const int64_t span = p.frame_length + 1;
  const int64_t total = static_cast<int64_t>(s.samples.size());
  LogMelFeatures out;
  out.num_mels = p.feature_size;
  out.num_frames = total < span ? 0 : static_cast<int>((total - span) / p.hop_length + 1);
  out.values.assign(static_cast<size_t>(out.num_frames) * p.feature_size, 0.0f);
  out.mask.assign(out.num_frames, 0);
  const std::vector<float> window = Window(p);
  const std::vector<MelFilter> filters = MelFilters(p);
  const Fft fft(p.fft_length);
  std::vector<float> frame(p.frame_length);
  std::vector<std::complex<double>> spectrum(p.fft_length);
  std::vector<double> magnitude(p.fft_length / 2 + 1);
  for (int t = 0; t < out.num_frames; ++t) {
    const int64_t start = static_cast<int64_t>(t) * p.hop_length;
    // Gemma 3n looks at the frame's first sample (the sample mask taken every hop), Gemma 4 at its last.
    out.mask[t] = p.style == LogMelStyle::kGemma3n ? s.real[start] : s.real[start + p.frame_length];
    CutFrame(s.samples.data() + start, p, window, frame);
    std::fill(spectrum.begin(), spectrum.end(), 0.0);
    std::copy(frame.begin(), frame.end(), spectrum.begin());
    fft.Forward(spectrum);
    // sqrt(re^2 + im^2) in double, not std::abs's hypot (a quarter of the features' time): the two agree
    // to an ulp of a double, far below the float features' rounding.
    for (size_t k = 0; k < magnitude.size(); ++k) magnitude[k] = std::sqrt(std::norm(spectrum[k]));
    float* row = out.values.data() + static_cast<size_t>(t) * p.feature_size;
    for (int m = 0; m < p.feature_size; ++m) {
      double mel = 0.0;
      const MelFilter& f = filters[m];
      for (size_t k = 0; k < f.weights.size(); ++k) mel += f.weights[k] * magnitude[f.first + k];
      double value =
          p.style == LogMelStyle::kGemma3n ? std::log(std::max(mel, p.mel_floor)) : std::log(mel + p.mel_floor);
      if (!p.per_bin_mean.empty()) value -= p.per_bin_mean[m];
      if (!p.per_bin_stddev.empty()) value /= p.per_bin_stddev[m];
      // Gemma 4 multiplies the features by the mask.
      row[m] = p.style == LogMelStyle::kGemma4 && out.mask[t] == 0 ? 0.0f : static_cast<float>(value);
    }
  }
  return out;
}

}  // namespace gemlet::media
