// SPDX-License-Identifier: MIT
// Fuzz target: the store URL, S3 endpoint and object-key parsers, and cache-key naming on
// untrusted strings (command lines, environment variables, listed keys).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "remote/cache_keys.h"
#include "remote/object_store.h"
#include "remote/store_url.h"
#include "tests/fuzz/fuzz_check.h"

using namespace lazycache;
using namespace lazycache::remote;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view s(reinterpret_cast<const char*>(data), size);
  auto url = parse_store_url(s);
  if (url.ok()) {
    std::string shown = url->display();
    // A presigned query carries a signature: it must never be shown. (Matched with its '?': a
    // short query can occur elsewhere in the URL by chance, which the fuzzer found at once.)
    if (!url->http_query.empty() && shown.find("?" + url->http_query) != std::string::npos)
      fuzz::fail("display() shows the query", Status());
  } else if (url.error().code() != ErrorCode::kInvalidArgument) {
    fuzz::fail("parse_store_url", url.error());
  }
  auto ep = parse_endpoint(s);
  if (!ep.ok() && ep.error().code() != ErrorCode::kInvalidArgument) fuzz::fail("parse_endpoint", ep.error());
  Status k = check_object_key(s);
  if (!k.ok() && k.code() != ErrorCode::kInvalidArgument) fuzz::fail("check_object_key", k);
  // Cache keys: split the input into scope and key at the first newline.
  size_t nl = s.find('\n');
  std::string_view scope = nl == std::string_view::npos ? std::string_view() : s.substr(0, nl);
  std::string_view key = nl == std::string_view::npos ? s : s.substr(nl + 1);
  for (const std::string& version : {std::string(), entry_version({std::string(key)})}) {
    auto object_key = entry_object_key(scope, key, version);
    if (!object_key.ok()) continue;
    if (!check_object_key(*object_key).ok()) fuzz::fail("entry_object_key made an invalid object key", check_object_key(*object_key));
    auto back = entry_name_in_scope(scope, *object_key);
    if (!back || back->key != key || back->version != version) fuzz::fail("entry_name_in_scope does not invert entry_object_key", Status());
  }
  (void)key_of_entry(scope, s);
  (void)escape_key_component(s);
  return 0;
}
