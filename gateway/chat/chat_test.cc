// The OpenAI request mapping and the output encoding, without a server.
#include <string>
#include <variant>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "common/retry_hint.h"
#include "common/wav_writer.h"
#include "gateway/chat/chat_request.h"
#include "gateway/chat/chat_response.h"
#include "gateway/http/api_error.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace omnistage {
namespace {

using nlohmann::json;

const ServedModel kModel{"omni-demo", 0};

ChatRequest Parse(const std::string& body) {
  std::variant<ChatRequest, ApiError> parsed = ParseChatRequest(body, kModel);
  EXPECT_TRUE(std::holds_alternative<ChatRequest>(parsed))
      << std::get<ApiError>(parsed).Json();
  return std::holds_alternative<ChatRequest>(parsed) ? std::get<ChatRequest>(parsed)
                                                     : ChatRequest();
}

ApiError Refusal(const std::string& body) {
  std::variant<ChatRequest, ApiError> parsed = ParseChatRequest(body, kModel);
  EXPECT_TRUE(std::holds_alternative<ApiError>(parsed)) << body;
  return std::holds_alternative<ApiError>(parsed) ? std::get<ApiError>(parsed) : ApiError();
}

TEST(ChatRequestTest, MapsTheFieldsOntoAGenerateRequest) {
  ChatRequest r = Parse(R"({"model": "omni-demo",
      "messages": [{"role": "user", "content": "Tell me about the sea."}],
      "modalities": ["text", "audio"], "audio": {"voice": "alloy", "format": "pcm16"},
      "max_completion_tokens": 64, "seed": 7, "temperature": 0.5, "stream": true,
      "stream_options": {"include_usage": true}, "user": "u-1", "logprobs": false,
      "some_future_field": {"ignored": true}})");
  EXPECT_EQ(r.generate.prompt(), "Tell me about the sea.");
  ASSERT_EQ(r.generate.output_modalities_size(), 2);
  EXPECT_EQ(r.generate.output_modalities(0), v1::MODALITY_TEXT);
  EXPECT_EQ(r.generate.output_modalities(1), v1::MODALITY_AUDIO);
  ASSERT_EQ(r.generate.stage_params_size(), 1);
  EXPECT_EQ(r.generate.stage_params(0).stage_id(), 0);
  EXPECT_EQ(r.generate.stage_params(0).max_tokens(), 64u);
  EXPECT_EQ(r.generate.stage_params(0).seed(), 7u);
  EXPECT_FLOAT_EQ(r.generate.stage_params(0).temperature(), 0.5f);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_TRUE(r.audio);
  EXPECT_EQ(r.audio_format, AudioFormat::kPcm16);
  EXPECT_EQ(r.user, "u-1");
  EXPECT_EQ(r.generate.session_key(), "u-1");
  EXPECT_TRUE(r.generate.request_id().empty());  // The orchestrator names it.
}

// `user`, or the X-Session-Id header when it is there, keys the session.
TEST(ChatRequestTest, TheSessionKeyIsTheHeaderOrElseTheUser) {
  auto key = [](const std::string& user, const std::string& header) {
    std::variant<ChatRequest, ApiError> parsed = ParseChatRequest(
        R"({"model": "omni-demo", "messages": [{"role": "user", "content": "Hi"}])" + user + "}",
        kModel, header);
    EXPECT_TRUE(std::holds_alternative<ChatRequest>(parsed)) << user << " " << header;
    return std::holds_alternative<ChatRequest>(parsed)
               ? std::get<ChatRequest>(parsed).generate.session_key()
               : "";
  };
  EXPECT_EQ(key("", ""), "");
  EXPECT_EQ(key(R"(, "user": null)", ""), "");
  EXPECT_EQ(key(R"(, "user": "alice")", ""), "alice");
  EXPECT_EQ(key("", "conversation-7"), "conversation-7");
  EXPECT_EQ(key(R"(, "user": "alice")", "conversation-7"), "conversation-7");
  const std::string longest(256, 'k');
  EXPECT_EQ(key(R"(, "user": ")" + longest + R"(")", ""), longest);
  EXPECT_EQ(key("", longest), longest);
  EXPECT_EQ(key("", "a b/c=d"), "a b/c=d");
}

