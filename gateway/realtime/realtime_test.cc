// The Realtime API's events without a connection: client events read and
// checked, session.update and response.create applied, the conversation as
// the chat completions' request, and a response's server events.
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/escaping.h"
#include "gateway/chat/chat_request.h"
#include "gateway/realtime/realtime_conversation.h"
#include "gateway/realtime/realtime_encoder.h"
#include "gateway/realtime/realtime_events.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace omnistage {
namespace {

using nlohmann::json;

RealtimeError ErrorOf(const std::string& text) {
  std::variant<ClientEvent, RealtimeError> parsed = ParseClientEvent(text);
  EXPECT_TRUE(std::holds_alternative<RealtimeError>(parsed)) << text;
  return std::holds_alternative<RealtimeError>(parsed) ? std::get<RealtimeError>(parsed)
                                                       : RealtimeError();
}

TEST(RealtimeEventsTest, ReadsTypeAndEventId) {
  std::variant<ClientEvent, RealtimeError> parsed =
      ParseClientEvent(R"({"type": "response.create", "event_id": "evt_1"})");
  ASSERT_TRUE(std::holds_alternative<ClientEvent>(parsed));
  EXPECT_EQ(std::get<ClientEvent>(parsed).type, "response.create");
  EXPECT_EQ(std::get<ClientEvent>(parsed).event_id, "evt_1");
  EXPECT_EQ(ErrorOf("not json").code, "invalid_json");
  EXPECT_EQ(ErrorOf("[1, 2]").code, "invalid_json");
  RealtimeError missing = ErrorOf(R"({"event_id": "evt_2"})");
  EXPECT_EQ(missing.code, "missing_required_parameter");
  EXPECT_EQ(missing.param, "type");
  EXPECT_EQ(missing.event_id, "evt_2");
  EXPECT_EQ(ErrorOf(R"({"type": 7})").code, "invalid_type");
}

TEST(RealtimeEventsTest, ErrorEventsHaveOpenAIsShape) {
  EventIds ids;
  const json event = json::parse(ErrorEvent(
      ids, RealtimeError("invalid_value", "Invalid value.", "session.type", "invalid_request_error")));
  EXPECT_EQ(event["type"], "error");
  EXPECT_EQ(event["event_id"].get<std::string>().rfind("event_", 0), 0u);
  EXPECT_EQ(event["error"]["type"], "invalid_request_error");
  EXPECT_EQ(event["error"]["code"], "invalid_value");
  EXPECT_EQ(event["error"]["param"], "session.type");
  EXPECT_TRUE(event["error"]["event_id"].is_null());
  EXPECT_NE(ids.Next(), ids.Next());
}

TEST(RealtimeEventsTest, SessionUpdateSetsWhatItNamesOrNothing) {
  RealtimeConfig config;
  config.model = "omni-demo";
  ASSERT_FALSE(ApplySessionUpdate(json::parse(R"({"session": {"type": "realtime",
      "output_modalities": ["text"], "instructions": "Be brief.", "max_output_tokens": 64,
      "audio": {"output": {"voice": "onyx", "format": {"type": "audio/pcm", "rate": 24000}},
                "input": {"turn_detection": null}}, "tools": [], "unknown": 1}})"),
                                  &config));
  EXPECT_FALSE(config.audio);
  EXPECT_EQ(config.instructions, "Be brief.");
  EXPECT_EQ(config.max_output_tokens, 64);
  EXPECT_EQ(config.voice, "onyx");
  const json session = SessionJson(config);
  EXPECT_EQ(session["output_modalities"], json::array({"text"}));
  EXPECT_EQ(session["audio"]["output"]["voice"], "onyx");
  EXPECT_EQ(session["audio"]["output"]["format"]["rate"], 24000);
  EXPECT_EQ(session["max_output_tokens"], 64);
  ASSERT_FALSE(ApplySessionUpdate(
      json::parse(R"({"session": {"type": "realtime", "max_output_tokens": "inf"}})"), &config));
  EXPECT_FALSE(config.max_output_tokens.has_value());

  // A refusal changes nothing, even what came before the field at fault.
  const RealtimeConfig before = config;
  auto refused = [&](const char* event) {
    std::optional<RealtimeError> error = ApplySessionUpdate(json::parse(event), &config);
    EXPECT_TRUE(error.has_value()) << event;
    EXPECT_EQ(config.instructions, before.instructions);
    return error.has_value() ? error->param + " " + error->code : "";
  };
  EXPECT_EQ(refused(R"({})"), "session missing_required_parameter");
  EXPECT_EQ(refused(R"({"session": {}})"), "session.type missing_required_parameter");
  EXPECT_EQ(refused(R"({"session": {"type": "transcription"}})"), "session.type unsupported_value");
  EXPECT_EQ(refused(R"({"session": {"type": "realtime", "instructions": "x",
      "audio": {"output": {"format": {"type": "audio/pcmu"}}}}})"),
            "session.audio.output.format.type unsupported_value");
  EXPECT_EQ(refused(R"({"session": {"type": "realtime", "audio": {"input":
      {"turn_detection": {"type": "semantic_vad"}}}}})"),
            "session.audio.input.turn_detection.type unsupported_value");
  EXPECT_EQ(refused(R"({"session": {"type": "realtime", "audio": {"input":
      {"turn_detection": {"type": "server_vad", "threshold": 1.5}}}}})"),
            "session.audio.input.turn_detection.threshold invalid_value");
  EXPECT_EQ(refused(R"({"session": {"type": "realtime", "audio": {"input":
      {"turn_detection": {"type": "server_vad", "silence_duration_ms": 20.5}}}}})"),
            "session.audio.input.turn_detection.silence_duration_ms invalid_type");
  EXPECT_EQ(refused(R"({"session": {"type": "realtime", "audio": {"input":
      {"turn_detection": {"type": "server_vad", "create_response": "yes"}}}}})"),
            "session.audio.input.turn_detection.create_response invalid_type");
  EXPECT_EQ(refused(R"({"session": {"type": "realtime", "audio": {"input":
      {"turn_detection": {"type": "server_vad", "idle_timeout_ms": 5000}}}}})"),
            "session.audio.input.turn_detection.idle_timeout_ms unsupported_value");
  EXPECT_EQ(refused(R"({"session": {"type": "realtime", "audio": {"input":
      {"turn_detection": {"type": "none"}}}}})"),
            "session.audio.input.turn_detection.type invalid_value");
  EXPECT_EQ(refused(R"({"session": {"type": "realtime", "output_modalities": ["video"]}})"),
            "session.output_modalities invalid_value");
  EXPECT_EQ(refused(R"({"session": {"type": "realtime", "max_output_tokens": 0}})"),
            "session.max_output_tokens invalid_value");
  EXPECT_EQ(refused(R"({"session": {"type": "realtime", "tools": [{"type": "function"}]}})"),
            "session.tools unsupported_value");
  EXPECT_EQ(refused(R"({"session": {"type": "realtime", "model": "gpt-realtime"}})"),
            "session.model invalid_value");
}

