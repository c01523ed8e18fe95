#include "gateway/http/multipart.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

using ::testing::HasSubstr;

constexpr char kType[] = "multipart/form-data; boundary=------------------------d74496d66958873e";
constexpr char kDash[] = "--------------------------d74496d66958873e";

// A body as curl -F writes it: a file, then two fields.
std::string CurlBody(const std::string& file) {
  return absl::StrCat(kDash, "\r\n",
                      "Content-Disposition: form-data; name=\"file\"; filename=\"hello.wav\"\r\n",
                      "Content-Type: audio/wav\r\n\r\n", file, "\r\n", kDash, "\r\n",
                      "Content-Disposition: form-data; name=\"model\"\r\n\r\n", "whisper-1\r\n",
                      kDash, "\r\n", "Content-Disposition: form-data; name=\"response_format\"\r\n",
                      "\r\n", "srt\r\n", kDash, "--\r\n");
}

TEST(MultipartTest, ReadsAFileAndFieldsAsCurlSendsThem) {
  // Binary content, with what looks like line breaks and dashes inside.
  std::string file("RIFF\0\0\r\n--\r\n-\x01\xff", 14);
  absl::StatusOr<std::vector<FormPart>> parts = ParseMultipart(kType, CurlBody(file));
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_EQ(parts->size(), 3u);
  const FormPart* upload = FindPart(*parts, "file");
  ASSERT_NE(upload, nullptr);
  EXPECT_EQ(upload->filename, "hello.wav");
  EXPECT_EQ(upload->content_type, "audio/wav");
  EXPECT_EQ(upload->body, file);
  EXPECT_EQ(FindPart(*parts, "model")->body, "whisper-1");
  EXPECT_EQ(FindPart(*parts, "response_format")->body, "srt");
  EXPECT_EQ(FindPart(*parts, "language"), nullptr);
}

TEST(MultipartTest, QuotedValuesCaseAndAPreambleAreRead) {
  const std::string body =
      "ignored preamble\r\n--b\r\ncontent-disposition: FORM-DATA; filename=\"a \\\"b\\\".ogg\"; "
      "name=file\r\nCONTENT-TYPE: audio/ogg\r\n\r\nOggS\r\n--b--";
  absl::StatusOr<std::vector<FormPart>> parts =
      ParseMultipart("Multipart/Form-Data; charset=utf-8; Boundary=\"b\"", body);
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_EQ(parts->size(), 1u);
  EXPECT_EQ((*parts)[0].name, "file");
  EXPECT_EQ((*parts)[0].filename, "a \"b\".ogg");
  EXPECT_EQ((*parts)[0].content_type, "audio/ogg");
  EXPECT_EQ((*parts)[0].body, "OggS");
}

TEST(MultipartTest, AnEmptyPartIsKept) {
  absl::StatusOr<std::vector<FormPart>> parts =
      ParseMultipart("multipart/form-data; boundary=b",
                     "--b\r\nContent-Disposition: form-data; name=\"prompt\"\r\n\r\n\r\n--b--\r\n");
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_EQ(parts->size(), 1u);
  EXPECT_EQ((*parts)[0].body, "");
}

TEST(MultipartTest, WhatIsNotAFormIsRefusedSayingWhy) {
  struct Case {
    std::string type;
    std::string body;
    std::string says;
  };
  const std::string many = [] {
    std::string body;
    for (size_t i = 0; i <= kMaxParts; ++i) {
      absl::StrAppend(&body, "--b\r\nContent-Disposition: form-data; name=\"f", i,
                      "\"\r\n\r\nx\r\n");
    }
    return body + "--b--";
  }();
  for (const Case& c : std::vector<Case>{
           {"application/json", "{}", "must be multipart/form-data, not 'application/json'"},
           {"multipart/form-data", "--b--", "names no boundary"},
           {"multipart/form-data; boundary=", "--b--", "names no boundary"},
           {"multipart/form-data; boundary=b", "no boundary here", "does not hold its boundary"},
           {"multipart/form-data; boundary=b",
            "--b\r\nContent-Disposition: form-data; name=\"f\"\r\n\r\nunterminated",
            "ends before its closing boundary"},
           {"multipart/form-data; boundary=b",
            "--b\r\nContent-Disposition: form-data; name=\"f\"\r\n",
            "ends inside a part's headers"},
           {"multipart/form-data; boundary=b", "--b\r\nContent-Type: text/plain\r\n\r\nx\r\n--b--",
            "no Content-Disposition naming it"},
           {"multipart/form-data; boundary=b",
            "--b\r\nContent-Disposition: attachment; name=\"f\"\r\n\r\nx\r\n--b--",
            "not form-data"},
           {"multipart/form-data; boundary=b", "--b\r\nbroken header\r\n\r\nx\r\n--b--",
            "has no ':'"},
           {"multipart/form-data; boundary=b",
            "--b\r\nContent-Disposition: form-data; name=\"f\"\r\nX: " +
                std::string(kMaxPartHeaderBytes, 'a') + "\r\n\r\nx\r\n--b--",
            "headers pass 8192 bytes"},
           {"multipart/form-data; boundary=b", many, "more than 64 parts"},
       }) {
    absl::StatusOr<std::vector<FormPart>> parts = ParseMultipart(c.type, c.body);
    ASSERT_FALSE(parts.ok()) << c.type << " | " << c.body.substr(0, 80);
    EXPECT_EQ(parts.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(parts.status().message(), HasSubstr(c.says)) << c.body.substr(0, 80);
  }
}

}  // namespace
}  // namespace omnistage
