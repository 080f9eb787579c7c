// SPDX-License-Identifier: MIT
#include "remote/testing/fault_injecting_object_store.h"

#include <algorithm>
#include <sstream>
#include <thread>

namespace lazycache::remote::testing {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t mix(uint64_t seed, StoreOp op, uint64_t index) {
  return splitmix64(seed ^ splitmix64(static_cast<uint64_t>(op) * 0x100000001b3ULL + index));
}

std::string describe_action(const FaultAction& a) {
  std::string s;
  auto add = [&](const std::string& part) { s += (s.empty() ? "" : ", ") + part; };
  if (a.delay.count()) add("delay " + std::to_string(a.delay.count()) + " ms");
  if (a.gate) add("gate");
  if (a.fail) add(std::string("fail ") + error_code_name(*a.fail));
  if (a.truncate_after_bytes) add("truncate after " + std::to_string(*a.truncate_after_bytes) + " bytes");
  if (a.flip_etag) add("flip etag");
  if (a.flip_body_bit) add("flip body bit");
  return s.empty() ? "no-op" : s;
}

std::string flipped(const std::string& etag) { return etag + "-flipped"; }

}  // namespace

void Gate::release() {
  std::lock_guard lock(mu_);
  released_ = true;
  cv_.notify_all();
}

bool Gate::wait_arrived(size_t n, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return arrived_ >= n; });
}

size_t Gate::arrived() const {
  std::lock_guard lock(mu_);
  return arrived_;
}

void Gate::pass() {
  std::unique_lock lock(mu_);
  ++arrived_;
  cv_.notify_all();
  cv_.wait(lock, [&] { return released_; });
}

void FaultInjectingObjectStore::add_rule(FaultRule rule) {
  std::lock_guard lock(mu_);
  rules_.push_back(std::move(rule));
}

void FaultInjectingObjectStore::fail_nth(StoreOp op, uint64_t k, FaultAction action) {
  add_rule(FaultRule{.op = op, .first_call = k, .times = 1, .key_contains = {}, .action = std::move(action)});
}

void FaultInjectingObjectStore::set_one_in(StoreOp op, uint32_t n, uint64_t seed, FaultAction action) {
  std::lock_guard lock(mu_);
  one_in_[static_cast<size_t>(op)] = OneIn{n, seed, std::move(action)};
}

void FaultInjectingObjectStore::clear_rules() {
  std::lock_guard lock(mu_);
  rules_.clear();
  for (auto& o : one_in_) o.reset();
}

std::vector<FaultRecord> FaultInjectingObjectStore::faults() const {
  std::lock_guard lock(mu_);
  return records_;
}

size_t FaultInjectingObjectStore::fault_count() const {
  std::lock_guard lock(mu_);
  return records_.size();
}

std::string FaultInjectingObjectStore::describe_faults() const {
  std::ostringstream os;
  for (const auto& r : faults()) {
    os << store_op_name(r.op) << " #" << r.call_index << " key " << r.key << ": " << r.what << "\n";
  }
  return os.str();
}

std::optional<FaultAction> FaultInjectingObjectStore::next(StoreOp op, std::string_view key, uint64_t* index) {
  *index = calls_[static_cast<size_t>(op)].fetch_add(1) + 1;
  std::lock_guard lock(mu_);
  std::optional<FaultAction> chosen;
  for (const auto& r : rules_) {
    if (r.op != op || *index < r.first_call) continue;
    if (r.times != 0 && *index - r.first_call >= r.times) continue;
    if (!r.key_contains.empty() && key.find(r.key_contains) == std::string_view::npos) continue;
    chosen = r.action;
    break;
  }
  const auto& one = one_in_[static_cast<size_t>(op)];
  if (!chosen && one && one->n > 0 && mix(one->seed, op, *index) % one->n == 0) chosen = one->action;
  if (chosen) records_.push_back(FaultRecord{op, *index, std::string(key), describe_action(*chosen)});
  return chosen;
}

