// Tests for the metrics registry: the exposition text exactly (HELP/TYPE
// lines, label escaping, cumulative histogram buckets, _sum and _count),
// value formatting, concurrent updates, render hooks and removal of children.
#include "common/metrics.h"

#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(MetricsTest, CountersAndGaugesRenderWithHelpTypeAndLabels) {
  MetricsRegistry registry;
  Family<Counter>& requests =
      registry.AddCounter("omnistage_requests_total", "Requests that ended.", {"finish_reason"});
  Family<Gauge>& in_flight = registry.AddGauge("omnistage_in_flight_requests", "In flight.");
  requests.With({"stop"}).Increment();
  requests.With({"stop"}).Increment(2);
  requests.With({"error"}).Increment();
  in_flight.With({}).Set(7);
  EXPECT_EQ(registry.Render(),
            "# HELP omnistage_requests_total Requests that ended.\n"
            "# TYPE omnistage_requests_total counter\n"
            "omnistage_requests_total{finish_reason=\"error\"} 1\n"
            "omnistage_requests_total{finish_reason=\"stop\"} 3\n"
            "# HELP omnistage_in_flight_requests In flight.\n"
            "# TYPE omnistage_in_flight_requests gauge\n"
            "omnistage_in_flight_requests 7\n");
}

TEST(MetricsTest, HistogramBucketsAreCumulativeWithSumAndCount) {
  MetricsRegistry registry;
  Family<Histogram>& latency =
      registry.AddHistogram("x_seconds", "Latency.", {"stage"}, {0.1, 1});
  Histogram& h = latency.With({"0"});
  h.Observe(0.05);
  h.Observe(0.1);  // On a bound: counted in that bucket (le is <=).
  h.Observe(0.5);
  h.Observe(30);
  EXPECT_EQ(h.count(), 4u);
  EXPECT_EQ(h.CumulativeCount(0), 2u);
  EXPECT_EQ(registry.Render(),
            "# HELP x_seconds Latency.\n"
            "# TYPE x_seconds histogram\n"
            "x_seconds_bucket{stage=\"0\",le=\"0.1\"} 2\n"
            "x_seconds_bucket{stage=\"0\",le=\"1\"} 3\n"
            "x_seconds_bucket{stage=\"0\",le=\"+Inf\"} 4\n"
            "x_seconds_sum{stage=\"0\"} 30.65\n"
            "x_seconds_count{stage=\"0\"} 4\n");
}

TEST(MetricsTest, HistogramWithoutLabels) {
  MetricsRegistry registry;
  registry.AddHistogram("lag_seconds", "Lag.", {}, {0.001}).With({}).Observe(0.0005);
  EXPECT_THAT(registry.Render(), HasSubstr("lag_seconds_bucket{le=\"0.001\"} 1\n"
                                           "lag_seconds_bucket{le=\"+Inf\"} 1\n"
                                           "lag_seconds_sum 0.0005\n"
                                           "lag_seconds_count 1\n"));
}

TEST(MetricsTest, LabelValuesAndHelpAreEscaped) {
  MetricsRegistry registry;
  registry.AddCounter("c_total", "a \\ b\nc", {"reason"}).With({"say \"hi\"\n\\"}).Increment();
  EXPECT_EQ(registry.Render(),
            "# HELP c_total a \\\\ b\\nc\n"
            "# TYPE c_total counter\n"
            "c_total{reason=\"say \\\"hi\\\"\\n\\\\\"} 1\n");
}

TEST(MetricsTest, ValuesAreShortestRoundTripDecimals) {
  EXPECT_EQ(FormatValue(0.1), "0.1");
  EXPECT_EQ(FormatValue(1234567), "1234567");
  EXPECT_EQ(FormatValue(1e-6), "1e-06");
  EXPECT_EQ(FormatValue(1.0 / 0.0), "+Inf");
  EXPECT_EQ(FormatValue(-1.0 / 0.0), "-Inf");
  EXPECT_EQ(FormatValue(0.0 / 0.0), "NaN");
}

TEST(MetricsTest, ConcurrentIncrementsAreAllCounted) {
  MetricsRegistry registry;
  Counter& counter = registry.AddCounter("n_total", "N.").With({});
  Histogram& histogram = registry.AddHistogram("h", "H.", {}, {1}).With({});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        counter.Increment();
        histogram.Observe(0.5);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(counter.value(), 40000);
  EXPECT_EQ(histogram.count(), 40000u);
  EXPECT_EQ(histogram.sum(), 20000);
}

TEST(MetricsTest, HooksRunBeforeEachRenderAndChildrenCanBeRemoved) {
  MetricsRegistry registry;
  Family<Gauge>& up = registry.AddGauge("up_replicas", "Up.", {"replica"});
  int renders = 0;
  registry.OnRender([&] {
    ++renders;
    up.Clear();
    up.With({"1"}).Set(1);
  });
  up.With({"0"}).Set(1);
  const std::string text = registry.Render();
  EXPECT_EQ(renders, 1);
  EXPECT_THAT(text, HasSubstr("up_replicas{replica=\"1\"} 1\n"));
  EXPECT_THAT(text, Not(HasSubstr("replica=\"0\"")));
}

TEST(MetricsTest, ReplaceAllSwapsEveryChildAtOnce) {
  MetricsRegistry registry;
  Family<Gauge>& up = registry.AddGauge("up_replicas", "Up.", {"replica"});
  up.With({"0"}).Set(1);
  up.ReplaceAll({{{"1"}, 1}, {{"2"}, 0}});
  const std::string text = registry.Render();
  EXPECT_THAT(text, Not(HasSubstr("replica=\"0\"")));
  EXPECT_THAT(text, HasSubstr("up_replicas{replica=\"1\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("up_replicas{replica=\"2\"} 0\n"));
}

TEST(MetricsTest, RemovedChildrenAreNotRendered) {
  MetricsRegistry registry;
  Family<Gauge>& up = registry.AddGauge("up_replicas", "Up.", {"replica"});
  up.With({"0"}).Set(1);
  up.With({"1"}).Set(0);
  up.Remove({"1"});
  EXPECT_THAT(registry.Render(), HasSubstr("up_replicas{replica=\"0\"} 1\n"));
  EXPECT_THAT(registry.Render(), Not(HasSubstr("replica=\"1\"")));
}

TEST(MetricsDeathTest, BadNamesRepeatsAndLabelCountsCrash) {
  MetricsRegistry registry;
  registry.AddCounter("ok_total", "ok", {"a"});
  EXPECT_DEATH(registry.AddCounter("ok_total", "again"), "bad or repeated metric ok_total");
  EXPECT_DEATH(registry.AddCounter("9lives", "bad"), "bad or repeated");
  EXPECT_DEATH(registry.AddGauge("g", "bad label", {"le"}), "bad or repeated");
  Family<Counter>& family = registry.AddCounter("two_total", "two labels", {"a", "b"});
  EXPECT_DEATH(family.With({"x"}), "two_total has 2 label\\(s\\), asked with 1");
}

TEST(MetricsTest, BucketSetsAscend) {
  for (const std::vector<double>* buckets :
       {&LatencyBuckets(), &FineLatencyBuckets(), &SizeBuckets()}) {
    for (size_t i = 1; i < buckets->size(); ++i) EXPECT_LT((*buckets)[i - 1], (*buckets)[i]);
  }
  EXPECT_EQ(LatencyBuckets().front(), 0.0001);
  EXPECT_EQ(LatencyBuckets().back(), 120);
  EXPECT_EQ(FineLatencyBuckets().front(), 0.000001);
}

}  // namespace
}  // namespace omnistage
