// SPDX-License-Identifier: MIT
// File: tools/command.h -- how a CLI command plugs into `lazycache`.
// Each command is one cmd_<name>.cpp that defines `int run_<name>(ArgParser&)` and registers it:
//   static const CommandRegistration reg{"pack", "write an archive from local paths", run_pack};
// main.cpp dispatches on argv[1]; commands parse their own options with ArgParser.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace lazycache::cli {

// Exit codes (one table for the whole CLI; documented in docs/cli.md).
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;   // the operation failed (message on stderr)
inline constexpr int kExitUsage = 2;     // bad command line
inline constexpr int kExitNotFound = 3;  // cache miss with --fail-on-cache-miss, missing entry
int exit_code_for(const Status& status);

// A small declarative option parser: declare options, then parse(). Accepts "--opt value",
// "--opt=value", repeated options, "--" to end options, and generates --help text.
class ArgParser {
 public:
  ArgParser(std::string command, std::string usage, std::vector<std::string> args);

  // Declarations (call before parse()).
  void flag(const std::string& name, const std::string& help);  // --name
  void option(const std::string& name, const std::string& value_name, const std::string& help,
              std::optional<std::string> default_value = std::nullopt);                         // --name VALUE
  void multi(const std::string& name, const std::string& value_name, const std::string& help);  // repeatable
  void alias(const std::string& short_name, const std::string& long_name);                      // "-o" -> "output"
  // Accepted but left out of --help (options a command takes only so that scripts can pass one
  // set of store options to every command).
  void hide(const std::string& name);

  // Returns false after printing --help (exit 0) or an error (exit 2); `exit_code` says which.
  bool parse(int& exit_code);

  bool has(const std::string& name) const;
  std::string get(const std::string& name) const;  // value or default or ""
  std::optional<std::string> get_opt(const std::string& name) const;
  std::vector<std::string> get_all(const std::string& name) const;
  // Integer option with byte suffixes (K, M, G, KiB, MiB, GiB); errors name the option.
  Result<uint64_t> get_size(const std::string& name) const;
  Result<int64_t> get_int(const std::string& name) const;
  const std::vector<std::string>& positionals() const { return positionals_; }
  std::string help_text() const;
  const std::string& command() const { return command_; }

 private:
  struct Spec {
    std::string name, value_name, help;
    bool takes_value = false, repeatable = false;
    std::optional<std::string> default_value;
    bool hidden = false;  // left out of help_text()
  };
  std::string command_, usage_;
  std::vector<std::string> args_;
  std::vector<Spec> specs_;
  std::map<std::string, std::string> aliases_;
  std::map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> positionals_;
  const Spec* find(const std::string& name) const;
};

using CommandFn = std::function<int(ArgParser&)>;

struct CommandInfo {
  std::string name, summary, usage;
  CommandFn run;
};

std::map<std::string, CommandInfo>& command_registry();

struct CommandRegistration {
  CommandRegistration(std::string name, std::string summary, std::string usage, CommandFn run) {
    command_registry()[name] = CommandInfo{name, std::move(summary), std::move(usage), std::move(run)};
  }
};

// Prints "lazycache <command>: <status>" to stderr and returns the exit code for it. Any URL in
// the message goes through remote::redact_url() first: no password or signature reaches a log.
int report_error(const std::string& command, const Status& status);

// "4M", "10G", "65536" (K, M, G, KiB, MiB, GiB): kInvalidArgument naming `what` otherwise.
Result<uint64_t> parse_size_text(std::string_view text, std::string_view what);

// `s` as the inside of a JSON string: quote and backslash escaped, control bytes as \u00XX.
std::string json_escape(std::string_view s);

}  // namespace lazycache::cli
