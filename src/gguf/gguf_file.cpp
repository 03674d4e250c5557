// GGUF reader: checks every field against the file's size and the format's rules before using it,
// so a hostile or truncated file gives an Error naming the byte, never a crash or a huge allocation.
#include "gguf/gguf_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <numeric>

#include "gguf/gguf_cursor.h"
#include "gguf/gguf_split.h"
#include "util/error.h"

namespace tessera::gguf {

using detail::checked_add;
using detail::checked_align_up;
using detail::checked_mul;
using detail::Cursor;

namespace {

constexpr uint64_t kMaxNameLength = uint64_t{1} << 16;  // keys and tensor names
constexpr uint64_t kInt64Max = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
// The fewest bytes one entry can take, to bound counts by the bytes left in the file.
constexpr uint64_t kMinKvBytes = 8 + 1 + 4 + 1;                  // key length, 1-byte key, type, 1-byte value
constexpr uint64_t kMinTensorInfoBytes = 8 + 1 + 4 + 8 + 4 + 8;  // name, 1 dim, type, offset

// Names from the file may hold any bytes; escape the unprintable ones before they reach a message.
std::string printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7F) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += ch;
    }
  }
  return out;
}

// Bytes a value of this type takes at least; 0 for a type id that is not a GGUF value type.
uint64_t min_value_bytes(uint32_t type) {
  switch (static_cast<ValueType>(type)) {
    case ValueType::UINT8:
    case ValueType::INT8:
    case ValueType::BOOL:
      return 1;
    case ValueType::UINT16:
    case ValueType::INT16:
      return 2;
    case ValueType::UINT32:
    case ValueType::INT32:
    case ValueType::FLOAT32:
      return 4;
    case ValueType::UINT64:
    case ValueType::INT64:
    case ValueType::FLOAT64:
    case ValueType::STRING:  // the length
      return 8;
    case ValueType::ARRAY:  // element type + count
      return 12;
  }
  return 0;
}

Value read_value(Cursor& c, uint32_t type, int depth);

template <typename T>
void read_scalars(Cursor& c, uint64_t count, std::vector<Value>& items) {
  for (uint64_t i = 0; i < count; ++i) items.emplace_back(c.read<T>("an array element"));
}

Value read_array(Cursor& c, int depth) {
  size_t at = c.pos();
  if (depth >= kMaxArrayDepth) c.fail_at(at, "arrays are nested deeper than {} levels", kMaxArrayDepth);
  auto elem = c.read<uint32_t>("the array element type");
  uint64_t elem_min = min_value_bytes(elem);
  if (elem_min == 0) c.fail_at(at, "unknown array element type {}", elem);
  size_t count_at = c.pos();
  auto count = c.read<uint64_t>("the array length");
  if (count > kMaxArrayLength) c.fail_at(count_at, "array length {} exceeds the limit of {}", count, kMaxArrayLength);
  // count * elem_min cannot overflow: both factors are small.
  if (count * elem_min > c.left()) {
    c.fail_at(count_at, "array of {} {} values needs at least {} bytes, but only {} are left", count,
              value_type_name(static_cast<ValueType>(elem)), count * elem_min, c.left());
  }
  std::vector<Value> items;
  items.reserve(static_cast<size_t>(count));
  switch (static_cast<ValueType>(elem)) {
    case ValueType::UINT8:
      read_scalars<uint8_t>(c, count, items);
      break;
    case ValueType::INT8:
      read_scalars<int8_t>(c, count, items);
      break;
    case ValueType::UINT16:
      read_scalars<uint16_t>(c, count, items);
      break;
    case ValueType::INT16:
      read_scalars<int16_t>(c, count, items);
      break;
    case ValueType::UINT32:
      read_scalars<uint32_t>(c, count, items);
      break;
    case ValueType::INT32:
      read_scalars<int32_t>(c, count, items);
      break;
    case ValueType::FLOAT32:
      read_scalars<float>(c, count, items);
      break;
    case ValueType::UINT64:
      read_scalars<uint64_t>(c, count, items);
      break;
    case ValueType::INT64:
      read_scalars<int64_t>(c, count, items);
      break;
    case ValueType::FLOAT64:
      read_scalars<double>(c, count, items);
      break;
    case ValueType::STRING:
      // The hot path for vocabularies (150k+ entries): one std::string per element, nothing more.
      for (uint64_t i = 0; i < count; ++i) items.emplace_back(std::string(c.read_string("a string", kMaxStringLength)));
      break;
    case ValueType::BOOL:
    case ValueType::ARRAY:
      for (uint64_t i = 0; i < count; ++i) items.push_back(read_value(c, elem, depth + 1));
      break;
  }
  return Value::array(static_cast<ValueType>(elem), std::move(items));
}