TEST(ChatRequestTest, RefusesASessionKeyTooLongOrNotAStringNamingItsSource) {
  const std::string body =
      R"({"model": "omni-demo", "messages": [{"role": "user", "content": "Hi"}])";
  struct Case {
    std::string user;
    std::string header;
    std::string param;
    std::string code;
    std::string message;
  };
  const Case cases[] = {
      {R"(, "user": 7)", "", "user", "invalid_type",
       "Invalid type for 'user': expected a string, but got an integer instead."},
      {R"(, "user": ")" + std::string(257, 'u') + R"(")", "", "user", "string_above_max_length",
       "Invalid 'user': string too long. Expected a string with maximum length 256, but got a "
       "string with length 257 instead."},
      // Both are checked, whichever keys the session.
      {R"(, "user": ")" + std::string(300, 'u') + R"(")", "s", "user", "string_above_max_length",
       "length 300"},
      {R"(, "user": "alice")", std::string(257, 'h'), "X-Session-Id", "string_above_max_length",
       "Invalid 'X-Session-Id' header: string too long. Expected a string with maximum length "
       "256, but got a string with length 257 instead."},
      {"", "tab\\there", "X-Session-Id", "", ""},  // printable: a backslash and a t
      {"", "tab\there", "X-Session-Id", "invalid_value",
       "Invalid 'X-Session-Id' header: byte 4 is not printable ASCII."},
      {"", "caf\xc3\xa9", "X-Session-Id", "invalid_value", "byte 4 is not printable ASCII"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.user + " | " + c.header);
    std::variant<ChatRequest, ApiError> parsed = ParseChatRequest(body + c.user + "}", kModel,
                                                                  c.header);
    if (c.code.empty()) {
      EXPECT_TRUE(std::holds_alternative<ChatRequest>(parsed));
      continue;
    }
    ASSERT_TRUE(std::holds_alternative<ApiError>(parsed));
    const ApiError& e = std::get<ApiError>(parsed);
    EXPECT_EQ(e.http_status, 400);
    EXPECT_EQ(e.type, "invalid_request_error");
    EXPECT_EQ(e.param, c.param);
    EXPECT_EQ(e.code, c.code);
    EXPECT_THAT(e.message, ::testing::HasSubstr(c.message));
  }
}

