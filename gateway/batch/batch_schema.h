// The gateway's durable store (docs/openai.md, "Files" and "Batches"): its
// SQLite schema, one entry per version (SqliteDatabase::Open applies those
// a file lacks). A released version is never edited: a change is a new
// version that alters what the ones before made.
#ifndef OMNISTAGE_GATEWAY_BATCH_BATCH_SCHEMA_H_
#define OMNISTAGE_GATEWAY_BATCH_BATCH_SCHEMA_H_

#include <string>
#include <vector>

namespace omnistage {

const std::vector<std::string>& BatchSchema();

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_BATCH_BATCH_SCHEMA_H_