Value read_value(Cursor& c, uint32_t type, int depth) {
  switch (static_cast<ValueType>(type)) {
    case ValueType::UINT8:
      return c.read<uint8_t>("a uint8 value");
    case ValueType::INT8:
      return c.read<int8_t>("an int8 value");
    case ValueType::UINT16:
      return c.read<uint16_t>("a uint16 value");
    case ValueType::INT16:
      return c.read<int16_t>("an int16 value");
    case ValueType::UINT32:
      return c.read<uint32_t>("a uint32 value");
    case ValueType::INT32:
      return c.read<int32_t>("an int32 value");
    case ValueType::FLOAT32:
      return c.read<float>("a float32 value");
    case ValueType::UINT64:
      return c.read<uint64_t>("a uint64 value");
    case ValueType::INT64:
      return c.read<int64_t>("an int64 value");
    case ValueType::FLOAT64:
      return c.read<double>("a float64 value");
    case ValueType::BOOL: {
      size_t at = c.pos();
      auto b = c.read<uint8_t>("a bool value");
      if (b > 1) c.fail_at(at, "bool value is {} (must be 0 or 1)", b);
      return b == 1;
    }
    case ValueType::STRING:
      return std::string(c.read_string("a string", kMaxStringLength));
    case ValueType::ARRAY:
      return read_array(c, depth);
  }
  c.fail_at(c.pos(), "unknown value type {}", type);
}

struct SplitKeys {
  uint64_t no = 0;
  uint64_t count = 0;
  uint64_t n_tensors = 0;
};

bool has_split_keys(const Metadata& md) {
  return md.contains(kSplitNo) || md.contains(kSplitCount) || md.contains(kSplitTensorsCount);
}

// The three keys, checked: each present, an integer, in range. Errors name the file.
SplitKeys read_split_keys(const Metadata& md, const std::string& file) {
  SplitKeys k;
  try {
    k.no = md.get_u64(kSplitNo);
    k.count = md.get_u64(kSplitCount);
    k.n_tensors = md.get_u64(kSplitTensorsCount);
  } catch (const Error& e) {
    fail("{}: a split GGUF file, but {}", file, e.what());
  }
  if (k.count < 1 || k.count > kMaxSplitCount) fail("{}: split.count {} is not 1 to {}", file, k.count, kMaxSplitCount);
  if (k.no >= k.count) fail("{}: split.no {} is not below split.count {}", file, k.no, k.count);
  if (k.n_tensors > kMaxTensorCount) {
    fail("{}: split.tensors.count {} exceeds the limit of {}", file, k.n_tensors, kMaxTensorCount);
  }
  return k;
}

std::string hex_bytes(std::span<const uint8_t> b) {
  std::string out;
  for (uint8_t x : b) out += fmt::format("{}{:02x}", out.empty() ? "" : " ", x);
  return out;
}

}  // namespace

int64_t TensorInfo::n_elements() const {
  return std::accumulate(ne.begin(), ne.end(), int64_t{1}, [](int64_t a, int64_t b) { return a * b; });
}

int64_t TensorInfo::rows() const {
  if (ne.empty()) return 0;
  return std::accumulate(ne.begin() + 1, ne.end(), int64_t{1}, [](int64_t a, int64_t b) { return a * b; });
}

GgufFile GgufFile::open_one(const std::filesystem::path& path) {
  GgufFile f;
  Part& p = f.parts_.emplace_back();
  p.map = MappedFile(path);
  p.bytes = p.map.bytes();
  p.name = path.string();
  f.name_ = p.name;
  f.parse_all();
  return f;
}

GgufFile GgufFile::open(const std::filesystem::path& path) {
  GgufFile f = open_one(path);
  f.open_other_parts(path);
  return f;
}

GgufFile GgufFile::parse(std::span<const uint8_t> bytes, std::string name) {
  GgufFile f;
  Part& p = f.parts_.emplace_back();
  p.bytes = bytes;
  p.name = name;
  f.name_ = std::move(name);
  f.parse_all();
  return f;
}

uint64_t GgufFile::file_size() const {
  uint64_t total = 0;
  for (const Part& p : parts_) total += p.bytes.size();
  return total;
}

const TensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const TensorInfo& GgufFile::tensor(std::string_view name) const {
  const TensorInfo* t = find_tensor(name);
  if (t == nullptr) fail("{}: no tensor named '{}'", name_, printable(name));
  return *t;
}

std::span<const uint8_t> GgufFile::tensor_data(const TensorInfo& info) const {
  // Infos from this file were checked while parsing; this guards against an info from elsewhere.
  if (info.part >= parts_.size()) {
    fail("{}: tensor '{}': part {} of a set of {} files", name_, printable(info.name), info.part, parts_.size());
  }
  const Part& p = parts_[info.part];
  uint64_t start = 0;
  uint64_t end = 0;
  if (!checked_add(p.data_offset, info.offset, start) || !checked_add(start, info.n_bytes, end) ||
      end > p.bytes.size()) {
    fail("{}: tensor '{}': data [offset {}, {} bytes] is not inside the file", p.name, printable(info.name),
         info.offset, info.n_bytes);
  }
  return p.bytes.subspan(static_cast<size_t>(start), static_cast<size_t>(info.n_bytes));
}

void GgufFile::parse_all() {
  const std::span<const uint8_t> bytes = parts_.front().bytes;
  uint64_t& data_offset = parts_.front().data_offset;
  Cursor c(bytes, name_);

  // ---- header ----
  if (bytes.size() < 4) c.fail_at(0, "the file is {} bytes long, too short for a GGUF header", bytes.size());
  if (std::memcmp(bytes.data(), "GGUF", 4) != 0) {
    c.fail_at(0, "not a GGUF file (magic {}, expected 47 47 55 46 \"GGUF\")", hex_bytes(bytes.first(4)));
  }
  c.read<uint32_t>("the magic");
  version_ = c.read<uint32_t>("the version");
  if (version_ == 1) {
    c.fail_at(4, "GGUF version 1 is not supported (it used 32-bit counts); convert the model with a newer llama.cpp");
  }
  if (version_ != 2 && version_ != 3) {
    uint32_t swapped = __builtin_bswap32(version_);
    if (swapped == 2 || swapped == 3) c.fail_at(4, "big-endian GGUF files are not supported");
    c.fail_at(4, "unsupported GGUF version {} (supported: 2 and 3)", version_);
  }
  auto n_tensors = c.read<uint64_t>("the tensor count");
  if (n_tensors > kMaxTensorCount) c.fail_at(8, "tensor count {} exceeds the limit of {}", n_tensors, kMaxTensorCount);
  auto n_kv = c.read<uint64_t>("the key/value count");
  if (n_kv > kMaxKvCount) c.fail_at(16, "key/value count {} exceeds the limit of {}", n_kv, kMaxKvCount);
  // Both counts are below 2^21, so these products cannot overflow.
  if (n_tensors * kMinTensorInfoBytes > c.left()) {
    c.fail_at(
        8, "tensor count {} needs at least {} bytes of tensor infos, but the file has only {} bytes after the header",
        n_tensors, n_tensors * kMinTensorInfoBytes, c.left());
  }
  if (n_kv * kMinKvBytes + n_tensors * kMinTensorInfoBytes > c.left()) {
    c.fail_at(16, "{} keys and {} tensors need at least {} bytes, but the file has only {} bytes after the header",
              n_kv, n_tensors, n_kv * kMinKvBytes + n_tensors * kMinTensorInfoBytes, c.left());
  }

  // ---- metadata ----
  // Where each key starts, for errors that point back at a key (views into the file bytes stay valid).
  std::unordered_map<std::string_view, size_t> key_at;
  key_at.reserve(static_cast<size_t>(n_kv));
  for (uint64_t i = 0; i < n_kv; ++i) {
    size_t at = c.pos();
    c.set_context(fmt::format("key/value pair {}", i));
    std::string_view key = c.read_string("the key", kMaxNameLength);
    if (key.empty()) c.fail_at(at, "the key is empty");
    c.set_context(fmt::format("key '{}'", printable(key)));
    if (auto it = key_at.find(key); it != key_at.end()) c.fail_at(at, "duplicate key (first at byte {})", it->second);
    size_t type_at = c.pos();
    auto type = c.read<uint32_t>("the value type");
    if (min_value_bytes(type) == 0) c.fail_at(type_at, "unknown value type {}", type);
    Value value = read_value(c, type, 0);
    key_at.emplace(key, at);
    metadata_.set(std::string(key), std::move(value));
  }
  c.set_context({});

  if (const Value* a = metadata_.find("general.alignment")) {
    size_t at = key_at.at("general.alignment");
    uint64_t align = 0;
    try {
      align = a->to_u64("general.alignment");
    } catch (const Error& e) {
      c.fail_at(at, "{}", e.what());
    }
    if (align == 0 || !std::has_single_bit(align)) c.fail_at(at, "general.alignment {} is not a power of two", align);
    alignment_ = align;
  }

  // ---- tensor infos ----
  std::vector<size_t> info_at;
  info_at.reserve(static_cast<size_t>(n_tensors));
  tensors_.reserve(static_cast<size_t>(n_tensors));
  tensor_index_.reserve(static_cast<size_t>(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    size_t at = c.pos();
    c.set_context(fmt::format("tensor {}", i));
    TensorInfo t;
    t.name = std::string(c.read_string("the tensor name", kMaxNameLength));
    if (t.name.empty()) c.fail_at(at, "the tensor name is empty");
    c.set_context(fmt::format("tensor '{}'", printable(t.name)));
    if (auto it = tensor_index_.find(t.name); it != tensor_index_.end()) {
      c.fail_at(at, "duplicate tensor name (first at byte {})", info_at[it->second]);
    }

    size_t dims_at = c.pos();
    auto n_dims = c.read<uint32_t>("the dimension count");
    if (n_dims < 1 || n_dims > static_cast<uint32_t>(kMaxDims)) {
      c.fail_at(dims_at, "{} dimensions (must be 1 to {})", n_dims, kMaxDims);
    }
    uint64_t n_elements = 1;
    t.ne.reserve(n_dims);
    for (uint32_t d = 0; d < n_dims; ++d) {
      size_t ne_at = c.pos();
      auto ne = c.read<uint64_t>("a dimension");
      if (ne == 0 || ne > kInt64Max) c.fail_at(ne_at, "ne[{}] = {} (each dimension must be 1 to 2^63-1)", d, ne);
      if (!checked_mul(n_elements, ne, n_elements) || n_elements > kInt64Max) {
        c.fail_at(ne_at, "the element count overflows a 64-bit integer at ne[{}] = {}", d, ne);
      }
      t.ne.push_back(static_cast<int64_t>(ne));
    }

    size_t type_at = c.pos();
    auto type_id = c.read<uint32_t>("the tensor type");
    auto traits = find_type_traits(type_id);
    if (!traits) c.fail_at(type_at, "unknown tensor type id {}", type_id);
    t.type = traits->type;
    if (t.ne[0] % traits->block_size != 0) {
      c.fail_at(dims_at, "row length ne[0] = {} is not a multiple of the {} block size {}", t.ne[0], traits->name,
                traits->block_size);
    }
    // n_elements is a multiple of the block size because ne[0] is.
    if (!checked_mul(n_elements / static_cast<uint64_t>(traits->block_size), traits->type_size, t.n_bytes)) {
      c.fail_at(dims_at, "the byte size of {} {} elements overflows 64 bits", n_elements, traits->name);
    }

    size_t offset_at = c.pos();
    t.offset = c.read<uint64_t>("the data offset");
    if (t.offset % alignment_ != 0) {
      c.fail_at(offset_at, "data offset {} is not a multiple of the alignment {}", t.offset, alignment_);
    }
    info_at.push_back(at);
    tensor_index_.emplace(t.name, tensors_.size());
    tensors_.push_back(std::move(t));
  }
  c.set_context({});

  // ---- data section ----
  if (!checked_align_up(c.pos(), alignment_, data_offset)) {
    c.fail_at(c.pos(), "aligning the data section to {} bytes overflows", alignment_);
  }
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const TensorInfo& t = tensors_[i];
    uint64_t end = 0;
    if (!checked_add(data_offset, t.offset, end) || !checked_add(end, t.n_bytes, end) || end > bytes.size()) {
      fail(
          "{}: tensor '{}' (byte {}): data [offset {}, {} bytes] ends past the end of the file ({} bytes; the data "
          "section starts at byte {})",
          name_, printable(t.name), info_at[i], t.offset, t.n_bytes, bytes.size(), data_offset);
    }
  }
  std::vector<size_t> order(tensors_.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return tensors_[a].offset != tensors_[b].offset ? tensors_[a].offset < tensors_[b].offset : a < b;
  });
  for (size_t k = 1; k < order.size(); ++k) {
    const TensorInfo& prev = tensors_[order[k - 1]];
    const TensorInfo& cur = tensors_[order[k]];
    // Both ends are inside the file (checked above), so this sum cannot overflow.
    if (prev.offset + prev.n_bytes > cur.offset) {
      fail("{}: tensor '{}' (byte {}): data [offset {}, {} bytes] overlaps tensor '{}' (byte {}) [offset {}, {} bytes]",
           name_, printable(cur.name), info_at[order[k]], cur.offset, cur.n_bytes, printable(prev.name),
           info_at[order[k - 1]], prev.offset, prev.n_bytes);
    }
  }
}

