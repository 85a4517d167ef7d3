// The watchdog's armed wait: one deadline per wait (now + timeout x periods), and a nested
// scope that puts the outer wait back, deadline and all, when it ends. (Its abort, an
// MPI_Abort of the whole job, is the e2e case watchdog_hung_rank.)
#include <gtest/gtest.h>

#include <string>

#include "core/timer.hpp"
#include "train/watchdog.hpp"

namespace hpctrain {
namespace {

TEST(Watchdog, ScopesNestAndPutTheOuterDeadlineBack) {
  Watchdog w(100.0);  // never reached here
  EXPECT_EQ(w.armed().deadline, 0.0);
  const double t0 = now_seconds();
  w.arm("outer wait", 5, 3.0);
  const Watchdog::Armed outer = w.armed();
  EXPECT_EQ(std::string(outer.what), "outer wait");
  EXPECT_EQ(outer.step, 5);
  EXPECT_EQ(outer.limit, 300.0);
  EXPECT_GE(outer.deadline, t0 + 300.0);
  EXPECT_LE(outer.deadline, now_seconds() + 300.0);
  {
    WatchdogScope inner(w, "inner collective", 6);
    const Watchdog::Armed a = w.armed();
    EXPECT_EQ(std::string(a.what), "inner collective");
    EXPECT_EQ(a.limit, 100.0);
    EXPECT_LT(a.deadline, outer.deadline);  // its own, shorter, deadline
  }
  const Watchdog::Armed back = w.armed();
  EXPECT_EQ(std::string(back.what), "outer wait");
  EXPECT_EQ(back.step, 5);
  EXPECT_EQ(back.deadline, outer.deadline);  // not restarted by the inner wait
  w.disarm();
  EXPECT_EQ(w.armed().deadline, 0.0);
  {
    WatchdogScope alone(w, "a wait of its own", 7);
    EXPECT_GT(w.armed().deadline, 0.0);
  }
  EXPECT_EQ(w.armed().deadline, 0.0);  // disarmed again, as it was
}

}  // namespace
}  // namespace hpctrain
