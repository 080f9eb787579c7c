// SPDX-License-Identifier: MIT
// `lazycache doctor`: says whether this machine can mount (and if not, why), for CI scripts and
// the troubleshooting guide. Exit 0 when FUSE is usable, 1 when it is not.
#include <cstdlib>
#include <iostream>
#include <optional>

#include "remote/store_url.h"
#include "tools/command.h"
#include "tools/fuse_probe.h"

namespace lazycache::cli {
namespace {

int run_doctor(ArgParser& args) {
  args.option("device", "PATH", "the FUSE device to check", "/dev/fuse");
  args.flag("no-trial-mount", "skip the trial mount that proves the mount permission");
  args.flag("json", "print one JSON object instead of text");
  int code = 0;
  if (!args.parse(code)) return code;
  if (!args.positionals().empty()) {
    std::cerr << "lazycache doctor: unexpected argument '" << args.positionals()[0] << "'\n";
    return kExitUsage;
  }
  FuseProbeOptions opts;
  opts.device = args.get("device");
  opts.trial_mount = !args.has("no-trial-mount");
  FuseProbeResult r = probe_fuse(opts);
  // Only whether a store and credentials are configured: never their values beyond the URL,
  // and the URL without its password or signature (redact_url).
  const char* store_env = std::getenv("LAZYCACHE_STORE");
  const std::optional<std::string> store = store_env ? std::optional<std::string>(remote::redact_url(store_env)) : std::nullopt;
  bool have_keys = std::getenv("AWS_ACCESS_KEY_ID") != nullptr || std::getenv("AWS_PROFILE") != nullptr;
  if (args.has("json")) {
    std::cout << "{\"fuse_usable\":" << (r.usable ? "true" : "false") << ",\"fuse_method\":\""
              << json_escape(r.method) << "\",\"fuse_reason\":\"" << json_escape(r.reason)
              << "\",\"store\":\"" << json_escape(store ? *store : "") << "\",\"aws_credentials\":"
              << (have_keys ? "true" : "false") << "}\n";
  } else {
    if (r.usable) {
      std::cout << "fuse: usable (" << r.method << ")\n";
    } else {
      std::cout << "fuse: NOT usable: " << r.reason << "\n"
                << "      restore --mode auto will extract instead of mounting\n";
    }
    std::cout << "store: " << (store ? *store + " (LAZYCACHE_STORE)" : std::string("default local store"))
              << "\n"
              << "aws credentials: " << (have_keys ? "set in the environment" : "none in the environment") << "\n";
  }
  return r.usable ? kExitOk : kExitFailure;
}

const CommandRegistration reg{"doctor", "check whether this machine can mount (FUSE) and what is configured",
                              "[--device PATH] [--no-trial-mount] [--json]", run_doctor};

}  // namespace
}  // namespace lazycache::cli
