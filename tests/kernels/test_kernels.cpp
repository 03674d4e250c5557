// The SIMD kernels against quant.h's scalar references, on every path (scalar, avx2, avx512) this CPU supports:
// activation quantizers byte for byte (ties included), vec_dot within float rounding of the reference for every
// weight type and several row lengths (random blocks and extreme levels), and gemm against per-pair vec_dot on odd
// tile shapes, strides and output leading dimensions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "support/isa_test.h"
#include "tensor/fp16.h"
#include "tensor/ggml_type.h"
#include "tensor/kernels.h"
#include "tensor/quant.h"

namespace tessera {

// Readable test parameters in gtest's output.
void PrintTo(Isa isa, std::ostream* os) { *os << isa_name(isa); }

namespace {

const GgmlType kWeightTypes[] = {GgmlType::F32,    GgmlType::F16,   GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q4_1,
                                 GgmlType::Q5_0,   GgmlType::Q5_1,  GgmlType::Q8_0, GgmlType::Q8_1, GgmlType::Q2_K,
                                 GgmlType::Q3_K,   GgmlType::Q4_K,  GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q8_K,
                                 GgmlType::IQ4_NL, GgmlType::IQ4_XS};

bool is_float(GgmlType t) { return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16; }

std::vector<float> normal_data(int64_t n, unsigned seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = dist(rng);
  return x;
}

// Byte offsets of the fp16 scale fields (d, m/dmin) inside one block; they must stay finite in random blocks.
std::vector<size_t> half_fields(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_0:
    case GgmlType::Q5_0:
    case GgmlType::Q8_0:
    case GgmlType::IQ4_NL:
    case GgmlType::IQ4_XS:
      return {0};
    case GgmlType::Q4_1:
    case GgmlType::Q5_1:
    case GgmlType::Q8_1:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
      return {0, 2};
    case GgmlType::Q2_K:
      return {80, 82};
    case GgmlType::Q3_K:
      return {108};
    case GgmlType::Q6_K:
      return {208};
    default:
      return {};
  }
}

// A weight row of n elements. Quantizable types alternate between quantize_row of normal data (realistic) and
// random bytes (every level and scale code, e.g. Q8_0's -128 or IQ4_XS's extreme scales).
std::vector<uint8_t> make_weights(GgmlType t, int64_t n, unsigned seed) {
  const TypeTraits& tr = type_traits(t);
  std::vector<uint8_t> w(row_size(t, n));
  std::mt19937 rng(seed);
  if (is_float(t)) {
    quantize_row(t, normal_data(n, seed).data(), w.data(), n);
    return w;
  }
  if (seed % 2 == 0 && can_quantize(t) && t != GgmlType::Q8_1 && t != GgmlType::Q8_K) {
    quantize_row(t, normal_data(n, seed, 0.05f).data(), w.data(), n);
    return w;
  }
  for (auto& b : w) b = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> mag(0.001f, 0.05f);
  const int64_t nb = n / tr.block_size;
  for (int64_t i = 0; i < nb; ++i) {
    uint8_t* blk = w.data() + i * tr.type_size;
    if (t == GgmlType::Q8_K) {
      const float d = mag(rng);
      std::memcpy(blk, &d, 4);
      continue;
    }
    for (size_t off : half_fields(t)) {
      const float v = mag(rng) * ((rng() & 1) ? -1.0f : 1.0f);
      const uint16_t h = fp32_to_fp16(v);
      std::memcpy(blk + off, &h, 2);
    }
  }
  return w;
}

// The activation row as quant.h's reference produces it, plus its dequantized values.
struct Act {
  std::vector<uint8_t> bytes;
  std::vector<float> values;
};

Act make_act(GgmlType weight, const std::vector<float>& x) {
  const GgmlType at = Kernels::act_type(weight);
  const auto n = static_cast<int64_t>(x.size());
  Act a;
  a.bytes.resize(row_size(at, n));
  quantize_row_activation(at, x.data(), a.bytes.data(), n);
  a.values.resize(x.size());
  dequantize_row(at, a.bytes.data(), a.values.data(), n);
  return a;
}

struct Reference {
  double dot;
  double magnitude;  // sum |w_i x_i|: float rounding in a kernel scales with it
};

Reference reference(GgmlType t, const std::vector<uint8_t>& w, const Act& a, int64_t n) {
  std::vector<float> wf(static_cast<size_t>(n));
  dequantize_row(t, w.data(), wf.data(), n);
  Reference r{0, 0};
  for (int64_t i = 0; i < n; ++i) r.magnitude += std::fabs(static_cast<double>(wf[i]) * a.values[i]);
  if (is_float(t)) {
    for (int64_t i = 0; i < n; ++i) r.dot += static_cast<double>(wf[i]) * a.values[i];
  } else {
    r.dot = vec_dot_row(t, w.data(), a.bytes.data(), n);
  }
  return r;
}

double tolerance(double magnitude) { return 1e-5 * magnitude + 1e-6; }

std::vector<int64_t> lengths(GgmlType t) {
  const int64_t bs = type_traits(t).block_size;
  if (bs == 1) return {1, 7, 15, 16, 17, 33, 63, 64, 65, 100, 256, 1000, 4096};
  if (bs == 32) return {32, 64, 96, 128, 160, 224, 256, 288, 480, 512, 1024, 2080, 4096};
  return {256, 512, 768, 1024, 2048, 4096};
}

// Each path is a test case of its own: one the CPU lacks is skipped, naming the missing ISA, never passed silently.
class KernelTest : public test::IsaTest {
 protected:
  const Kernels& k() const { return Kernels::get(GetParam()); }
};

TEST_P(KernelTest, TableIsCompleteAndForItsPath) {
  EXPECT_EQ(k().isa(), GetParam());
  for (GgmlType act : {GgmlType::F32, GgmlType::Q8_0, GgmlType::Q8_1, GgmlType::Q8_K}) {
    EXPECT_NE(k().quantize_act(act), nullptr) << type_name(act);
  }
  for (uint32_t id = 0; id < 64; ++id) {
    const auto tr = find_type_traits(id);
    if (!tr || !tr->can_dequantize) continue;
    EXPECT_NE(k().vec_dot(tr->type), nullptr) << tr->name;
    EXPECT_NE(k().gemm(tr->type), nullptr) << tr->name;
  }
  EXPECT_EQ(Kernels::act_type(GgmlType::F16), GgmlType::F32);
  EXPECT_EQ(Kernels::act_type(GgmlType::BF16), GgmlType::F32);
  EXPECT_EQ(Kernels::act_type(GgmlType::Q4_0), GgmlType::Q8_0);
  EXPECT_EQ(Kernels::act_type(GgmlType::Q5_1), GgmlType::Q8_1);
  EXPECT_EQ(Kernels::act_type(GgmlType::IQ4_XS), GgmlType::Q8_K);
}

// Rows that exercise rounding: normal data at several scales, exact ties (x * id lands on k + 0.5), zero and
// constant blocks, subnormal values, powers of two, and a max-magnitude tie between +a and -a (Q8_K keeps the
// first).
std::vector<std::vector<float>> activation_rows() {
  std::vector<std::vector<float>> rows;
  for (unsigned seed = 1; seed <= 4; ++seed) rows.push_back(normal_data(1024, seed, seed == 4 ? 1e-3f : 3.0f));
  std::mt19937 rng(7);
  std::vector<float> ties(1024);
  for (size_t i = 0; i < ties.size(); ++i) {
    const int q = static_cast<int>(rng() % 127);
    ties[i] = (static_cast<float>(q) + 0.5f) * ((rng() & 1) ? -1.0f : 1.0f);
  }
  for (size_t b = 0; b < ties.size(); b += 32) ties[b + (b / 32) % 32] = (b / 32) % 3 == 0 ? -127.0f : 127.0f;
  for (size_t b = 0; b < ties.size(); b += 256) ties[b + 3] = 127.0f, ties[b + 1] = -127.0f;
  rows.push_back(ties);
  std::vector<float> odd(1024, 0.0f);
  for (size_t i = 256; i < 512; ++i) odd[i] = 0.75f;
  // Subnormals next to one normal value per block. (A block of only subnormals would overflow 127/amax to inf,
  // where the reference's float -> int8 conversion is undefined and compiler-dependent.)
  for (size_t i = 512; i < 768; ++i) {
    odd[i] = i % 32 == 9 ? 1e-3f : (i % 2 ? 1.0f : -1.0f) * 1e-40f * static_cast<float>(i % 7 + 1);
  }
  for (size_t i = 768; i < 1024; ++i) odd[i] = i == 900 ? -5.0f : 5.0f * std::ldexp(1.0f, -static_cast<int>(i % 30));
  rows.push_back(odd);
  return rows;
}

TEST_P(KernelTest, ActivationQuantizersMatchReferenceBytes) {
  for (GgmlType act : {GgmlType::F32, GgmlType::Q8_0, GgmlType::Q8_1, GgmlType::Q8_K}) {
    const ActQuantFn fn = k().quantize_act(act);
    ASSERT_NE(fn, nullptr);
    int row_index = 0;
    for (const auto& x : activation_rows()) {
      for (int64_t n : {int64_t{256}, int64_t{1024}}) {
        const size_t bytes = row_size(act, n);
        std::vector<uint8_t> want(bytes), got(bytes, 0xAB);
        quantize_row_activation(act, x.data(), want.data(), n);
        fn(x.data(), got.data(), n);
        EXPECT_EQ(want, got) << type_name(act) << " row " << row_index << " n " << n;
      }
      ++row_index;
    }
  }
}

TEST_P(KernelTest, VecDotMatchesReference) {
  unsigned seed = 100;
  for (GgmlType t : kWeightTypes) {
    const VecDotFn dot = k().vec_dot(t);
    ASSERT_NE(dot, nullptr) << type_name(t);
    for (int64_t n : lengths(t)) {
      for (int rep = 0; rep < 2; ++rep, ++seed) {
        const auto w = make_weights(t, n, seed);
        const Act a = make_act(t, normal_data(n, seed + 7));
        const Reference ref = reference(t, w, a, n);
        const double got = dot(w.data(), a.bytes.data(), n);
        EXPECT_NEAR(got, ref.dot, tolerance(ref.magnitude)) << type_name(t) << " n " << n << " seed " << seed;
      }
    }
  }
}

// Every level at its extreme against activations at +-127: the integer sums reach their largest magnitude, so
// any 16-bit saturation or lost offset shows up.
TEST_P(KernelTest, VecDotExtremeLevels) {
  for (GgmlType t : kWeightTypes) {
    if (is_float(t)) continue;
    const int64_t n = 512;
    for (uint8_t fill : {uint8_t{0x00}, uint8_t{0xFF}, uint8_t{0x80}, uint8_t{0x7F}, uint8_t{0x88}}) {
      std::vector<uint8_t> w(row_size(t, n), fill);
      const TypeTraits& tr = type_traits(t);
      for (int64_t i = 0; i < n / tr.block_size; ++i) {
        uint8_t* blk = w.data() + i * tr.type_size;
        if (t == GgmlType::Q8_K) {
          const float d = 0.01f;
          std::memcpy(blk, &d, 4);
        }
        for (size_t off : half_fields(t)) {
          const uint16_t h = fp32_to_fp16(0.01f);
          std::memcpy(blk + off, &h, 2);
        }
      }
      for (float sign : {1.0f, -1.0f}) {
        std::vector<float> x(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) x[i] = sign * (i % 64 == 5 ? -1.0f : 1.0f);
        const Act a = make_act(t, x);
        const Reference ref = reference(t, w, a, n);
        const double got = k().vec_dot(t)(w.data(), a.bytes.data(), n);
        EXPECT_NEAR(got, ref.dot, tolerance(ref.magnitude))
            << type_name(t) << " fill " << int{fill} << " sign " << sign;
      }
    }
  }
}

// The gemms sum several products in 16 bits before widening: rows at their largest levels against activations at
// +-127 and -128 must not saturate (9 rows, 12 tokens: a partial panel and more than one token step).
TEST_P(KernelTest, GemmExtremeLevels) {
  for (GgmlType t : kWeightTypes) {
    if (is_float(t) || t == GgmlType::Q8_K) continue;
    const int64_t n = 512, rows = 9, toks = 12;
    const TypeTraits& tr = type_traits(t);
    for (uint8_t fill : {uint8_t{0xFF}, uint8_t{0x80}, uint8_t{0x7F}, uint8_t{0x88}, uint8_t{0x00}}) {
      std::vector<uint8_t> w(row_size(t, n), fill);
      for (int64_t i = 0; i < n / tr.block_size; ++i) {
        for (size_t off : half_fields(t)) {
          const uint16_t h = fp32_to_fp16(0.01f);
          std::memcpy(w.data() + i * tr.type_size + off, &h, 2);
        }
      }
      std::vector<uint8_t> ws;
      for (int64_t r = 0; r < rows; ++r) ws.insert(ws.end(), w.begin(), w.end());
      std::vector<Act> acts;
      std::vector<uint8_t> x;
      for (int64_t tok = 0; tok < toks; ++tok) {
        std::vector<float> v(static_cast<size_t>(n));
        // Token 0: all +1 (quantized to the extreme level -128 with a negative scale), 1: all -1, then mixtures.
        for (int64_t i = 0; i < n; ++i)
          v[i] = (tok % 2 == 0 ? 1.0f : -1.0f) * (tok >= 2 && i % (tok + 1) == 0 ? -1 : 1);
        acts.push_back(make_act(t, v));
        x.insert(x.end(), acts.back().bytes.begin(), acts.back().bytes.end());
      }
      std::vector<float> y(static_cast<size_t>(rows * toks));
      k().gemm(t)(ws.data(), w.size(), rows, x.data(), acts[0].bytes.size(), toks, n, y.data(), rows);
      // The same rows as panels, where the path has them (their sums run in 16 bits too).
      std::vector<float> yp(y.size(), std::nanf(""));
      std::vector<uint8_t> storage;
      if (const PackedGemm* fns = k().panels(t)) {
        const int64_t groups = (rows + fns->group_rows - 1) / fns->group_rows;
        storage.resize(fns->group_bytes(n) * static_cast<size_t>(groups) + 64);
        uint8_t* packed = storage.data() + (64 - reinterpret_cast<uintptr_t>(storage.data()) % 64) % 64;
        fns->pack(ws.data(), w.size(), rows, n, packed);
        fns->gemm(packed, rows, x.data(), acts[0].bytes.size(), toks, n, yp.data(), rows);
      }
      for (int64_t tok = 0; tok < toks; ++tok) {
        const Reference ref = reference(t, w, acts[tok], n);
        for (int64_t r = 0; r < rows; ++r) {
          EXPECT_NEAR(y[tok * rows + r], ref.dot, tolerance(ref.magnitude))
              << type_name(t) << " fill " << int{fill} << " tok " << tok << " row " << r;
          if (!storage.empty()) {
            EXPECT_NEAR(yp[tok * rows + r], ref.dot, tolerance(ref.magnitude))
                << type_name(t) << " panels, fill " << int{fill} << " tok " << tok << " row " << r;
          }
        }
      }
    }
  }
}

TEST_P(KernelTest, GemmMatchesVecDot) {
  struct Shape {
    int64_t rows, toks;
  };
  const Shape shapes[] = {{1, 1},  {7, 1},  {70, 1},  {7, 3}, {16, 4}, {33, 7}, {70, 17},
                          {5, 33}, {64, 8}, {17, 12}, {9, 2}, {6, 5},  {11, 9}, {5, 16}};
  unsigned seed = 500;
  for (GgmlType t : kWeightTypes) {
    const GgmlType at = Kernels::act_type(t);
    const int64_t bs = type_traits(t).block_size;
    const int64_t k_len = bs == 256 ? 512 : (bs == 32 ? 160 : 45);
    const size_t w_row = row_size(t, k_len);
    const size_t x_row = row_size(at, k_len);
    for (const Shape& s : shapes) {
      ++seed;
      const size_t w_stride = w_row + 64;  // padded rows: the kernel must use the stride
      const size_t x_stride = x_row + 36;
      std::vector<uint8_t> w(w_stride * static_cast<size_t>(s.rows), 0xCD);
      std::vector<uint8_t> x(x_stride * static_cast<size_t>(s.toks), 0xCD);
      std::vector<double> mag(static_cast<size_t>(s.rows * s.toks));
      std::vector<Act> acts;
      std::vector<std::vector<uint8_t>> rows;
      for (int64_t r = 0; r < s.rows; ++r) {
        rows.push_back(make_weights(t, k_len, seed * 1000 + static_cast<unsigned>(r)));
        std::memcpy(w.data() + r * w_stride, rows.back().data(), w_row);
      }
      for (int64_t tok = 0; tok < s.toks; ++tok) {
        acts.push_back(make_act(t, normal_data(k_len, seed * 7 + static_cast<unsigned>(tok))));
        std::memcpy(x.data() + tok * x_stride, acts.back().bytes.data(), x_row);
      }
      const int64_t ldy = s.rows + 3;
      std::vector<float> y(static_cast<size_t>(ldy * s.toks), std::nanf(""));
      k().gemm(t)(w.data(), w_stride, s.rows, x.data(), x_stride, s.toks, k_len, y.data(), ldy);
      for (int64_t tok = 0; tok < s.toks; ++tok) {
        for (int64_t r = 0; r < ldy; ++r) {
          const float got = y[tok * ldy + r];
          if (r >= s.rows) {
            EXPECT_TRUE(std::isnan(got)) << type_name(t) << ": wrote outside the tile at row " << r;
            continue;
          }
          const float want = k().vec_dot(t)(rows[r].data(), acts[tok].bytes.data(), k_len);
          const Reference ref = reference(t, rows[r], acts[tok], k_len);
          EXPECT_NEAR(got, want, tolerance(ref.magnitude))
              << type_name(t) << " shape " << s.rows << "x" << s.toks << " row " << r << " tok " << tok;
        }
      }
    }
  }
}

// Larger tiles with long rows: several panel passes and token groups, k spanning many blocks.
TEST_P(KernelTest, GemmLargeTile) {
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q5_0, GgmlType::F16}) {
    const GgmlType at = Kernels::act_type(t);
    const int64_t k_len = 1536, n_rows = 150, n_tok = 29;
    const size_t w_row = row_size(t, k_len), x_row = row_size(at, k_len);
    std::vector<uint8_t> w(w_row * n_rows), x(x_row * n_tok);
    for (int64_t r = 0; r < n_rows; ++r) {
      const auto row = make_weights(t, k_len, 9000 + static_cast<unsigned>(r));
      std::memcpy(w.data() + r * w_row, row.data(), w_row);
    }
    std::vector<Act> acts;
    for (int64_t tok = 0; tok < n_tok; ++tok) {
      acts.push_back(make_act(t, normal_data(k_len, 77 + static_cast<unsigned>(tok))));
      std::memcpy(x.data() + tok * x_row, acts.back().bytes.data(), x_row);
    }
    std::vector<float> y(static_cast<size_t>(n_rows * n_tok));
    k().gemm(t)(w.data(), w_row, n_rows, x.data(), x_row, n_tok, k_len, y.data(), n_rows);
    for (int64_t tok = 0; tok < n_tok; ++tok) {
      for (int64_t r = 0; r < n_rows; ++r) {
        const std::vector<uint8_t> row(w.begin() + r * w_row, w.begin() + (r + 1) * w_row);
        const Reference ref = reference(t, row, acts[tok], k_len);
        EXPECT_NEAR(y[tok * n_rows + r], ref.dot, tolerance(ref.magnitude))
            << type_name(t) << " row " << r << " tok " << tok;
      }
    }
  }
}

