#include "sha256.h"

#include <gtest/gtest.h>

#include <cctype>
#include <ostream>
#include <string>

namespace cutecall {
namespace {

std::string HexOf(std::string_view bytes) { return ToHex(Sha256(bytes)); }

// FIPS 180-4 / NIST example vectors.
TEST(Sha256Test, EmptyString) {
  EXPECT_EQ(HexOf(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Sha256Test, EmptyViewWithNullData) {
  EXPECT_EQ(HexOf(std::string_view()),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Sha256Test, Abc) {
  EXPECT_EQ(HexOf("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256Test, Message448Bits) {
  EXPECT_EQ(HexOf("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256Test, Message896Bits) {
  EXPECT_EQ(HexOf("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmn"
                  "hijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu"),
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

TEST(Sha256Test, OneMillionAs) {
  EXPECT_EQ(HexOf(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// Lengths around the padding boundaries: 55 bytes is the longest message
// whose padding fits one block, 56..63 need a second block, 64 is exactly one
// block of data.
struct PaddingCase {
  size_t length;
  const char* hex;  // SHA-256 of `length` bytes of 'a'
};

std::ostream& operator<<(std::ostream& os, const PaddingCase& c) {
  return os << c.length << " bytes";
}

class Sha256PaddingTest : public ::testing::TestWithParam<PaddingCase> {};

TEST_P(Sha256PaddingTest, MatchesReference) {
  EXPECT_EQ(HexOf(std::string(GetParam().length, 'a')), GetParam().hex);
}

INSTANTIATE_TEST_SUITE_P(
    Boundaries, Sha256PaddingTest,
    ::testing::Values(
        PaddingCase{55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"},
        PaddingCase{56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"},
        PaddingCase{63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34"},
        PaddingCase{64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"},
        PaddingCase{65, "635361c48bb9eab14198e76ea8ab7f1a41685d6ad62aa9146d301d4f17eb0ae0"},
        PaddingCase{119, "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb"},
        PaddingCase{120, "2f3d335432c70b580af0e8e1b3674a7c020d683aa5f73aaaedfdc55af904c21c"},
        PaddingCase{128, "6836cf13bac400e9105071cd6af47084dfacad4e5e302c94bfed24e013afb73e"}),
    [](const ::testing::TestParamInfo<PaddingCase>& info) {
      return "Length" + std::to_string(info.param.length);
    });

TEST(Sha256Test, HashesEveryByteValueIncludingNul) {
  std::string all;
  for (int i = 0; i < 256; ++i) all.push_back(char(i));
  EXPECT_EQ(HexOf(all),
            "40aff2e9d2d8922e47afd4648e6967497158785fbd1da870e7110266bf944880");
  EXPECT_EQ(HexOf(std::string_view("a\0b", 3)),
            "59b271ae1bbcb1d31d41929817f4b16fb439eb4f31520b5ad1d5ce98920a7138");
}

TEST(Sha256Test, ToHexIsLowerCaseAndFromHexRoundTrips) {
  Digest d = Sha256("abc");
  std::string hex = ToHex(d);
  ASSERT_EQ(hex.size(), 64u);
  EXPECT_EQ(hex.find_first_not_of("0123456789abcdef"), std::string::npos);

  Digest back{};
  ASSERT_TRUE(FromHex(hex, &back));
  EXPECT_EQ(back, d);
}

TEST(Sha256Test, FromHexAcceptsUpperCase) {
  Digest d = Sha256("abc");
  std::string upper = ToHex(d);
  for (char& c : upper) c = char(std::toupper(static_cast<unsigned char>(c)));
  Digest back{};
  ASSERT_TRUE(FromHex(upper, &back));
  EXPECT_EQ(back, d);
}

TEST(Sha256Test, FromHexCoversAllByteValues) {
  Digest d;
  for (size_t i = 0; i < d.size(); ++i) d[i] = uint8_t(i * 8 + 7);  // 07 .. ff
  Digest back{};
  ASSERT_TRUE(FromHex(ToHex(d), &back));
  EXPECT_EQ(back, d);
}

TEST(Sha256Test, FromHexRejectsWrongLength) {
  const std::string hex = ToHex(Sha256("abc"));
  Digest out{};
  EXPECT_FALSE(FromHex("", &out));
  EXPECT_FALSE(FromHex(hex.substr(0, 63), &out));
  EXPECT_FALSE(FromHex(hex.substr(0, 62), &out));
  EXPECT_FALSE(FromHex(hex + "0", &out));
  EXPECT_FALSE(FromHex(hex + hex, &out));
}

TEST(Sha256Test, FromHexRejectsNonHexAtAnyPosition) {
  const std::string hex = ToHex(Sha256("abc"));
  for (char bad : {'g', 'G', 'x', ' ', '-', '\0', char(0xc3)}) {
    for (size_t pos : {size_t(0), size_t(1), size_t(31), size_t(62), size_t(63)}) {
      std::string s = hex;
      s[pos] = bad;
      Digest out{};
      EXPECT_FALSE(FromHex(s, &out)) << "char " << int(bad) << " at " << pos;
    }
  }
}

}  // namespace
}  // namespace cutecall
