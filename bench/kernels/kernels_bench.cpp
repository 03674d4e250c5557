// Throughput of the kernels per weight type and path: vec_dot and gemv (gemm with one token) as GB/s of weights
// streamed (rows in L2, or totalling more than L2, against one activation row: the decode case) and gemm as GOPS
// (2 * rows * tokens * k per call: prefill; 'panels_gemm/' the same on the panels decode streams).
// Filter with --benchmark_filter, e.g. 'vec_dot/avx512/q4_K' or 'gemm/.*/q8_0'; 'stream/' is decode's pattern on
// two threads, 'matmul/' the engine's decode matmul over matrices of a given size, 'attend/' the attention's block
// update (query rows x keys per second), 'attention/' a decode step's attention over one layer's cache (the 1b
// preset's heads, f16 cache).
#include <benchmark/benchmark.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "model/attention.h"
#include "tensor/ggml_type.h"
#include "tensor/kernels.h"
#include "tensor/matmul.h"
#include "tensor/quant.h"
#include "tensor/vec_ops.h"
#include "util/thread_pool.h"

namespace tessera {
namespace {

const GgmlType kTypes[] = {GgmlType::Q4_0,   GgmlType::Q4_1,   GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
                           GgmlType::IQ4_NL, GgmlType::Q2_K,   GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K,
                           GgmlType::Q6_K,   GgmlType::IQ4_XS, GgmlType::F16,  GgmlType::BF16, GgmlType::F32};

std::vector<float> random_floats(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Quantizes one random row and repeats its bytes (quantizing 64 MB with the reference K-quant search is slow).
std::vector<uint8_t> weight_rows(GgmlType t, int64_t k, int64_t rows) {
  const size_t row = row_size(t, k);
  std::vector<uint8_t> one(row * 8);
  for (int i = 0; i < 8; ++i) {
    const auto x = random_floats(static_cast<size_t>(k), 1 + static_cast<unsigned>(i));
    if (t == GgmlType::IQ4_NL || t == GgmlType::IQ4_XS) {
      std::mt19937 rng(static_cast<unsigned>(i));
      for (size_t b = 0; b < row; ++b) one[i * row + b] = static_cast<uint8_t>(rng());
      const size_t bs = type_traits(t).type_size;
      for (size_t b = 0; b < row; b += bs) one[i * row + b + 1] = 0x20;  // finite fp16 d
    } else {
      quantize_row(t, x.data(), one.data() + i * row, k);
    }
  }
  std::vector<uint8_t> w(row * static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) std::copy_n(one.data() + (r % 8) * row, row, w.data() + r * row);
  return w;
}

std::vector<uint8_t> activations(GgmlType weight, int64_t k, int64_t n_tok, const Kernels& kern) {
  const GgmlType at = Kernels::act_type(weight);
  const size_t row = row_size(at, k);
  std::vector<uint8_t> x(row * static_cast<size_t>(n_tok));
  for (int64_t t = 0; t < n_tok; ++t) {
    const auto f = random_floats(static_cast<size_t>(k), 100 + static_cast<unsigned>(t));
    kern.quantize_act(at)(f.data(), x.data() + t * row, k);
  }
  return x;
}

// kbytes of weight rows (k = 4096) against one activation row.
void bench_vec_dot(benchmark::State& state, Isa isa, GgmlType t, int64_t kbytes) {
  const Kernels& kern = Kernels::get(isa);
  const int64_t k = 4096;
  const int64_t rows = std::max<int64_t>(1, kbytes * 1024 / static_cast<int64_t>(row_size(t, k)));
  const auto w = weight_rows(t, k, rows);
  const auto x = activations(t, k, 1, kern);
  const size_t row = row_size(t, k);
  const VecDotFn dot = kern.vec_dot(t);
  float sink = 0;
  for (auto _ : state) {
    for (int64_t r = 0; r < rows; ++r) sink += dot(w.data() + r * row, x.data(), k);
    benchmark::DoNotOptimize(sink);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(w.size()));
}

void bench_gemm(benchmark::State& state, Isa isa, GgmlType t) {
  const Kernels& kern = Kernels::get(isa);
  const int64_t k = 2048, rows = 256, n_tok = 512;
  const auto w = weight_rows(t, k, rows);
  const auto x = activations(t, k, n_tok, kern);
  std::vector<float> y(static_cast<size_t>(rows * n_tok));
  const GemmFn gemm = kern.gemm(t);
  for (auto _ : state) {
    gemm(w.data(), row_size(t, k), rows, x.data(), row_size(Kernels::act_type(t), k), n_tok, k, y.data(), rows);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GOPS"] = benchmark::Counter(static_cast<double>(2 * rows * n_tok * k) * state.iterations() / 1e9,
                                              benchmark::Counter::kIsRate);
}

// The decode case as the engine runs it: gemm with one token (the multi-row gemv kernels) over kbytes of weight
// rows (k = 2048), against the vec_dot loop above on the same bytes.
void bench_gemv(benchmark::State& state, Isa isa, GgmlType t, int64_t kbytes) {
  const Kernels& kern = Kernels::get(isa);
  const int64_t k = 2048;
  const int64_t rows = std::max<int64_t>(1, kbytes * 1024 / static_cast<int64_t>(row_size(t, k)));
  const auto w = weight_rows(t, k, rows);
  const auto x = activations(t, k, 1, kern);
  std::vector<float> y(static_cast<size_t>(rows));
  const GemmFn gemm = kern.gemm(t);
  for (auto _ : state) {
    gemm(w.data(), row_size(t, k), rows, x.data(), row_size(Kernels::act_type(t), k), 1, k, y.data(), rows);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(w.size()));
}

// The same decode case on panels (Kernels::panels: what the weights' copy holds for these types), reporting the
// rows' bytes per second so the figure compares with gemv's.
void bench_panels(benchmark::State& state, Isa isa, GgmlType t, int64_t kbytes) {
  const Kernels& kern = Kernels::get(isa);
  const PackedGemm* fns = kern.panels(t);
  const int64_t k = 2048;
  const int64_t rows = std::max<int64_t>(16, kbytes * 1024 / static_cast<int64_t>(row_size(t, k)) / 16 * 16);
  const auto w = weight_rows(t, k, rows);
  const auto x = activations(t, k, 1, kern);
  const size_t bytes = static_cast<size_t>(rows / fns->group_rows) * fns->group_bytes(k);
  std::vector<uint8_t> storage(bytes + 64);
  uint8_t* p = storage.data() + (64 - reinterpret_cast<uintptr_t>(storage.data()) % 64) % 64;
  fns->pack(w.data(), row_size(t, k), rows, k, p);
  std::vector<float> y(static_cast<size_t>(rows));
  for (auto _ : state) {
    fns->gemm(p, rows, x.data(), row_size(Kernels::act_type(t), k), 1, k, y.data(), rows);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(w.size()));
}

// Small token counts (speculative decoding, batched sequences): where the repacking gemm starts to beat a
// vec_dot per (row, token). Reports weight GB/s per token (bytes * tokens / time).
void bench_gemm_tokens(benchmark::State& state, Isa isa, GgmlType t, int64_t n_tok) {
  const Kernels& kern = Kernels::get(isa);
  const int64_t k = 2048, rows = 1024;
  const auto w = weight_rows(t, k, rows);
  const auto x = activations(t, k, n_tok, kern);
  std::vector<float> y(static_cast<size_t>(rows * n_tok));
  const GemmFn gemm = kern.gemm(t);
  for (auto _ : state) {
    gemm(w.data(), row_size(t, k), rows, x.data(), row_size(Kernels::act_type(t), k), n_tok, k, y.data(), rows);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(w.size()) * n_tok);
}

// GOPS of a layout packed at setup: rows x k = 2048 against n_tok tokens on one thread.
void run_packed_gemm(benchmark::State& state, const Kernels& kern, GgmlType t, const PackedGemm* fns, int64_t rows,
                     int64_t n_tok) {
  const int64_t k = 2048;
  const auto w = weight_rows(t, k, rows);
  const auto x = activations(t, k, n_tok, kern);
  const size_t bytes = static_cast<size_t>(rows / fns->group_rows) * fns->group_bytes(k);
  std::vector<uint8_t> storage(bytes + 64);
  uint8_t* p = storage.data() + (64 - reinterpret_cast<uintptr_t>(storage.data()) % 64) % 64;
  fns->pack(w.data(), row_size(t, k), rows, k, p);
  std::vector<float> y(static_cast<size_t>(rows * n_tok));
  for (auto _ : state) {
    fns->gemm(p, rows, x.data(), row_size(Kernels::act_type(t), k), n_tok, k, y.data(), rows);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GOPS"] = benchmark::Counter(2.0 * static_cast<double>(rows * k * n_tok) * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
}

// Prefill on weights packed at load (--repack), the shape of one 1B projection (2048 x 2048): GOPS by token count,
// so a pipeline's micro-batch size can be set where the kernel is still near its full rate.
void bench_packed_tokens(benchmark::State& state, Isa isa, GgmlType t, int64_t n_tok) {
  const Kernels& kern = Kernels::get(isa);
  run_packed_gemm(state, kern, t, kern.packed(t), 2048, n_tok);
}

// Prefill on the panels (Kernels::panels: the layout decode streams, which serves every token count for the types
// whose max_tokens is 0): 256 rows (in L2) x 512 tokens.
void bench_panels_gemm(benchmark::State& state, Isa isa, GgmlType t) {
  const Kernels& kern = Kernels::get(isa);
  run_packed_gemm(state, kern, t, kern.panels(t), 256, 512);
}

// The roofline for vec_dot: summing the same number of bytes with plain 64-bit loads, four independent streams,
// with the same 4 KB software prefetch distance as the kernels.
void bench_read(benchmark::State& state, int64_t mbytes) {
  std::vector<uint64_t> buf(static_cast<size_t>(mbytes) * (1 << 20) / 8, 1);
  for (auto _ : state) {
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t i = 0; i < buf.size(); i += 4) {
      if (i % 8 == 0) __builtin_prefetch(buf.data() + i + 512);
      s0 += buf[i];
      s1 += buf[i + 1];
      s2 += buf[i + 2];
      s3 += buf[i + 3];
    }
    benchmark::DoNotOptimize(s0 + s1 + s2 + s3);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(buf.size() * 8));
}

// Decode's access pattern: two threads streaming ~600 MB of panels (more than any cache) against one activation row
// in 256-row takes. "own": each thread works through its own half front to back, as run_dynamic's ranges do;
// "interleaved": take i goes to thread i % 2, as one shared counter of takes did; "rows": "own" over the same
// weights as rows (the plain gemm, what the copy held before the path had panels); "read": the same threads summing
// the panels' bytes with plain loads (bench_read's loop). Compare their GB/s within one run.
// Memory in transparent huge pages, as the engine's weight copy is (model_weights.cpp).
struct HugeBuffer {
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, Free> p;
  explicit HugeBuffer(size_t bytes = 0) {
    constexpr size_t kHuge = size_t{2} << 20;
    if (bytes == 0) return;
    const size_t n = (bytes + kHuge - 1) / kHuge * kHuge;
    p.reset(static_cast<uint8_t*>(std::aligned_alloc(kHuge, n)));
    madvise(p.get(), n, MADV_HUGEPAGE);
  }
  uint8_t* data() const { return p.get(); }
};

struct StreamSet {
  HugeBuffer storage;
  HugeBuffer rows_storage;
  const uint8_t* panels = nullptr;
  const PackedGemm* fns = nullptr;
  GemmFn gemm = nullptr;
  GgmlType type = GgmlType::Q4_K;
  size_t bytes = 0;
  int64_t rows = 0;
  int64_t k = 2048;
  std::vector<uint8_t> x;
};

const StreamSet& stream_set(Isa isa, GgmlType t, int64_t k = 2048) {
  static std::vector<std::pair<std::tuple<Isa, GgmlType, int64_t>, std::unique_ptr<StreamSet>>> sets;
  for (const auto& [key, set] : sets) {
    if (key == std::tuple{isa, t, k}) return *set;
  }
  auto s = std::make_unique<StreamSet>();
  const Kernels& kern = Kernels::get(isa);
  s->type = t;
  s->k = k;
  s->fns = kern.panels(t);
  s->gemm = kern.gemm(t);
  s->rows = (int64_t{600} << 20) / static_cast<int64_t>(row_size(t, s->k)) / 512 * 512;
  const auto rows = weight_rows(t, s->k, 64);
  const size_t group = s->fns->group_bytes(s->k);
  s->bytes = static_cast<size_t>(s->rows / s->fns->group_rows) * group;
  s->storage = HugeBuffer(s->bytes);
  uint8_t* p = s->storage.data();
  for (int64_t r = 0; r < s->rows; r += 64) {
    s->fns->pack(rows.data(), row_size(t, s->k), 64, s->k, p + static_cast<size_t>(r / s->fns->group_rows) * group);
  }
  s->panels = p;
  s->rows_storage = HugeBuffer(row_size(t, s->k) * static_cast<size_t>(s->rows));
  for (int64_t r = 0; r < s->rows; r += 64) {
    std::copy(rows.begin(), rows.end(), s->rows_storage.data() + r * static_cast<int64_t>(row_size(t, s->k)));
  }
  s->x = activations(t, s->k, 1, kern);
  sets.emplace_back(std::tuple{isa, t, k}, std::move(s));
  return *sets.back().second;
}

enum class Stream { Own, OwnL2, OwnNone, Interleaved, Rows, Read };

void bench_stream(benchmark::State& state, Isa isa, GgmlType type, Stream mode) {
  const StreamSet& s = stream_set(isa, type);
  const int64_t t = state.thread_index(), n = state.threads();
  constexpr int64_t kTake = 256;
  const size_t group = s.fns->group_bytes(s.k);
  const size_t row = row_size(type, s.k);
  std::vector<float> y(static_cast<size_t>(s.rows));
  const auto take = [&](int64_t r) {
    const int64_t count = std::min(kTake, s.rows - r);
    if (mode == Stream::Rows) {
      s.gemm(s.rows_storage.data() + static_cast<size_t>(r) * row, row, count, s.x.data(), s.x.size(), 1, s.k,
             y.data() + r, s.rows);
      return;
    }
    const auto gemm = mode == Stream::OwnL2     ? s.fns->gemm_l2
                      : mode == Stream::OwnNone ? s.fns->gemm_unprefetched
                                                : s.fns->gemm;
    gemm(s.panels + static_cast<size_t>(r / s.fns->group_rows) * group, count, s.x.data(), s.x.size(), 1, s.k,
         y.data() + r, s.rows);
  };
  const int64_t half0 = s.rows * t / n, half1 = s.rows * (t + 1) / n;
  for (auto _ : state) {
    if (mode == Stream::Read) {
      const auto* w = reinterpret_cast<const uint64_t*>(s.panels);
      const size_t w0 = s.bytes / 8 * static_cast<size_t>(t) / static_cast<size_t>(n) / 4 * 4;
      const size_t w1 = s.bytes / 8 * static_cast<size_t>(t + 1) / static_cast<size_t>(n) / 4 * 4;
      uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      for (size_t i = w0; i < w1; i += 4) {
        if (i % 8 == 0) __builtin_prefetch(w + i + 512);
        s0 += w[i];
        s1 += w[i + 1];
        s2 += w[i + 2];
        s3 += w[i + 3];
      }
      benchmark::DoNotOptimize(s0 + s1 + s2 + s3);
    } else if (mode == Stream::Interleaved) {
      for (int64_t r = t * kTake; r < s.rows; r += n * kTake) take(r);
    } else {
      for (int64_t r = half0; r < half1; r += kTake) take(r);
    }
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(s.bytes) / n);
}

// The access order alone ("Panels read front to back" in docs/perf-log/panels.md): each thread sums its half of 600 MB
// in 2304-byte blocks (a Q4_K panel block), each block's 36 lines either in order ("in_order") or its last 4 first,
// as the panels' kernels read them while the scales sat behind the levels ("last_lines_first"). No software
// prefetch: what the hardware prefetcher makes of each order.
void bench_read_order(benchmark::State& state, bool last_lines_first) {
  constexpr size_t kBlock = 2304, kLines = kBlock / 64, kFirst = kLines - 4;
  static const HugeBuffer buf = [] {
    HugeBuffer b(size_t{600} << 20);
    std::memset(b.data(), 1, size_t{600} << 20);
    return b;
  }();
  const size_t blocks = (size_t{600} << 20) / kBlock;
  const auto t = static_cast<size_t>(state.thread_index()), n = static_cast<size_t>(state.threads());
  const size_t b0 = blocks * t / n, b1 = blocks * (t + 1) / n;
  for (auto _ : state) {
    uint64_t sum = 0;
    for (size_t b = b0; b < b1; ++b) {
      const auto* blk = reinterpret_cast<const uint64_t*>(buf.data() + b * kBlock);
      const auto line = [&](size_t l) {
        for (size_t i = 0; i < 8; ++i) sum += blk[8 * l + i];
      };
      if (last_lines_first) {
        for (size_t l = kFirst; l < kLines; ++l) line(l);
        for (size_t l = 0; l < kFirst; ++l) line(l);
      } else {
        for (size_t l = 0; l < kLines; ++l) line(l);
      }
    }
    benchmark::DoNotOptimize(sum);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>((b1 - b0) * kBlock));
}

// The engine's decode path itself (matmul on a 2-thread pool, each call naming the next so the worker reads its
// start ahead) over consecutive matrices of `rows` rows carved from the stream set's panels: set beside "own" and
// across sizes, what each call costs beyond its stream (fork and join, cold starts, the threads' last takes).
// Its in-process comparisons (--benchmark_enable_random_interleaving) found the prefetch distance of
// tensor/kernels/x86/stream_prefetch.h.
void bench_matmul(benchmark::State& state, Isa isa, GgmlType type, int64_t k, int64_t rows, int threads) {
  const StreamSet& s = stream_set(isa, type, k);
  ThreadPool pool(threads);
  MatmulScratch scratch;
  scratch.kernels = &Kernels::get(isa);
  const size_t group = s.fns->group_bytes(s.k);
  const int64_t n_mat = s.rows / rows;
  std::vector<TensorView> views(static_cast<size_t>(n_mat));
  for (int64_t m = 0; m < n_mat; ++m) {
    TensorView& v = views[static_cast<size_t>(m)];
    v.type = type;
    v.ne = {s.k, rows, 1, 1};
    v.row_bytes = row_size(type, s.k);
    v.data = s.rows_storage.data() + static_cast<size_t>(m * rows) * v.row_bytes;
    v.panels = {s.panels + static_cast<size_t>(m * rows / s.fns->group_rows) * group, s.fns, group, s.fns->group_rows};
  }
  std::vector<float> x(static_cast<size_t>(s.k), 0.5f), y(static_cast<size_t>(rows));
  for (auto _ : state) {
    for (int64_t m = 0; m < n_mat; ++m) {
      const TensorView* next = m + 1 < n_mat ? &views[static_cast<size_t>(m + 1)] : nullptr;
      matmul(views[static_cast<size_t>(m)], x.data(), 1, y.data(), pool, scratch,
             next != nullptr ? NextWeights{&next, 1} : NextWeights{});
    }
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * n_mat * rows / s.fns->group_rows * static_cast<int64_t>(group));
}

// One block of 64 keys (head size 64, the 1b preset's) folded into n_rows query rows that all see it: 8 rows are a
// decode step's heads of one KV head in the 1b preset, 64 a prompt's work item.
void bench_attend(benchmark::State& state, Isa isa, int64_t n_rows) {
  constexpr int64_t kD = 64;
  struct Free {
    void operator()(float* p) const { ::operator delete[](p, std::align_val_t{64}); }
  };
  const auto floats = [](int64_t n) {
    return std::unique_ptr<float[], Free>(
        static_cast<float*>(::operator new[](static_cast<size_t>(n) * sizeof(float), std::align_val_t{64})));
  };
  auto q = floats(n_rows * kD), o = floats(n_rows * kD), m = floats(n_rows), l = floats(n_rows);
  auto k = floats(kAttnKeys * kD), v = floats(kAttnKeys * kD), kt = floats(kAttnKeys * kD);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int64_t i = 0; i < n_rows * kD; ++i) q[static_cast<size_t>(i)] = u(rng) * 0.125f;
  for (int64_t i = 0; i < kAttnKeys * kD; ++i) {
    k[static_cast<size_t>(i)] = u(rng);
    v[static_cast<size_t>(i)] = u(rng);
  }
  std::fill(o.get(), o.get() + n_rows * kD, 0.0f);
  std::fill(m.get(), m.get() + n_rows, -1e30f);
  std::fill(l.get(), l.get() + n_rows, 0.0f);
  const std::vector<int32_t> pos(static_cast<size_t>(n_rows), static_cast<int32_t>(kAttnKeys - 1));
  const AttnRows rows{q.get(), o.get(), m.get(), l.get(), pos.data(), n_rows};
  const AttnKeys keys{k.get(), v.get(), kAttnKeys, 0, kD, kD, kt.get()};
  const AttnUpdateFn attend = VecOps::get(isa).attend;
  for (auto _ : state) {
    attend(rows, keys);
    benchmark::DoNotOptimize(o.get());
  }
  state.SetItemsProcessed(state.iterations() * n_rows * kAttnKeys);
}

// The attention of the last n_tokens of a context of ctx tokens (1: a decode step; more: a prompt's batch) in one
// layer of the 1b preset (32 query heads over 4 KV heads of 64, f16 cache), on one thread: the cache conversion
// and the block updates together.
void bench_attention(benchmark::State& state, Isa isa, int64_t ctx, int64_t n_tokens) {
  const AttentionShape shape{32, 4, 64, 64};
  KvCache cache(KvCacheConfig{1, 1, ctx, 256, 256, GgmlType::F16, 4});
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> k(256), v(256), q(static_cast<size_t>(n_tokens * 32 * 64)), out(q.size());
  for (int64_t p = 0; p < ctx; ++p) {
    for (auto& x : k) x = u(rng);
    for (auto& x : v) x = u(rng);
    cache.store(0, 0, p, k.data(), v.data());
  }
  cache.set_length(0, ctx);
  for (auto& x : q) x = u(rng);
  Batch batch;
  for (int64_t t = ctx - n_tokens; t < ctx; ++t) batch.add(0, 0, static_cast<int32_t>(t), true);
  ThreadPool pool(1);
  AttentionScratch scratch;
  const VecOps& ops = VecOps::get(isa);
  for (auto _ : state) {
    attention(shape, cache, 0, batch, q.data(), out.data(), pool, ops, scratch);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * ctx * n_tokens);
}

// One fork and join of the pool with next to no work in it: what each decode matmul pays on top of its stream
// (docs/perf-log/threads.md, "Where two threads lose to one"). The job captures several references, as the engine's do.
void bench_pool_run(benchmark::State& state, int threads) {
  ThreadPool pool(threads);
  std::vector<int64_t> sums(static_cast<size_t>(threads) * 16, 0);
  int64_t a = 1, b = 2, c = 3;
  for (auto _ : state) {
    pool.run([&](int t) { sums[static_cast<size_t>(t) * 16] += a + b + c + t; });
  }
  benchmark::DoNotOptimize(sums.data());
}

int register_all() {
  benchmark::RegisterBenchmark("pool/run/2threads", bench_pool_run, 2)->MinTime(0.5);
  for (int64_t mb : {1, 64, 512}) {
    benchmark::RegisterBenchmark(("read/" + std::to_string(mb) + "MB").c_str(), bench_read, mb)
        ->Unit(benchmark::kMillisecond)
        ->MinTime(0.2);
  }
  for (auto [name, last_first] : {std::pair{"in_order", false}, std::pair{"last_lines_first", true}}) {
    benchmark::RegisterBenchmark((std::string("order/") + name).c_str(), bench_read_order, last_first)
        ->Threads(1)
        ->Threads(2)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond)
        ->MinTime(0.5);
  }
  const CpuFeatures f = detect_cpu_features();
  for (Isa isa : {Isa::Avx2, Isa::Avx512}) {
    if (!isa_supported(isa, f)) continue;
    for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q4_0, GgmlType::Q8_0}) {
      if (Kernels::get(isa).panels(t) == nullptr) continue;
      // "own_l2": "own" with the layout's kernel that prefetches into L2 (PackedGemm::gemm_l2), where it has one;
      // "own_none": with its kernel without software prefetch (PackedGemm::gemm_unprefetched).
      for (auto [name, mode] : {std::pair{"own", Stream::Own}, std::pair{"own_l2", Stream::OwnL2},
                                std::pair{"own_none", Stream::OwnNone}, std::pair{"interleaved", Stream::Interleaved},
                                std::pair{"rows", Stream::Rows}, std::pair{"read", Stream::Read}}) {
        if (mode == Stream::OwnL2 && Kernels::get(isa).panels(t)->gemm_l2 == nullptr) continue;
        if (mode == Stream::OwnNone && Kernels::get(isa).panels(t)->gemm_unprefetched == nullptr) continue;
        const std::string label =
            std::string("stream/") + std::string(isa_name(isa)) + "/" + std::string(type_name(t)) + "/" + name;
        benchmark::RegisterBenchmark(label.c_str(), bench_stream, isa, t, mode)
            ->Threads(1)
            ->Threads(2)
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond)
            ->MinTime(0.5);
      }
      // 2048 rows: 1b's attention output in Q4_0 (2.3 MB); 262144: one long stream per thread. k = 5632: 1b's FFN
      // down, 2048 rows.
      for (auto [k, rows] :
           {std::pair<int64_t, int64_t>{2048, 512}, {2048, 2048}, {2048, 8192}, {2048, 262144}, {5632, 2048}}) {
        // /t1: the same calls on a pool of one thread (no fork or join), to set the calls' cost apart from their
        // stream's.
        for (int threads : {2, 1}) {
          const std::string label = std::string("matmul/") + std::string(isa_name(isa)) + "/" +
                                    std::string(type_name(t)) + "/k" + std::to_string(k) + "/" + std::to_string(rows) +
                                    "rows" + (threads == 1 ? "/t1" : "");
          benchmark::RegisterBenchmark(label.c_str(), bench_matmul, isa, t, k, rows, threads)
              ->UseRealTime()
              ->Unit(benchmark::kMillisecond)
              ->MinTime(0.2);
        }
      }
    }
  }
  for (Isa isa : {Isa::Avx2, Isa::Avx512, Isa::Scalar}) {
    if (!isa_supported(isa, f)) continue;
    for (int64_t ctx : {32, 256, 2048}) {
      for (int64_t n_tokens : {1, 64}) {
        const std::string what = n_tokens == 1 ? "decode" : "prompt" + std::to_string(n_tokens);
        benchmark::RegisterBenchmark(
            ("attention/" + std::string(isa_name(isa)) + "/" + what + "/ctx" + std::to_string(ctx)).c_str(),
            bench_attention, isa, ctx, n_tokens)
            ->Unit(benchmark::kMicrosecond)
            ->MinTime(0.2);
      }
    }
    for (int64_t n_rows : {1, 8, 64}) {
      benchmark::RegisterBenchmark(
          ("attend/" + std::string(isa_name(isa)) + "/" + std::to_string(n_rows) + "rows").c_str(), bench_attend, isa,
          n_rows)
          ->MinTime(0.2);
    }
  }
  for (Isa isa : {Isa::Avx2, Isa::Avx512, Isa::Scalar}) {
    if (!isa_supported(isa, f)) continue;
    const std::string path(isa_name(isa));
    for (GgmlType t : kTypes) {
      const std::string name(type_name(t));
      // 128 KB: compute-bound (L2); 64 MB: the brief's larger-than-L2 set (L3 here); 512 MB: DRAM.
      for (int64_t kb : {int64_t{128}, int64_t{64} << 10, int64_t{512} << 10}) {
        const std::string size = kb < 1024 ? std::to_string(kb) + "KB" : std::to_string(kb >> 10) + "MB";
        benchmark::RegisterBenchmark(("vec_dot/" + path + "/" + name + "/" + size).c_str(), bench_vec_dot, isa, t, kb)
            ->Unit(benchmark::kMillisecond)
            ->MinTime(0.2);
        benchmark::RegisterBenchmark(("gemv/" + path + "/" + name + "/" + size).c_str(), bench_gemv, isa, t, kb)
            ->Unit(benchmark::kMillisecond)
            ->MinTime(0.2);
        if (Kernels::get(isa).panels(t) != nullptr) {
          benchmark::RegisterBenchmark(("panels/" + path + "/" + name + "/" + size).c_str(), bench_panels, isa, t, kb)
              ->Unit(benchmark::kMillisecond)
              ->MinTime(0.2);
        }
      }
      if (Kernels::get(isa).panels(t) != nullptr) {
        benchmark::RegisterBenchmark(("panels_gemm/" + path + "/" + name).c_str(), bench_panels_gemm, isa, t)
            ->Unit(benchmark::kMillisecond)
            ->MinTime(0.2);
      }
      for (int64_t n : {1, 2, 3, 4, 8, 12, 16, 24, 32}) {
        benchmark::RegisterBenchmark(("gemm_tokens/" + path + "/" + name + "/" + std::to_string(n)).c_str(),
                                     bench_gemm_tokens, isa, t, n)
            ->Unit(benchmark::kMillisecond)
            ->MinTime(0.2);
      }
      if (Kernels::get(isa).packed(t) != nullptr) {
        for (int64_t n : {16, 24, 32, 48, 64, 96, 128, 256, 512}) {
          benchmark::RegisterBenchmark(("packed_tokens/" + path + "/" + name + "/" + std::to_string(n)).c_str(),
                                       bench_packed_tokens, isa, t, n)
              ->Unit(benchmark::kMillisecond)
              ->MinTime(0.2);
        }
      }
      benchmark::RegisterBenchmark(("gemm/" + path + "/" + name).c_str(), bench_gemm, isa, t)
          ->Unit(benchmark::kMillisecond)
          ->MinTime(0.2);
    }
  }
  return 0;
}

const int kRegistered = register_all();

}  // namespace
}  // namespace tessera

BENCHMARK_MAIN();
