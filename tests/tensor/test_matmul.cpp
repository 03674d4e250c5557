// matmul against the scalar reference and identical with one or two threads (dynamic or static row chunks);
// matmul_multi equal to separate matmuls, including weights that need two activation formats; matmul_each too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "support/isa_test.h"
#include "tensor/fp16.h"
#include "tensor/kernels.h"
#include "tensor/matmul.h"
#include "tensor/packed_weights.h"
#include "tensor/quant.h"

namespace tessera {
namespace {

struct Weight {
  std::vector<uint8_t> bytes;
  TensorView view;
};

Weight make_weight(GgmlType t, int64_t rows, int64_t k, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.05f);
  std::vector<float> f(static_cast<size_t>(k));
  Weight w;
  const size_t row = row_size(t, k);
  w.bytes.resize(row * static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    for (auto& v : f) v = dist(rng);
    if (t == GgmlType::IQ4_NL || t == GgmlType::IQ4_XS) {
      // No quantizer for them: random nibbles and scales under a small d (a block's first 2 bytes).
      const TypeTraits& tr = type_traits(t);
      uint8_t* p = w.bytes.data() + r * row;
      for (size_t i = 0; i < row; ++i) p[i] = static_cast<uint8_t>(rng());
      for (int64_t b = 0; b < k / tr.block_size; ++b) {
        const uint16_t d = fp32_to_fp16(0.002f * f[static_cast<size_t>(b)]);
        std::memcpy(p + static_cast<size_t>(b) * tr.type_size, &d, 2);
      }
      continue;
    }
    quantize_row(t, f.data(), w.bytes.data() + r * row, k);
  }
  w.view.type = t;
  w.view.ne = {k, rows, 1, 1};
  w.view.data = w.bytes.data();
  w.view.row_bytes = row;
  return w;
}

std::vector<float> inputs(int64_t n_tokens, int64_t k) {
  std::mt19937 rng(99);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n_tokens * k));
  for (auto& v : x) v = dist(rng);
  return x;
}

// The reference: quant.h's activation conversion and vec_dot_row for every (row, token).
void expect_matches_reference(const Weight& w, const std::vector<float>& x, int64_t n_tokens,
                              const std::vector<float>& y) {
  const int64_t k = w.view.cols();
  const int64_t n = w.view.rows();
  const GgmlType at = Kernels::act_type(w.view.type);
  std::vector<uint8_t> act(row_size(at, k));
  std::vector<float> wf(static_cast<size_t>(k));
  for (int64_t t = 0; t < n_tokens; ++t) {
    quantize_row_activation(at, x.data() + t * k, act.data(), k);
    std::vector<float> xf(static_cast<size_t>(k));
    dequantize_row(at, act.data(), xf.data(), k);
    for (int64_t r = 0; r < n; ++r) {
      dequantize_row(w.view.type, w.view.row(r), wf.data(), k);
      double want = 0, mag = 0;
      for (int64_t i = 0; i < k; ++i) {
        want += static_cast<double>(wf[i]) * xf[i];
        mag += std::fabs(static_cast<double>(wf[i]) * xf[i]);
      }
      if (at != GgmlType::F32) want = vec_dot_row(w.view.type, w.view.row(r), act.data(), k);
      EXPECT_NEAR(y[t * n + r], want, 1e-5 * mag + 1e-6) << type_name(w.view.type) << " row " << r << " tok " << t;
    }
  }
}

// k = 4096: rows long enough that the chunks shrink to 32 or 16 rows (at most 64 KB of weights each).
TEST(Matmul, OneAndTwoThreadsMatchTheReference) {
  for (const auto& [t, k] : {std::pair{GgmlType::Q4_0, 512},
                             {GgmlType::Q8_0, 512},
                             {GgmlType::Q4_K, 512},
                             {GgmlType::Q6_K, 512},
                             {GgmlType::F16, 512},
                             {GgmlType::Q8_0, 4096},
                             {GgmlType::Q4_K, 4096}}) {
    const Weight w = make_weight(t, 300, k, 5);
    for (int64_t n_tokens : {1, 2, 5, 20}) {
      const auto x = inputs(n_tokens, k);
      std::vector<float> y1(static_cast<size_t>(300 * n_tokens)), y2(y1.size());
      ThreadPool one(1), two(2);
      MatmulScratch s1, s2;
      matmul(w.view, x.data(), n_tokens, y1.data(), one, s1);
      matmul(w.view, x.data(), n_tokens, y2.data(), two, s2);
      EXPECT_EQ(y1, y2) << type_name(t) << " tokens " << n_tokens;
      expect_matches_reference(w, x, n_tokens, y2);
    }
  }
}

TEST(Matmul, MultiEqualsSeparateMatmuls) {
  const int64_t k = 768;
  // q/k/v of a Q4_K_M file: two K-quant types (one activation format) plus a Q8_0 (a second format); then the
  // formats alternating, and a third format (Q4_1's Q8_1) that is converted on its own.
  const Weight wq = make_weight(GgmlType::Q4_K, 1100, k, 1);
  const Weight wk = make_weight(GgmlType::Q6_K, 70, k, 2);
  const Weight wv = make_weight(GgmlType::Q8_0, 650, k, 3);
  const Weight w1 = make_weight(GgmlType::Q4_1, 130, k, 4);
  const Weight w0 = make_weight(GgmlType::Q8_0, 90, k, 5);
  const std::vector<std::vector<const Weight*>> sets = {
      {&wq, &wk, &wv}, {&wv, &wq, &w0}, {&w0, &w1, &wq, &wv, &wk}, {&w1, &wq, &w1}};
  for (const auto& set : sets) {
    for (int threads : {1, 2}) {
      for (int64_t n_tokens : {1, 3, 9}) {
        const auto x = inputs(n_tokens, k);
        ThreadPool pool(threads);
        MatmulScratch scratch;
        const size_t n = set.size();
        std::vector<std::vector<float>> want(n), got(n);
        std::vector<MatmulOut> outs(n);
        for (size_t i = 0; i < n; ++i) {
          const auto size = static_cast<size_t>(set[i]->view.rows() * n_tokens);
          want[i].resize(size);
          got[i].assign(size, std::nanf(""));
          matmul(set[i]->view, x.data(), n_tokens, want[i].data(), pool, scratch);
          outs[i] = {&set[i]->view, got[i].data()};
        }
        matmul_multi(outs, x.data(), n_tokens, pool, scratch);
        for (size_t i = 0; i < n; ++i) {
          EXPECT_EQ(got[i], want[i]) << "set of " << n << ", output " << i << ", " << threads << " threads, "
                                     << n_tokens << " tokens";
        }
      }
    }
  }
}

