// SPDX-License-Identifier: MIT
#include "remote/cache_keys.h"

#include <algorithm>
#include <cstdio>
#include <span>

#include "remote/sigv4.h"

namespace lazycache::remote {
namespace {

bool plain(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '~' || c == '+' ||
         c == '=' || c == ',' || c == '@' || c == ':' || c == '-';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

std::optional<std::string> unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size()) return std::nullopt;
    int hi = hex_value(s[i + 1]), lo = hex_value(s[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

bool has_control_byte(std::string_view s) {
  for (unsigned char c : s)
    if (c < 0x20 || c == 0x7f) return true;
  return false;
}

bool valid_version(std::string_view v) {
  if (v.size() != 16) return false;
  for (char c : v)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

// Newest first; ties go to the greater key (the rule of a restore-keys prefix).
bool newer(const KeyMatch& a, const KeyMatch& b) {
  if (a.object.last_modified_s != b.object.last_modified_s) return a.object.last_modified_s > b.object.last_modified_s;
  return a.key != b.key ? a.key > b.key : a.object.key > b.object.key;
}

// Every entry of `scope` whose key starts with `prefix` (exactly `prefix` with `exact_key`).
Result<std::vector<KeyMatch>> list_entries(ObjectStore& store, std::string_view scope, const std::string& prefix, bool exact_key) {
  std::vector<KeyMatch> out;
  std::string continuation;
  const std::string list_prefix = entry_list_prefix(scope, prefix);
  do {
    LC_ASSIGN_OR_RETURN(auto page, store.list(list_prefix, continuation));
    for (const auto& obj : page.objects) {
      auto name = entry_name_in_scope(scope, obj.key);
      if (!name || name->key.compare(0, prefix.size(), prefix) != 0 || (exact_key && name->key != prefix)) continue;
      out.push_back(KeyMatch{name->key, exact_key, obj, name->version});
    }
    continuation = page.next_continuation;
  } while (!continuation.empty());
  std::sort(out.begin(), out.end(), newer);
  return out;
}

// head() by a tail read: the object's info, and its last min(tail_bytes, size) bytes in `tail`.
Result<ObjectInfo> head_with_tail(ObjectStore& store, const std::string& name, uint64_t tail_bytes, std::string& tail) {
  tail.assign(tail_bytes, '\0');
  auto read = store.get_tail(name, tail_bytes, std::as_writable_bytes(std::span<char>(tail)));
  if (!read.ok()) {
    tail.clear();
    return read.error();
  }
  tail.resize(read->bytes);
  read->info.key = name;
  return read->info;
}

}  // namespace

std::string entry_version(const std::vector<std::string>& saved_paths, std::string_view compression) {
  // NUL between the parts: no path holds one, so two lists of paths never hash the same text.
  std::string text = "lazycache-paths-v1";
  for (const auto& p : saved_paths) text += std::string(1, '\0') + p;
  text += std::string(1, '\0') + std::string(compression);
  return sha256_hex(text).substr(0, 16);
}

std::string escape_key_component(std::string_view s) {
  // "." and ".." would be path segments with a meaning: encode their dots too.
  bool dots_only = s == "." || s == "..";
  std::string out;
  for (unsigned char c : s) {
    if (plain(c) && !(dots_only && c == '.')) {
      out += static_cast<char>(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

Result<std::string> entry_object_key(std::string_view scope, std::string_view key, std::string_view version) {
  if (key.empty()) return Status(ErrorCode::kInvalidArgument, "empty cache key");
  if (key.size() > 512) return Status(ErrorCode::kInvalidArgument, "cache key longer than 512 bytes");
  if (scope.size() > 256) return Status(ErrorCode::kInvalidArgument, "scope longer than 256 bytes");
  // Keys and scopes travel as lines of $GITHUB_OUTPUT: a control character would forge outputs.
  for (std::string_view s : {scope, key})
    if (has_control_byte(s)) return Status(ErrorCode::kInvalidArgument, "cache key or scope contains a control character");
  if (!version.empty() && !valid_version(version))
    return Status(ErrorCode::kInvalidArgument, "entry version '" + std::string(version) + "' is not 16 lowercase hex digits");
  // Escaping can triple a key's length: the name must still pass the object key rules (length).
  std::string name = entry_list_prefix(scope, key);
  if (!version.empty()) name += kVersionSeparator + std::string(version);
  name += kEntrySuffix;
  if (!check_object_key(name).ok())
    return Status(ErrorCode::kInvalidArgument,
                  "cache key and scope take " + std::to_string(name.size()) + " bytes once escaped: too long for an object key");
  return name;
}

std::string entry_list_prefix(std::string_view scope, std::string_view key_prefix) {
  std::string out;
  if (!scope.empty()) out = escape_key_component(scope) + "/";
  return out + escape_key_component(key_prefix);
}

std::optional<EntryName> entry_name_in_scope(std::string_view scope, std::string_view object_key) {
  std::string head = scope.empty() ? "" : escape_key_component(scope) + "/";
  if (object_key.substr(0, head.size()) != head) return std::nullopt;
  std::string_view rest = object_key.substr(head.size());
  if (rest.size() <= kEntrySuffix.size() || rest.substr(rest.size() - kEntrySuffix.size()) != kEntrySuffix) return std::nullopt;
  rest.remove_suffix(kEntrySuffix.size());
  if (rest.find('/') != std::string_view::npos) return std::nullopt;  // another scope's entry
  std::string version;
  if (size_t bang = rest.find(kVersionSeparator); bang != std::string_view::npos) {
    version = std::string(rest.substr(bang + 1));
    if (!valid_version(version)) return std::nullopt;
    rest = rest.substr(0, bang);
  }
  auto key = unescape(rest);
  if (!key || key->empty() || escape_key_component(*key) != rest) return std::nullopt;  // not written by us
  // entry_object_key() never names a key with a control byte: a listed one was planted, and it
  // would reach $GITHUB_OUTPUT and the terminal as cache-matched-key (a forged line).
  if (has_control_byte(*key)) return std::nullopt;
  return EntryName{std::string(scope), std::move(*key), std::move(version)};
}

std::optional<std::string> key_of_entry(std::string_view scope, std::string_view object_key) {
  auto name = entry_name_in_scope(scope, object_key);
  if (!name) return std::nullopt;
  return name->key;
}

std::optional<EntryName> entry_name_of(std::string_view object_key) {
  std::string scope;
  if (size_t slash = object_key.find('/'); slash != std::string_view::npos) {
    auto unescaped = unescape(object_key.substr(0, slash));
    if (!unescaped || unescaped->empty() || has_control_byte(*unescaped) || escape_key_component(*unescaped) != object_key.substr(0, slash))
      return std::nullopt;
    scope = *unescaped;
  }
  return entry_name_in_scope(scope, object_key);
}

Result<KeyResolution> resolve_cache_key(ObjectStore& store, std::string_view scope, std::string_view primary_key,
                                        const std::vector<std::string>& restore_prefixes, const std::optional<std::string>& version,
                                        uint64_t tail_bytes) {
  KeyResolution out;
  const std::string primary(primary_key);
  LC_ASSIGN_OR_RETURN(std::string exact_name, entry_object_key(scope, primary_key, version.value_or("")));
  if (version) {
    // The common case, an exact hit, costs one request: a HEAD, or the tail read that finds the
    // object as surely (a kNotFound either way).
    auto exact = tail_bytes > 0 ? head_with_tail(store, exact_name, tail_bytes, out.tail) : store.head(exact_name);
    if (exact.ok()) {
      out.match = KeyMatch{primary, true, *exact, *version};
      return out;
    }
    if (exact.error().code() != ErrorCode::kNotFound) return exact.error().with_context("looking up key " + primary);
    // What the miss message names: the key saved for other paths. Best effort: a store that
    // cannot list (a presigned URL) or may not (no s3:ListBucket) still answers a miss.
    auto others = list_entries(store, scope, primary, /*exact_key=*/true);
    if (others.ok()) out.other_versions = std::move(*others);
  } else {
    // Any version: the newest entry of the key, versioned or not.
    auto all = list_entries(store, scope, primary, /*exact_key=*/true);
    if (all.ok() && !all->empty()) {
      out.match = all->front();
      return out;
    }
    if (!all.ok()) {  // cannot list (a presigned URL, a server without ListObjectsV2): the name without a version
      auto exact = store.head(exact_name);
      if (exact.ok()) {
        out.match = KeyMatch{primary, true, *exact, ""};
        return out;
      }
      if (exact.error().code() != ErrorCode::kNotFound) return exact.error().with_context("looking up key " + primary);
      if (all.error().code() != ErrorCode::kUnsupported) return all.error().with_context("listing the entries of key " + primary);
    }
  }
  for (const auto& prefix : restore_prefixes) {
    auto listed = list_entries(store, scope, prefix, /*exact_key=*/false);
    if (!listed.ok()) return listed.error().with_context("listing restore key prefix '" + prefix + "'");
    for (KeyMatch& m : *listed) {
      if (version && m.version != *version) continue;
      m.exact = false;
      out.match = std::move(m);
      return out;
    }
  }
  return out;
}

}  // namespace lazycache::remote
