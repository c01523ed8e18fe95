// JsonBody: a request's body read as the JSON object the OpenAI API takes, or
// the 400 that says what is wrong with it in OpenAI's shape: bytes that are not
// UTF-8 (JSON text must be), naming the field whose value holds them
// (`messages[0].content`) and the byte; anything else that is not JSON; JSON
// that is not an object.
//
//   std::variant<nlohmann::json, ApiError> body = ReadJsonBody(exchange->body());
#ifndef OMNISTAGE_GATEWAY_HTTP_JSON_BODY_H_
#define OMNISTAGE_GATEWAY_HTTP_JSON_BODY_H_

#include <string>
#include <variant>

#include "gateway/http/api_error.h"
#include "nlohmann/json.hpp"

namespace omnistage {

std::variant<nlohmann::json, ApiError> ReadJsonBody(const std::string& body);

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_HTTP_JSON_BODY_H_
