// The int8 multiply-accumulate peak of this CPU for each instruction sequence the packed GEMMs use
// (peak_probe.cc): the compute bound prefill is held against, beside the bandwidth probe's for decode.
#pragma once

#include <string>
#include <vector>

namespace gemlet {

struct Int8Peak {
  std::string kernels;      // the kernel table whose GEMMs issue this sequence ("AVX3_DL", "AVX2", ...)
  std::string sequence;     // the instructions, e.g. "zmm vpdpbusd"
  int macs_per_step = 0;    // int8 products one step of the sequence makes
  double gmacs = 0;         // all threads together, the best run
};

// One entry per sequence this CPU runs, `threads` threads at once, the best of `reps` runs after a
// warm-up (about 30 ms each).
std::vector<Int8Peak> MeasureInt8Peaks(int threads, int reps = 3);

}  // namespace gemlet
