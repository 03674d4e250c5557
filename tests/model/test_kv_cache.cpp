// The KV cache's layout: what a token stores comes back from k_head / v_head at its position, head by head, for
// every layer, sequence and element type; configurations the layout cannot hold are refused with a clear message.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/kv_cache.h"
#include "tensor/fp16.h"
#include "util/error.h"

namespace tessera {
namespace {

// A value no two (layer, slot, pos, k/v, element) share: an integer below 2048, exact in f16.
float tag(int64_t layer, int64_t slot, int64_t pos, bool key, int64_t i) {
  return static_cast<float>((((layer * 2 + slot) * 4 + pos) * 2 + (key ? 1 : 0)) * 16 + i);
}

TEST(KvCache, EachHeadsHistoryComesBackInOrder) {
  constexpr int64_t layers = 2, slots = 2, ctx = 4, heads = 4, hk = 4, hv = 3;
  for (GgmlType type : {GgmlType::F16, GgmlType::F32}) {
    KvCache cache(KvCacheConfig::uniform(layers, slots, ctx, heads, hk, hv, type));
    for (int64_t l = 0; l < layers; ++l) {
      for (int64_t s = 0; s < slots; ++s) {
        for (int64_t p = 0; p < ctx; ++p) {
          std::vector<float> k(heads * hk), v(heads * hv);
          for (int64_t i = 0; i < heads * hk; ++i) k[static_cast<size_t>(i)] = tag(l, s, p, true, i);
          for (int64_t i = 0; i < heads * hv; ++i) v[static_cast<size_t>(i)] = tag(l, s, p, false, i);
          cache.store(l, s, p, k.data(), v.data(), VecOps::get(Isa::Scalar));
        }
      }
    }
    const auto read = [type](const uint8_t* head, int64_t at) {
      return type == GgmlType::F16 ? fp16_to_fp32(reinterpret_cast<const uint16_t*>(head)[at])
                                   : reinterpret_cast<const float*>(head)[at];
    };
    for (int64_t l = 0; l < layers; ++l) {
      for (int64_t s = 0; s < slots; ++s) {
        for (int64_t h = 0; h < heads; ++h) {
          for (int64_t p = 0; p < ctx; ++p) {
            for (int64_t i = 0; i < hk; ++i) {
              ASSERT_EQ(read(cache.k_head(l, s, h), p * hk + i), tag(l, s, p, true, h * hk + i))
                  << type_name(type) << " layer " << l << " slot " << s << " head " << h << " pos " << p;
            }
            for (int64_t i = 0; i < hv; ++i) {
              ASSERT_EQ(read(cache.v_head(l, s, h), p * hv + i), tag(l, s, p, false, h * hv + i))
                  << type_name(type) << " layer " << l << " slot " << s << " head " << h << " pos " << p;
            }
          }
        }
      }
    }
  }
}

TEST(KvCache, EmptyHeadsAreRefused) {
  try {
    KvCache cache(KvCacheConfig::uniform(1, 1, 4, 2, 0, 12, GgmlType::F16));
    FAIL() << "accepted heads of 0 elements";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer 0 has 2 heads of 0 and 12 elements"), std::string::npos) << e.what();
  }
}

// A sliding layer's ring keeps position p in cell p mod n_cells: the last n_cells positions come back.
TEST(KvCache, RingKeepsTheLastCells) {
  KvCacheConfig config = KvCacheConfig::uniform(1, 1, 16, 1, 2, 2, GgmlType::F32);
  config.layers[0].window = 3;
  config.layers[0].n_cells = 5;
  KvCache cache(config);
  for (int64_t p = 0; p < 12; ++p) {
    const float k[2] = {static_cast<float>(p), 0.5f};
    cache.store(0, 0, p, k, k);
  }
  const auto* keys = reinterpret_cast<const float*>(cache.k_head(0, 0, 0));
  for (int64_t p = 7; p < 12; ++p) EXPECT_EQ(keys[(p % 5) * 2], static_cast<float>(p)) << p;
  EXPECT_EQ(cache.bytes(), 5u * 2 * 2 * 4);
  cache.set_length(0, 12);
  EXPECT_TRUE(cache.can_truncate(0, 9));   // a token at 9 sees 7..8: held (7..11)
  EXPECT_FALSE(cache.can_truncate(0, 8));  // one at 8 sees 6..7: 6 is gone
}

// Sequence ids and sizes that a peer sends are checked: an Error naming them, never std::out_of_range or an
// allocation of exabytes.
TEST(KvCache, SlotsAndSizesFromOutsideAreChecked) {
  KvCache cache(KvCacheConfig::uniform(1, 2, 8, 1, 4, 4, GgmlType::F16));
  EXPECT_THROW(cache.length(2), Error);
  EXPECT_THROW(cache.length(-1), Error);
  KvCacheConfig huge = KvCacheConfig::uniform(1, int64_t{1} << 40, int64_t{1} << 40, 8, 128, 128, GgmlType::F16);
  try {
    KvCache too_big(huge);
    FAIL() << "a cache of 2^80 positions was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("more than 64 TiB"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessera
