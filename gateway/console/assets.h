// The live console's page, script and style sheet (gateway/console/*.html,
// .js, .css), built into the gateway binary by embed_assets.sh: the gateway
// serves them with no files beside it.
#ifndef OMNISTAGE_GATEWAY_CONSOLE_ASSETS_H_
#define OMNISTAGE_GATEWAY_CONSOLE_ASSETS_H_

#include <string_view>

namespace omnistage {

struct ConsoleAsset {
  // The file's name ("console.js"), its Content-Type, its bytes.
  std::string_view name;
  std::string_view content_type;
  std::string_view body;
};

// The asset named `name`; nullptr when there is none.
const ConsoleAsset* FindConsoleAsset(std::string_view name);

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_CONSOLE_ASSETS_H_
