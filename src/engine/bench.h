#pragma once
// rocmforge bench: prompt processing (pp) and generation (tg) throughput, llama-bench style,
// each row beside the bound the device allows: bytes the step must read over the measured
// bandwidth, and for prefill also flops over the measured matmul peak.
#include <string>
#include <vector>

#include "model/forward_pass.h"

namespace rf {

class ModelRunner;

struct BenchSettings {
  std::vector<int> prompt_lengths = {512};
  std::vector<int> generation_lengths = {128};
  std::vector<int> batch_sizes = {1};
  int repetitions = 5;
};

struct BenchRow {
  std::string test;  // "pp512", "tg128"
  int batch = 1;
  std::vector<double> tokens_per_second;  // one per repetition
  double median = 0;
  double min = 0;
  double max = 0;
  double bound = 0;             // tokens/s the ceilings allow
  std::string bound_by;         // "memory" or "compute"
  double bytes_per_step = 0;    // for tg: average bytes read per decode step
};

std::vector<BenchRow> run_bench(ModelRunner& runner, const BenchSettings& settings, const DeviceCeilings& ceilings);

}  // namespace rf
