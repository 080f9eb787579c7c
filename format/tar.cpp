// SPDX-License-Identifier: MIT
#include "format/tar.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "format/quote.h"

namespace lazycache::format {

namespace {

constexpr uint64_t kMaxOctal11 = 077777777777ull;  // 12-byte numeric fields (size, mtime)
constexpr uint64_t kMaxOctal7 = 07777777ull;       // 8-byte numeric fields (uid, gid)
// Bounds for extension headers read from untrusted streams: xattr values are at most 64 KiB
// on Linux, paths at most 4 KiB, so 16 MiB of pax records is far above anything legitimate.
constexpr uint64_t kMaxPaxBytes = 16ull << 20;
constexpr uint64_t kMaxGnuLongBytes = 1ull << 20;

void put_octal(char* field, size_t width, uint64_t value) {
  // width-1 digits then NUL, zero-padded: the form GNU tar and bsdtar write.
  std::string digits(width - 1, '0');
  for (size_t i = width - 1; i-- > 0 && value;) {
    digits[i] = static_cast<char>('0' + (value & 7));
    value >>= 3;
  }
  std::memcpy(field, digits.data(), width - 1);
  field[width - 1] = '\0';
}

void put_string(char* field, size_t width, std::string_view s) { std::memcpy(field, s.data(), std::min(width, s.size())); }

std::string pax_record(std::string_view key, std::string_view value) {
  size_t body = key.size() + value.size() + 3;  // ' ', '=', '\n'
  size_t len = body + std::to_string(body).size();
  if (std::to_string(len).size() != std::to_string(body).size()) len = body + std::to_string(len).size();
  return std::to_string(len) + " " + std::string(key) + "=" + std::string(value) + "\n";
}

std::string pax_time(int64_t ns) {
  bool negative = ns < 0;
  uint64_t abs = negative ? 0 - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
  std::string frac = std::to_string(abs % 1000000000ull);
  frac.insert(0, 9 - frac.size(), '0');
  return (negative ? "-" : "") + std::to_string(abs / 1000000000ull) + "." + frac;
}

std::string ustar_block(std::string_view name, char typeflag, uint32_t mode, uint64_t uid, uint64_t gid, uint64_t size, int64_t mtime_s,
                        std::string_view linkname) {
  std::string b(kTarBlock, '\0');
  char* h = b.data();
  put_string(h, 100, name);
  put_octal(h + 100, 8, mode & 07777);
  put_octal(h + 108, 8, std::min<uint64_t>(uid, kMaxOctal7));
  put_octal(h + 116, 8, std::min<uint64_t>(gid, kMaxOctal7));
  put_octal(h + 124, 12, std::min<uint64_t>(size, kMaxOctal11));
  put_octal(h + 136, 12, static_cast<uint64_t>(std::clamp<int64_t>(mtime_s, 0, static_cast<int64_t>(kMaxOctal11))));
  std::memset(h + 148, ' ', 8);
  h[156] = typeflag;
  put_string(h + 157, 100, linkname);
  std::memcpy(h + 257,
              "ustar\0"
              "00",
              8);
  put_octal(h + 329, 8, 0);
  put_octal(h + 337, 8, 0);
  unsigned sum = 0;
  for (size_t i = 0; i < kTarBlock; ++i) sum += static_cast<unsigned char>(h[i]);
  put_octal(h + 148, 7, sum);  // six digits, NUL, then the space already there
  return b;
}

int64_t floor_seconds(int64_t ns) { return ns >= 0 ? ns / 1000000000 : -((-(ns + 1)) / 1000000000) - 1; }

Status corrupt(const std::string& what) { return Status(ErrorCode::kCorrupt, "tar: " + what); }

// Numeric header field: octal ASCII (spaces/NULs around it) or GNU base-256.
Result<uint64_t> parse_number(const char* field, size_t width, const char* what, bool* negative = nullptr) {
  auto first = static_cast<unsigned char>(field[0]);
  if (first & 0x80) {
    if (first == 0xFF) {
      if (!negative) return corrupt(std::string("negative ") + what);
      // Two's complement negative base-256 value (only mtime may be negative).
      uint64_t v = 0;
      for (size_t i = 1; i < width; ++i) v = (v << 8) | static_cast<unsigned char>(field[i]);
      if (width > 9 && std::any_of(field + 1, field + width - 8, [](char c) { return static_cast<unsigned char>(c) != 0xFF; }))
        return corrupt(std::string("base-256 ") + what + " out of range");
      *negative = true;
      return v;
    }
    if (first != 0x80) return corrupt(std::string("bad base-256 ") + what);
    uint64_t v = 0;
    for (size_t i = 1; i < width; ++i) {
      if (v >> 56) return corrupt(std::string("base-256 ") + what + " out of range");
      v = (v << 8) | static_cast<unsigned char>(field[i]);
    }
    return v;
  }
  size_t i = 0;
  while (i < width && (field[i] == ' ' || field[i] == '\0')) ++i;
  uint64_t v = 0;
  size_t digits = 0;
  for (; i < width && field[i] >= '0' && field[i] <= '7'; ++i, ++digits) {
    if (v >> 60) return corrupt(std::string(what) + " out of range");
    v = (v << 3) | static_cast<uint64_t>(field[i] - '0');
  }
  for (; i < width; ++i)
    if (field[i] != ' ' && field[i] != '\0') return corrupt(std::string("bad octal digit in ") + what);
  return v;
}

std::string field_string(const char* field, size_t width) { return std::string(field, strnlen(field, width)); }

}  // namespace

std::string tar_header_bytes(const TarMember& m) {
  std::string path = m.path;
  if (m.type == TarType::kDirectory) path += '/';
  int64_t mtime_s = floor_seconds(m.mtime_ns);
  bool has_ns = m.mtime_ns != mtime_s * 1000000000;
  std::string records;
  if (path.size() > 100) records += pax_record("path", path);
  if (m.linkname.size() > 100) records += pax_record("linkpath", m.linkname);
  if (m.size > kMaxOctal11) records += pax_record("size", std::to_string(m.size));
  if (m.uid > kMaxOctal7) records += pax_record("uid", std::to_string(m.uid));
  if (m.gid > kMaxOctal7) records += pax_record("gid", std::to_string(m.gid));
  if (has_ns || mtime_s < 0 || static_cast<uint64_t>(mtime_s) > kMaxOctal11) records += pax_record("mtime", pax_time(m.mtime_ns));
  for (const auto& [name, value] : m.xattrs) records += pax_record("SCHILY.xattr." + name, value);
  std::string out;
  if (!records.empty()) {
    out = ustar_block("././@PaxHeader", 'x', 0644, 0, 0, records.size(), 0, "");
    out += records;
    out.append(tar_padding(records.size()), '\0');
  }
  out += ustar_block(path, static_cast<char>(m.type), m.mode, m.uid, m.gid, m.type == TarType::kRegular ? m.size : 0, mtime_s, m.linkname);
  return out;
}

Result<TarHeader> parse_tar_header(std::span<const std::byte> block) {
  if (block.size() != kTarBlock) return corrupt("header block is not 512 bytes");
  const char* h = reinterpret_cast<const char*>(block.data());
  TarHeader t;
  if (std::all_of(h, h + kTarBlock, [](char c) { return c == '\0'; })) {
    t.zero_block = true;
    return t;
  }
  LC_ASSIGN_OR_RETURN(uint64_t stored_sum, parse_number(h + 148, 8, "checksum"));
  uint64_t unsigned_sum = 0;
  int64_t signed_sum = 0;
  for (size_t i = 0; i < kTarBlock; ++i) {
    char c = (i >= 148 && i < 156) ? ' ' : h[i];
    unsigned_sum += static_cast<unsigned char>(c);
    signed_sum += static_cast<signed char>(c);
  }
  if (stored_sum != unsigned_sum && static_cast<int64_t>(stored_sum) != signed_sum) return corrupt("header checksum mismatch");
  t.typeflag = h[156] == '\0' ? '0' : h[156];
  t.name = field_string(h, 100);
  t.linkname = field_string(h + 157, 100);
  LC_ASSIGN_OR_RETURN(uint64_t mode, parse_number(h + 100, 8, "mode"));
  t.mode = static_cast<uint32_t>(mode & 07777);
  LC_ASSIGN_OR_RETURN(t.uid, parse_number(h + 108, 8, "uid"));
  LC_ASSIGN_OR_RETURN(t.gid, parse_number(h + 116, 8, "gid"));
  LC_ASSIGN_OR_RETURN(t.size, parse_number(h + 124, 12, "size"));
  bool negative = false;
  LC_ASSIGN_OR_RETURN(uint64_t mtime, parse_number(h + 136, 12, "mtime", &negative));
  t.mtime_s = static_cast<int64_t>(mtime);  // two's complement reinterpretation when negative
  if (!negative && mtime > static_cast<uint64_t>(INT64_MAX) / 1000000000) return corrupt("mtime out of range");
  if (std::memcmp(h + 257, "ustar\0", 6) == 0) {  // POSIX: prefix is valid (GNU "ustar  " has none)
    std::string prefix = field_string(h + 345, 155);
    if (!prefix.empty()) t.name = prefix + "/" + t.name;
  }
  return t;
}

Result<std::vector<std::pair<std::string, std::string>>> parse_pax_records(std::string_view data) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t pos = 0;
  while (pos < data.size()) {
    if (data[pos] == '\0') break;  // some writers pad records with NULs
    size_t len = 0, i = pos;
    while (i < data.size() && data[i] >= '0' && data[i] <= '9') {
      if (len > data.size()) return corrupt("pax record length out of range");
      len = len * 10 + static_cast<size_t>(data[i] - '0');
      ++i;
    }
    if (i == pos || i >= data.size() || data[i] != ' ') return corrupt("malformed pax record length");
    if (len > data.size() - pos || len < i - pos + 3) return corrupt("pax record length out of range");
    std::string_view rec = data.substr(i + 1, pos + len - (i + 1));
    if (rec.empty() || rec.back() != '\n') return corrupt("pax record not terminated by a newline");
    rec.remove_suffix(1);
    size_t eq = rec.find('=');
    if (eq == std::string_view::npos || eq == 0) return corrupt("pax record without key=value");
    out.emplace_back(std::string(rec.substr(0, eq)), std::string(rec.substr(eq + 1)));
    pos += len;
  }
  return out;
}