// The weights of the next call only decide what idle threads read ahead: outputs are bit-identical with and
// without them, and each thread's region is the start of the range run_dynamic gives it (64-row chunks numbered
// across the next call's weights, thread t's range from chunk total * t / threads to the next thread's), within
// the weight where it starts, capped at 256 KB.
TEST(Matmul, NextWeightsAreReadAheadFromTheStartOfEachThreadsRange) {
  const int64_t k = 512;
  const Weight small = make_weight(GgmlType::Q6_K, 70, k, 2);  // under 256 rows: 5 chunks of 16
  const Weight big = make_weight(GgmlType::Q8_0, 1100, k, 3);  // 18 chunks
  const TensorView* next[] = {&small.view, &big.view};
  for (int threads : {1, 2, 3}) {
    for (int64_t n_tokens : {1, 3, 5}) {
      const auto x = inputs(n_tokens, k);
      ThreadPool pool(threads);
      MatmulScratch scratch;
      std::vector<float> want(static_cast<size_t>(1100 * n_tokens)), got(want.size(), std::nanf(""));
      matmul(big.view, x.data(), n_tokens, want.data(), pool, scratch);
      matmul(big.view, x.data(), n_tokens, got.data(), pool, scratch, next);
      EXPECT_EQ(got, want) << threads << " threads, " << n_tokens << " tokens";

      std::vector<ThreadPool::ReadAhead> regions;
      read_ahead_regions(next, n_tokens, threads, regions);
      if (threads == 1 || n_tokens > 3) {
        EXPECT_TRUE(regions.empty()) << "no dynamic takes: nothing to read ahead";
        continue;
      }
      ASSERT_EQ(regions.size(), static_cast<size_t>(threads));
      for (int t = 0; t < threads; ++t) {
        const int64_t c = 23 * t / threads;
        const int64_t range = 23 * (t + 1) / threads - c;
        const TensorView& w = c < 5 ? small.view : big.view;
        const int64_t rows = c < 5 ? 16 : 64;
        const int64_t r0 = (c < 5 ? c : c - 5) * rows;
        const int64_t r1 = std::min(w.rows(), r0 + range * rows);
        EXPECT_EQ(regions[t].data, w.row(r0)) << "thread " << t;
        EXPECT_EQ(regions[t].bytes, std::min<size_t>(static_cast<size_t>(r1 - r0) * w.row_bytes, 256 << 10));
      }
    }
  }
}

// The experts of a MoE layer: slices of one tensor (on and off a panel boundary) and other weights, each with its
// own input and token count, in one pass: each output bit-identical to its own matmul, on rows, panels and tiles.
TEST(Matmul, EachEqualsSeparateMatmuls) {
  const Isa isa = best_isa(detect_cpu_features());
  const Kernels& kernels = Kernels::get(isa);
  const int64_t k = 512;
  Weight experts = make_weight(GgmlType::Q4_K, 6 * 96, k, 11);
  std::vector<uint8_t> storage;
  if (const PackedGemm* fns = kernels.panels(GgmlType::Q4_K)) {
    storage.resize(PackedWeights::panel_bytes(experts.view, *fns) + 64);
    uint8_t* p = storage.data() + (64 - reinterpret_cast<uintptr_t>(storage.data()) % 64) % 64;
    ThreadPool pool(2);
    PackedWeights::write_panels(experts.view, *fns, p, pool);
    experts.view.panels = PackedWeights::rows_at(experts.view, *fns, p);
  }
  const Weight other[2] = {make_weight(GgmlType::Q6_K, 130, k, 12), make_weight(GgmlType::Q8_0, 70, k, 13)};
  std::vector<TensorView> views;
  for (int64_t e : {0, 2, 5}) views.push_back(experts.view.slice_rows(e * 96, 96));
  views.push_back(experts.view.slice_rows(40, 100));  // off a panel boundary: rows
  views.push_back(other[0].view);
  views.push_back(other[1].view);
  // Decode-sized jobs, then prefill-sized ones (the tiles, on and off a panel); jobs 0 and 1 share their input, as
  // an expert's gate and up do. Each split: every row chunk from a shared counter, and whole jobs per thread (more
  // jobs than threads, then fewer).
  const std::vector<std::vector<int64_t>> token_sets = {{1, 3, 2, 5, 1, 17}, {40, 64, 20, 50, 9, 70}};
  for (const auto& tokens : token_sets) {
    for (EachSplit split : {EachSplit::Chunks, EachSplit::WholeJobs}) {
      for (size_t n_jobs : {views.size(), size_t{3}}) {
        for (int threads : {1, 2}) {
          ThreadPool pool(threads);
          MatmulScratch scratch;
          scratch.kernels = &kernels;
          std::vector<std::vector<float>> xs, want, got;
          std::vector<MatmulJob> jobs;
          for (size_t i = 0; i < n_jobs; ++i) {
            const int64_t t = i == 1 ? tokens[0] : tokens[i];
            xs.push_back(inputs(t, k));
            for (auto& v : xs.back()) v *= static_cast<float>(i + 1);  // inputs differ per job
            const auto size = static_cast<size_t>(views[i].rows() * t);
            want.emplace_back(size);
            got.emplace_back(size, std::nanf(""));
          }
          for (size_t i = 0; i < n_jobs; ++i) {
            const float* x = xs[i == 1 ? 0 : i].data();
            const int64_t t = i == 1 ? tokens[0] : tokens[i];
            matmul(views[i], x, t, want[i].data(), pool, scratch);
            jobs.push_back({&views[i], x, t, got[i].data()});
          }
          matmul_each(jobs, pool, scratch, split);
          for (size_t i = 0; i < n_jobs; ++i) {
            EXPECT_EQ(got[i], want[i]) << "job " << i << " of " << n_jobs << ", " << jobs[i].n_tokens << " tokens, "
                                       << threads << " threads, split " << static_cast<int>(split);
          }
        }
      }
    }
  }
}