// One token against many long rows: the decode path (multi-row gemv kernels, row groups plus a remainder).
TEST_P(KernelTest, GemvManyRows) {
  for (GgmlType t : kWeightTypes) {
    if (is_float(t) || t == GgmlType::Q8_1 || t == GgmlType::Q8_K) continue;
    const GgmlType at = Kernels::act_type(t);
    const int64_t k_len = type_traits(t).block_size == 256 ? 2304 : 2080, n_rows = 39;
    const size_t w_row = row_size(t, k_len), x_row = row_size(at, k_len);
    std::vector<uint8_t> w(w_row * n_rows);
    std::vector<std::vector<uint8_t>> rows;
    for (int64_t r = 0; r < n_rows; ++r) {
      rows.push_back(make_weights(t, k_len, 7000 + static_cast<unsigned>(r)));
      std::memcpy(w.data() + r * w_row, rows.back().data(), w_row);
    }
    const Act a = make_act(t, normal_data(k_len, 4242));
    std::vector<float> y(static_cast<size_t>(n_rows));
    k().gemm(t)(w.data(), w_row, n_rows, a.bytes.data(), x_row, 1, k_len, y.data(), n_rows);
    for (int64_t r = 0; r < n_rows; ++r) {
      const Reference ref = reference(t, rows[r], a, k_len);
      EXPECT_NEAR(y[r], ref.dot, tolerance(ref.magnitude)) << type_name(t) << " row " << r;
    }
  }
}

