// SPDX-License-Identifier: MIT
#include "remote/curl_library.h"

#include <dlfcn.h>

#include <mutex>
#include <string>

namespace lazycache::remote {
namespace {

// libcurl4's soname: the ABI the header above describes.
constexpr const char* kLibrary = "libcurl.so.4";

struct Loaded {
  CurlApi api;
  std::string error;  // empty: loaded
};

Loaded load() {
  Loaded out;
  void* lib = ::dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);  // never closed: its handles live as long as the process
  if (lib == nullptr) {
    const char* why = ::dlerror();
    out.error = std::string("cannot load ") + kLibrary + " (install libcurl4): " + (why != nullptr ? why : "unknown error");
    return out;
  }
  auto bind = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(lib, name));
    if (fn == nullptr && out.error.empty()) out.error = std::string(kLibrary) + " has no " + name;
  };
  CurlApi& a = out.api;
  bind(a.global_init, "curl_global_init");
  bind(a.easy_init, "curl_easy_init");
  bind(a.easy_reset, "curl_easy_reset");
  bind(a.easy_cleanup, "curl_easy_cleanup");
  bind(a.easy_setopt, "curl_easy_setopt");
  bind(a.easy_perform, "curl_easy_perform");
  bind(a.easy_getinfo, "curl_easy_getinfo");
  bind(a.easy_strerror, "curl_easy_strerror");
  bind(a.slist_append, "curl_slist_append");
  bind(a.slist_free_all, "curl_slist_free_all");
  if (out.error.empty() && a.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) out.error = "curl_global_init failed";
  return out;
}

}  // namespace

Result<const CurlApi*> curl_api() {
  static const Loaded loaded = load();  // C++ makes the first call's initialisation thread-safe
  if (!loaded.error.empty()) return Status(ErrorCode::kUnavailable, loaded.error);
  return &loaded.api;
}

}  // namespace lazycache::remote
