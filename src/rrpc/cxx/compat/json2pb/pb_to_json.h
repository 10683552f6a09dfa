// json2pb/pb_to_json.h - brpc's json2pb::ProtoMessageToJson over protobuf's
// own JSON printer (field names as in the .proto, compact), for programs
// that log messages as JSON. Only the (message, json, error) form.
#ifndef RRPC_COMPAT_JSON2PB_PB_TO_JSON_H
#define RRPC_COMPAT_JSON2PB_PB_TO_JSON_H

#include <google/protobuf/message.h>
#include <google/protobuf/util/json_util.h>

#include <string>

namespace json2pb {

// true with the JSON in *json; false with the reason in *error (if given).
inline bool ProtoMessageToJson(const google::protobuf::Message& message, std::string* json,
                               std::string* error = nullptr) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  json->clear();
  auto status = google::protobuf::util::MessageToJsonString(message, json, options);
  if (status.ok()) return true;
  if (error != nullptr) *error = std::string(status.message());
  return false;
}

}  // namespace json2pb

#endif  // RRPC_COMPAT_JSON2PB_PB_TO_JSON_H
