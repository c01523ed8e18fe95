// The tests' store: a fresh SQLite file under the test's temporary
// directory with the batch schema, or the same file opened again (a
// restarted gateway).
//
//   std::unique_ptr<SqliteDatabase> db = OpenTestStore("owners.db");
#ifndef OMNISTAGE_GATEWAY_BATCH_TEST_STORE_H_
#define OMNISTAGE_GATEWAY_BATCH_TEST_STORE_H_

#include <memory>
#include <string>

#include "gateway/batch/sqlite_database.h"

namespace omnistage {

// The path of `name` in the test's temporary directory.
std::string TestStorePath(const std::string& name);
// Opens `name` there with BatchSchema(); a failure fails the test and
// returns null.
std::unique_ptr<SqliteDatabase> OpenTestStore(const std::string& name);

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_BATCH_TEST_STORE_H_
