// NucleusCut: histogram rounds over ordering keys, then the last few tokens sorted; integer masses throughout.
#include "engine/nucleus.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "util/error.h"

namespace tessera {
namespace {

constexpr size_t kBuckets = 256;
constexpr size_t kFinal = 64;  // a range holding this few tokens is sent whole
// The first round's buckets are 1/6 wide below the best logit; exp(-43) in units of 2^-62 truncates to 0, so every
// token with a mass lies in the first 258 of them (the last bucket takes the rest).
constexpr float kScale = 6.0f;

uint32_t ordered_bits(float f) {
  if (f == 0.0f) f = 0.0f;  // -0 as +0
  const auto bits = std::bit_cast<uint32_t>(f);
  return (bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u;
}

float from_ordered_bits(uint32_t bits) {
  return std::bit_cast<float>((bits & 0x80000000u) != 0 ? bits & 0x7FFFFFFFu : ~bits);
}

// The shift that splits a key range of this width into at most kBuckets buckets.
int shift_for(uint64_t width) { return std::max(0, static_cast<int>(std::bit_width(width)) - 8); }

template <class T>
void put(std::vector<uint8_t>& out, const T& v) {
  const size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &v, sizeof(T));
}

template <class T>
T get(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace

uint64_t order_key(float logit, int32_t token) {
  return (uint64_t{ordered_bits(logit)} << 32) | (0xFFFFFFFFu - static_cast<uint32_t>(token));
}

uint64_t NucleusCut::mass_of(float logit) const {
  // exp(...) <= 1, so the product is exact and fits a signed conversion (which has an instruction of its own).
  const float weight = std::exp(logit - max_logit_);
  return static_cast<uint64_t>(static_cast<int64_t>(weight * 0x1p62f));
}

void NucleusCut::begin(std::span<const float> logits, int32_t first_token, float max_logit, float top_p) {
  if (!(top_p > 0.0f && top_p <= 1.0f)) fail("top_p must be in (0, 1], got {}", top_p);
  logits_ = logits;
  first_token_ = first_token;
  max_logit_ = max_logit;
  top_p_fixed_ = static_cast<uint64_t>(std::llround(static_cast<double>(top_p) * 0x1p32));
  before_ = 0;
  target_ = 0;
  round_ = 0;
  final_ = false;
  done_ = false;
  cut_ = 0;
  cut_logit_ = -std::numeric_limits<float>::infinity();
  cut_token_ = std::numeric_limits<int32_t>::max();
  active_.clear();
  if (!(max_logit > -std::numeric_limits<float>::infinity())) {
    // Every logit is -inf: nothing weighs anything, so every token stays (the draw then falls back on the best).
    done_ = true;
  }
}

size_t NucleusCut::first_bucket(float logit) const {
  const float distance = (max_logit_ - logit) * kScale;
  return distance < static_cast<float>(kBuckets - 1) ? static_cast<size_t>(distance) : kBuckets - 1;
}

size_t NucleusCut::message_size() const {
  if (final_) return sizeof(uint64_t) + kFinal * sizeof(Item);
  // counts and masses; from the second round on also the lowest and highest key of each bucket
  return kBuckets * (sizeof(uint32_t) + sizeof(Mass) + (round_ > 0 ? 2 * sizeof(uint64_t) : 0));
}

std::span<const uint8_t> NucleusCut::message() {
  if (done_) fail("the top-p cut is already settled");
  message_.clear();
  if (final_) {
    put(message_, static_cast<uint64_t>(active_.size()));
    for (const Item& item : active_) {
      put(message_, item.key);
      put(message_, item.mass);
    }
    message_.resize(message_size(), 0);
    return message_;
  }
  counts_.assign(kBuckets, 0);
  masses_.assign(kBuckets, 0);
  if (round_ == 0) {
    // By distance below the best logit, which spreads a row's tokens far better than the keys' leading bits; the
    // one pass over the whole range, so it does no more than it must.
    for (float logit : logits_) {
      const uint64_t mass = mass_of(logit);
      if (mass == 0) continue;
      const size_t b = first_bucket(logit);
      ++counts_[b];
      masses_[b] += mass;
    }
  } else {
    lows_.assign(kBuckets, std::numeric_limits<uint64_t>::max());
    highs_.assign(kBuckets, 0);
    for (const Item& item : active_) {
      const size_t b = (item.key - lo_) >> shift_;
      ++counts_[b];
      masses_[b] += item.mass;
      lows_[b] = std::min(lows_[b], item.key);
      highs_[b] = std::max(highs_[b], item.key);
    }
  }
  for (uint32_t c : counts_) put(message_, c);
  for (Mass m : masses_) put(message_, m);
  if (round_ > 0) {
    for (uint64_t v : lows_) put(message_, v);
    for (uint64_t v : highs_) put(message_, v);
  }
  return message_;
}

std::pair<uint32_t, uint32_t> NucleusCut::first_bucket_bits(size_t b) const {
  // first_bucket falls as the logit rises, so each bucket is a run of floats; search the ordered bits for its ends.
  const uint32_t bottom = ordered_bits(-std::numeric_limits<float>::infinity());  // in the last bucket
  const uint32_t top = ordered_bits(max_logit_);                                  // in bucket 0
  auto bucket = [&](uint32_t bits) { return first_bucket(from_ordered_bits(bits)); };
  uint32_t lo = bottom;
  uint32_t hi = top;
  while (lo < hi) {  // the lowest with a bucket <= b
    const uint32_t mid = lo + (hi - lo) / 2;
    if (bucket(mid) <= b) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  const uint32_t low = lo;
  lo = bottom;
  hi = top;
  while (lo < hi) {  // the highest with a bucket >= b
    const uint32_t mid = lo + (hi - lo + 1) / 2;
    if (bucket(mid) >= b) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return {low, lo};
}

void NucleusCut::read(std::span<const uint8_t> all, int ranks) {
  if (done_) fail("the top-p cut is already settled");
  if (ranks < 1 || all.size() != message_size() * static_cast<size_t>(ranks)) {
    fail("a top-p round got {} bytes from {} ranks, expected {} a rank", all.size(), ranks, message_size());
  }
  if (final_) {
    read_final(all, ranks);
  } else {
    read_histogram(all, ranks);
  }
}

void NucleusCut::read_histogram(std::span<const uint8_t> all, int ranks) {
  const size_t size = message_size();
  const bool first = round_ == 0;
  counts_.assign(kBuckets, 0);
  masses_.assign(kBuckets, 0);
  lows_.assign(kBuckets, std::numeric_limits<uint64_t>::max());
  highs_.assign(kBuckets, 0);
  for (int r = 0; r < ranks; ++r) {
    const uint8_t* p = all.data() + static_cast<size_t>(r) * size;
    const uint8_t* masses = p + kBuckets * sizeof(uint32_t);
    const uint8_t* lows = masses + kBuckets * sizeof(Mass);
    const uint8_t* highs = lows + kBuckets * sizeof(uint64_t);
    for (size_t b = 0; b < kBuckets; ++b) {
      counts_[b] += get<uint32_t>(p + b * sizeof(uint32_t));
      masses_[b] += get<Mass>(masses + b * sizeof(Mass));
      if (!first) {
        lows_[b] = std::min(lows_[b], get<uint64_t>(lows + b * sizeof(uint64_t)));
        highs_[b] = std::max(highs_[b], get<uint64_t>(highs + b * sizeof(uint64_t)));
      }
    }
  }
  if (first) {
    Mass total = 0;
    for (Mass m : masses_) total += m;
    // total < 2^62 * 2^31 tokens, so the product fits.
    target_ = (total * top_p_fixed_) >> 32;
  }
  // Walk the buckets best first (the first round's lowest index, a key round's highest) to the one where the
  // mass reaches the target.
  size_t cut = kBuckets;
  for (size_t i = 0; i < kBuckets; ++i) {
    const size_t b = first ? i : kBuckets - 1 - i;
    if (counts_[b] == 0) continue;
    if (before_ + masses_[b] >= target_) {
      cut = b;
      break;
    }
    before_ += masses_[b];
  }
  if (cut == kBuckets) fail("top-p: the ranks' masses do not reach the target (they disagree on the row)");
  if (first) {
    // From here on a key range holds the bucket's tokens: every logit between its ends, with any id.
    const auto [low, high] = first_bucket_bits(cut);
    lo_ = uint64_t{low} << 32;
    hi_ = (uint64_t{high} << 32) | 0xFFFFFFFFu;
    for (size_t i = 0; i < logits_.size(); ++i) {
      if (first_bucket(logits_[i]) != cut) continue;
      const uint64_t mass = mass_of(logits_[i]);
      if (mass != 0) active_.push_back({order_key(logits_[i], first_token_ + static_cast<int32_t>(i)), mass});
    }
  } else {
    // The tokens' own lowest and highest keys, which also narrows exact ties down to their ids.
    lo_ = lows_[cut];
    hi_ = highs_[cut];
    std::erase_if(active_, [&](const Item& item) { return item.key < lo_ || item.key > hi_; });
  }
  shift_ = shift_for(hi_ - lo_);
  final_ = counts_[cut] <= kFinal;
  ++round_;
}

void NucleusCut::read_final(std::span<const uint8_t> all, int ranks) {
  const size_t size = message_size();
  items_.clear();
  for (int r = 0; r < ranks; ++r) {
    const uint8_t* p = all.data() + static_cast<size_t>(r) * size;
    const auto n = get<uint64_t>(p);
    if (n > kFinal) fail("a top-p round got {} tokens from rank {}, at most {} expected", n, r, kFinal);
    for (size_t i = 0; i < n; ++i) {
      const uint8_t* item = p + sizeof(uint64_t) + i * sizeof(Item);
      items_.push_back({get<uint64_t>(item), get<uint64_t>(item + sizeof(uint64_t))});
    }
  }
  std::sort(items_.begin(), items_.end(), [](const Item& a, const Item& b) { return a.key > b.key; });
  for (const Item& item : items_) {
    before_ += item.mass;
    if (before_ >= target_) {
      cut_ = item.key;
      cut_logit_ = from_ordered_bits(static_cast<uint32_t>(item.key >> 32));
      cut_token_ = static_cast<int32_t>(0xFFFFFFFFu - static_cast<uint32_t>(item.key));
      done_ = true;
      return;
    }
  }
  fail("top-p: the ranks' masses do not reach the target (they disagree on the row)");
}

uint64_t NucleusCut::solve(std::span<const float> logits, float max_logit, float top_p) {
  begin(logits, 0, max_logit, top_p);
  while (!done_) read(message(), 1);
  return cut_;
}

}  // namespace tessera