// audio.voice goes to the voice stage as its extra parameter `voice`, OpenAI's
// names as espeak-ng variants; without a voice stage (kModel) it is not used.
TEST(ChatRequestTest, TheVoiceGoesToTheStageThatSpeaks) {
  const ServedModel speaking{"omni-demo", 0, 2};
  auto parse = [&](const std::string& audio, const std::string& modalities) {
    std::variant<ChatRequest, ApiError> parsed = ParseChatRequest(
        R"({"model": "omni-demo", "messages": [{"role": "user", "content": "Hi"}],
            "max_tokens": 8, "modalities": )" + modalities + R"(, "audio": )" + audio + "}",
        speaking);
    EXPECT_TRUE(std::holds_alternative<ChatRequest>(parsed));
    return std::get<ChatRequest>(parsed).generate;
  };
  v1::GenerateRequest onyx = parse(R"({"voice": "onyx"})", R"(["text", "audio"])");
  ASSERT_EQ(onyx.stage_params_size(), 2);
  EXPECT_EQ(onyx.stage_params(0).stage_id(), 2);
  EXPECT_EQ(onyx.stage_params(0).extra().at("voice"), "m7");
  EXPECT_EQ(onyx.stage_params(1).stage_id(), 0);
  EXPECT_EQ(onyx.stage_params(1).max_tokens(), 8u);
  EXPECT_EQ(parse(R"({"voice": "croak"})", R"(["audio"])").stage_params(0).extra().at("voice"),
            "croak");
  EXPECT_EQ(VoiceVariant("alloy"), "f2");
  EXPECT_EQ(VoiceVariant("shimmer"), "f5");
  // No audio asked for: no voice passed on.
  EXPECT_EQ(parse(R"({"voice": "onyx"})", R"(["text"])").stage_params_size(), 1);
  // A voice stage that is the text stage: one StageParameters for both.
  const ServedModel one{"omni-demo", 0, 0};
  std::variant<ChatRequest, ApiError> both = ParseChatRequest(
      R"({"model": "omni-demo", "messages": [{"role": "user", "content": "Hi"}], "seed": 3,
          "modalities": ["audio"], "audio": {"voice": "echo"}})",
      one);
  ASSERT_TRUE(std::holds_alternative<ChatRequest>(both));
  const v1::GenerateRequest& merged = std::get<ChatRequest>(both).generate;
  ASSERT_EQ(merged.stage_params_size(), 1);
  EXPECT_EQ(merged.stage_params(0).seed(), 3u);
  EXPECT_EQ(merged.stage_params(0).extra().at("voice"), "m1");
  // The default model has no voice stage.
  EXPECT_EQ(Parse(R"({"model": "omni-demo", "messages": [{"role": "user", "content": "Hi"}],
      "modalities": ["audio"], "audio": {"voice": "onyx"}})").generate.stage_params_size(), 0);
}

TEST(ChatRequestTest, DefaultsToTextAndJoinsSeveralMessagesByRole) {
  ChatRequest r = Parse(R"({"model": "omni-demo", "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "Hi "}, {"type": "text", "text": "there"}]},
      {"role": "assistant", "content": null}], "max_tokens": 5})");
  EXPECT_EQ(r.generate.prompt(), "system: Be brief.\nuser: Hi there\nassistant: ");
  ASSERT_EQ(r.generate.output_modalities_size(), 1);
  EXPECT_EQ(r.generate.output_modalities(0), v1::MODALITY_TEXT);
  EXPECT_FALSE(r.stream);
  EXPECT_EQ(r.audio_format, AudioFormat::kWav);
  EXPECT_EQ(r.generate.stage_params(0).max_tokens(), 5u);
}

