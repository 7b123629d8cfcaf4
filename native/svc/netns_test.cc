// What needs no root: without a namespace (-1) nothing moves and fn runs
// here, and a namespace that does not exist is an error that names the
// deployment host and says how to make it. Entering a real one needs root:
// tests/test_svc_deployment.py covers that end to end.
#include "svc/netns.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace tailscope::svc {
namespace {

TEST(Netns, WithoutANamespaceRunsHereAndReturnsWhatFnReturns) {
  int ran = 0;
  EXPECT_EQ(in_netns(-1, "", [&] { return ++ran + 41; }), 42);
  EXPECT_EQ(ran, 1);
  EXPECT_TRUE(enter_netns(-1));
}

TEST(Netns, AMissingNamespaceNamesTheHostAndWhatToDo) {
  try {
    open_netns("host-a", "tailscope-no-such-namespace");
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("host-a"), std::string::npos) << what;
    EXPECT_NE(what.find("/run/netns/tailscope-no-such-namespace"), std::string::npos) << what;
    EXPECT_NE(what.find("tailscope hosts up"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace tailscope::svc
