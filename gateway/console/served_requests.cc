#include "gateway/console/served_requests.h"

#include <algorithm>
#include <utility>

namespace omnistage {

ServedRequests::ServedRequests(size_t capacity) : capacity_(std::max<size_t>(capacity, 1)) {}

void ServedRequests::Add(ServedRequest request) {
  ++total_;
  recent_.push_front(std::move(request));
  if (recent_.size() > capacity_) recent_.pop_back();
}

}  // namespace omnistage
