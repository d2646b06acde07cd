// The rank table readers' hash index (platform/rank_table_index.h): a repeat
// names where its key was first seen, clear() forgets everything whatever the
// probe paths, and names are compared as text while the table's strings grow.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>

#include "platform/rank_table_index.h"

namespace trainit::rank_table_internal {
namespace {

// Every key on one probe path: each insert, lookup and clear walks past all
// the others.
struct CollidingKeys {
  [[nodiscard]] std::size_t hash(std::uint64_t /*key*/) const { return 0; }
  [[nodiscard]] bool equal(std::uint64_t a, std::uint64_t b) const { return a == b; }
};

TEST(RankTableIndex, ARepeatGivesThePlaceItsKeyWasFirstSeen) {
  DeviceIdIndex ids;
  EXPECT_EQ(ids.insert(3, 0), std::nullopt);
  EXPECT_EQ(ids.insert(5, 1), std::nullopt);
  EXPECT_EQ(ids.insert(3, 2), std::optional<std::uint32_t>(0));
  EXPECT_EQ(ids.insert(5, 3), std::optional<std::uint32_t>(1));
  EXPECT_EQ(ids.insert(3, 4), std::optional<std::uint32_t>(0)) << "a repeat does not replace the first place";
}

TEST(RankTableIndex, KeysSurviveGrowth) {
  DeviceIdIndex ids;
  for (std::uint32_t k = 0; k < 5000; ++k)
    ASSERT_EQ(ids.insert(std::uint64_t{k} * 7, k), std::nullopt) << k;
  for (std::uint32_t k = 0; k < 5000; ++k)
    ASSERT_EQ(ids.insert(std::uint64_t{k} * 7, 0), std::optional<std::uint32_t>(k)) << k;
}

TEST(RankTableIndex, ClearForgetsEveryKeyEvenOnOneProbePath) {
  FirstSeen<std::uint64_t, CollidingKeys> ids;
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    // Rounds of different sizes: a smaller one after a larger leaves the
    // slots of the larger behind, which must read as free.
    const std::uint32_t count = round == 1 ? 40 : 200;
    for (std::uint32_t k = 0; k < count; ++k)
      ASSERT_EQ(ids.insert(k + round, k), std::nullopt) << k;
    for (std::uint32_t k = 0; k < count; ++k)
      ASSERT_EQ(ids.insert(k + round, 0), std::optional<std::uint32_t>(k)) << k;
    ids.clear();
  }
  EXPECT_EQ(ids.insert(1, 9), std::nullopt);
}

TEST(RankTableIndex, NamesAreComparedAsTextWhileTheStringsGrow) {
  std::string strings;
  NameIndex names{NameKeys(&strings)};
  auto add = [&](const std::string& s) {
    TableText t{static_cast<std::uint32_t>(strings.size()), static_cast<std::uint32_t>(s.size())};
    strings += s;
    return t;
  };
  for (std::uint32_t i = 0; i < 1000; ++i)  // the strings move many times
    ASSERT_EQ(names.insert(add("10.0." + std::to_string(i / 256) + "." + std::to_string(i % 256)), i), std::nullopt);
  EXPECT_EQ(names.insert(add("10.0.1.44"), 7), std::optional<std::uint32_t>(300));
  EXPECT_EQ(names.insert(add("10.0.1.4"), 7), std::optional<std::uint32_t>(260));
  EXPECT_EQ(names.insert(add("10.0.1.444"), 7), std::nullopt) << "a longer name is another name";

  names.release();
  EXPECT_EQ(names.insert(add("10.0.1.44"), 1), std::nullopt) << "release() forgets every name";
  EXPECT_EQ(names.insert(add("10.0.1.44"), 2), std::optional<std::uint32_t>(1));
}

}  // namespace
}  // namespace trainit::rank_table_internal