TEST(ChatRequestTest, RefusesWhatItCannotDoNamingTheField) {
  const std::string messages = R"("messages": [{"role": "user", "content": "x"}])";
  struct Case {
    std::string body;
    int status;
    std::string param;
    std::string message_part;
  };
  const Case cases[] = {
      {"not json", 400, "", "could not parse the JSON body"},
      {"[1, 2]", 400, "", "could not parse the JSON body"},
      {"{\"model\": \"omni-demo\", \"messages\": [{\"role\": \"user\", \"content\": \"\xff\"}]}",
       400, "messages[0].content", "not valid UTF-8"},
      {"{" + messages + "}", 400, "model", "Missing required parameter: 'model'"},
      {R"({"model": "gpt-4o", )" + messages + "}", 404, "model", "does not exist"},
      {R"({"model": "omni-demo"})", 400, "messages", "Missing required parameter"},
      {R"({"model": "omni-demo", "messages": []})", 400, "messages", "empty array"},
      {R"({"model": "omni-demo", "messages": "hi"})", 400, "messages", "expected an array"},
      {R"({"model": "omni-demo", "messages": [{"role": "wizard", "content": "x"}]})", 400,
       "messages[0].role", "Invalid value: 'wizard'"},
      {R"({"model": "omni-demo", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
       400, "messages[0].content[0].type", "not supported"},
      {R"({"model": "omni-demo", "max_tokens": "64", )" + messages + "}", 400, "max_tokens",
       "Invalid type for 'max_tokens': expected an integer, but got a string instead."},
      {R"({"model": "omni-demo", "max_tokens": 0, )" + messages + "}", 400, "max_tokens",
       "expected a value in [1, 1000000]"},
      {R"({"model": "omni-demo", "temperature": 3, )" + messages + "}", 400, "temperature",
       "[0, 2]"},
      {R"({"model": "omni-demo", "modalities": ["video"], )" + messages + "}", 400,
       "modalities[0]", "Invalid value: 'video'"},
      {R"({"model": "omni-demo", "audio": {"format": "mp3"}, )" + messages + "}", 400,
       "audio.format", "Supported values are: 'wav' and 'pcm16'"},
      {R"({"model": "omni-demo", "stream": "yes", )" + messages + "}", 400, "stream",
       "expected a boolean"},
      {R"({"model": "omni-demo", "stream_options": {"include_usage": true}, )" + messages + "}",
       400, "stream_options", "only allowed when 'stream' is enabled"},
      {R"({"model": "omni-demo", "n": 2, )" + messages + "}", 400, "n", "[1, 1]"},
  };
  for (const Case& c : cases) {
    ApiError e = Refusal(c.body);
    EXPECT_EQ(e.http_status, c.status) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body;
    EXPECT_NE(e.message.find(c.message_part), std::string::npos) << e.message;
    const json shaped = json::parse(e.Json());
    ASSERT_TRUE(shaped.contains("error")) << e.Json();
    for (const char* key : {"message", "type", "param", "code"}) {
      EXPECT_TRUE(shaped["error"].contains(key)) << key << " in " << e.Json();
    }
  }
}

// A WAV file of `seconds` of a 16-bit square wave at `rate_hz`, `channels`.
std::string Wav(double seconds, int rate_hz, int channels) {
  const int64_t frames = static_cast<int64_t>(seconds * rate_hz);
  std::string wav = WavHeader(rate_hz, channels, frames * 2 * channels);
  for (int64_t i = 0; i < frames * channels; ++i) {
    const int16_t sample = (i / channels / 40) % 2 == 0 ? 8000 : -8000;
    wav.push_back(static_cast<char>(static_cast<uint16_t>(sample) & 0xff));
    wav.push_back(static_cast<char>(static_cast<uint16_t>(sample) >> 8));
  }
  return wav;
}

std::string AudioPart(const std::string& file, const std::string& format = "wav") {
  return nlohmann::json({{"type", "input_audio"},
                         {"input_audio", {{"data", absl::Base64Escape(file)}, {"format", format}}}})
      .dump();
}

