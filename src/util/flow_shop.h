// The flow-shop recurrence shared by the planner's pipeline prediction and the runtime's choice of prompt
// micro-batches: jobs pass a chain of elements in order, one job at a time per element.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace tessera {

// When the last of n_jobs leaves the last of n_elements. Job c starts on element j once element j is free and the
// job has reached it; it holds the element for busy(c, j) and reaches element j + 1 pass(c, j) after it started
// there (busy plus any latency that does not hold the element, such as a link's delay). 0 without jobs or elements.
template <class Busy, class Pass>
double flow_shop_makespan(int64_t n_jobs, size_t n_elements, Busy busy, Pass pass) {
  std::vector<double> free_at(n_elements, 0.0);
  double last_out = 0;
  for (int64_t c = 0; c < n_jobs; ++c) {
    double arrives = 0;
    for (size_t j = 0; j < n_elements; ++j) {
      const double start = std::max(arrives, free_at[j]);
      free_at[j] = start + busy(c, j);
      arrives = start + pass(c, j);
    }
    last_out = n_elements > 0 ? arrives : 0.0;
  }
  return last_out;
}

}  // namespace tessera
