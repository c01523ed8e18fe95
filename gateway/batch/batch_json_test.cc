#include "gateway/batch/batch_json.h"

#include <string>
#include <variant>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace omnistage {
namespace {

ApiError Refusal(const std::string& body) {
  std::variant<BatchCreate, ApiError> parsed = ParseBatchCreate(body);
  EXPECT_TRUE(std::holds_alternative<ApiError>(parsed)) << body;
  return std::holds_alternative<ApiError>(parsed) ? std::get<ApiError>(parsed) : ApiError{};
}

TEST(BatchJsonTest, ReadsACreate) {
  std::variant<BatchCreate, ApiError> parsed = ParseBatchCreate(
      R"({"input_file_id": "file-1", "endpoint": "/v1/chat/completions",
          "completion_window": "24h", "metadata": {"job": "nightly"}})");
  ASSERT_TRUE(std::holds_alternative<BatchCreate>(parsed));
  const BatchCreate& create = std::get<BatchCreate>(parsed);
  EXPECT_EQ(create.input_file_id, "file-1");
  EXPECT_EQ(create.endpoint, "/v1/chat/completions");
  EXPECT_EQ(create.completion_window, "24h");
  EXPECT_EQ(create.metadata, R"({"job":"nightly"})");
  EXPECT_EQ(std::get<BatchCreate>(ParseBatchCreate(R"({"input_file_id": "f",
      "endpoint": "/v1/audio/speech", "completion_window": "1h"})"))
                .metadata,
            "null");
}

TEST(BatchJsonTest, RefusesACreateNamingTheField) {
  EXPECT_EQ(Refusal(R"({"endpoint": "/v1/chat/completions", "completion_window": "24h"})").param,
            "input_file_id");
  EXPECT_EQ(Refusal(R"({"input_file_id": "f", "endpoint": "/v1/embeddings",
                        "completion_window": "24h"})")
                .param,
            "endpoint");
  EXPECT_EQ(Refusal(R"({"input_file_id": "f", "endpoint": "/v1/chat/completions",
                        "completion_window": "forever"})")
                .param,
            "completion_window");
  EXPECT_EQ(Refusal(R"({"input_file_id": "f", "endpoint": "/v1/chat/completions",
                        "completion_window": "24h", "metadata": {"n": 3}})")
                .param,
            "metadata");
  EXPECT_EQ(Refusal("[]").http_status, 400);
}

TEST(BatchJsonTest, WritesABatchAsOpenAIDoes) {
  StoredBatch batch;
  batch.id = "batch_1";
  batch.endpoint = "/v1/chat/completions";
  batch.input_file_id = "file-1";
  batch.completion_window = "24h";
  batch.status = "completed";
  batch.metadata = "null";
  batch.created_at = 100;
  batch.in_progress_at = 100;
  batch.expires_at = 200;
  batch.completed_at = 150;
  batch.output_file_id = "file-2";
  batch.total = 3;
  batch.completed = 2;
  batch.failed = 1;
  const nlohmann::json json = nlohmann::json::parse(BatchJson(batch));
  EXPECT_EQ(json["object"], "batch");
  EXPECT_EQ(json["status"], "completed");
  EXPECT_EQ(json["output_file_id"], "file-2");
  EXPECT_TRUE(json["error_file_id"].is_null());
  EXPECT_TRUE(json["cancelled_at"].is_null());
  EXPECT_EQ(json["completed_at"], 150);
  EXPECT_EQ(json["request_counts"]["total"], 3);
  EXPECT_EQ(json["request_counts"]["failed"], 1);
  EXPECT_TRUE(json["metadata"].is_null());
  const nlohmann::json list = nlohmann::json::parse(BatchListJson({batch}, false));
  EXPECT_EQ(list["data"][0]["id"], "batch_1");
  EXPECT_EQ(list["last_id"], "batch_1");
}

TEST(BatchJsonTest, AnInputFileErrorNamesItsLine) {
  const ApiError error = InputFileError({"duplicate_custom_id", "Line 3: ...", "custom_id", 3});
  EXPECT_EQ(error.http_status, 400);
  EXPECT_EQ(error.param, "input_file_id");
  EXPECT_EQ(error.code, "duplicate_custom_id");
  EXPECT_EQ(error.message, "Line 3: ...");
}

}  // namespace
}  // namespace omnistage
