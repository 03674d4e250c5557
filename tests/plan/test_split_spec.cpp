// --split: both syntaxes, and every way a placement can be wrong (unknown names, gaps, overlaps, ranges outside
// the model, zero shares) is refused with a message that names the problem.
#include <gtest/gtest.h>

#include "plan/split_spec.h"
#include "util/error.h"

namespace tessera::plan {
namespace {

const std::vector<std::string> kNames = {"local", "a", "b"};

std::string error_of(const std::string& text, int64_t n_layer = 22) {
  try {
    const auto spec = parse_split(text);
    const std::vector<uint64_t> bytes(static_cast<size_t>(n_layer), 100);
    resolve_split(spec, kNames, bytes);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SplitSpec, RangesInAnyOrderResolveInLayerOrder) {
  const auto spec = parse_split("11-21@b, 0-10@a");
  EXPECT_EQ(spec.kind, SplitSpec::Kind::Ranges);
  const std::vector<uint64_t> bytes(22, 100);
  const auto r = resolve_split(spec, kNames, bytes);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].node, "a");
  EXPECT_EQ(r[0].first, 0);
  EXPECT_EQ(r[0].last, 10);
  EXPECT_EQ(r[1].node, "b");
  EXPECT_EQ(r[1].first, 11);
  EXPECT_EQ(r[1].last, 21);
  EXPECT_EQ(format_ranges(r), "0-10@a,11-21@b");
}

TEST(SplitSpec, SingleLayerRange) {
  const std::vector<uint64_t> bytes(3, 1);
  const auto r = resolve_split(parse_split("0@a,1-2@b"), kNames, bytes);
  EXPECT_EQ(r[0].count(), 1);
  EXPECT_EQ(format_ranges(r), "0@a,1-2@b");
}

TEST(SplitSpec, ProportionsSplitBytesNotLayers) {
  // Layer 0 weighs as much as the other three together: a 1:1 split puts it alone on the first node.
  const std::vector<uint64_t> bytes = {300, 100, 100, 100};
  const auto r = resolve_split(parse_split("a:1,b:1"), kNames, bytes);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].count(), 1);
  EXPECT_EQ(r[1].count(), 3);
  const std::vector<uint64_t> even(30, 10);
  const auto r2 = resolve_split(parse_split("a:1,b:2"), kNames, even);
  EXPECT_EQ(r2[0].count(), 10);
  EXPECT_EQ(r2[1].count(), 20);
}

TEST(SplitSpec, UnknownNodeListsValidNames) {
  const std::string e = error_of("0-10@a,11-21@zz");
  EXPECT_NE(e.find("unknown node 'zz'"), std::string::npos) << e;
  EXPECT_NE(e.find("valid: local, a, b"), std::string::npos) << e;
  EXPECT_NE(error_of("a:1,zz:2").find("valid: local, a, b"), std::string::npos);
}

TEST(SplitSpec, GapIsNamed) {
  const std::string e = error_of("0-9@a,12-21@b");
  EXPECT_NE(e.find("layers 10-11 are not placed"), std::string::npos) << e;
  EXPECT_NE(e.find("22 layers"), std::string::npos) << e;
  const std::string tail = error_of("0-9@a,10-20@b");
  EXPECT_NE(tail.find("layer 21 are not placed"), std::string::npos) << tail;
  const std::string head = error_of("1-21@a");
  EXPECT_NE(head.find("layer 0 are not placed"), std::string::npos) << head;
}

TEST(SplitSpec, OverlapIsNamed) {
  const std::string e = error_of("0-12@a,10-21@b");
  EXPECT_NE(e.find("layers 10-12 are placed on both 'a' and 'b'"), std::string::npos) << e;
}

TEST(SplitSpec, OutOfRangeNamesTheLayerCount) {
  const std::string e = error_of("0-10@a,11-40@b");
  EXPECT_NE(e.find("outside the model"), std::string::npos) << e;
  EXPECT_NE(e.find("22 layers (0-21)"), std::string::npos) << e;
}

TEST(SplitSpec, ZeroLayersNeverPlacedSilently) {
  // A zero share is refused at parse time; a tiny one is refused when it rounds to no layer.
  EXPECT_NE(error_of("a:0,b:1").find("share must be positive"), std::string::npos);
  const std::string e = error_of("a:1,b:1000", 22);
  EXPECT_NE(e.find("rounds to 0 of the model's 22 layers"), std::string::npos) << e;
  EXPECT_NE(error_of("local:1,a:1,b:1", 2).find("every node needs at least one layer"), std::string::npos);
}

TEST(SplitSpec, NodeNamedTwice) {
  EXPECT_NE(error_of("0-5@a,6-10@b,11-21@a").find("named twice"), std::string::npos);
  EXPECT_NE(error_of("a:1,a:2").find("named twice"), std::string::npos);
}

TEST(SplitSpec, SyntaxErrors) {
  EXPECT_NE(error_of("").find("empty"), std::string::npos);
  EXPECT_NE(error_of("0-10@a,,11-21@b").find("empty item"), std::string::npos);
  EXPECT_NE(error_of("0-10@a,b:1").find("mixes"), std::string::npos);
  EXPECT_NE(error_of("x-10@a").find("not a layer number"), std::string::npos);
  EXPECT_NE(error_of("10-3@a").find("ends before it starts"), std::string::npos);
  EXPECT_NE(error_of("a").find("expected FIRST-LAST@NODE"), std::string::npos);
  EXPECT_NE(error_of("a:x").find("not a number"), std::string::npos);
  EXPECT_NE(error_of("a:inf").find("not a number"), std::string::npos);
  EXPECT_NE(error_of("0-21@").find("bad node name"), std::string::npos);
  EXPECT_NE(error_of("0-21@9x").find("bad node name"), std::string::npos);
}

TEST(SplitSpec, ProportionalCountsCoverEveryLayer) {
  const std::vector<uint64_t> bytes = {5, 7, 9, 11, 13, 2, 3, 8};
  for (const auto& weights : std::vector<std::vector<double>>{{1}, {1, 1}, {3, 1, 1}, {1, 5, 1, 1}, {1, 1, 1, 1, 1}}) {
    const auto counts = proportional_counts(bytes, weights);
    ASSERT_EQ(counts.size(), weights.size());
    int64_t total = 0;
    for (int64_t c : counts) {
      EXPECT_GE(c, 0);
      total += c;
    }
    EXPECT_EQ(total, 8);
  }
}

}  // namespace
}  // namespace tessera::plan
