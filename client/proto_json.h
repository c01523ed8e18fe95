// A message as the JSON `omni` prints for programs (status --json, utility):
// indented, every field shown also when it has its default value.
#ifndef OMNISTAGE_CLIENT_PROTO_JSON_H_
#define OMNISTAGE_CLIENT_PROTO_JSON_H_

#include <string>

#include "google/protobuf/message.h"

namespace omnistage {

std::string ToJson(const google::protobuf::Message& message);

}  // namespace omnistage

#endif  // OMNISTAGE_CLIENT_PROTO_JSON_H_