// input_audio parts make the prompt streamed input: text and audio in order,
// the audio mono at the file's rate, a second at most per payload.
TEST(ChatRequestTest, InputAudioBecomesStreamedInputInOrder) {
  const ChatRequest r = Parse(
      R"({"model": "omni-demo", "messages": [{"role": "system", "content": "Be brief."},
          {"role": "user", "content": [{"type": "text", "text": "Listen: "}, )" +
      AudioPart(Wav(2.5, 22050, 2)) + R"(, {"type": "text", "text": " Answer."}]}]})");
  EXPECT_EQ(r.generate.prompt(), "");
  ASSERT_EQ(r.input.size(), 5u);
  EXPECT_EQ(r.input[0].text().text(), "system: Be brief.\nuser: Listen: ");
  int64_t samples = 0;
  for (size_t i = 1; i <= 3; ++i) {
    ASSERT_TRUE(r.input[i].has_audio()) << i;
    EXPECT_EQ(r.input[i].audio().sample_rate_hz(), 22050);
    EXPECT_EQ(r.input[i].audio().channels(), 1);
    EXPECT_LE(r.input[i].audio().pcm_s16le().size(), 22050u * 2);
    samples += static_cast<int64_t>(r.input[i].audio().pcm_s16le().size() / 2);
  }
  EXPECT_EQ(samples, 55125);
  EXPECT_EQ(r.input[4].text().text(), " Answer.");
  // A lone user message of audio alone: the audio, nothing else.
  const ChatRequest alone =
      Parse(R"({"model": "omni-demo", "messages": [{"role": "user", "content": [)" +
            AudioPart(Wav(0.5, 16000, 1)) + "]}]}");
  ASSERT_EQ(alone.input.size(), 1u);
  EXPECT_TRUE(alone.input[0].has_audio());
}

TEST(ChatRequestTest, RefusesAudioItCannotHearNamingThePart) {
  auto refusal = [](const std::string& part) {
    return Refusal(R"({"model": "omni-demo", "messages": [{"role": "user", "content": [)" + part +
                   "]}]}");
  };
  ApiError e = refusal(AudioPart(Wav(0.5, 16000, 1), "flac"));
  EXPECT_EQ(e.param, "messages[0].content[0].input_audio.format");
  e = refusal(R"({"type": "input_audio", "input_audio": {"data": "@@@", "format": "wav"}})");
  EXPECT_EQ(e.param, "messages[0].content[0].input_audio.data");
  e = refusal(AudioPart("not audio at all, just words"));
  EXPECT_EQ(e.param, "messages[0].content[0].input_audio.data");
  EXPECT_THAT(e.message, ::testing::HasSubstr("not audio"));
  // A wav said to be mp3: not what the format names.
  e = refusal(AudioPart(Wav(0.5, 16000, 1), "mp3"));
  EXPECT_EQ(e.param, "messages[0].content[0].input_audio.data");
  // A wav whose audio is not there: the decoder's refusal.
  e = refusal(AudioPart("RIFF\x04\0\0\0WAVEjunk"));
  EXPECT_THAT(e.message, ::testing::HasSubstr("not audio"));
  e = refusal(AudioPart(WavHeader(16000, 1, 0)));
  EXPECT_THAT(e.message, ::testing::HasSubstr("no audio"));
  e = refusal(R"({"type": "input_audio", "input_audio": "x"})");
  EXPECT_EQ(e.param, "messages[0].content[0].input_audio");
  // Over the limit in all: two parts of 160 s each.
  const std::string long_part = AudioPart(Wav(160, 8000, 1));
  e = refusal(long_part + ", " + long_part);
  EXPECT_EQ(e.param, "messages[0].content[1].input_audio.data");
  EXPECT_THAT(e.message, ::testing::HasSubstr("300"));
}

TEST(ApiErrorTest, ARetryHintBecomesTheHeadersOpenAIsSdksWaitBy) {
  const ApiError error = FromStatus(
      WithRetryAfter(absl::ResourceExhaustedError("the queue is full"), absl::Milliseconds(1500)));
  EXPECT_EQ(error.http_status, 429);
  EXPECT_EQ(error.type, "rate_limit_error");
  using Header = std::pair<std::string, std::string>;
  EXPECT_EQ(error.Headers(),
            (std::vector<Header>{{"Retry-After", "2"}, {"retry-after-ms", "1500"}}));
  EXPECT_TRUE(FromStatus(absl::ResourceExhaustedError("x")).Headers().empty());
}

TEST(ApiErrorTest, OrchestratorStatusesBecomeHttpStatuses) {
  EXPECT_EQ(FromStatus(absl::InvalidArgumentError("x")).http_status, 400);
  EXPECT_EQ(FromStatus(absl::UnauthenticatedError("x")).http_status, 401);
  EXPECT_EQ(FromStatus(absl::PermissionDeniedError("x")).http_status, 403);
  EXPECT_EQ(FromStatus(absl::NotFoundError("x")).http_status, 404);
  EXPECT_EQ(FromStatus(absl::ResourceExhaustedError("x")).http_status, 429);
  EXPECT_EQ(FromStatus(absl::UnavailableError("x")).http_status, 503);
  EXPECT_EQ(FromStatus(absl::InternalError("x")).http_status, 500);
  EXPECT_EQ(json::parse(FromStatus(absl::UnauthenticatedError("no token")).Json())["error"]
                ["type"],
            "authentication_error");
}

v1::GenerateResponse Output(const std::string& text, const std::string& pcm) {
  v1::GenerateResponse response;
  response.set_request_id("req-1");
  if (!text.empty()) {
    v1::OutputChunk* chunk = response.add_outputs();
    chunk->set_modality(v1::MODALITY_TEXT);
    chunk->mutable_payload()->mutable_text()->set_text(text);
  }
  if (!pcm.empty()) {
    v1::OutputChunk* chunk = response.add_outputs();
    chunk->set_modality(v1::MODALITY_AUDIO);
    chunk->mutable_payload()->mutable_audio()->set_pcm_s16le(pcm);
    chunk->mutable_payload()->mutable_audio()->set_sample_rate_hz(24000);
  }
  return response;
}

// The JSON of each "data: " event (and "[DONE]" as a string).
std::vector<json> EventsOf(const std::string& sse) {
  std::vector<json> events;
  for (absl::string_view block : absl::StrSplit(sse, "\n\n", absl::SkipEmpty())) {
    EXPECT_TRUE(absl::StartsWith(block, "data: ")) << block;
    const std::string data(block.substr(6));
    events.push_back(data == "[DONE]" ? json("[DONE]") : json::parse(data));
  }
  return events;
}

TEST(ChatEncoderTest, StreamsTextAndAudioAsChunksThenDone) {
  ChatRequest request = Parse(R"({"model": "omni-demo", "messages": [{"role": "user",
      "content": "Say hi"}], "modalities": ["text", "audio"], "stream": true,
      "stream_options": {"include_usage": true}})");
  ChatEncoder encoder(request, "omni-demo", 1700000000);
  encoder.set_request_id("req-1");
  std::string sse = encoder.Events(Output("Hi", std::string(4, '\1')));
  sse += encoder.Events(Output(" there", std::string(2, '\2')));
  std::vector<json> events = EventsOf(sse);
  v1::Terminal stop;
  stop.set_finish_reason(v1::FINISH_REASON_STOP);
  const std::vector<json> last = EventsOf(encoder.FinalEvents(stop));
  events.insert(events.end(), last.begin(), last.end());
  ASSERT_EQ(events.size(), 7u);
  EXPECT_EQ(events[0]["id"], "chatcmpl-req-1");
  EXPECT_EQ(events[0]["object"], "chat.completion.chunk");
  EXPECT_EQ(events[0]["model"], "omni-demo");
  EXPECT_EQ(events[0]["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(events[0]["choices"][0]["delta"]["content"], "Hi");
  EXPECT_TRUE(events[0]["choices"][0]["finish_reason"].is_null());
  // Audio: a WAV header of unknown length first (format wav), then the PCM.
  std::string first_audio;
  ASSERT_TRUE(absl::Base64Unescape(
      events[1]["choices"][0]["delta"]["audio"]["data"].get<std::string>(), &first_audio));
  ASSERT_EQ(first_audio.size(), 44u + 4u);
  EXPECT_EQ(first_audio.substr(0, 4), "RIFF");
  EXPECT_EQ(first_audio.substr(44), std::string(4, '\1'));
  EXPECT_EQ(events[2]["choices"][0]["delta"]["content"], " there");
  std::string second_audio;
  ASSERT_TRUE(absl::Base64Unescape(
      events[3]["choices"][0]["delta"]["audio"]["data"].get<std::string>(), &second_audio));
  EXPECT_EQ(second_audio, std::string(2, '\2'));
  EXPECT_EQ(events[4]["choices"][0]["finish_reason"], "stop");
  EXPECT_TRUE(events[5]["choices"].empty());
  EXPECT_EQ(events[5]["usage"]["prompt_tokens"], 2);
  EXPECT_EQ(events[5]["usage"]["completion_tokens"], 2);
  EXPECT_EQ(events[6], "[DONE]");
}

TEST(ChatEncoderTest, AnErrorAfterTheStartIsAnErrorEvent) {
  ChatRequest request = Parse(R"({"model": "omni-demo", "messages": [{"role": "user",
      "content": "x"}], "stream": true})");
  ChatEncoder encoder(request, "omni-demo", 1);
  v1::Terminal failed;
  failed.set_finish_reason(v1::FINISH_REASON_ERROR);
  failed.mutable_error()->set_code(14);
  failed.mutable_error()->set_message("stage 1 (talker) replica 0 died");
  const std::vector<json> events = EventsOf(encoder.FinalEvents(failed));
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0]["error"]["message"], "stage 1 (talker) replica 0 died");
  EXPECT_EQ(events[0]["error"]["type"], "server_error");
  EXPECT_EQ(events[1], "[DONE]");
}

