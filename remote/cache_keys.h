// SPDX-License-Identifier: MIT
// File: remote/cache_keys.h -- cache keys like actions/cache: object naming and key resolution.
//
// Naming (docs/stores.md): the entry for key K in scope S is the object
//     [escape(S) "/"] escape(K) ".tar.zst"
// below the store's own base (directory, or bucket + prefix). escape() percent-encodes '/', '%',
// control characters, spaces and anything outside [A-Za-z0-9._~+=,@:-] byte by byte, so it keeps
// prefixes: every key starting with P is named starting with escape(P), and one list(prefix)
// answers a restore-keys prefix. A scope is one path segment however many '/' it has.
//
// Resolution: the exact key first (HEAD); else, for each restore prefix in order, the newest
// entry (Last-Modified, ties broken by the greater key) among the keys starting with it; the
// first prefix that matches anything wins.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "remote/object_store.h"

namespace lazycache::remote {

inline constexpr std::string_view kEntrySuffix = ".tar.zst";

std::string escape_key_component(std::string_view s);
// kInvalidArgument for an empty key, a key over 512 bytes, a scope over 256, a control
// character in either, or a name too long for an object key once escaped (a long non-ASCII key).
Result<std::string> entry_object_key(std::string_view scope, std::string_view key);
// The list prefix for keys starting with key_prefix (which may be empty: all entries of scope).
std::string entry_list_prefix(std::string_view scope, std::string_view key_prefix);
// The key an entry object names, or nullopt when the object is not an entry of `scope` (or
// names a key with a control byte, which entry_object_key() never writes).
std::optional<std::string> key_of_entry(std::string_view scope, std::string_view object_key);
// The scope and key an entry object names, whatever its scope; nullopt when it names no entry.
struct EntryName {
  std::string scope, key;
};
std::optional<EntryName> entry_name_of(std::string_view object_key);

struct KeyMatch {
  std::string key;     // the cache key that matched (== primary key when exact)
  bool exact = false;  // cache-hit in actions/cache terms
  ObjectInfo object;   // the entry object (object.key is the store key)
};

// Blocking; lists every page under each prefix until one matches. nullopt: a miss.
// Errors: the store's (a kNotFound from HEAD is a miss, not an error).
Result<std::optional<KeyMatch>> resolve_cache_key(ObjectStore& store, std::string_view scope, std::string_view primary_key,
                                                  const std::vector<std::string>& restore_prefixes);

}  // namespace lazycache::remote
