// Every message of the omnistage.v1 package survives serialization: each field is
// set to a non-default value (each oneof member in turn), serialized, parsed back
// and compared field by field.
#include <string>
#include <vector>

#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"
#include "google/protobuf/dynamic_message.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "protos/common.pb.h"
#include "protos/orchestrator.pb.h"
#include "protos/stage_worker.pb.h"

namespace omnistage {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::FileDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// Sets one field of `msg` to a value that differs from the default.
void FillField(Message* msg, const FieldDescriptor* field, int depth);

// Sets every field (for a oneof: only `oneof_choice` of each oneof, when given).
void FillMessage(Message* msg, int depth,
                 const FieldDescriptor* oneof_choice = nullptr) {
  const Descriptor* d = msg->GetDescriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    const auto* oneof = f->real_containing_oneof();
    if (oneof != nullptr && oneof_choice != nullptr &&
        oneof_choice->real_containing_oneof() == oneof && f != oneof_choice) {
      continue;
    }
    FillField(msg, f, depth);
  }
}

void FillField(Message* msg, const FieldDescriptor* field, int depth) {
  const Reflection* r = msg->GetReflection();
  const bool rep = field->is_repeated();
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      rep ? r->AddInt32(msg, field, -7) : r->SetInt32(msg, field, -7);
      break;
    case FieldDescriptor::CPPTYPE_INT64:
      rep ? r->AddInt64(msg, field, -(int64_t{1} << 40)) : r->SetInt64(msg, field, -(int64_t{1} << 40));
      break;
    case FieldDescriptor::CPPTYPE_UINT32:
      rep ? r->AddUInt32(msg, field, 4000000000u) : r->SetUInt32(msg, field, 4000000000u);
      break;
    case FieldDescriptor::CPPTYPE_UINT64:
      rep ? r->AddUInt64(msg, field, 1ULL << 63) : r->SetUInt64(msg, field, 1ULL << 63);
      break;
    case FieldDescriptor::CPPTYPE_FLOAT:
      rep ? r->AddFloat(msg, field, 0.75f) : r->SetFloat(msg, field, 0.75f);
      break;
    case FieldDescriptor::CPPTYPE_DOUBLE:
      rep ? r->AddDouble(msg, field, 2.5) : r->SetDouble(msg, field, 2.5);
      break;
    case FieldDescriptor::CPPTYPE_BOOL:
      rep ? r->AddBool(msg, field, true) : r->SetBool(msg, field, true);
      break;
    case FieldDescriptor::CPPTYPE_ENUM: {
      const auto* e = field->enum_type();
      const auto* v = e->value(e->value_count() - 1);
      rep ? r->AddEnum(msg, field, v) : r->SetEnum(msg, field, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_STRING: {
      const std::string s = field->type() == FieldDescriptor::TYPE_BYTES
                                ? std::string("\x00\xff\x01", 3)
                                : "héllo " + field->name();
      rep ? r->AddString(msg, field, s) : r->SetString(msg, field, s);
      break;
    }
    case FieldDescriptor::CPPTYPE_MESSAGE: {
      if (depth > 3) break;  // google.protobuf.Value is recursive.
      Message* sub = rep ? r->AddMessage(msg, field) : r->MutableMessage(msg, field);
      FillMessage(sub, depth + 1);
      break;
    }
  }
}

void ExpectRoundTrip(const Message& original) {
  std::string wire;
  ASSERT_TRUE(original.SerializeToString(&wire)) << original.GetTypeName();
  std::unique_ptr<Message> parsed(original.New());
  ASSERT_TRUE(parsed->ParseFromString(wire)) << original.GetTypeName();
  std::string diff;
  google::protobuf::util::MessageDifferencer differ;
  differ.ReportDifferencesToString(&diff);
  EXPECT_TRUE(differ.Compare(original, *parsed)) << original.GetTypeName() << "\n" << diff;
}

void CollectMessages(const Descriptor* d, std::vector<const Descriptor*>* out) {
  if (d->options().map_entry()) return;
  out->push_back(d);
  for (int i = 0; i < d->nested_type_count(); ++i) CollectMessages(d->nested_type(i), out);
}

TEST(RoundTripTest, EveryMessageOfEveryFile) {
  google::protobuf::DynamicMessageFactory factory;
  int messages = 0;
  for (const FileDescriptor* file :
       {v1::Payload::descriptor()->file(), v1::WorkerCommand::descriptor()->file(),
        v1::GenerateRequest::descriptor()->file()}) {
    std::vector<const Descriptor*> all;
    for (int i = 0; i < file->message_type_count(); ++i) {
      CollectMessages(file->message_type(i), &all);
    }
    for (const Descriptor* d : all) {
      const Message* prototype = factory.GetPrototype(d);
      std::unique_ptr<Message> full(prototype->New());
      FillMessage(full.get(), 0);
      if (d->field_count() > 0) {
        EXPECT_GT(full->ByteSizeLong(), 0u) << d->full_name();
      }
      ExpectRoundTrip(*full);
      // Each member of each (non-synthetic) oneof, on its own; real oneofs come first.
      for (int o = 0; o < d->real_oneof_decl_count(); ++o) {
        for (int f = 0; f < d->oneof_decl(o)->field_count(); ++f) {
          std::unique_ptr<Message> one(prototype->New());
          FillMessage(one.get(), 0, d->oneof_decl(o)->field(f));
          ExpectRoundTrip(*one);
        }
      }
      ++messages;
    }
  }
  // Guards against the loop silently seeing no messages.
  EXPECT_GE(messages, 30);
}

TEST(RoundTripTest, GeneratedClassesParseWhatTheyWrite) {
  v1::WorkerEvent event;
  auto* out = event.mutable_step()->add_outputs();
  out->set_request_id("r1");
  out->add_payloads()->mutable_audio()->set_pcm_s16le(std::string(4, '\x01'));
  out->mutable_payloads(0)->mutable_audio()->set_sample_rate_hz(24000);
  out->set_finished(true);
  out->set_finish_reason(v1::FINISH_REASON_STOP);
  v1::WorkerEvent back;
  ASSERT_TRUE(back.ParseFromString(event.SerializeAsString()));
  ASSERT_EQ(back.event_case(), v1::WorkerEvent::kStep);
  EXPECT_EQ(back.step().outputs(0).payloads(0).audio().sample_rate_hz(), 24000);
  EXPECT_EQ(back.step().outputs(0).finish_reason(), v1::FINISH_REASON_STOP);

  v1::StageParameters params;
  EXPECT_FALSE(params.has_max_tokens());  // proto3 optional keeps presence
  params.set_max_tokens(0);
  v1::StageParameters params_back;
  ASSERT_TRUE(params_back.ParseFromString(params.SerializeAsString()));
  EXPECT_TRUE(params_back.has_max_tokens());
  EXPECT_EQ(params_back.max_tokens(), 0u);
}

}  // namespace
}  // namespace omnistage