Result<int64_t> parse_pax_time(std::string_view v) {
  bool negative = !v.empty() && v[0] == '-';
  if (negative) v.remove_prefix(1);
  size_t dot = v.find('.');
  std::string_view sec = v.substr(0, dot), frac = dot == std::string_view::npos ? std::string_view() : v.substr(dot + 1);
  if (sec.empty() || sec.size() > 11) return corrupt("pax time '" + std::string(v) + "' out of range");
  int64_t s = 0, ns = 0;
  for (char c : sec) {
    if (c < '0' || c > '9') return corrupt("bad pax time");
    s = s * 10 + (c - '0');
  }
  for (size_t i = 0; i < 9; ++i) {
    char c = i < frac.size() ? frac[i] : '0';
    if (c < '0' || c > '9') return corrupt("bad pax time fraction");
    ns = ns * 10 + (c - '0');
  }
  for (size_t i = 9; i < frac.size(); ++i)
    if (frac[i] < '0' || frac[i] > '9') return corrupt("bad pax time fraction");
  // Nanoseconds since the epoch fit int64 until 2262: a later (or 11-digit) time is refused
  // here rather than overflowing.
  if (s > (INT64_MAX - ns) / 1000000000) return corrupt("pax time '" + std::string(v) + "' out of range");
  int64_t total = s * 1000000000 + ns;
  return negative ? -total : total;
}

