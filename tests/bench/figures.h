// The small sums the audio benchmarks print their figures with: a spread over
// runs, a percentile, and the CPU time of the calling thread.
#ifndef OMNISTAGE_TESTS_BENCH_FIGURES_H_
#define OMNISTAGE_TESTS_BENCH_FIGURES_H_

#include <string>
#include <vector>

namespace omnistage {
namespace bench {

// "min..max" of `values`, `decimals` digits after the point; "-" for none.
std::string Range(const std::vector<double>& values, int decimals);

// The value at fraction `p` (0..1) of `values` sorted; 0 for none.
double PercentileOf(std::vector<double> values, double p);

// CPU seconds the calling thread has run.
double ThreadCpuSeconds();

}  // namespace bench
}  // namespace omnistage

#endif  // OMNISTAGE_TESTS_BENCH_FIGURES_H_