// Rows packed by fns (a PackedGemm) give what the reference gives, for whole matrices and for row ranges
// starting at a later packed group, with no write outside the rows asked for.
// k_len 0: 768 for the 256-element formats, 320 for the 32-element ones.
void expect_packed_matches_reference(GgmlType t, const PackedGemm* fns, int64_t k_len = 0) {
  ASSERT_GT(fns->group_rows, 0);
  ASSERT_EQ(64 % fns->group_rows, 0) << "matmul's 64-row chunks must be whole packed groups";
  const GgmlType at = Kernels::act_type(t);
  if (k_len == 0) k_len = type_traits(t).block_size == 256 ? 768 : 320;
  const int64_t n_rows = 37;
  const size_t w_row = row_size(t, k_len), x_row = row_size(at, k_len);
  const size_t w_stride = w_row + 32;
  std::vector<uint8_t> w(w_stride * n_rows, 0xCD);
  std::vector<std::vector<uint8_t>> rows;
  for (int64_t r = 0; r < n_rows; ++r) {
    rows.push_back(make_weights(t, k_len, 3100 + static_cast<unsigned>(r)));
    std::memcpy(w.data() + r * w_stride, rows.back().data(), w_row);
  }
  const int64_t groups = (n_rows + fns->group_rows - 1) / fns->group_rows;
  const size_t group_bytes = fns->group_bytes(k_len);
  ASSERT_EQ(group_bytes % 64, 0u);
  std::vector<uint8_t> storage(group_bytes * static_cast<size_t>(groups) + 64);
  uint8_t* packed = storage.data() + (64 - reinterpret_cast<uintptr_t>(storage.data()) % 64) % 64;
  fns->pack(w.data(), w_stride, n_rows, k_len, packed);
  for (int64_t n_tok : {int64_t{1}, int64_t{2}, int64_t{fns->min_tokens}, int64_t{5}, int64_t{13}, int64_t{25}}) {
    std::vector<Act> acts;
    std::vector<uint8_t> x(x_row * static_cast<size_t>(n_tok));
    for (int64_t tok = 0; tok < n_tok; ++tok) {
      acts.push_back(make_act(t, normal_data(k_len, 810 + static_cast<unsigned>(tok))));
      std::memcpy(x.data() + tok * x_row, acts.back().bytes.data(), x_row);
    }
    // All rows, then the rows of the second group onwards (the offset matmul uses for a later chunk); with each
    // kernel of the layout.
    for (auto [first, gemm] : {std::pair{int64_t{0}, fns->gemm}, std::pair{int64_t{fns->group_rows}, fns->gemm},
                               std::pair{int64_t{0}, fns->gemm_unprefetched}, std::pair{int64_t{0}, fns->gemm_l2},
                               std::pair{int64_t{fns->group_rows}, fns->gemm_l2}}) {
      if (gemm == nullptr) continue;
      const int64_t count = n_rows - first;
      const int64_t ldy = n_rows + 2;
      std::vector<float> y(static_cast<size_t>(ldy * n_tok), std::nanf(""));
      gemm(packed + static_cast<size_t>(first / fns->group_rows) * group_bytes, count, x.data(), x_row, n_tok, k_len,
           y.data() + first, ldy);
      for (int64_t tok = 0; tok < n_tok; ++tok) {
        for (int64_t r = 0; r < ldy; ++r) {
          const float got = y[tok * ldy + r];
          if (r < first || r >= n_rows) {
            EXPECT_TRUE(std::isnan(got)) << type_name(t) << ": wrote outside rows at " << r;
            continue;
          }
          const Reference ref = reference(t, rows[r], acts[tok], k_len);
          EXPECT_NEAR(got, ref.dot, tolerance(ref.magnitude))
              << type_name(t) << " row " << r << " tok " << tok << " of " << n_tok << " from " << first;
        }
      }
    }
  }
}