// A voice the vocoder does not know: the worker refuses its request's
// params.extra.voice, and the client is told which of its fields that was.
TEST(ChatEncoderTest, AnUnknownVoiceIsRefusedNamingAudioVoice) {
  const std::string body = R"({"model": "omni-demo", "messages": [{"role": "user",
      "content": "x"}], "modalities": ["text", "audio"], "audio": {"voice": "nosuchvoice",
      "format": "wav"}})";
  std::variant<ChatRequest, ApiError> parsed =
      ParseChatRequest(body, ServedModel{"omni-demo", 0, /*voice_stage=*/2});
  ASSERT_TRUE(std::holds_alternative<ChatRequest>(parsed));
  ChatEncoder encoder(std::get<ChatRequest>(parsed), "omni-demo", 1);
  v1::Terminal refused;
  refused.set_finish_reason(v1::FINISH_REASON_ERROR);
  v1::Error* error = refused.mutable_error();
  error->set_code(3);  // INVALID_ARGUMENT
  error->set_message("stage 2 (vocoder) replica 0 rejected the request: engine vocoder: extra "
                     "parameter voice: expected one of ..., got 'nosuchvoice'");
  error->set_stage_id(2);
  error->set_field("params.extra.voice");
  std::variant<std::string, ApiError> answer = encoder.Completion(refused);
  ASSERT_TRUE(std::holds_alternative<ApiError>(answer));
  const json body_json = json::parse(std::get<ApiError>(answer).Json());
  EXPECT_EQ(std::get<ApiError>(answer).http_status, 400);
  EXPECT_EQ(body_json["error"]["param"], "audio.voice");
  EXPECT_EQ(body_json["error"]["type"], "invalid_request_error");
  // The same refusal as a stream's error event.
  EXPECT_EQ(EventsOf(encoder.FinalEvents(refused))[0]["error"]["param"], "audio.voice");
  // Another stage's refusal of a field named alike is no audio.voice.
  error->set_stage_id(1);
  EXPECT_TRUE(json::parse(encoder.TerminalError(refused).Json())["error"]["param"].is_null());
}

