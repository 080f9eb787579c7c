// SPDX-License-Identifier: MIT
#include "remote/cache_keys.h"

#include <cstdio>

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

}  // namespace

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

Result<std::string> entry_object_key(std::string_view scope, std::string_view key) {
  if (key.empty()) return Status(ErrorCode::kInvalidArgument, "empty cache key");
  if (key.size() > 512) return Status(ErrorCode::kInvalidArgument, "cache key longer than 512 bytes");
  if (scope.size() > 256) return Status(ErrorCode::kInvalidArgument, "scope longer than 256 bytes");
  // Keys and scopes travel as lines of $GITHUB_OUTPUT: a control character would forge outputs.
  for (std::string_view s : {scope, key})
    if (has_control_byte(s)) return Status(ErrorCode::kInvalidArgument, "cache key or scope contains a control character");
  // Escaping can triple a key's length: the name must still pass the object key rules (length).
  std::string name = entry_list_prefix(scope, key) + std::string(kEntrySuffix);
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

std::optional<std::string> key_of_entry(std::string_view scope, std::string_view object_key) {
  std::string head = scope.empty() ? "" : escape_key_component(scope) + "/";
  if (object_key.substr(0, head.size()) != head) return std::nullopt;
  std::string_view rest = object_key.substr(head.size());
  if (rest.size() <= kEntrySuffix.size() || rest.substr(rest.size() - kEntrySuffix.size()) != kEntrySuffix) return std::nullopt;
  rest.remove_suffix(kEntrySuffix.size());
  if (rest.find('/') != std::string_view::npos) return std::nullopt;  // another scope's entry
  auto key = unescape(rest);
  if (!key || escape_key_component(*key) != rest) return std::nullopt;  // not written by us
  // entry_object_key() never names a key with a control byte: a listed one was planted, and it
  // would reach $GITHUB_OUTPUT and the terminal as cache-matched-key (a forged line).
  if (has_control_byte(*key)) return std::nullopt;
  return key;
}

std::optional<EntryName> entry_name_of(std::string_view object_key) {
  std::string scope;
  if (size_t slash = object_key.find('/'); slash != std::string_view::npos) {
    auto unescaped = unescape(object_key.substr(0, slash));
    if (!unescaped || unescaped->empty() || has_control_byte(*unescaped) || escape_key_component(*unescaped) != object_key.substr(0, slash))
      return std::nullopt;
    scope = *unescaped;
  }
  auto key = key_of_entry(scope, object_key);
  if (!key) return std::nullopt;
  return EntryName{std::move(scope), std::move(*key)};
}

Result<std::optional<KeyMatch>> resolve_cache_key(ObjectStore& store, std::string_view scope, std::string_view primary_key,
                                                  const std::vector<std::string>& restore_prefixes) {
  LC_ASSIGN_OR_RETURN(std::string exact_name, entry_object_key(scope, primary_key));
  auto exact = store.head(exact_name);
  if (exact.ok()) return std::optional<KeyMatch>(KeyMatch{std::string(primary_key), true, *exact});
  if (exact.error().code() != ErrorCode::kNotFound) return exact.error().with_context("looking up key " + std::string(primary_key));
  for (const auto& prefix : restore_prefixes) {
    std::optional<KeyMatch> best;
    std::string continuation;
    std::string list_prefix = entry_list_prefix(scope, prefix);
    do {
      auto page = store.list(list_prefix, continuation);
      if (!page.ok()) return page.error().with_context("listing restore key prefix '" + prefix + "'");
      for (const auto& obj : page->objects) {
        auto key = key_of_entry(scope, obj.key);
        if (!key || key->compare(0, prefix.size(), prefix) != 0) continue;
        bool newer = !best || obj.last_modified_s > best->object.last_modified_s ||
                     (obj.last_modified_s == best->object.last_modified_s && *key > best->key);
        if (newer) best = KeyMatch{*key, false, obj};
      }
      continuation = page->next_continuation;
    } while (!continuation.empty());
    if (best) return best;
  }
  return std::optional<KeyMatch>();
}

}  // namespace lazycache::remote
