// Per-token row work of a batch (norms, rope and cache stores, residuals, SwiGLU): spread over the pool for
// prefill-sized batches, where it would otherwise leave the other threads idle, and run on the calling thread for
// decode-sized ones, whose rows take less time than waking the pool.
#pragma once

#include <cstdint>

#include "util/thread_pool.h"

namespace tessera {

constexpr int64_t kParallelRowTokens = 16;

template <class Fn>
void for_each_token(ThreadPool& pool, int64_t n_tokens, Fn&& fn) {
  if (n_tokens < kParallelRowTokens || pool.size() == 1) {
    for (int64_t t = 0; t < n_tokens; ++t) fn(t);
    return;
  }
  pool.parallel_for(n_tokens, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) fn(t);
  });
}

}  // namespace tessera