// Weights as panels (what the weights' copy holds on the SIMD paths): every token count the panels serve and the
// ones above it (rows again), whole and for an expert-like slice on and off a panel boundary. The AVX-512 path has
// panels for every quantized format, the AVX2 path for all but Q8_0 (its rows already stream at the
// memory's pace); where a path has none the copy keeps rows.
void expect_panels_match_the_reference(Isa isa) {
  const Kernels& kernels = Kernels::get(isa);
  const int64_t k = 512, rows = 200;
  ThreadPool pool(2);
  for (GgmlType t :
       {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q4_0, GgmlType::Q4_1,
        GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::IQ4_NL, GgmlType::IQ4_XS}) {
    SCOPED_TRACE(type_name(t));
    const bool avx2_has = t != GgmlType::Q8_0;
    const bool has = isa == Isa::Avx512 || (isa == Isa::Avx2 && avx2_has);
    if (!has) {
      EXPECT_EQ(kernels.panels(t), nullptr) << isa_name(isa) << " has no panels for this type";
      continue;
    }
    Weight w = make_weight(t, rows, k, 7);
    const PackedGemm* fns = kernels.panels(t);
    ASSERT_NE(fns, nullptr);
    const size_t bytes = PackedWeights::panel_bytes(w.view, *fns);
    if (isa == Isa::Avx512 && (t == GgmlType::Q4_K || t == GgmlType::Q5_K || t == GgmlType::IQ4_XS)) {
      // Decode reads every byte of the panels once: these take the rows' own bytes, scales and mins kept 6-bit.
      const int64_t padded = (rows + fns->group_rows - 1) / fns->group_rows * fns->group_rows;
      EXPECT_EQ(bytes, static_cast<size_t>(padded) * w.view.row_bytes);
    }
    std::vector<uint8_t> storage(bytes + 64);
    uint8_t* p = storage.data() + (64 - reinterpret_cast<uintptr_t>(storage.data()) % 64) % 64;
    PackedWeights::write_panels(w.view, *fns, p, pool);
    w.view.panels = PackedWeights::rows_at(w.view, *fns, p);
    for (int64_t n_tokens : {1, 2, 3, 4, 5, 6, 9, 17, 23, 48, 49, 97, 257}) {
      const auto x = inputs(n_tokens, k);
      for (auto [first, count] : {std::pair<int64_t, int64_t>{0, rows}, {64, 100}, {40, 120}, {44, 120}}) {
        Weight slice = w;
        slice.view = w.view.slice_rows(first, count);
        EXPECT_EQ(slice.view.panels.empty(), first % fns->group_rows != 0);
        std::vector<float> y(static_cast<size_t>(count * n_tokens), std::nanf(""));
        MatmulScratch scratch;
        scratch.kernels = &kernels;
        matmul(slice.view, x.data(), n_tokens, y.data(), pool, scratch);
        SCOPED_TRACE(::testing::Message() << n_tokens << " tokens, rows " << first << "+" << count);
        expect_matches_reference(slice, x, n_tokens, y);
      }
    }
  }
}

// Each path is a test case of its own: one the CPU lacks is skipped, naming the missing ISA, never passed silently.
class MatmulPath : public test::IsaTest {};

