#include "common/metrics.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "absl/strings/str_cat.h"

namespace omnistage {
namespace {

bool IsNameChar(char c, bool first, bool colon) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':')) {
    return true;
  }
  return !first && c >= '0' && c <= '9';
}

bool IsValidName(const std::string& name, bool colon) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    if (!IsNameChar(name[i], i == 0, colon)) return false;
  }
  return true;
}

// HELP text escapes backslash and newline; label values also the quote.
std::string Escape(const std::string& text, bool quote) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (quote && c == '"') {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

template <typename T>
std::string Header(const std::string& name, const std::string& help) {
  return absl::StrCat("# HELP ", name, " ", Escape(help, false), "\n# TYPE ", name, " ",
                      T::kType, "\n");
}

}  // namespace

void WrongLabelCount(const std::string& name, size_t want, size_t got) {
  std::cerr << "metrics: " << name << " has " << want << " label(s), asked with " << got << "\n";
  std::abort();
}

uint64_t AtomicDouble::ToBits(double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

double AtomicDouble::FromBits(uint64_t bits) {
  double value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

void AtomicDouble::Add(double delta) {
  uint64_t old = bits_.load(std::memory_order_relaxed);
  while (!bits_.compare_exchange_weak(old, ToBits(FromBits(old) + delta),
                                      std::memory_order_relaxed)) {
  }
}

std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  // Counts print as integers, however large they are in the shortest form.
  if (value == std::trunc(value) && std::fabs(value) < 1e15) {
    return absl::StrCat(static_cast<int64_t>(value));
  }
  char buffer[32];
  const std::to_chars_result result = std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::general);
  return std::string(buffer, result.ptr);
}

std::string RenderLabels(const std::vector<std::string>& names,
                         const std::vector<std::string>& values) {
  if (names.empty()) return "";
  std::string out = "{";
  for (size_t i = 0; i < names.size(); ++i) {
    absl::StrAppend(&out, i > 0 ? "," : "", names[i], "=\"", Escape(values[i], true), "\"");
  }
  out += "}";
  return out;
}

void Counter::Render(const std::string& name, const std::string& labels,
                     std::string* out) const {
  absl::StrAppend(out, name, labels, " ", FormatValue(value()), "\n");
}

void Gauge::Render(const std::string& name, const std::string& labels, std::string* out) const {
  absl::StrAppend(out, name, labels, " ", FormatValue(value()), "\n");
}

Histogram::Histogram(const std::vector<double>* bounds)
    : bounds_(bounds), buckets_(new std::atomic<uint64_t>[bounds->size() + 1]) {
  for (size_t i = 0; i <= bounds_->size(); ++i) buckets_[i].store(0, std::memory_order_relaxed);
}

void Histogram::Observe(double value) {
  size_t i = 0;
  while (i < bounds_->size() && value > (*bounds_)[i]) ++i;
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.Add(value);
  count_.fetch_add(1, std::memory_order_relaxed);
}

uint64_t Histogram::CumulativeCount(size_t i) const {
  uint64_t total = 0;
  for (size_t b = 0; b <= i && b <= bounds_->size(); ++b) {
    total += buckets_[b].load(std::memory_order_relaxed);
  }
  return total;
}

void Histogram::Render(const std::string& name, const std::string& labels,
                       std::string* out) const {
  // `labels` is "" or "{...}": le joins the others.
  const std::string prefix =
      labels.empty() ? "{" : absl::StrCat(labels.substr(0, labels.size() - 1), ",");
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_->size(); ++i) {
    cumulative += buckets_[i].load(std::memory_order_relaxed);
    const std::string le = i < bounds_->size() ? FormatValue((*bounds_)[i]) : "+Inf";
    absl::StrAppend(out, name, "_bucket", prefix, "le=\"", le, "\"} ", cumulative, "\n");
  }
  // The count is the +Inf bucket, so the two always agree in one scrape.
  absl::StrAppend(out, name, "_sum", labels, " ", FormatValue(sum()), "\n", name, "_count",
                  labels, " ", cumulative, "\n");
}

