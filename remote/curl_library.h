// SPDX-License-Identifier: MIT
// File: remote/curl_library.h -- libcurl, loaded when the first HTTP client is made (dlopen),
// not when the program starts.
//
// Why: libcurl brings about 30 shared libraries (GnuTLS, Kerberos, LDAP, SASL, p11-kit, ...)
// whose loading and constructors cost every process ~16 ms at start on this 2-core VM (an empty
// program linked with -lcurl: 20 ms; without: 4 ms). Every command paid it, and so did each
// helper process the mount daemon starts (the tree walk, the open feed, the cache check), though
// only the commands that talk to an S3 or HTTP store use it: `unmount` of a mount, `status`, a
// local-directory store's `mount` and `save` never do.
// The library is Debian's libcurl4 (the soname the build was compiled against); the types and
// constants still come from its header, so a call through this table is checked as a direct
// call would be.
#pragma once

#include <curl/curl.h>

#include "common/status.h"

namespace lazycache::remote {

// The functions of libcurl this program calls.
struct CurlApi {
  decltype(&::curl_global_init) global_init = nullptr;
  decltype(&::curl_easy_init) easy_init = nullptr;
  decltype(&::curl_easy_reset) easy_reset = nullptr;
  decltype(&::curl_easy_cleanup) easy_cleanup = nullptr;
  decltype(&::curl_easy_setopt) easy_setopt = nullptr;
  decltype(&::curl_easy_perform) easy_perform = nullptr;
  decltype(&::curl_easy_getinfo) easy_getinfo = nullptr;
  decltype(&::curl_easy_strerror) easy_strerror = nullptr;
  decltype(&::curl_slist_append) slist_append = nullptr;
  decltype(&::curl_slist_free_all) slist_free_all = nullptr;
};

// The loaded library (loaded and curl_global_init'ed once, on the first call; thread-safe), or
// kUnavailable naming the library and the loader's reason (libcurl4 not installed) on every call.
Result<const CurlApi*> curl_api();

}  // namespace lazycache::remote
