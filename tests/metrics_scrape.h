// One GET of /metrics on 127.0.0.1:`port` for tests; "" (and a test failure)
// when it does not answer 200.
#ifndef OMNISTAGE_TESTS_METRICS_SCRAPE_H_
#define OMNISTAGE_TESTS_METRICS_SCRAPE_H_

#include <string>

#include "gtest/gtest.h"
#include "httplib.h"

namespace omnistage {

inline std::string Scrape(int port) {
  httplib::Client client("127.0.0.1", port);
  httplib::Result result = client.Get("/metrics");
  EXPECT_TRUE(result) << "scrape of port " << port;
  if (!result) return "";
  EXPECT_EQ(result->status, 200);
  return result->body;
}

}  // namespace omnistage

#endif  // OMNISTAGE_TESTS_METRICS_SCRAPE_H_
