// SPDX-License-Identifier: MIT
// `lazycache doctor`: says whether this machine can mount (and if not, why) and whether the store
// can be used (tools/store_check.h), for CI scripts and the troubleshooting guide. Exit 0 when
// FUSE is usable and the store check passed (or was skipped), 1 otherwise.
#include <cstdlib>
#include <iostream>
#include <optional>

#include "remote/store_url.h"
#include "tools/command.h"
#include "tools/fuse_probe.h"
#include "tools/json_output.h"
#include "tools/store_check.h"
#include "tools/store_options.h"

namespace lazycache::cli {
namespace {

int run_doctor(ArgParser& args) {
  args.option("device", "PATH", "the FUSE device to check", "/dev/fuse");
  args.flag("no-trial-mount", "skip the trial mount that proves the mount permission");
  args.flag("json", "print one JSON object instead of text");
  args.flag("no-store-check", "do not check the store (by default one listing request)");
  add_store_options(args, StoreUse::kRead);
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
  const bool check = !args.has("no-store-check");
  const StoreCheck sc = check ? check_store(args) : StoreCheck{};
  if (args.has("json")) {
    JsonObject j;
    j.add("fuse_usable", r.usable).add("fuse_method", r.method).add("fuse_reason", r.reason);
    j.add("store", store ? *store : "").add("aws_credentials", have_keys);
    if (check) {
      j.add("store_checked", sc.store).add("store_ok", sc.ok).add("store_problem", sc.problem);
      j.add("store_error", sc.detail).add("store_check_ms", sc.ms);
    }
    std::cout << j.str() << "\n";
  } else {
    if (r.usable) {
      std::cout << "fuse: usable (" << r.method << ")\n";
    } else {
      std::cout << "fuse: NOT usable: " << r.reason << "\n"
                << "      restore --mode auto will extract instead of mounting\n";
    }
    const std::string source = args.has("store") ? "--store" : store ? "LAZYCACHE_STORE" : "the default local store";
    std::cout << "store: " << remote::redact_url(store_url_from(args)) << " (" << source << ")\n"
              << "aws credentials: " << (have_keys ? "set in the environment" : "none in the environment") << "\n";
    if (check && sc.ok) std::cout << "store check: " << sc.store << ": OK (listed in " << sc.ms << " ms)\n";
    if (check && !sc.ok) {
      std::cout << "store check: " << sc.store << ": NOT usable: " << sc.problem << "\n"
                << "      " << sc.detail << "\n";
    }
  }
  return r.usable && (!check || sc.ok) ? kExitOk : kExitFailure;
}

const CommandRegistration reg{"doctor", "check whether this machine can mount (FUSE) and use the store",
                              "[--device PATH] [--no-trial-mount] [--no-store-check] [--store URL ...] [--json]", run_doctor};

}  // namespace
}  // namespace lazycache::cli
