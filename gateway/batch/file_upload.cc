#include "gateway/batch/file_upload.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "gateway/http/multipart.h"
#include "nlohmann/json.hpp"

namespace omnistage {
namespace {

nlohmann::json FileObject(const StoredFile& file) {
  return {{"id", file.id},
          {"object", "file"},
          {"bytes", file.bytes},
          {"created_at", file.created_at},
          {"filename", file.filename},
          {"purpose", file.purpose},
          // Stored whole when answered: nothing is left to process.
          {"status", "processed"}};
}

}  // namespace

std::variant<FileUpload, ApiError> ParseFileUpload(absl::string_view content_type,
                                                   absl::string_view body, size_t max_bytes) {
  absl::StatusOr<std::vector<FormPart>> parts = ParseMultipart(content_type, body);
  if (!parts.ok()) return InvalidRequest("", std::string(parts.status().message()));
  const FormPart* purpose = FindPart(*parts, "purpose");
  if (purpose == nullptr || purpose->body.empty()) {
    return InvalidRequest("purpose", "Missing required parameter: 'purpose'.");
  }
  if (purpose->body != "batch") {
    return InvalidRequest("purpose",
                          absl::StrCat("Invalid value for 'purpose': '", purpose->body,
                                       "'. This server stores files with purpose 'batch'."));
  }
  const FormPart* file = FindPart(*parts, "file");
  if (file == nullptr) return InvalidRequest("file", "Missing required parameter: 'file'.");
  if (file->body.empty()) return InvalidRequest("file", "The file is empty.");
  if (file->body.size() > max_bytes) {
    ApiError error =
        InvalidRequest("file", absl::StrCat("The file is ", file->body.size(), " bytes; at most ",
                                            max_bytes, " are taken."));
    error.http_status = 413;
    return error;
  }
  FileUpload upload;
  upload.purpose = purpose->body;
  upload.filename = file->filename.empty() ? "file" : file->filename;
  upload.content = file->body;
  return upload;
}

std::string FileJson(const StoredFile& file) { return FileObject(file).dump(); }

std::string FileListJson(const std::vector<StoredFile>& files, bool has_more) {
  nlohmann::json data = nlohmann::json::array();
  for (const StoredFile& file : files) data.push_back(FileObject(file));
  nlohmann::json list = {{"object", "list"}, {"data", std::move(data)}, {"has_more", has_more}};
  list["first_id"] = files.empty() ? nlohmann::json() : nlohmann::json(files.front().id);
  list["last_id"] = files.empty() ? nlohmann::json() : nlohmann::json(files.back().id);
  return list.dump();
}

std::string FileDeletedJson(absl::string_view id) {
  return nlohmann::json{{"id", std::string(id)}, {"object", "file"}, {"deleted", true}}.dump();
}

}  // namespace omnistage
