// SPDX-License-Identifier: MIT
// File: remote/cache_keys.h -- cache keys like actions/cache: object naming and key resolution.
//
// Naming (docs/stores.md): the entry for key K in scope S saved for paths of version V is the object
//     [escape(S) "/"] escape(K) "!" V ".tar.zst"
// below the store's own base (directory, or bucket + prefix). escape() percent-encodes '/', '%',
// control characters, spaces and anything outside [A-Za-z0-9._~+=,@:-] byte by byte, so it keeps
// prefixes: every key starting with P is named starting with escape(P), and one list(prefix)
// answers a restore-keys prefix. A scope is one path segment however many '/' it has.
//
// Versions: as actions/cache makes the paths and the compression part of an entry's identity, V
// is entry_version() of the saved paths (absolute, in the order given) and the compression, so a
// key reused for other paths names another object: two jobs sharing a key for different paths
// each have their own entry and never mount each other's tree. escape() never writes '!', so
// "!" V is unambiguous, and an older lazycache (which names entries without it, and which this
// one still reads as version "") ignores these names.
//
// Resolution: the exact key first (HEAD of its name for the version); else, for each restore
// prefix in order, the newest entry (Last-Modified, ties broken by the greater key) of that
// version among the keys starting with it; the first prefix that matches anything wins. With no
// version (nullopt: --any-paths, or no paths given) every version counts, the newest first.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "remote/object_store.h"

namespace lazycache::remote {

inline constexpr std::string_view kEntrySuffix = ".tar.zst";
inline constexpr char kVersionSeparator = '!';
// The compression every entry uses today (format/: seekable zstd frames of a tar stream).
inline constexpr std::string_view kEntryCompression = "zstd-seekable";

// 16 lowercase hex digits of SHA-256 over "lazycache-paths-v1", each saved path and the
// compression, joined by NUL bytes (which no path holds, so the text is unambiguous). `saved_paths` are absolute and normalised (as save, mount and
// restore resolve PATHs), in the order given.
std::string entry_version(const std::vector<std::string>& saved_paths, std::string_view compression = kEntryCompression);

std::string escape_key_component(std::string_view s);
// kInvalidArgument for an empty key, a key over 512 bytes, a scope over 256, a control
// character in either, a version that entry_version() cannot have made, or a name too long for
// an object key once escaped (a long non-ASCII key). `version` "": the name an older lazycache
// gave (no version); only tests and tools that read such entries ask for it.
Result<std::string> entry_object_key(std::string_view scope, std::string_view key, std::string_view version);
// The list prefix for keys starting with key_prefix (which may be empty: all entries of scope).
std::string entry_list_prefix(std::string_view scope, std::string_view key_prefix);

struct EntryName {
  std::string scope, key;
  std::string version;  // "" for an entry an older lazycache saved (no version in its name)
};
// The key and version an entry object names, or nullopt when the object is not an entry of
// `scope` (or names a key with a control byte, which entry_object_key() never writes).
std::optional<EntryName> entry_name_in_scope(std::string_view scope, std::string_view object_key);
std::optional<std::string> key_of_entry(std::string_view scope, std::string_view object_key);
// The scope, key and version an entry object names, whatever its scope; nullopt when it names
// no entry.
std::optional<EntryName> entry_name_of(std::string_view object_key);

struct KeyMatch {
  std::string key;      // the cache key that matched (== primary key when exact)
  bool exact = false;   // cache-hit in actions/cache terms
  ObjectInfo object;    // the entry object (object.key is the store key)
  std::string version;  // the entry's version ("": saved by an older lazycache)
};

struct KeyResolution {
  std::optional<KeyMatch> match;  // nullopt: a miss
  // With tail_bytes > 0 and an exact match: the entry's last min(tail_bytes, size) bytes, read by
  // the lookup itself (empty otherwise, e.g. for matches found by listing).
  std::string tail;
  // With a version and no exact match: the entries of the primary key saved for other paths
  // (other versions, and older entries without one), newest first. What a miss message names.
  std::vector<KeyMatch> other_versions;
};

// Blocking; lists every page under each prefix until one matches. `version` nullopt: any.
// Errors: the store's (a kNotFound from HEAD is a miss, not an error; a store that cannot list,
// such as a presigned URL, finds no other versions and, with any version, the unversioned name).
// tail_bytes > 0 (mount): the exact name (with a version) is looked up with get_tail instead of
// head, so an exact hit costs one request that also brings the archive's tail (on S3 a
// suffix-range GET: a mount then needs no HEAD and, when the index fits, no other read).
Result<KeyResolution> resolve_cache_key(ObjectStore& store, std::string_view scope, std::string_view primary_key,
                                        const std::vector<std::string>& restore_prefixes, const std::optional<std::string>& version,
                                        uint64_t tail_bytes = 0);

}  // namespace lazycache::remote
