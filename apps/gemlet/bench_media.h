// `gemlet bench --image FILE | --audio FILE` (bench_media.cc): encoding through the model's towers.
#pragma once

namespace gemlet::cli {

int RunMediaBench(int argc, char** argv);

}  // namespace gemlet::cli
