// SPDX-License-Identifier: MIT
#include "remote/upload_sink.h"

#include <algorithm>
#include <cstring>

namespace lazycache::remote {

UploadSink::UploadSink(std::shared_ptr<ObjectStore> store, std::string key, PutOptions options, size_t pipe_bytes)
    : store_(std::move(store)), key_(std::move(key)), pipe_bytes_(std::max<size_t>(pipe_bytes, 1)) {
  uploader_ = std::thread([this, options] {
    auto result = store_->put(
        key_, [this](std::span<std::byte> out) { return read_body(out); }, options);
    std::lock_guard lock(mu_);
    upload_done_ = true;
    if (result.ok()) published_ = *result;
    else upload_status_ = result.error();
    cv_.notify_all();
  });
}

UploadSink::~UploadSink() {
  {
    std::lock_guard lock(mu_);
    if (!committed_) abandoned_ = true;
    cv_.notify_all();
  }
  finish();
}

void UploadSink::finish() {
  if (uploader_.joinable()) uploader_.join();
}

Result<size_t> UploadSink::read_body(std::span<std::byte> out) {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return !chunks_.empty() || closed_ || abandoned_; });
  if (abandoned_) return Status(ErrorCode::kCancelled, "upload of " + key_ + " abandoned before commit");
  size_t n = 0;
  while (n < out.size() && !chunks_.empty()) {
    auto& front = chunks_.front();
    size_t take = std::min(out.size() - n, front.size() - front_offset_);
    std::memcpy(out.data() + n, front.data() + front_offset_, take);
    n += take;
    front_offset_ += take;
    if (front_offset_ == front.size()) {
      chunks_.pop_front();
      front_offset_ = 0;
    }
  }
  buffered_ -= n;
  cv_.notify_all();
  return n;  // 0 only when closed and drained: the end of the body
}

Status UploadSink::write(std::span<const std::byte> bytes) {
  if (bytes.empty()) return Status();
  std::unique_lock lock(mu_);
  if (closed_) return Status(ErrorCode::kInternal, "write after commit on upload of " + key_);
  cv_.wait(lock, [&] { return buffered_ < pipe_bytes_ || upload_done_; });
  if (upload_done_) {
    if (!upload_status_.ok()) return upload_status_;
    return Status(ErrorCode::kInternal, "upload of " + key_ + " ended before its body did");
  }
  chunks_.emplace_back(bytes.begin(), bytes.end());
  buffered_ += bytes.size();
  written_ += bytes.size();
  cv_.notify_all();
  return Status();
}

Status UploadSink::commit() {
  {
    std::lock_guard lock(mu_);
    closed_ = true;
    committed_ = true;
    cv_.notify_all();
  }
  finish();
  std::lock_guard lock(mu_);
  return upload_status_;
}

}  // namespace lazycache::remote