Status TarReader::read_exact(std::span<std::byte> out, const char* what) {
  LC_ASSIGN_OR_RETURN(size_t n, read_(out));
  position_ += n;
  if (n != out.size()) return corrupt(std::string("stream ends inside ") + what + " at offset " + std::to_string(position_));
  return Status();
}

Status TarReader::skip(uint64_t n) {
  std::byte buf[64 * 1024];
  while (n > 0) {
    size_t chunk = static_cast<size_t>(std::min<uint64_t>(n, sizeof buf));
    LC_RETURN_IF_ERROR(read_exact(std::span<std::byte>(buf, chunk), "member data"));
    n -= chunk;
  }
  return Status();
}

Result<size_t> TarReader::read_data(std::span<std::byte> out) {
  size_t want = static_cast<size_t>(std::min<uint64_t>(out.size(), data_left_));
  if (want == 0) return size_t{0};
  LC_RETURN_IF_ERROR(read_exact(out.first(want), "member data"));
  data_left_ -= want;
  return want;
}

Result<std::optional<TarEntryInfo>> TarReader::next() {
  LC_RETURN_IF_ERROR(skip(data_left_ + padding_left_));
  data_left_ = padding_left_ = 0;
  std::vector<std::pair<std::string, std::string>> pax;
  std::optional<std::string> gnu_name, gnu_link;
  std::byte block[kTarBlock];
  for (;;) {
    uint64_t header_offset = position_;
    LC_RETURN_IF_ERROR(read_exact(block, "a header"));
    auto parsed = parse_tar_header(block);
    if (!parsed.ok()) return parsed.error().with_context("header at offset " + std::to_string(header_offset));
    TarHeader h = std::move(parsed).value();
    if (h.zero_block) return std::optional<TarEntryInfo>();
    if (h.typeflag == 'x' || h.typeflag == 'g' || h.typeflag == 'L' || h.typeflag == 'K') {
      uint64_t limit = (h.typeflag == 'x' || h.typeflag == 'g') ? kMaxPaxBytes : kMaxGnuLongBytes;
      if (h.size > limit)
        return corrupt("extension header of " + std::to_string(h.size) + " bytes at offset " + std::to_string(header_offset));
      std::string data(h.size, '\0');
      LC_RETURN_IF_ERROR(read_exact(std::as_writable_bytes(std::span<char>(data)), "an extension header"));
      LC_RETURN_IF_ERROR(skip(tar_padding(h.size)));
      if (h.typeflag == 'x') {
        LC_ASSIGN_OR_RETURN(auto recs, parse_pax_records(data));
        pax.insert(pax.end(), recs.begin(), recs.end());
      } else if (h.typeflag == 'L') {
        gnu_name = std::string(data.c_str());
      } else if (h.typeflag == 'K') {
        gnu_link = std::string(data.c_str());
      }  // 'g': global records are accepted and ignored (lazycache never writes them)
      continue;
    }
    TarEntryInfo e;
    e.path = gnu_name ? *gnu_name : h.name;
    e.linkname = gnu_link ? *gnu_link : h.linkname;
    e.typeflag = h.typeflag;
    e.mode = h.mode;
    e.uid = h.uid;
    e.gid = h.gid;
    e.size = h.size;
    if (h.mtime_s > INT64_MAX / 1000000000 || h.mtime_s < INT64_MIN / 1000000000)
      return corrupt("member " + quote_path(e.path) + ": mtime out of range");
    e.mtime_ns = h.mtime_s * 1000000000;
    for (const auto& [key, value] : pax) {
      if (key == "path") e.path = value;
      else if (key == "linkpath") e.linkname = value;
      else if (key == "mtime") {
        auto t = parse_pax_time(value);
        if (!t.ok()) return t.error().with_context("member " + quote_path(e.path));
        e.mtime_ns = *t;
      } else if (key == "size" || key == "uid" || key == "gid") {
        if (value.empty() || value.size() > 19 || value.find_first_not_of("0123456789") != std::string::npos)
          return corrupt("member " + quote_path(e.path) + ": bad pax " + key + " " + quote_path(value, 64));
        uint64_t n = std::stoull(value);
        (key == "size" ? e.size : key == "uid" ? e.uid : e.gid) = n;
      } else if (key.rfind("SCHILY.xattr.", 0) == 0) {
        std::string name = key.substr(13);
        // listxattr(2) separates names by NUL: one inside a name would show as an extra name.
        if (name.empty() || name.find('\0') != std::string::npos)
          return corrupt("member " + quote_path(e.path) + ": xattr name " + quote_path(name, 64) + " is empty or holds a NUL byte");
        e.xattrs.emplace_back(std::move(name), value);
      }
    }
    while (e.path.size() > 1 && e.path.back() == '/') e.path.pop_back();
    e.data_offset = position_;
    bool has_data = e.typeflag == '0' || e.typeflag == '7' || e.typeflag == '1';  // some writers give hardlinks data
    if (!has_data) e.size = 0;
    if (e.size > (1ull << 62))
      return corrupt("member " + quote_path(e.path) + ": size out of range (header at offset " + std::to_string(header_offset) + ")");
    data_left_ = e.size;
    padding_left_ = tar_padding(e.size);
    return std::optional<TarEntryInfo>(std::move(e));
  }
}

}  // namespace lazycache::format