TEST(RealtimeEventsTest, TurnDetectionIsServerVadByDefaultAndNullTurnsItOff) {
  RealtimeConfig config;
  ASSERT_TRUE(config.turn_detection.has_value());
  json shown = SessionJson(config)["audio"]["input"]["turn_detection"];
  EXPECT_EQ(shown["type"], "server_vad");
  EXPECT_EQ(shown["threshold"], 0.5);
  EXPECT_EQ(shown["prefix_padding_ms"], 300);
  EXPECT_EQ(shown["silence_duration_ms"], 500);
  EXPECT_EQ(shown["create_response"], true);
  EXPECT_EQ(shown["interrupt_response"], true);
  EXPECT_TRUE(shown["idle_timeout_ms"].is_null());

  ASSERT_FALSE(ApplySessionUpdate(json::parse(R"({"session": {"type": "realtime",
      "audio": {"input": {"turn_detection": null}}}})"), &config));
  EXPECT_FALSE(config.turn_detection.has_value());
  EXPECT_TRUE(SessionJson(config)["audio"]["input"]["turn_detection"].is_null());
  // An update that names no turn_detection leaves it as it is.
  ASSERT_FALSE(ApplySessionUpdate(json::parse(R"({"session": {"type": "realtime",
      "instructions": "x"}})"), &config));
  EXPECT_FALSE(config.turn_detection.has_value());

  // The fields given are set, the others take their defaults.
  ASSERT_FALSE(ApplySessionUpdate(json::parse(R"({"session": {"type": "realtime",
      "audio": {"input": {"turn_detection": {"type": "server_vad", "threshold": 0.8,
      "silence_duration_ms": 200, "create_response": false}}}}})"), &config));
  ASSERT_TRUE(config.turn_detection.has_value());
  EXPECT_EQ(config.turn_detection->threshold, 0.8);
  EXPECT_EQ(config.turn_detection->prefix_padding_ms, 300);
  EXPECT_EQ(config.turn_detection->silence_duration_ms, 200);
  EXPECT_FALSE(config.turn_detection->create_response);
  EXPECT_TRUE(config.turn_detection->interrupt_response);
  shown = SessionJson(config)["audio"]["input"]["turn_detection"];
  EXPECT_EQ(shown["silence_duration_ms"], 200);
  EXPECT_EQ(shown["create_response"], false);
}