TEST(ChatEncoderTest, AWholeCompletionCarriesTextAndAWavFile) {
  ChatRequest request = Parse(R"({"model": "omni-demo", "messages": [{"role": "user",
      "content": "x"}], "modalities": ["text", "audio"]})");
  ChatEncoder encoder(request, "omni-demo", 5);
  encoder.set_request_id("r9");
  encoder.Gather(Output("Hello", std::string(6, '\3')));
  encoder.Gather(Output(" world", ""));
  v1::Terminal length;
  length.set_finish_reason(v1::FINISH_REASON_LENGTH);
  std::variant<std::string, ApiError> body = encoder.Completion(length);
  ASSERT_TRUE(std::holds_alternative<std::string>(body));
  const json completion = json::parse(std::get<std::string>(body));
  EXPECT_EQ(completion["id"], "chatcmpl-r9");
  EXPECT_EQ(completion["object"], "chat.completion");
  EXPECT_EQ(completion["choices"][0]["message"]["content"], "Hello world");
  EXPECT_EQ(completion["choices"][0]["finish_reason"], "length");
  std::string wav;
  ASSERT_TRUE(absl::Base64Unescape(
      completion["choices"][0]["message"]["audio"]["data"].get<std::string>(), &wav));
  ASSERT_EQ(wav.size(), 44u + 6u);
  EXPECT_EQ(static_cast<unsigned char>(wav[40]), 6);  // The data chunk's real length.
  EXPECT_EQ(completion["usage"]["completion_tokens"], 2);
}

