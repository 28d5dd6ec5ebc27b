#include "core/trace.hpp"

#include <gtest/gtest.h>

namespace meshtp {
namespace {

TEST(Tracer, RecordsOnlyWhenEnabledAndRespectsTheCap) {
  Tracer& t = Tracer::instance();
  t.disable();
  t.clear();
  { const ScopedSpan off("off", SpanKind::kCompute); }
  EXPECT_TRUE(t.spans().empty());

  t.enable(2);
  { const ScopedSpan a("a", SpanKind::kCompute); }
  t.record("b", SpanKind::kComm, 1.0, 2.5);
  t.record("c", SpanKind::kWait, 3.0, 4.0);  // past the cap: counted, not stored
  ASSERT_EQ(t.spans().size(), 2u);
  EXPECT_STREQ(t.spans()[0].name, "a");
  EXPECT_LE(t.spans()[0].start_s, t.spans()[0].end_s);
  EXPECT_EQ(t.spans()[1].kind, SpanKind::kComm);
  EXPECT_EQ(t.spans()[1].end_s, 2.5);
  EXPECT_EQ(t.dropped(), 1);
  EXPECT_STREQ(to_string(SpanKind::kWait), "wait");
  t.disable();
  t.clear();
}

}  // namespace
}  // namespace meshtp