Status FaultInjectingObjectStore::pre_call(StoreOp op, uint64_t index, std::string_view key, const FaultAction& a) {
  if (a.delay.count() > 0) std::this_thread::sleep_for(a.delay);
  if (a.gate) a.gate->pass();
  if (a.fail) {
    return Status(*a.fail,
                  std::string(store_op_name(op)) + " " + std::string(key) + " (call #" + std::to_string(index) + "): " + a.message);
  }
  return Status();
}

Result<ObjectInfo> FaultInjectingObjectStore::head(std::string_view key) {
  uint64_t index = 0;
  auto a = next(StoreOp::kHead, key, &index);
  if (!a) return inner_->head(key);
  LC_RETURN_IF_ERROR(pre_call(StoreOp::kHead, index, key, *a));
  auto r = inner_->head(key);
  if (r.ok() && a->flip_etag) r->etag = flipped(r->etag);
  return r;
}

Result<size_t> FaultInjectingObjectStore::get_range(const RangeRequest& req, std::span<std::byte> out) {
  uint64_t index = 0;
  auto a = next(StoreOp::kGetRange, req.key, &index);
  if (!a) return inner_->get_range(req, out);
  LC_RETURN_IF_ERROR(pre_call(StoreOp::kGetRange, index, req.key, *a));
  RangeRequest changed = req;
  // A faulted reply is damaged after it came in: told as it came, a reader would have been
  // given the undamaged bytes.
  changed.on_progress = nullptr;
  if (a->flip_etag) changed.if_match = flipped(req.if_match.empty() ? std::string("\"none\"") : req.if_match);
  auto r = inner_->get_range(changed, out);
  if (!r.ok()) return r;
  size_t n = *r;
  if (a->truncate_after_bytes) n = static_cast<size_t>(std::min<uint64_t>(n, *a->truncate_after_bytes));
  if (a->flip_body_bit && n > 0) {
    uint64_t h = mix(index, StoreOp::kGetRange, req.offset);
    out[h % n] ^= static_cast<std::byte>(1u << ((h >> 32) % 8));
  }
  return n;
}

Result<ObjectInfo> FaultInjectingObjectStore::put(std::string_view key, const BodyReader& body, const PutOptions& opts) {
  uint64_t index = 0;
  auto a = next(StoreOp::kPut, key, &index);
  if (!a) return inner_->put(key, body, opts);
  LC_RETURN_IF_ERROR(pre_call(StoreOp::kPut, index, key, *a));
  uint64_t limit = a->truncate_after_bytes.value_or(0), sent = 0;
  const std::string k(key);
  // Stands in for an upload connection that drops after `limit` body bytes.
  BodyReader cut = [&](std::span<std::byte> buf) -> Result<size_t> {
    auto n = body(sent < limit ? buf.first(static_cast<size_t>(std::min<uint64_t>(buf.size(), limit - sent))) : buf);
    if (!n.ok() || *n == 0) return n;
    if (sent >= limit) {
      return Status(ErrorCode::kUnavailable,
                    "put " + k + " (call #" + std::to_string(index) + "): connection lost after " + std::to_string(sent) + " bytes");
    }
    sent += *n;
    return n;
  };
  auto r = a->truncate_after_bytes ? inner_->put(key, cut, opts) : inner_->put(key, body, opts);
  if (r.ok() && a->flip_etag) r->etag = flipped(r->etag);
  return r;
}

Result<ListPage> FaultInjectingObjectStore::list(std::string_view prefix, std::string_view continuation) {
  uint64_t index = 0;
  auto a = next(StoreOp::kList, prefix, &index);
  if (!a) return inner_->list(prefix, continuation);
  LC_RETURN_IF_ERROR(pre_call(StoreOp::kList, index, prefix, *a));
  return inner_->list(prefix, continuation);
}

Status FaultInjectingObjectStore::remove(std::string_view key) {
  uint64_t index = 0;
  auto a = next(StoreOp::kRemove, key, &index);
  if (!a) return inner_->remove(key);
  LC_RETURN_IF_ERROR(pre_call(StoreOp::kRemove, index, key, *a));
  return inner_->remove(key);
}

}  // namespace lazycache::remote::testing
