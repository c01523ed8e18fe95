#include "gateway/realtime_audio_input.h"

#include "absl/strings/str_cat.h"

namespace omnistage {
namespace {

// The engine of a speech recognizer: a stage 0 that takes audio.
constexpr char kListenerEngine[] = "listener";
constexpr char kSendText[] = "; send text with conversation.item.create.";

}  // namespace

RealtimeAudioInput::RealtimeAudioInput(const v1::StageStatus* stage0,
                                       const std::string& unknown_why) {
  refusal_.code = "input_audio_not_supported";
  if (stage0 == nullptr) {
    refusal_.message = absl::StrCat("The gateway cannot tell whether this pipeline's stage 0 "
                                    "takes audio (",
                                    unknown_why, ")", kSendText);
  } else if (stage0->engine() == kListenerEngine) {
    refusal_.code = "input_audio_unavailable";
    refusal_.message = absl::StrCat("This pipeline's stage 0 (", stage0->name(),
                                    ") recognizes speech, but this gateway does not stream "
                                    "audio to it through GenerateDuplex yet",
                                    kSendText);
  } else {
    refusal_.message = absl::StrCat("This pipeline's stage 0 (", stage0->name(), ", engine '",
                                    stage0->engine(), "') takes text, not audio", kSendText);
  }
}

std::optional<RealtimeError> RealtimeAudioInput::Handle(Op, const std::string&,
                                                        const std::string& event_id) const {
  RealtimeError error = refusal_;
  error.event_id = event_id;
  return error;
}

}  // namespace omnistage