// Every SIMD path: the AVX2 panels serve AVX2-only machines even where AVX-512 is the default.
TEST_P(MatmulPath, PanelsMatchTheReference) { expect_panels_match_the_reference(GetParam()); }

// A layout with several decode kernels (the AVX-512 panels: prefetching into L1 or L2, and Q8_0's without prefetch):
// matmul runs each in turn as PrefetchChoice picks, and every call's outputs are the same bits and match the
// reference.
void expect_every_decode_kernel_runs_and_agrees(const Kernels& kernels, GgmlType type) {
  SCOPED_TRACE(type_name(type));
  const PackedGemm* fns = kernels.panels(type);
  ASSERT_NE(fns, nullptr);
  const int64_t k = 512, rows = 200;
  ThreadPool pool(2);
  Weight w = make_weight(type, rows, k, 11);
  std::vector<uint8_t> storage(PackedWeights::panel_bytes(w.view, *fns) + 64);
  uint8_t* p = storage.data() + (64 - reinterpret_cast<uintptr_t>(storage.data()) % 64) % 64;
  PackedWeights::write_panels(w.view, *fns, p, pool);
  w.view.panels = PackedWeights::rows_at(w.view, *fns, p);
  const auto x = inputs(1, k);
  MatmulScratch scratch;
  scratch.kernels = &kernels;
  std::vector<float> first;
  for (int64_t call = 0; call < 3 * PrefetchChoice::kPeriod; ++call) {
    std::vector<float> y(static_cast<size_t>(rows), std::nanf(""));
    matmul(w.view, x.data(), 1, y.data(), pool, scratch);
    if (call == 0) {
      expect_matches_reference(w, x, 1, y);
      first = y;
    } else {
      ASSERT_EQ(y, first) << "call " << call;
    }
  }
  const uint64_t bytes = PackedWeights::panel_bytes(w.view, *fns);  // the calls' shape, as matmul counts it
  for (DecodeKernel kernel : {DecodeKernel::L1, DecodeKernel::L2, DecodeKernel::Unprefetched}) {
    if (has_kernel(*fns, kernel)) {
      EXPECT_GT(scratch.prefetch.ns_per_byte(fns, bytes, kernel), 0) << "kernel " << static_cast<int>(kernel) << " ran";
    } else {
      EXPECT_EQ(scratch.prefetch.ns_per_byte(fns, bytes, kernel), 0) << "kernel " << static_cast<int>(kernel);
    }
  }
}

TEST_P(MatmulPath, EveryDecodeKernelOfALayoutRunsAndAgrees) {
  {
    const Isa isa = GetParam();
    const Kernels& kernels = Kernels::get(isa);
    const PackedGemm* q8 = kernels.panels(GgmlType::Q8_0);
    // The AVX2 path has no Q8_0 panels and one decode kernel per layout; the AVX-512 panels have three each: into
    // L1, into L2, and without software prefetch.
    ASSERT_EQ(q8 != nullptr && q8->gemm_unprefetched != nullptr, isa == Isa::Avx512);
    const PackedGemm* q4k = kernels.panels(GgmlType::Q4_K);
    ASSERT_NE(q4k, nullptr);
    EXPECT_EQ(q4k->gemm_l2 != nullptr, isa == Isa::Avx512);
    EXPECT_EQ(q4k->gemm_unprefetched != nullptr, isa == Isa::Avx512);
    if (isa != Isa::Avx512) return;  // the AVX2 layouts have one decode kernel each: checked above
    for (GgmlType type :
         {GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::IQ4_XS, GgmlType::Q6_K, GgmlType::Q3_K,
          GgmlType::Q2_K, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::IQ4_NL}) {
      expect_every_decode_kernel_runs_and_agrees(kernels, type);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, MatmulPath, ::testing::Values(Isa::Avx2, Isa::Avx512), test::isa_test_name);

}  // namespace
}  // namespace tessera
