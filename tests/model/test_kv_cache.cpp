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
    KvCache cache(KvCacheConfig{layers, slots, ctx, heads * hk, heads * hv, type, heads});
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

TEST(KvCache, HeadsThatDoNotDivideTheRowsAreRefused) {
  try {
    KvCache cache(KvCacheConfig{1, 1, 4, 12, 12, GgmlType::F16, 5});
    FAIL() << "accepted 5 heads over rows of 12";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("5 heads do not divide rows of 12"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessera
