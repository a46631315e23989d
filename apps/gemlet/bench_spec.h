// `gemlet bench --spec lookup|draft|mtp` (bench_spec.cc): verification cost and a workload's acceptance.
#pragma once

namespace gemlet::cli {

int RunSpecBench(int argc, char** argv);

}  // namespace gemlet::cli