// Weights packed once by --repack (PackedGemm, the AVX-512 path).
TEST_P(KernelTest, PackedGemmMatchesReference) {
  int tested = 0;
  for (GgmlType t : kWeightTypes) {
    const PackedGemm* fns = k().packed(t);
    if (fns == nullptr) continue;
    ++tested;
    expect_packed_matches_reference(t, fns);
  }
  if (GetParam() == Isa::Avx512) {
    EXPECT_GE(tested, 10) << "the AVX-512 path packs every quantized format it has a gemm for";
  } else {
    EXPECT_EQ(tested, 0);
  }
}

// Panels, which the weights' copy holds instead of the rows (every quantized format on the AVX-512 path; all but
// Q8_0 on the AVX2 path).
TEST_P(KernelTest, PanelsMatchReference) {
  int tested = 0;
  for (GgmlType t : kWeightTypes) {
    const PackedGemm* fns = k().panels(t);
    if (fns == nullptr) continue;
    ++tested;
    EXPECT_EQ(fns->min_tokens, 1) << "panels replace the rows, so they serve every call";
    expect_packed_matches_reference(t, fns);
    // The 32-element formats' AVX-512 panels keep blocks in groups of 8-16: 9 blocks fill none, 37 blocks two to
    // four whole groups and part of another, for every group size. A part-filled group takes only its blocks'
    // bytes: a panel is its rows' bytes, to the next 64.
    if (type_traits(t).block_size == 32) {
      for (int64_t k : {288, 37 * 32}) {
        expect_packed_matches_reference(t, fns, k);
        if (GetParam() == Isa::Avx512) {
          EXPECT_EQ(fns->group_bytes(k), (16 * row_size(t, k) + 63) / 64 * 64) << k;
        }
      }
    }
  }
  EXPECT_EQ(tested, GetParam() == Isa::Avx512 ? 12 : GetParam() == Isa::Avx2 ? 11 : 0);
}

TESSERA_ISA_TEST_SUITE(KernelTest);

}  // namespace
}  // namespace tessera
