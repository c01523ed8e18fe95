// FileUpload: a POST /v1/files read from its multipart form, as OpenAI's
// Files API takes it (docs/openai.md, "Files"): the `file` part (its
// filename kept) and `purpose`, of which this gateway stores "batch" (the
// Batch API's input); and the File object's JSON that answers it.
//
//   std::variant<FileUpload, ApiError> upload = ParseFileUpload(content_type, body, limit);
//   std::string json = FileJson(stored_file);
//
// Errors are 400 invalid_request_error naming the field; a file over
// `max_bytes` is 413 (OpenAI's cap for a batch input is 200 MB).
#ifndef OMNISTAGE_GATEWAY_BATCH_FILE_UPLOAD_H_
#define OMNISTAGE_GATEWAY_BATCH_FILE_UPLOAD_H_

#include <cstddef>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/string_view.h"
#include "gateway/batch/file_store.h"
#include "gateway/http/api_error.h"

namespace omnistage {

struct FileUpload {
  std::string purpose;
  std::string filename;
  std::string content;
};

std::variant<FileUpload, ApiError> ParseFileUpload(absl::string_view content_type,
                                                   absl::string_view body, size_t max_bytes);

// {"id", "object": "file", "bytes", "created_at", "filename", "purpose",
// "status": "processed"}.
std::string FileJson(const StoredFile& file);
// {"object": "list", "data": [files], "first_id", "last_id", "has_more"}.
std::string FileListJson(const std::vector<StoredFile>& files, bool has_more);
// {"id", "object": "file", "deleted": true}.
std::string FileDeletedJson(absl::string_view id);

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_BATCH_FILE_UPLOAD_H_
