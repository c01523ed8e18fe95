// Metrics: Prometheus counters, gauges and histograms with labels, and the text
// exposition (format 0.0.4) of all of them. No C++ Prometheus client is
// packaged in Debian; this is the small part of one that we need.
//
//   MetricsRegistry registry;
//   Family<Counter>& requests = registry.AddCounter(
//       "omnistage_requests_total", "Generate calls that ended.", {"finish_reason"});
//   requests.With({"stop"}).Increment();
//   Family<Histogram>& ttfo = registry.AddHistogram(
//       "omnistage_time_to_first_output_seconds", "...", {"modality"}, LatencyBuckets());
//   ttfo.With({"text"}).Observe(0.012);
//   std::string text = registry.Render();
//
// Values are atomics: updating a child is lock-free, and a scrape on another
// thread reads them without stopping the writer. With() takes the family's
// mutex; keep the child on hot paths. Names and label names are checked when a
// family is added (a bad one is a programming error: it crashes). Thread-safe.
#ifndef OMNISTAGE_COMMON_METRICS_H_
#define OMNISTAGE_COMMON_METRICS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace omnistage {

// A double updated with compare-and-swap (std::atomic<double> has no fetch_add
// in C++17).
class AtomicDouble {
 public:
  void Add(double delta);
  void Set(double value) { bits_.store(ToBits(value), std::memory_order_relaxed); }
  double Get() const { return FromBits(bits_.load(std::memory_order_relaxed)); }

 private:
  static uint64_t ToBits(double value);
  static double FromBits(uint64_t bits);
  std::atomic<uint64_t> bits_{0};
};

class Counter {
 public:
  static constexpr char kType[] = "counter";
  explicit Counter(const std::vector<double>* unused) {}
  // `delta` >= 0.
  void Increment(double delta = 1) { value_.Add(delta); }
  double value() const { return value_.Get(); }
  void Render(const std::string& name, const std::string& labels, std::string* out) const;

 private:
  AtomicDouble value_;
};

class Gauge {
 public:
  static constexpr char kType[] = "gauge";
  explicit Gauge(const std::vector<double>* unused) {}
  void Set(double value) { value_.Set(value); }
  void Add(double delta) { value_.Add(delta); }
  double value() const { return value_.Get(); }
  void Render(const std::string& name, const std::string& labels, std::string* out) const;

 private:
  AtomicDouble value_;
};

class Histogram {
 public:
  static constexpr char kType[] = "histogram";
  // `bounds`: ascending upper bounds (without +Inf), owned by the family.
  explicit Histogram(const std::vector<double>* bounds);
  void Observe(double value);
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  double sum() const { return sum_.Get(); }
  // Observations <= bounds[i] (cumulative), as rendered.
  uint64_t CumulativeCount(size_t i) const;
  void Render(const std::string& name, const std::string& labels, std::string* out) const;

 private:
  const std::vector<double>* const bounds_;
  // buckets_[i]: observations in (bounds[i-1], bounds[i]]; the last is +Inf.
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;
  std::atomic<uint64_t> count_{0};
  AtomicDouble sum_;
};

// 100 us to 2 min: request, stage and abort latencies.
const std::vector<double>& LatencyBuckets();
// 1 us to 1 s: event-loop lag, engine steps.
const std::vector<double>& FineLatencyBuckets();
// 1 to 1024: batch sizes.
const std::vector<double>& SizeBuckets();

class FamilyBase {
 public:
  virtual ~FamilyBase() = default;
  virtual void Render(std::string* out) const = 0;
};

// One metric name and its children, one per combination of label values.
template <typename T>
class Family : public FamilyBase {
 public:
  Family(std::string name, std::string help, std::vector<std::string> label_names,
         std::vector<double> bounds)
      : name_(std::move(name)),
        help_(std::move(help)),
        label_names_(std::move(label_names)),
        bounds_(std::move(bounds)) {}

  // The child for `values` (one per label name, in order), made on first use.
  // The reference stays valid until Remove() or Clear().
  T& With(const std::vector<std::string>& values);
  void Remove(const std::vector<std::string>& values);
  void Clear();
  // Replaces every child at once: a render sees the children before or after,
  // never a mix (gauges of state read at scrape time). Family<Gauge> only.
  // References to the old children become invalid.
  void ReplaceAll(const std::map<std::vector<std::string>, double>& values);
  void Render(std::string* out) const override;

 private:
  const std::string name_;
  const std::string help_;
  const std::vector<std::string> label_names_;
  const std::vector<double> bounds_;
  mutable absl::Mutex mu_;
  std::map<std::vector<std::string>, std::unique_ptr<T>> children_ ABSL_GUARDED_BY(mu_);
};

class MetricsRegistry {
 public:
  Family<Counter>& AddCounter(const std::string& name, const std::string& help,
                              std::vector<std::string> labels = {});
  Family<Gauge>& AddGauge(const std::string& name, const std::string& help,
                          std::vector<std::string> labels = {});
  Family<Histogram>& AddHistogram(const std::string& name, const std::string& help,
                                  std::vector<std::string> labels, std::vector<double> bounds);
  // Runs at the start of every Render(), on its thread: for values read from
  // state owned elsewhere (e.g. a snapshot taken on an event loop).
  void OnRender(std::function<void()> hook);

  // Every family, in the order added.
  std::string Render() const;

 private:
  void CheckName(const std::string& name, const std::vector<std::string>& labels);

  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<FamilyBase>> families_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> names_ ABSL_GUARDED_BY(mu_);
  std::vector<std::function<void()>> hooks_ ABSL_GUARDED_BY(mu_);
};

// A sample value as the exposition writes it: shortest round-trip decimal,
// +Inf, -Inf, NaN.
std::string FormatValue(double value);
// `{a="x",b="y"}` with exposition escaping; "" for no labels.
std::string RenderLabels(const std::vector<std::string>& names,
                         const std::vector<std::string>& values);

// Crashes: a child asked for with the wrong number of label values.
[[noreturn]] void WrongLabelCount(const std::string& name, size_t want, size_t got);

template <typename T>
T& Family<T>::With(const std::vector<std::string>& values) {
  if (values.size() != label_names_.size()) {
    WrongLabelCount(name_, label_names_.size(), values.size());
  }
  absl::MutexLock lock(&mu_);
  std::unique_ptr<T>& child = children_[values];
  if (child == nullptr) child = std::make_unique<T>(&bounds_);
  return *child;
}

template <typename T>
void Family<T>::Remove(const std::vector<std::string>& values) {
  absl::MutexLock lock(&mu_);
  children_.erase(values);
}

template <typename T>
void Family<T>::Clear() {
  absl::MutexLock lock(&mu_);
  children_.clear();
}

// Gauges only (metrics.cc).
template <>
void Family<Gauge>::ReplaceAll(const std::map<std::vector<std::string>, double>& values);

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_METRICS_H_
