// StageAssembler: a local GGUF file (or split set) is used when the file name and size (of the whole set) match,
// or when it is the same model in the other form (split or merged); either way each tensor's content hash must
// match. Cached tensors are files named by their hash, checked again when mapped.
#include "cluster/stage_assembler.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <string_view>
#include <vector>

#include "util/error.h"

namespace tessera::cluster {
namespace {

gguf::TensorInfo to_gguf(const net::TensorInfo& t) {
  gguf::TensorInfo g;
  g.name = t.name;
  g.type = t.type;
  for (auto d : t.shape) g.ne.push_back(static_cast<int64_t>(d));
  g.n_bytes = t.n_bytes;
  return g;
}

bool same_layout(const gguf::TensorInfo& g, const net::TensorInfo& t) {
  if (g.type != t.type || g.n_bytes != t.n_bytes || g.ne.size() != t.shape.size()) return false;
  for (size_t i = 0; i < g.ne.size(); ++i) {
    if (static_cast<uint64_t>(g.ne[i]) != t.shape[i]) return false;
  }
  return true;
}

// Whether `name` is PREFIX-00001-of-NNNNN.gguf, the first file of a split set; sets prefix.
bool first_of_a_set(const std::string& name, std::string& prefix) {
  constexpr std::string_view kFirst = "-00001-of-";
  constexpr size_t kTail = kFirst.size() + 5 + 5;  // "-00001-of-" NNNNN ".gguf"
  if (name.size() <= kTail || !name.ends_with(".gguf")) return false;
  const size_t at = name.size() - kTail;
  if (std::string_view(name).substr(at, kFirst.size()) != kFirst) return false;
  for (size_t i = at + kFirst.size(); i < at + kFirst.size() + 5; ++i) {
    if (name[i] < '0' || name[i] > '9') return false;
  }
  prefix = name.substr(0, at);
  return true;
}

// NAME.gguf for NAME-00001-of-0000N.gguf; the files NAME-00001-of-0000N.gguf under `dir` for NAME.gguf.
std::vector<std::filesystem::path> other_forms(const std::filesystem::path& dir, const std::string& file_name) {
  std::string prefix;
  if (first_of_a_set(file_name, prefix)) return {dir / (prefix + ".gguf")};
  std::vector<std::filesystem::path> out;
  if (!file_name.ends_with(".gguf")) return out;
  const std::string stem = file_name.substr(0, file_name.size() - 5);
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (first_of_a_set(e.path().filename().string(), prefix) && prefix == stem) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

AssembledSource::AssembledSource(std::string name, std::vector<uint8_t> metadata_gguf)
    : name_(std::move(name)),
      metadata_bytes_(std::make_unique<std::vector<uint8_t>>(std::move(metadata_gguf))),
      metadata_file_(gguf::GgufFile::parse(*metadata_bytes_, name_ + " (metadata from the head)")) {}

void AssembledSource::add(const net::TensorInfo& info, std::span<const uint8_t> data,
                          std::shared_ptr<const void> owner) {
  if (index_.contains(info.name)) fail("{}: tensor '{}' listed twice", name_, info.name);
  index_.emplace(info.name, tensors_.size());
  tensors_.push_back(to_gguf(info));
  data_.push_back(data);
  owners_.push_back(std::move(owner));
}

const gguf::TensorInfo* AssembledSource::find_tensor(std::string_view name) const {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

std::span<const uint8_t> AssembledSource::tensor_data(const gguf::TensorInfo& info) const {
  return data_.at(index_.at(info.name));
}

StageAssembler::StageAssembler(const net::LoadStage& request, const AssemblerOptions& options)
    : request_(request), options_(options) {
  source_ = std::make_shared<AssembledSource>(request.file_name, request.model_metadata);
  std::unordered_map<std::string, const net::TensorInfo*> missing;
  for (const auto& t : request.tensors) missing[t.name] = &t;

  // A GGUF file (or the first file of a split set) of the same name and size under --models: map the tensors
  // whose content matches. Only those tensors' bytes are read (to hash them), from whichever files hold them.
  const auto use_file = [&](const std::filesystem::path& path, bool same_size_only) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) return false;
    std::shared_ptr<const gguf::GgufFile> file;
    try {
      file = std::make_shared<const gguf::GgufFile>(gguf::GgufFile::open(path));
    } catch (const Error& e) {
      local_problem_ = e.what();  // a broken file or set: the head sends the tensors instead
      return false;
    }
    if (same_size_only && file->file_size() != request.file_size) return false;
    size_t found = 0;
    for (auto it = missing.begin(); it != missing.end();) {
      const gguf::TensorInfo* g = file->find_tensor(it->first);
      if (g != nullptr && same_layout(*g, *it->second)) {
        const auto data = file->tensor_data(*g);
        if (net::content_hash(data) == it->second->hash) {
          source_->add(*it->second, data, file);
          have_.push_back(it->second->hash);
          it = missing.erase(it);
          ++found;
          continue;
        }
      }
      ++it;
    }
    if (!same_size_only && found == 0) return false;
    found_in_ = path.string();
    if (file->n_parts() > 1) found_in_ += fmt::format(" (a split set of {} files)", file->n_parts());
    return true;
  };
  if (options.models_dir && !use_file(*options.models_dir / request.file_name, true)) {
    // The same model in the other form (a split set for a single file, or the other way round) differs in size,
    // so only the tensors' hashes say whether it holds them.
    for (const auto& path : other_forms(*options.models_dir, request.file_name)) {
      if (use_file(path, false)) break;
    }
  }
  // Tensors cached from an earlier load, one file per content hash.
  if (options.cache_dir) {
    for (auto it = missing.begin(); it != missing.end();) {
      const auto path = *options.cache_dir / net::hash_hex(it->second->hash);
      std::error_code ec;
      if (std::filesystem::is_regular_file(path, ec) && std::filesystem::file_size(path, ec) == it->second->n_bytes) {
        auto map = std::make_shared<const MappedFile>(path);
        if (net::content_hash(map->bytes()) == it->second->hash) {
          source_->add(*it->second, map->bytes(), map);
          have_.push_back(it->second->hash);
          it = missing.erase(it);
          if (found_in_.empty()) found_in_ = "cache";
          continue;
        }
      }
      ++it;
    }
  }
  for (const auto& [name, info] : missing) {
    Pending& p = pending_[net::hash_hex(info->hash)];
    if (p.infos.empty()) {
      p.bytes.resize(info->n_bytes);
      bytes_needed_ += info->n_bytes;
    } else if (p.bytes.size() != info->n_bytes) {
      fail("tensors '{}' and '{}' share a content hash but not a size", p.infos.front().name, name);
    }
    p.infos.push_back(*info);
  }
}

net::LoadReply StageAssembler::reply() const {
  net::LoadReply r;
  r.have = have_;
  for (const auto& [hex, p] : pending_) r.need.push_back(p.infos.front().hash);
  return r;
}

void StageAssembler::receive(const net::WeightChunk& chunk) {
  auto it = pending_.find(net::hash_hex(chunk.hash));
  if (it == pending_.end()) fail("weight chunk for tensor {} that was not requested", net::hash_hex(chunk.hash));
  Pending& p = it->second;
  if (chunk.offset > p.bytes.size() || chunk.data.size() > p.bytes.size() - chunk.offset) {
    fail("weight chunk [{}, +{}) lies outside tensor '{}' of {} bytes", chunk.offset, chunk.data.size(),
         p.infos.front().name, p.bytes.size());
  }
  std::copy(chunk.data.begin(), chunk.data.end(), p.bytes.begin() + static_cast<std::ptrdiff_t>(chunk.offset));
  p.received += chunk.data.size();
  bytes_received_ += chunk.data.size();
  if (p.received > p.bytes.size()) fail("tensor '{}' received more bytes than it holds", p.infos.front().name);
}

std::shared_ptr<const gguf::TensorSource> StageAssembler::finish() {
  if (!complete()) fail("the stage's weights are incomplete: {} of {} bytes received", bytes_received_, bytes_needed_);
  for (auto& [hex, p] : pending_) {
    if (net::content_hash(p.bytes) != p.infos.front().hash) {
      fail("tensor '{}' arrived corrupted (content hash mismatch)", p.infos.front().name);
    }
    if (options_.cache_dir) {
      std::filesystem::create_directories(*options_.cache_dir);
      const auto final_path = *options_.cache_dir / hex;
      const auto tmp = *options_.cache_dir / (hex + ".tmp");
      {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char*>(p.bytes.data()), static_cast<std::streamsize>(p.bytes.size()));
        if (!out) fail("{}: cannot write the weight cache", tmp.string());
      }
      std::filesystem::rename(tmp, final_path);
      auto map = std::make_shared<const MappedFile>(final_path);
      for (const auto& info : p.infos) source_->add(info, map->bytes(), map);
    } else {
      auto owned = std::make_shared<const std::vector<uint8_t>>(std::move(p.bytes));
      for (const auto& info : p.infos) source_->add(info, *owned, owned);
    }
  }
  pending_.clear();
  return source_;
}

}  // namespace tessera::cluster
