#include "common/tracing/otlp_wire.h"

#include <cstring>

namespace omnistage {
namespace {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

void AppendTag(std::string* out, int field, WireType type) {
  AppendVarint(out, (static_cast<uint64_t>(field) << 3) | type);
}

void AppendLittleEndian(std::string* out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

}  // namespace

size_t VarintSize(uint64_t value) {
  size_t size = 1;
  while (value >= 0x80) {
    value >>= 7;
    ++size;
  }
  return size;
}

size_t BytesFieldSize(size_t length) { return 1 + VarintSize(length) + length; }

void AppendVarint(std::string* out, uint64_t value) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

void AppendLengthPrefix(std::string* out, int field, size_t length) {
  AppendTag(out, field, kLengthDelimited);
  AppendVarint(out, length);
}

void AppendBytesField(std::string* out, int field, absl::string_view bytes) {
  AppendLengthPrefix(out, field, bytes.size());
  out->append(bytes.data(), bytes.size());
}

void AppendVarintField(std::string* out, int field, uint64_t value) {
  AppendTag(out, field, kVarint);
  AppendVarint(out, value);
}

void AppendFixed64Field(std::string* out, int field, uint64_t value) {
  AppendTag(out, field, kFixed64);
  AppendLittleEndian(out, value, 8);
}

void AppendFixed32Field(std::string* out, int field, uint32_t value) {
  AppendTag(out, field, kFixed32);
  AppendLittleEndian(out, value, 4);
}

void AppendDoubleField(std::string* out, int field, double value) {
  uint64_t bits;
  static_assert(sizeof(bits) == sizeof(value), "a double is 64 bits");
  std::memcpy(&bits, &value, sizeof(bits));
  AppendFixed64Field(out, field, bits);
}

}  // namespace omnistage