// The answer is the text stage's text: another stage's text (a listener's
// caption of the question) is not in it, streamed or whole.
TEST(ChatEncoderTest, TheAnswerIsTheTextStages) {
  const ServedModel voice_agent{"voice-agent", 1};
  auto parsed = ParseChatRequest(
      R"({"model": "voice-agent", "messages": [{"role": "user", "content": "x"}]})", voice_agent);
  ASSERT_TRUE(std::holds_alternative<ChatRequest>(parsed));
  ChatEncoder encoder(std::get<ChatRequest>(parsed), "voice-agent", 5);
  v1::GenerateResponse response = Output("what time is it", "");
  v1::OutputChunk* answer = response.add_outputs();
  answer->set_stage_id(1);
  answer->set_modality(v1::MODALITY_TEXT);
  answer->mutable_payload()->mutable_text()->set_text("Noon.");
  const std::vector<json> events = EventsOf(encoder.Events(response));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["choices"][0]["delta"]["content"], "Noon.");
  encoder.Gather(response);
  v1::Terminal stop;
  stop.set_finish_reason(v1::FINISH_REASON_STOP);
  const json completion = json::parse(std::get<std::string>(encoder.Completion(stop)));
  EXPECT_EQ(completion["choices"][0]["message"]["content"], "Noon.");
}

// A message quoting bytes that are not UTF-8 (a client's model name) is still
// an answer: they become U+FFFD.
TEST(ApiErrorTest, BytesThatAreNotUtf8AreReplaced) {
  const ApiError error = InvalidRequest("model", "The model 'a\xff\xfe" "b' does not exist.");
  const json parsed = json::parse(error.Json());
  EXPECT_EQ(parsed["error"]["message"].get<std::string>(),
            "The model 'a\xef\xbf\xbd\xef\xbf\xbd" "b' does not exist.");
}

TEST(ApiErrorTest, AnUnreachableOrchestratorsMessageNamesTheFix) {
  const std::string closed =
      "connections to all backends failing; last error: UNAVAILABLE: ipv4:127.0.0.1:1: Socket closed";
  EXPECT_THAT(ExplainUnreachable(closed, /*tls=*/false),
              testing::EndsWith("Socket closed (the orchestrator closes plaintext connections, so "
                                "it may serve TLS: start the gateway with --orchestrator_tls_ca "
                                "(the CA of its certificate))"));
  EXPECT_EQ(ExplainUnreachable(closed, /*tls=*/true), closed);
  EXPECT_THAT(ExplainUnreachable("... SSL routines::certificate verify failed", /*tls=*/true),
              testing::HasSubstr("does not chain to --orchestrator_tls_ca"));
  EXPECT_THAT(ExplainUnreachable("... SSL routines::wrong version number", /*tls=*/true),
              testing::HasSubstr("does not speak TLS"));
  const std::string refused = "failed to connect to all addresses; ... Connection refused";
  EXPECT_EQ(ExplainUnreachable(refused, /*tls=*/false), refused);
}

}  // namespace
}  // namespace omnistage
