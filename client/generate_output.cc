#include "client/generate_output.h"

#include <cstdio>
#include <iostream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace omnistage {

std::string CodeName(int code) {
  const std::string name = absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
  return name.empty() ? absl::StrCat("CODE ", code) : name;
}

std::string Describe(const grpc::Status& status) {
  return absl::StrCat(status.error_message(), " (", CodeName(status.error_code()), ")");
}

std::string Describe(const v1::Error& error) {
  return absl::StrCat(error.message(), " (", CodeName(error.code()), ")");
}

void GenerateOutput::Add(const v1::GenerateResponse& response) {
  request_id_ = response.request_id();
  for (const v1::OutputChunk& chunk : response.outputs()) {
    const v1::Payload& payload = chunk.payload();
    if (payload.has_text()) {
      if (label_ && chunk.stage_id() != last_text_stage_) {
        const int stage = chunk.stage_id();
        printer_.Text(absl::StrCat(last_text_stage_ < 0 ? "" : "\n",
                                   stage >= 0 && stage < static_cast<int>(names_.size())
                                       ? names_[stage]
                                       : absl::StrCat("stage ", stage),
                                   ": "));
        last_text_stage_ = stage;
      }
      printer_.Text(payload.text().text());
    } else if (payload.has_audio()) {
      if (absl::Status s = wav_.Append(payload.audio()); !s.ok()) {
        std::cerr << "omni: " << s.message() << "\n";
      }
      printer_.Audio(wav_.seconds());
    } else if (payload.has_tokens()) {
      printer_.Text(absl::StrCat(absl::StrJoin(payload.tokens().ids(), " "), " "));
    }
  }
  if (response.has_terminal()) terminal_ = response.terminal();
}

int GenerateOutput::End(const grpc::Status& status, const std::string& command,
                        const std::string& wav_path, bool interrupted) {
  printer_.End();
  const bool complete = status.ok() && (terminal_.finish_reason() == v1::FINISH_REASON_STOP ||
                                        terminal_.finish_reason() == v1::FINISH_REASON_LENGTH);
  // The audio that arrived is kept, also when the request did not finish.
  int rc = kOk;
  if (wav_.bytes() > 0 && wav_path.empty()) {
    std::fprintf(stderr, "omni: received %.2f s of audio; not saved (pass --wav=FILE)\n",
                 wav_.seconds());
  } else if (wav_.bytes() > 0) {
    if (absl::Status s = wav_.Save(wav_path); !s.ok()) {
      std::cerr << "omni: " << s.message() << "\n";
      rc = kError;
    } else {
      std::fprintf(stderr, "omni: wrote %s (%.2f s of audio at %d Hz%s)\n", wav_path.c_str(),
                   wav_.seconds(), wav_.sample_rate_hz(), complete ? "" : ", what arrived");
    }
  }
  const std::string who = request_id_.empty() ? "the request" : request_id_;
  if (interrupted) {
    std::cerr << "omni: interrupted; cancelled " << who
              << " (the orchestrator stops it on every stage)\n";
    return kInterrupted;
  }
  if (!status.ok()) {
    std::cerr << "omni: " << command << " failed: " << Describe(status) << "\n";
    return kError;
  }
  if (rc != kOk) return rc;
  switch (terminal_.finish_reason()) {
    case v1::FINISH_REASON_STOP:
    case v1::FINISH_REASON_LENGTH:
      std::cerr << "omni: " << who << " finished ("
                << v1::FinishReason_Name(terminal_.finish_reason()) << ")\n";
      return kOk;
    case v1::FINISH_REASON_ABORT:
      std::cerr << "omni: " << who << " was aborted\n";
      return kAborted;
    default:
      std::cerr << "omni: " << who << " failed: " << Describe(terminal_.error()) << "\n";
      return kError;
  }
}

}  // namespace omnistage
