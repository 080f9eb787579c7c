// SPDX-License-Identifier: MIT
#include "tools/json_output.h"

#include "tools/command.h"

namespace lazycache::cli {

void JsonObject::key(std::string_view k) {
  if (!body_.empty()) body_ += ',';
  body_ += '"';
  body_ += json_escape(k);
  body_ += "\":";
}

JsonObject& JsonObject::add(std::string_view k, std::string_view value) {
  key(k);
  body_ += '"';
  body_ += json_escape(value);
  body_ += '"';
  return *this;
}

JsonObject& JsonObject::add(std::string_view k, uint64_t value) {
  key(k);
  body_ += std::to_string(value);
  return *this;
}

JsonObject& JsonObject::add(std::string_view k, bool value) {
  key(k);
  body_ += value ? "true" : "false";
  return *this;
}

JsonObject& JsonObject::add_raw(std::string_view k, std::string_view json) {
  key(k);
  body_ += json;
  return *this;
}

std::string SaveJson::to_json() const {
  return JsonObject()
      .add("key", key)
      .add("store", store)
      .add("object", object)
      .add("saved", saved)
      .add("files", files)
      .add("file_bytes", file_bytes)
      .add("archive_bytes", archive_bytes)
      .add("frames", frames)
      .add("ms", ms)
      .add("requests", requests)
      .add("retries", retries)
      .str();
}

std::string RestoreJson::to_json() const {
  JsonObject o;
  o.add("primary_key", primary_key)
      .add("matched_key", matched_key)
      .add("cache_hit", cache_hit)
      .add("hit", hit())
      .add("mode", mode)
      .add("store", store)
      .add("files", files)
      .add("file_bytes", file_bytes)
      .add("entry_bytes", entry_bytes)
      .add("bytes_fetched", bytes_fetched)
      .add("ms", ms);
  if (!timeline.empty()) o.add_raw("timeline", timeline);
  return o.str();
}

std::string StoreEntryJson::to_json() const {
  return JsonObject()
      .add("scope", scope)
      .add("key", key)
      .add("object", object)
      .add("bytes", bytes)
      .add("saved_s", static_cast<uint64_t>(saved_s < 0 ? 0 : saved_s))
      .add("last_used_s", static_cast<uint64_t>(last_used_s < 0 ? 0 : last_used_s))
      .add("mounted_at", mounted_at)
      .add("version", version)
      .str();
}

}  // namespace lazycache::cli
