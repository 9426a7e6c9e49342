// RatioReporter: Google Benchmark's console output as usual, plus each run's CPU time per
// iteration by benchmark name, so a bench's main() can print ratios against a baseline measured
// in the same process (house rule: a benchmark compares against a baseline of the same run).
// Single-threaded (the benchmark runner calls it from main's thread).
#pragma once

#include <map>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

namespace tokimq::bench {

class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      if (r.run_type == Run::RT_Iteration && !r.error_occurred) {
        cpu_[r.benchmark_name()] = r.GetAdjustedCPUTime();
      }
    }
  }
  // CPU time per iteration (the benchmark's time unit) by benchmark name.
  const std::map<std::string, double>& cpu() const { return cpu_; }

 private:
  std::map<std::string, double> cpu_;
};

}  // namespace tokimq::bench