TEST(RealtimeConversationTest, TruncateKeepsTheAudioHeardAndTheTextBeforeIt) {
  RealtimeConversation conversation;
  RealtimeItem said{"a", "assistant", "One. Two. Three."};
  said.audio = true;
  said.audio_ms = 3000;
  // Each sentence's text came just before its audio.
  said.marks = {{0, 5}, {1000, 10}, {2000, 16}};
  RealtimeItem user{"u", "user", "hi"};
  std::string previous;
  ASSERT_FALSE(conversation.Add(&user, std::nullopt, &previous));
  ASSERT_FALSE(conversation.Add(&said, std::nullopt, &previous));
  EXPECT_EQ(conversation.Truncate("a", 0, 3001)->code, "invalid_value");
  EXPECT_EQ(conversation.Truncate("a", 1, 100)->param, "content_index");
  EXPECT_EQ(conversation.Truncate("u", 0, 0)->param, "item_id");
  EXPECT_EQ(conversation.Truncate("nope", 0, 0)->code, "item_not_found");
  // Cut during the second sentence: the first two remain.
  ASSERT_FALSE(conversation.Truncate("a", 0, 1500));
  EXPECT_EQ(conversation.Find("a")->text, "One. Two. ");
  EXPECT_EQ(conversation.Find("a")->audio_ms, 1500);
  EXPECT_EQ(conversation.Truncate("a", 0, 1600)->param, "audio_end_ms");  // past it now
  ASSERT_FALSE(conversation.Truncate("a", 0, 0));
  EXPECT_EQ(conversation.Find("a")->text, "");
}

TEST(RealtimeEventsTest, ItemCreateReadsTextMessages) {
  std::variant<ItemCreate, RealtimeError> parsed = ParseItemCreate(json::parse(R"({
      "previous_item_id": "root", "item": {"id": "item_a", "type": "message", "role": "user",
      "content": [{"type": "input_text", "text": "Hello, "}, {"type": "input_text",
      "text": "sea."}]}})"));
  ASSERT_TRUE(std::holds_alternative<ItemCreate>(parsed));
  const ItemCreate& create = std::get<ItemCreate>(parsed);
  EXPECT_EQ(create.item.id, "item_a");
  EXPECT_EQ(create.item.text, "Hello, sea.");
  EXPECT_EQ(create.previous_item_id, "root");
  const json item = ItemJson(create.item);
  EXPECT_EQ(item["object"], "realtime.item");
  EXPECT_EQ(item["content"][0]["type"], "input_text");

  auto param = [](const char* event) {
    std::variant<ItemCreate, RealtimeError> p = ParseItemCreate(json::parse(event));
    return std::holds_alternative<RealtimeError>(p) ? std::get<RealtimeError>(p).param : "";
  };
  EXPECT_EQ(param(R"({})"), "item");
  EXPECT_EQ(param(R"({"item": {"type": "function_call"}})"), "item.type");
  EXPECT_EQ(param(R"({"item": {"type": "message", "role": "robot", "content": []}})"),
            "item.role");
  EXPECT_EQ(param(R"({"item": {"type": "message", "role": "user", "content": [
      {"type": "input_audio", "audio": "AAAA"}]}})"),
            "item.content[0].type");
  EXPECT_EQ(param(R"({"item": {"type": "message", "role": "user", "content": [
      {"type": "input_text"}]}})"),
            "item.content[0].text");
}