const std::vector<double>& LatencyBuckets() {
  static const auto* const kBuckets = new std::vector<double>{
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
      0.25,   0.5,     1,      2.5,   5,      10,    30,   60,    120};
  return *kBuckets;
}

const std::vector<double>& FineLatencyBuckets() {
  static const auto* const kBuckets =
      new std::vector<double>{0.000001, 0.0000025, 0.000005, 0.00001, 0.000025, 0.00005,
                              0.0001,   0.00025,   0.0005,   0.001,   0.0025,   0.005,
                              0.01,     0.025,     0.05,     0.1,     0.25,     1};
  return *kBuckets;
}

const std::vector<double>& SizeBuckets() {
  static const auto* const kBuckets =
      new std::vector<double>{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
  return *kBuckets;
}

template <typename T>
void Family<T>::Render(std::string* out) const {
  out->append(Header<T>(name_, help_));
  absl::MutexLock lock(&mu_);
  for (const auto& [values, child] : children_) {
    child->Render(name_, RenderLabels(label_names_, values), out);
  }
}

template <>
void Family<Gauge>::ReplaceAll(const std::map<std::vector<std::string>, double>& values) {
  std::map<std::vector<std::string>, std::unique_ptr<Gauge>> next;
  for (const auto& [labels, value] : values) {
    if (labels.size() != label_names_.size()) {
      WrongLabelCount(name_, label_names_.size(), labels.size());
    }
    auto child = std::make_unique<Gauge>(&bounds_);
    child->Set(value);
    next.emplace(labels, std::move(child));
  }
  {
    absl::MutexLock lock(&mu_);
    children_.swap(next);
  }
  // The old children go here, outside the lock.
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

void MetricsRegistry::CheckName(const std::string& name, const std::vector<std::string>& labels) {
  bool ok = IsValidName(name, /*colon=*/true);
  for (const std::string& label : labels) {
    ok = ok && IsValidName(label, /*colon=*/false) && label.rfind("__", 0) != 0 && label != "le";
  }
  absl::MutexLock lock(&mu_);
  for (const std::string& known : names_) ok = ok && known != name;
  if (!ok) {
    std::cerr << "metrics: bad or repeated metric " << name << "\n";
    std::abort();
  }
  names_.push_back(name);
}

Family<Counter>& MetricsRegistry::AddCounter(const std::string& name, const std::string& help,
                                             std::vector<std::string> labels) {
  CheckName(name, labels);
  auto family = std::make_unique<Family<Counter>>(name, help, std::move(labels),
                                                  std::vector<double>{});
  Family<Counter>& ref = *family;
  absl::MutexLock lock(&mu_);
  families_.push_back(std::move(family));
  return ref;
}

Family<Gauge>& MetricsRegistry::AddGauge(const std::string& name, const std::string& help,
                                         std::vector<std::string> labels) {
  CheckName(name, labels);
  auto family =
      std::make_unique<Family<Gauge>>(name, help, std::move(labels), std::vector<double>{});
  Family<Gauge>& ref = *family;
  absl::MutexLock lock(&mu_);
  families_.push_back(std::move(family));
  return ref;
}

Family<Histogram>& MetricsRegistry::AddHistogram(const std::string& name,
                                                 const std::string& help,
                                                 std::vector<std::string> labels,
                                                 std::vector<double> bounds) {
  CheckName(name, labels);
  auto family = std::make_unique<Family<Histogram>>(name, help, std::move(labels),
                                                    std::move(bounds));
  Family<Histogram>& ref = *family;
  absl::MutexLock lock(&mu_);
  families_.push_back(std::move(family));
  return ref;
}

void MetricsRegistry::OnRender(std::function<void()> hook) {
  absl::MutexLock lock(&mu_);
  hooks_.push_back(std::move(hook));
}

std::string MetricsRegistry::Render() const {
  std::vector<std::function<void()>> hooks;
  {
    absl::MutexLock lock(&mu_);
    hooks = hooks_;
  }
  for (const auto& hook : hooks) hook();
  std::string out;
  absl::MutexLock lock(&mu_);
  for (const auto& family : families_) family->Render(&out);
  return out;
}

}  // namespace omnistage
