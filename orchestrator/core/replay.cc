#include "orchestrator/core/replay.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"

namespace omnistage {
namespace {

// FNV-1a, one byte at a time: a fingerprint that does not depend on how the
// content was cut into payloads.
uint64_t HashBytes(uint64_t hash, absl::string_view bytes) {
  for (unsigned char c : bytes) hash = (hash ^ c) * 0x100000001b3ULL;
  return hash;
}

uint64_t HashId(uint64_t hash, int32_t id) {
  const auto u = static_cast<uint32_t>(id);
  const char bytes[4] = {static_cast<char>(u), static_cast<char>(u >> 8),
                         static_cast<char>(u >> 16), static_cast<char>(u >> 24)};
  return HashBytes(hash, absl::string_view(bytes, 4));
}

// Drops from the front of `bytes` what is left of `target` past `*seen`,
// counting and fingerprinting it; true when nothing of `bytes` is left.
bool TrimBytes(std::string* bytes, int64_t target, int64_t* seen, uint64_t* hash) {
  const auto n = static_cast<size_t>(std::min<int64_t>(target - *seen, bytes->size()));
  *hash = HashBytes(*hash, absl::string_view(*bytes).substr(0, n));
  *seen += static_cast<int64_t>(n);
  bytes->erase(0, n);
  return bytes->empty();
}

absl::Status Differs(absl::string_view kind, int64_t count) {
  return absl::DataLossError(absl::StrCat("the replayed run's first ", count, " ", kind,
                                          " differ from what was delivered before"));
}

}  // namespace

void ContentMark::Add(const v1::Payload& payload) {
  switch (payload.kind_case()) {
    case v1::Payload::kText:
      text_bytes += static_cast<int64_t>(payload.text().text().size());
      text_hash = HashBytes(text_hash, payload.text().text());
      break;
    case v1::Payload::kTokens:
      token_ids += payload.tokens().ids_size();
      for (int32_t id : payload.tokens().ids()) token_hash = HashId(token_hash, id);
      break;
    case v1::Payload::kAudio:
      audio_bytes += static_cast<int64_t>(payload.audio().pcm_s16le().size());
      audio_hash = HashBytes(audio_hash, payload.audio().pcm_s16le());
      break;
    case v1::Payload::kRaw:
      ++raw_payloads;
      break;
    case v1::Payload::KIND_NOT_SET:
      break;
  }
}

bool ReplayFilter::TrimOne(v1::Payload* payload) {
  switch (payload->kind_case()) {
    case v1::Payload::kText:
      return TrimBytes(payload->mutable_text()->mutable_text(), target_.text_bytes,
                       &seen_.text_bytes, &seen_.text_hash);
    case v1::Payload::kTokens: {
      auto* ids = payload->mutable_tokens()->mutable_ids();
      const int n = static_cast<int>(
          std::min<int64_t>(target_.token_ids - seen_.token_ids, ids->size()));
      for (int i = 0; i < n; ++i) seen_.token_hash = HashId(seen_.token_hash, ids->Get(i));
      seen_.token_ids += n;
      ids->erase(ids->begin(), ids->begin() + n);
      return ids->empty();
    }
    case v1::Payload::kAudio:
      return TrimBytes(payload->mutable_audio()->mutable_pcm_s16le(), target_.audio_bytes,
                       &seen_.audio_bytes, &seen_.audio_hash);
    case v1::Payload::kRaw:
      if (seen_.raw_payloads >= target_.raw_payloads) return false;
      ++seen_.raw_payloads;
      return true;
    case v1::Payload::KIND_NOT_SET:
      return false;
  }
  return false;
}

absl::Status ReplayFilter::CheckKindsReached() const {
  if (seen_.text_bytes == target_.text_bytes && seen_.text_hash != target_.text_hash) {
    return Differs("bytes of text", target_.text_bytes);
  }
  if (seen_.token_ids == target_.token_ids && seen_.token_hash != target_.token_hash) {
    return Differs("token ids", target_.token_ids);
  }
  if (seen_.audio_bytes == target_.audio_bytes && seen_.audio_hash != target_.audio_hash) {
    return Differs("bytes of audio", target_.audio_bytes);
  }
  return absl::OkStatus();
}

absl::Status ReplayFilter::Trim(google::protobuf::RepeatedPtrField<v1::Payload>* payloads) {
  int kept = 0;
  for (int i = 0; i < payloads->size(); ++i) {
    v1::Payload* payload = payloads->Mutable(i);
    // Whatever is left of a payload after the delivered part goes on.
    if (TrimOne(payload)) continue;
    if (kept != i) payloads->SwapElements(kept, i);
    ++kept;
  }
  payloads->DeleteSubrange(kept, payloads->size() - kept);
  return CheckKindsReached();
}

bool ReplayFilter::done() const {
  return seen_.text_bytes == target_.text_bytes && seen_.token_ids == target_.token_ids &&
         seen_.audio_bytes == target_.audio_bytes && seen_.raw_payloads == target_.raw_payloads;
}

absl::Status ReplayFilter::CheckEnded() const {
  if (done()) return absl::OkStatus();
  return absl::DataLossError(absl::StrCat(
      "the replayed run ended having reproduced ", seen_.text_bytes, " of ", target_.text_bytes,
      " bytes of text, ", seen_.token_ids, " of ", target_.token_ids, " token ids, ",
      seen_.audio_bytes, " of ", target_.audio_bytes, " bytes of audio and ",
      seen_.raw_payloads, " of ", target_.raw_payloads,
      " raw payloads delivered before"));
}

namespace {

// Whether `next` can be joined to `last` without changing what an engine reads.
bool Joinable(const v1::Payload& last, const v1::Payload& next) {
  if (last.kind_case() != next.kind_case()) return false;
  switch (next.kind_case()) {
    case v1::Payload::kText:
    case v1::Payload::kTokens:
      return true;
    case v1::Payload::kAudio:
      return last.audio().sample_rate_hz() == next.audio().sample_rate_hz() &&
             last.audio().channels() == next.audio().channels();
    default:
      return false;
  }
}

}  // namespace

int64_t StageReplay::KeepInput(const v1::Payload& payload) {
  if (input.empty() || !Joinable(input.back(), payload)) {
    input.push_back(payload);
  } else if (payload.has_text()) {
    input.back().mutable_text()->mutable_text()->append(payload.text().text());
  } else if (payload.has_tokens()) {
    input.back().mutable_tokens()->mutable_ids()->MergeFrom(payload.tokens().ids());
  } else {
    input.back().mutable_audio()->mutable_pcm_s16le()->append(payload.audio().pcm_s16le());
  }
  return static_cast<int64_t>(payload.ByteSizeLong());
}

int64_t StageReplay::KeepProduced(const v1::Payload& payload) {
  auto into = [&payload](std::optional<v1::Payload>* kept) -> v1::Payload& {
    if (!kept->has_value()) {
      kept->emplace(payload);
      return **kept;
    }
    v1::Payload& to = **kept;
    if (payload.has_text()) to.mutable_text()->mutable_text()->append(payload.text().text());
    if (payload.has_tokens()) {
      to.mutable_tokens()->mutable_ids()->MergeFrom(payload.tokens().ids());
    }
    if (payload.has_audio()) {
      to.mutable_audio()->mutable_pcm_s16le()->append(payload.audio().pcm_s16le());
    }
    return to;
  };
  switch (payload.kind_case()) {
    case v1::Payload::kText:
      into(&produced_text);
      break;
    case v1::Payload::kTokens:
      into(&produced_tokens);
      break;
    case v1::Payload::kAudio:
      into(&produced_audio);
      break;
    case v1::Payload::kRaw:
      produced_raw.push_back(payload);
      break;
    case v1::Payload::KIND_NOT_SET:
      return 0;
  }
  return static_cast<int64_t>(payload.ByteSizeLong());
}

std::vector<v1::Payload> StageReplay::Produced() const {
  std::vector<v1::Payload> produced;
  for (const std::optional<v1::Payload>* kept : {&produced_text, &produced_tokens, &produced_audio}) {
    if (kept->has_value()) produced.push_back(**kept);
  }
  produced.insert(produced.end(), produced_raw.begin(), produced_raw.end());
  return produced;
}

void StageReplay::Clear() {
  input.clear();
  input.shrink_to_fit();
  produced_text.reset();
  produced_tokens.reset();
  produced_audio.reset();
  produced_raw.clear();
  produced_raw.shrink_to_fit();
}

}  // namespace omnistage
