#include "gateway/batch/test_store.h"

#include <cstdlib>

#include "gateway/batch/batch_schema.h"
#include "gtest/gtest.h"

namespace omnistage {

std::string TestStorePath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

std::unique_ptr<SqliteDatabase> OpenTestStore(const std::string& name) {
  absl::StatusOr<std::unique_ptr<SqliteDatabase>> db =
      SqliteDatabase::Open(TestStorePath(name), BatchSchema());
  EXPECT_TRUE(db.ok()) << db.status();
  return db.ok() ? *std::move(db) : nullptr;
}

}  // namespace omnistage