TEST(RealtimeConversationTest, AddsInOrderAndRefusesWhatItCannotPlace) {
  RealtimeConversation conversation;
  RealtimeItem a{"a", "user", "one"}, b{"b", "user", "two"}, c{"", "user", "zero"};
  std::string previous;
  ASSERT_FALSE(conversation.Add(&a, std::nullopt, &previous));
  EXPECT_EQ(previous, "");
  ASSERT_FALSE(conversation.Add(&b, std::nullopt, &previous));
  EXPECT_EQ(previous, "a");
  ASSERT_FALSE(conversation.Add(&c, std::string("root"), &previous));
  EXPECT_EQ(c.id.rfind("item_", 0), 0u);  // Named when the client gave no id.
  EXPECT_EQ(conversation.last_id(), "b");
  RealtimeItem again{"a", "user", "x"};
  EXPECT_EQ(conversation.Add(&again, std::nullopt, &previous)->code, "item_id_taken");
  RealtimeItem lost{"d", "user", "x"};
  EXPECT_EQ(conversation.Add(&lost, std::string("nope"), &previous)->code, "item_not_found");
  EXPECT_TRUE(conversation.Delete("a"));
  EXPECT_FALSE(conversation.Delete("a"));
  EXPECT_EQ(conversation.size(), 2u);
}

TEST(RealtimeConversationTest, RequestIsTheChatCompletionsOne) {
  const ServedModel model{"omni-demo", 0, 2};
  RealtimeConversation conversation;
  RealtimeConfig config;
  EXPECT_EQ(std::get<RealtimeError>(conversation.Request(config, model)).code,
            "empty_conversation");
  RealtimeItem hello{"a", "user", "Tell me about the sea."};
  std::string previous;
  conversation.Add(&hello, std::nullopt, &previous);
  config.voice = "alloy";
  config.max_output_tokens = 24;
  std::variant<ChatRequest, RealtimeError> request = conversation.Request(config, model);
  ASSERT_TRUE(std::holds_alternative<ChatRequest>(request));
  // What a chat completion of the same message, modalities and voice makes.
  std::variant<ChatRequest, ApiError> chat = ParseChatRequest(R"({"model": "omni-demo",
      "messages": [{"role": "user", "content": "Tell me about the sea."}],
      "modalities": ["text", "audio"], "audio": {"voice": "alloy", "format": "pcm16"},
      "max_completion_tokens": 24})", model);
  ASSERT_TRUE(std::holds_alternative<ChatRequest>(chat));
  EXPECT_EQ(std::get<ChatRequest>(request).generate.SerializeAsString(),
            std::get<ChatRequest>(chat).generate.SerializeAsString());

  config.instructions = "Be brief.";
  config.audio = false;
  const v1::GenerateRequest text = std::get<ChatRequest>(conversation.Request(config, model)).generate;
  EXPECT_EQ(text.prompt(), "system: Be brief.\nuser: Tell me about the sea.");
  ASSERT_EQ(text.output_modalities_size(), 1);
  EXPECT_EQ(text.output_modalities(0), v1::MODALITY_TEXT);
}

v1::GenerateResponse Outputs(const std::string& text, const std::string& pcm, int rate = 24000) {
  v1::GenerateResponse response;
  if (!text.empty()) response.add_outputs()->mutable_payload()->mutable_text()->set_text(text);
  if (!pcm.empty()) {
    v1::AudioChunk* audio = response.add_outputs()->mutable_payload()->mutable_audio();
    audio->set_pcm_s16le(pcm);
    audio->set_sample_rate_hz(rate);
    audio->set_channels(1);
  }
  return response;
}

