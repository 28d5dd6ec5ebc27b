#include "core/text.hpp"

#include <gtest/gtest.h>

#include "core/error.hpp"
#include "error_of.hpp"

namespace meshtp {
namespace {

using test_support::error_of;

// The strings issue 48's sweep put into configurations.
const char* const kInjections[] = {
    "gpt\n--tensor-model-parallel-size 64\n",
    "x\"]\n[evil]",
    "a\r\nb",
    "tab\there",
    "back\\slash",
    "nul\x01" "byte",
};

TEST(EscapeText, StaysOnOneLineAndInsideAQuotedString) {
  for (const char* s : kInjections) {
    const std::string e = escape_text(s);
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    EXPECT_EQ(e.find('\r'), std::string::npos) << e;
    // Every `"` is escaped: a preceding backslash that is not itself escaped.
    for (std::size_t i = 0; i < e.size(); ++i) {
      if (e[i] != '"') continue;
      std::size_t backslashes = 0;
      for (std::size_t k = i; k > 0 && e[k - 1] == '\\'; --k) ++backslashes;
      EXPECT_EQ(backslashes % 2, 1u) << e;
    }
  }
  EXPECT_EQ(escape_text("gpt\n--x 64"), "gpt\\n--x 64");
  EXPECT_EQ(escape_text("x\"]\n[evil]"), "x\\\"]\\n[evil]");
  EXPECT_EQ(escape_text("a\x01"), "a\\u0001");
  EXPECT_EQ(escape_text("caf\xc3\xa9"), "caf\xc3\xa9");
  EXPECT_EQ(escape_text("bad\xff"), "bad\\uFFFD");
}

TEST(ValidUtf8, RefusesMalformedSequences) {
  EXPECT_TRUE(valid_utf8("plain"));
  EXPECT_TRUE(valid_utf8("\xe2\x86\x92"));                // →
  EXPECT_FALSE(valid_utf8("\xff"));
  EXPECT_FALSE(valid_utf8("\xc0\xaf"));                   // overlong '/'
  EXPECT_FALSE(valid_utf8("\xed\xa0\x80"));               // a surrogate
  EXPECT_FALSE(valid_utf8("\xe2\x86"));                   // cut short
}

TEST(CheckName, RefusesControlCharactersAndNonUtf8NamingThem) {
  for (const char* s : kInjections) {
    if (std::string_view(s) == "back\\slash") continue;
    const std::string e = error_of([&] { check_name("model name", s); });
    EXPECT_NE(e.find("model name \""), std::string::npos) << s;
    EXPECT_NE(e.find("control character"), std::string::npos) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
  EXPECT_NE(error_of([] { check_name("--name", "h\xff"); }).find("--name \"h\\uFFFD\" is not UTF-8"),
            std::string::npos);
  EXPECT_EQ(error_of([] { check_name("--name", "dgx \"a100\" \xe2\x86\x92 b"); }), "");
}

}  // namespace
}  // namespace meshtp
