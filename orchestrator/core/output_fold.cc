#include "orchestrator/core/output_fold.h"

#include <string_view>
#include <utility>

#include "absl/container/flat_hash_map.h"

namespace omnistage {
namespace {

// Appends `next` to `into`'s payloads, joining it to the last one when both are
// tokens or both text.
void AppendPayload(v1::RequestOutput& into, v1::Payload& next) {
  if (into.payloads_size() > 0) {
    v1::Payload& last = *into.mutable_payloads(into.payloads_size() - 1);
    if (last.has_tokens() && next.has_tokens()) {
      last.mutable_tokens()->mutable_ids()->MergeFrom(next.tokens().ids());
      return;
    }
    if (last.has_text() && next.has_text()) {
      last.mutable_text()->mutable_text()->append(next.text().text());
      return;
    }
  }
  *into.add_payloads() = std::move(next);
}

}  // namespace

void FoldOutputs(v1::StepOutputs* step) {
  auto& outputs = *step->mutable_outputs();
  if (outputs.size() < 2) return;
  // Request id -> the position of its open (unfinished) output among the kept.
  // The keys view the kept outputs' ids, which stay put while later ones move.
  absl::flat_hash_map<std::string_view, int> open;
  open.reserve(outputs.size());
  int kept = 0;
  for (int i = 0; i < outputs.size(); ++i) {
    v1::RequestOutput& output = outputs[i];
    auto it = open.find(output.request_id());
    if (it != open.end()) {
      v1::RequestOutput& into = outputs[it->second];
      for (v1::Payload& payload : *output.mutable_payloads()) AppendPayload(into, payload);
      if (output.finished()) {
        into.set_finished(true);
        into.set_finish_reason(output.finish_reason());
        *into.mutable_error() = std::move(*output.mutable_error());
        open.erase(it);
      }
      continue;
    }
    if (kept != i) outputs.SwapElements(kept, i);
    if (!outputs[kept].finished()) open.emplace(outputs[kept].request_id(), kept);
    ++kept;
  }
  outputs.DeleteSubrange(kept, outputs.size() - kept);
}

}  // namespace omnistage
