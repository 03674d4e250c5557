// The batch-rate measurement: a cache-resident Q4_K matrix multiplied by 8 to 256 tokens at a time, as the engine's
// matmul runs them.
#include "hw/batch_rate.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <random>

#include "tensor/ggml_type.h"
#include "tensor/kernels.h"
#include "tensor/matmul.h"
#include "tensor/packed_weights.h"
#include "tensor/quant.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace tessera {
namespace {

using Clock = std::chrono::steady_clock;

struct FreeAligned {
  void operator()(uint8_t* p) const { std::free(p); }
};
using AlignedBytes = std::unique_ptr<uint8_t, FreeAligned>;

AlignedBytes aligned_bytes(size_t n) {
  const size_t size = (n + 63) / 64 * 64;
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(64, size));
  if (p == nullptr) fail("cannot allocate {} bytes for the batch-rate measurement", size);
  return AlignedBytes(p);
}

}  // namespace

std::vector<BatchRate> measure_batch_rates(double seconds) {
  if (!(seconds > 0) || seconds > 600) fail("the batch-rate time must be in (0, 600] seconds, got {}", seconds);
  // The scalar path is a fallback and a reference for tests, a hundred times slower: no machine plans with it.
  if (select_isa() == Isa::Scalar) return {};
  // 512 x 2048 Q4_K is 0.6 MB: it stays in the caches of any recent core, as a model's weights do not, so the
  // ratios are the kernels' compute alone (a pass of many tokens is compute-bound on the model too).
  constexpr int64_t kRows = 512, kCols = 2048;
  constexpr GgmlType kType = GgmlType::Q4_K;
  constexpr int kMax = kBatchRateTokens[std::size(kBatchRateTokens) - 1];
  const size_t row_bytes = row_size(kType, kCols);
  const AlignedBytes rows = aligned_bytes(row_bytes * kRows);
  std::mt19937 rng(1234);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> src(kCols);
  for (int64_t r = 0; r < kRows; ++r) {
    for (float& v : src) v = normal(rng);
    quantize_row(kType, src.data(), rows.get() + static_cast<size_t>(r) * row_bytes, kCols);
  }
  TensorView w;
  w.type = kType;
  w.ne = {kCols, kRows, 1, 1};
  w.data = rows.get();
  w.row_bytes = row_bytes;
  ThreadPool pool(1);
  AlignedBytes panels;
  const Kernels& kernels = Kernels::get(select_isa());
  if (const PackedGemm* p = kernels.panels(kType)) {
    panels = aligned_bytes(PackedWeights::panel_bytes(w, *p));
    PackedWeights::write_panels(w, *p, panels.get(), pool);
    w.panels = PackedWeights::rows_at(w, *p, panels.get());
  }
  std::vector<float> x(static_cast<size_t>(kMax * kCols)), y(static_cast<size_t>(kMax * kRows));
  for (float& v : x) v = normal(rng);
  MatmulScratch scratch;
  const double each = seconds / static_cast<double>(std::size(kBatchRateTokens));
  // A slow path (the scalar kernels, a core shared with a busy neighbour) must not stretch the probe: past twice
  // its time the ramp is left unmeasured and the planner keeps its constants.
  const auto give_up =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(2 * seconds));
  std::vector<BatchRate> out;
  for (int tokens : kBatchRateTokens) {
    matmul(w, x.data(), tokens, y.data(), pool, scratch);  // warm: the activations' buffers, the caches
    // The best of three stretches: a shared core loses one now and then to another task.
    double best = 0;
    for (int part = 0; part < 3; ++part) {
      int64_t calls = 0;
      const auto t0 = Clock::now();
      double dt = 0;
      do {
        matmul(w, x.data(), tokens, y.data(), pool, scratch);
        ++calls;
        dt = std::chrono::duration<double>(Clock::now() - t0).count();
      } while (dt < each / 3);
      best = std::max(best, static_cast<double>(calls * tokens) / dt);
      if (Clock::now() > give_up) return {};
    }
    out.push_back({tokens, best});
  }
  const double full = out.back().fraction;
  for (BatchRate& b : out) b.fraction = full > 0 ? b.fraction / full : 0;
  return out;
}

}  // namespace tessera
