#include "core/parse.hpp"

#include <gtest/gtest.h>

#include "core/error.hpp"

namespace meshtp {
namespace {

TEST(ParseMeshShape, AcceptsOneToThreeDims) {
  EXPECT_EQ(parse_mesh_shape("8"), (std::vector<int>{8}));
  EXPECT_EQ(parse_mesh_shape("2x4"), (std::vector<int>{2, 4}));
  EXPECT_EQ(parse_mesh_shape("2x2x2"), (std::vector<int>{2, 2, 2}));
  EXPECT_EQ(format_mesh_shape({2, 4}), "2x4");
}

TEST(ParseMeshShape, RejectsMalformedTextNamingIt) {
  for (const char* bad : {"", "x", "2x", "x2", "2y2", "0x4", "-2x2", "2x2x", "abc", "2 x 2"}) {
    try {
      parse_mesh_shape(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("bad mesh '") + bad + "'"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(ParseByteSize, BinarySuffixes) {
  EXPECT_EQ(parse_byte_size("4096"), 4096);
  EXPECT_EQ(parse_byte_size("8K"), 8192);
  EXPECT_EQ(parse_byte_size("64M"), 64ll << 20);
  EXPECT_EQ(parse_byte_size("1G"), 1ll << 30);
  EXPECT_EQ(parse_byte_sizes("8K,1M"), (std::vector<std::int64_t>{8192, 1 << 20}));
  EXPECT_EQ(format_byte_size(8192), "8K");
  EXPECT_EQ(format_byte_size(64ll << 20), "64M");
  EXPECT_EQ(format_byte_size(1000), "1000");
}

TEST(ParseByteSize, RejectsGarbage) {
  EXPECT_THROW(parse_byte_size("K"), Error);
  EXPECT_THROW(parse_byte_size("-8K"), Error);
  EXPECT_THROW(parse_byte_size("8Q"), Error);
  EXPECT_THROW(parse_byte_sizes("8K,,1M"), Error);
}

TEST(ParsePositiveInts, ListsAndErrors) {
  EXPECT_EQ(parse_positive_ints("4", "--chunks"), (std::vector<int>{4}));
  EXPECT_EQ(parse_positive_ints("1,2,4", "--chunks"), (std::vector<int>{1, 2, 4}));
  try {
    parse_positive_ints("1,0", "--chunks");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "bad --chunks '1,0': item '0' is not a positive integer; expected positive "
                 "integers joined by ',', like 1,2,4");
  }
  for (const char* bad : {"", ",", "1,", ",2", "1;2", "x", "-1", "1.5", "2 "}) {
    EXPECT_THROW(parse_positive_ints(bad, "--slices"), Error) << bad;
  }
}

TEST(Mesh2d, TwoDimsAndTheRanks) {
  EXPECT_EQ(mesh_2d("--mesh", "2x4"), (std::array<int, 2>{2, 4}));
  EXPECT_EQ(mesh_2d("--mesh", "2x4", 8), (std::array<int, 2>{2, 4}));
  try {
    mesh_2d("--mesh", "8");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--mesh 8 is not a 2D mesh: expected d1xd2, like 2x2");
  }
  try {
    mesh_2d("--mesh", "2x2", 2);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--mesh 2x2 has 4 ranks but the world has 2");
  }
}

}  // namespace
}  // namespace meshtp
