// SPDX-License-Identifier: MIT
#include "tools/command.h"

#include <cstdio>
#include <iostream>
#include <sstream>

#include "remote/store_url.h"

namespace lazycache::cli {

int exit_code_for(const Status& status) {
  switch (status.code()) {
    case ErrorCode::kOk: return kExitOk;
    case ErrorCode::kInvalidArgument: return kExitUsage;
    case ErrorCode::kNotFound: return kExitNotFound;
    default: return kExitFailure;
  }
}

int report_error(const std::string& command, const Status& status) {
  std::cerr << "lazycache " << command << ": " << remote::redact_url(status.to_string()) << "\n";
  return exit_code_for(status);
}

std::string json_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

std::map<std::string, CommandInfo>& command_registry() {
  static std::map<std::string, CommandInfo> registry;
  return registry;
}

ArgParser::ArgParser(std::string command, std::string usage, std::vector<std::string> args)
    : command_(std::move(command)), usage_(std::move(usage)), args_(std::move(args)) {
  flag("help", "show this help");
  alias("-h", "help");
}

void ArgParser::flag(const std::string& name, const std::string& help) {
  specs_.push_back(Spec{name, "", help, false, false, std::nullopt});
}
void ArgParser::option(const std::string& name, const std::string& value_name, const std::string& help,
                       std::optional<std::string> default_value) {
  specs_.push_back(Spec{name, value_name, help, true, false, std::move(default_value)});
}
void ArgParser::multi(const std::string& name, const std::string& value_name, const std::string& help) {
  specs_.push_back(Spec{name, value_name, help, true, true, std::nullopt});
}
void ArgParser::alias(const std::string& short_name, const std::string& long_name) { aliases_[short_name] = long_name; }

const ArgParser::Spec* ArgParser::find(const std::string& name) const {
  for (const auto& s : specs_)
    if (s.name == name) return &s;
  return nullptr;
}

bool ArgParser::parse(int& exit_code) {
  bool options_done = false;
  for (size_t i = 0; i < args_.size(); ++i) {
    std::string a = args_[i];
    if (options_done || a.size() < 2 || a[0] != '-') {
      positionals_.push_back(a);
      continue;
    }
    if (a == "--") {
      options_done = true;
      continue;
    }
    std::string name, value;
    bool has_value = false;
    if (auto it = aliases_.find(a); it != aliases_.end()) {
      name = it->second;
    } else if (a.rfind("--", 0) == 0) {
      name = a.substr(2);
      if (auto eq = name.find('='); eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
        has_value = true;
      }
    } else {
      std::cerr << "lazycache " << command_ << ": unknown option " << a << " (see --help)\n";
      exit_code = kExitUsage;
      return false;
    }
    const Spec* spec = find(name);
    if (!spec) {
      std::cerr << "lazycache " << command_ << ": unknown option --" << name << " (see --help)\n";
      exit_code = kExitUsage;
      return false;
    }
    if (spec->takes_value && !has_value) {
      if (i + 1 >= args_.size()) {
        std::cerr << "lazycache " << command_ << ": option --" << name << " needs a value (" << spec->value_name << ")\n";
        exit_code = kExitUsage;
        return false;
      }
      value = args_[++i];
    } else if (!spec->takes_value && has_value) {
      std::cerr << "lazycache " << command_ << ": option --" << name << " takes no value\n";
      exit_code = kExitUsage;
      return false;
    }
    auto& slot = values_[name];
    if (!spec->repeatable) slot.clear();
    slot.push_back(value);
  }
  if (has("help")) {
    std::cout << help_text();
    exit_code = kExitOk;
    return false;
  }
  return true;
}

bool ArgParser::has(const std::string& name) const { return values_.count(name) > 0; }

std::optional<std::string> ArgParser::get_opt(const std::string& name) const {
  if (auto it = values_.find(name); it != values_.end() && !it->second.empty()) return it->second.back();
  if (const Spec* s = find(name); s && s->default_value) return s->default_value;
  return std::nullopt;
}

std::string ArgParser::get(const std::string& name) const { return get_opt(name).value_or(""); }

std::vector<std::string> ArgParser::get_all(const std::string& name) const {
  if (auto it = values_.find(name); it != values_.end()) return it->second;
  return {};
}

Result<int64_t> ArgParser::get_int(const std::string& name) const {
  std::string v = get(name);
  try {
    size_t used = 0;
    long long n = std::stoll(v, &used);
    if (used != v.size()) throw std::invalid_argument(v);
    return static_cast<int64_t>(n);
  } catch (...) {
    return Status(ErrorCode::kInvalidArgument, "--" + name + ": expected an integer, got '" + v + "'");
  }
}

Result<uint64_t> parse_size_text(std::string_view v, std::string_view what) {
  size_t digits = 0;
  while (digits < v.size() && v[digits] >= '0' && v[digits] <= '9') ++digits;
  std::string_view suffix = v.substr(digits);
  uint64_t mult = 1;
  if (suffix.empty() || suffix == "B") mult = 1;
  else if (suffix == "K" || suffix == "KiB" || suffix == "k") mult = 1ull << 10;
  else if (suffix == "M" || suffix == "MiB") mult = 1ull << 20;
  else if (suffix == "G" || suffix == "GiB") mult = 1ull << 30;
  else digits = 0;
  if (digits == 0 || digits > 15)
    return Status(ErrorCode::kInvalidArgument, std::string(what) + ": expected a size like 4M or 65536, got '" + std::string(v) + "'");
  return std::stoull(std::string(v.substr(0, digits))) * mult;
}

Result<uint64_t> ArgParser::get_size(const std::string& name) const { return parse_size_text(get(name), "--" + name); }

void ArgParser::hide(const std::string& name) {
  for (auto& s : specs_)
    if (s.name == name) s.hidden = true;
}

std::string ArgParser::help_text() const {
  std::ostringstream os;
  os << "usage: lazycache " << command_ << " " << usage_ << "\n\noptions:\n";
  for (const auto& s : specs_) {
    if (s.hidden) continue;
    std::string left = "--" + s.name;
    for (const auto& [short_name, long_name] : aliases_)
      if (long_name == s.name) left = short_name + ", " + left;
    if (s.takes_value) left += " " + s.value_name;
    os << "  " << left;
    if (left.size() < 28) os << std::string(28 - left.size(), ' ');
    else os << "\n" << std::string(30, ' ');
    os << s.help;
    if (s.default_value && !s.default_value->empty()) os << " (default: " << *s.default_value << ")";
    if (s.repeatable) os << " (repeatable)";
    os << "\n";
  }
  return os.str();
}

}  // namespace lazycache::cli