std::vector<std::string> Types(const std::vector<std::string>& events) {
  std::vector<std::string> types;
  for (const std::string& e : events) types.push_back(json::parse(e)["type"]);
  return types;
}

TEST(RealtimeEncoderTest, AnAudioResponsesEventsInOrder) {
  EventIds ids;
  RealtimeConfig config;  // Audio by default.
  RealtimeEncoder encoder(ids, config, "conv_1", "Tell me about the sea.");
  const json created = json::parse(encoder.Created());
  EXPECT_EQ(created["response"]["status"], "in_progress");
  EXPECT_EQ(Types(encoder.Begin("item_a")),
            (std::vector<std::string>{"response.output_item.added", "conversation.item.added",
                                      "response.content_part.added"}));
  const std::vector<std::string> deltas = encoder.Events(Outputs("The sea", "\x01\x02"));
  ASSERT_EQ(Types(deltas), (std::vector<std::string>{"response.output_audio_transcript.delta",
                                                     "response.output_audio.delta"}));
  const json audio = json::parse(deltas[1]);
  EXPECT_EQ(audio["delta"], absl::Base64Escape("\x01\x02"));
  EXPECT_EQ(audio["response_id"], encoder.response_id());
  EXPECT_EQ(audio["item_id"], encoder.item_id());
  const std::vector<std::string> done = encoder.Finish(RealtimeEncoder::Status::kCompleted);
  EXPECT_EQ(Types(done),
            (std::vector<std::string>{"response.output_audio.done",
                                      "response.output_audio_transcript.done",
                                      "response.content_part.done", "response.output_item.done",
                                      "conversation.item.done", "response.done"}));
  const json response = json::parse(done.back())["response"];
  EXPECT_EQ(response["status"], "completed");
  EXPECT_EQ(response["output"][0]["content"][0]["transcript"], "The sea");
  EXPECT_EQ(response["usage"]["input_tokens"], 5);
  EXPECT_EQ(response["usage"]["output_token_details"]["text_tokens"], 2);
  EXPECT_EQ(encoder.item().status, "completed");
}

TEST(RealtimeEncoderTest, TextCancelledAndAudioOfAnotherRate) {
  EventIds ids;
  RealtimeConfig config;
  config.audio = false;
  RealtimeEncoder text(ids, config, "conv_1", "Hi");
  text.Begin("");
  EXPECT_EQ(Types(text.Events(Outputs("Hel", "\x01\x02"))),
            std::vector<std::string>{"response.output_text.delta"});  // No audio asked for.
  const json cancelled = json::parse(text.Finish(RealtimeEncoder::Status::kCancelled).back());
  EXPECT_EQ(cancelled["response"]["status"], "cancelled");
  EXPECT_EQ(cancelled["response"]["status_details"]["reason"], "client_cancelled");
  EXPECT_EQ(cancelled["response"]["output"][0]["status"], "incomplete");

  RealtimeEncoder audio(ids, RealtimeConfig(), "conv_1", "Hi");
  audio.Begin("");
  audio.Events(Outputs("", "\x01\x02", 16000));
  ASSERT_TRUE(audio.failure().has_value());
  EXPECT_EQ(audio.failure()->code, "unsupported_audio");
  const RealtimeError error = *audio.failure();
  const json failed = json::parse(audio.Finish(RealtimeEncoder::Status::kFailed, &error).back());
  EXPECT_EQ(failed["response"]["status_details"]["error"]["code"], "unsupported_audio");
}

TEST(RealtimeEventsTest, AudioAppendDecodesBase64) {
  std::variant<std::string, RealtimeError> pcm =
      ParseAudioAppend(json::parse(R"({"audio": "AQI="})"));
  ASSERT_TRUE(std::holds_alternative<std::string>(pcm));
  EXPECT_EQ(std::get<std::string>(pcm), "\x01\x02");
  EXPECT_EQ(std::get<RealtimeError>(ParseAudioAppend(json::parse(R"({"audio": "!!"})"))).code,
            "invalid_value");
  EXPECT_EQ(std::get<RealtimeError>(ParseAudioAppend(json::parse(R"({})"))).code,
            "missing_required_parameter");
}

}  // namespace
}  // namespace omnistage