// Called on the first file only (open(), never parse()): a file with split keys is a set of split.count files
// named PREFIX-0000k-of-0000n.gguf in the same folder.
void GgufFile::open_other_parts(const std::filesystem::path& first) {
  if (!has_split_keys(metadata_)) return;
  const SplitKeys k = read_split_keys(metadata_, name_);
  const std::string file_name = first.filename().string();
  if (k.no != 0) {
    const std::string suffix = split_suffix(k.no, k.count);
    const std::string first_name =
        file_name.ends_with(suffix)
            ? (first.parent_path() / (file_name.substr(0, file_name.size() - suffix.size()) + split_suffix(0, k.count)))
                  .string()
            : std::string("the file with split.no 0");
    fail("{} is part {} of a split GGUF set of {} files; open the set by its first file: {}", name_, k.no + 1, k.count,
         first_name);
  }
  Metadata model_keys;
  for (const auto& [key, value] : metadata_.entries()) {
    if (key != kSplitNo && key != kSplitCount && key != kSplitTensorsCount) model_keys.set(key, value);
  }
  metadata_ = std::move(model_keys);

  if (k.count > 1) {
    const std::string suffix = split_suffix(0, k.count);
    if (!file_name.ends_with(suffix)) {
      fail("{}: the first file of a split GGUF set of {} files must be named PREFIX{} to find the others", name_,
           k.count, suffix);
    }
    const std::filesystem::path prefix = first.parent_path() / file_name.substr(0, file_name.size() - suffix.size());
    for (uint64_t no = 1; no < k.count; ++no) {
      const std::filesystem::path path = split_path(prefix, no, k.count);
      std::error_code ec;
      if (!std::filesystem::is_regular_file(path, ec)) {
        fail("split GGUF set {}: part {} of {} is missing: {} is not a file", name_, no + 1, k.count, path.string());
      }
      GgufFile part = open_one(path);
      if (!has_split_keys(part.metadata_)) {
        fail("{}: expected part {} of {} of the split GGUF set {}, but the file has no split.* keys", part.name_,
             no + 1, k.count, name_);
      }
      const SplitKeys pk = read_split_keys(part.metadata_, part.name_);
      if (pk.count != k.count) {
        fail("{}: split.count is {}, but the first file {} says {}: the file belongs to another split set", part.name_,
             pk.count, name_, k.count);
      }
      if (pk.no != no) {
        fail("{}: split.no is {} (part {} of the set), expected {} (part {}): a misnamed or duplicated part",
             part.name_, pk.no, pk.no + 1, no, no + 1);
      }
      if (pk.n_tensors != k.n_tensors) {
        fail("{}: split.tensors.count is {}, but the first file {} says {}: the file belongs to another split set",
             part.name_, pk.n_tensors, name_, k.n_tensors);
      }
      if (tensors_.size() + part.tensors_.size() > k.n_tensors) {
        fail("{}: the set holds more tensors than split.tensors.count {} says (with this file's {}, {})", part.name_,
             k.n_tensors, part.tensors_.size(), tensors_.size() + part.tensors_.size());
      }
      const auto part_no = static_cast<uint32_t>(parts_.size());
      for (TensorInfo& t : part.tensors_) {
        if (const TensorInfo* other = find_tensor(t.name)) {
          fail("split GGUF set {}: tensor '{}' is in both {} and {}", name_, printable(t.name),
               parts_[other->part].name, part.name_);
        }
        t.part = part_no;
        tensor_index_.emplace(t.name, tensors_.size());
        tensors_.push_back(std::move(t));
      }
      parts_.push_back(std::move(part.parts_.front()));
    }
  }
  if (tensors_.size() != k.n_tensors) {
    fail("split GGUF set {}: its {} file(s) hold {} tensors, but split.tensors.count says {}", name_, k.count,
         tensors_.size(), k.n_tensors);
  }
}

}  // namespace tessera::gguf
