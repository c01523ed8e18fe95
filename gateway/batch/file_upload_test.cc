#include "gateway/batch/file_upload.h"

#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace omnistage {
namespace {

constexpr char kType[] = "multipart/form-data; boundary=XyZ";

std::string Form(const std::string& purpose, const std::string& file, bool with_file = true) {
  std::string body;
  if (!purpose.empty()) {
    body += "--XyZ\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\n" + purpose + "\r\n";
  }
  if (with_file) {
    body +=
        "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"in.jsonl\"\r\n"
        "Content-Type: application/jsonl\r\n\r\n" +
        file + "\r\n";
  }
  return body + "--XyZ--\r\n";
}

const ApiError& ErrorOf(const std::variant<FileUpload, ApiError>& parsed) {
  static const ApiError none;
  EXPECT_TRUE(std::holds_alternative<ApiError>(parsed));
  return std::holds_alternative<ApiError>(parsed) ? std::get<ApiError>(parsed) : none;
}

TEST(FileUploadTest, ReadsTheFileAndItsPurpose) {
  const std::string lines = "{\"custom_id\": \"a\"}\n{\"custom_id\": \"b\"}\n";
  std::variant<FileUpload, ApiError> parsed = ParseFileUpload(kType, Form("batch", lines), 1000);
  ASSERT_TRUE(std::holds_alternative<FileUpload>(parsed));
  const FileUpload& upload = std::get<FileUpload>(parsed);
  EXPECT_EQ(upload.purpose, "batch");
  EXPECT_EQ(upload.filename, "in.jsonl");
  EXPECT_EQ(upload.content, lines);
}

TEST(FileUploadTest, EachMistakeNamesItsField) {
  EXPECT_EQ(ErrorOf(ParseFileUpload(kType, Form("", "x"), 1000)).param, "purpose");
  EXPECT_EQ(ErrorOf(ParseFileUpload(kType, Form("fine-tune", "x"), 1000)).param, "purpose");
  EXPECT_EQ(ErrorOf(ParseFileUpload(kType, Form("batch", "", false), 1000)).param, "file");
  EXPECT_EQ(ErrorOf(ParseFileUpload(kType, Form("batch", ""), 1000)).param, "file");
  const ApiError& big =
      ErrorOf(ParseFileUpload(kType, Form("batch", std::string(1001, 'x')), 1000));
  EXPECT_EQ(big.http_status, 413);
  EXPECT_EQ(big.param, "file");
  const ApiError& not_a_form = ErrorOf(ParseFileUpload("application/json", "{}", 1000));
  EXPECT_EQ(not_a_form.http_status, 400);
}

TEST(FileUploadTest, AnswersInOpenAIsShapes) {
  StoredFile file;
  file.id = "file-0123456789abcdef01234567";
  file.purpose = "batch";
  file.filename = "in.jsonl";
  file.bytes = 42;
  file.created_at = 1700000000;
  const nlohmann::json one = nlohmann::json::parse(FileJson(file));
  EXPECT_EQ(one["object"], "file");
  EXPECT_EQ(one["id"], file.id);
  EXPECT_EQ(one["bytes"], 42);
  EXPECT_EQ(one["created_at"], 1700000000);
  EXPECT_EQ(one["filename"], "in.jsonl");
  EXPECT_EQ(one["purpose"], "batch");
  EXPECT_EQ(one["status"], "processed");
  const nlohmann::json list = nlohmann::json::parse(FileListJson({file, file}, true));
  EXPECT_EQ(list["object"], "list");
  EXPECT_EQ(list["data"].size(), 2u);
  EXPECT_EQ(list["has_more"], true);
  EXPECT_EQ(list["last_id"], file.id);
  const nlohmann::json empty = nlohmann::json::parse(FileListJson({}, false));
  EXPECT_EQ(empty["has_more"], false);
  EXPECT_TRUE(empty["first_id"].is_null());
  const nlohmann::json deleted = nlohmann::json::parse(FileDeletedJson(file.id));
  EXPECT_EQ(deleted["deleted"], true);
  EXPECT_EQ(deleted["object"], "file");
}

}  // namespace
}  // namespace omnistage
