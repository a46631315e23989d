// The helpers the mmproj writers share: config values with their errors, checked tensor lookups.
#include "convert/mmproj_parts.h"

#include <fstream>
#include <iterator>
#include <sstream>

#include "base/json_input.h"

namespace gemlet::mmproj {

Result<Json> ReadJsonFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Error("cannot read '" + path.string() + "'");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSIGN_OR_RETURN(Json j, ParseJson(text, path.string()));
  if (!j.is_object()) return Status::Error(path.string() + ": not a JSON object");
  return j;
}

Result<int64_t> PositiveInt(const Json& object, const char* key, const std::string& where) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_number_integer() || it->get<int64_t>() <= 0) {
    return Status::Error(where + ": '" + key + "' must be a positive integer");
  }
  return it->get<int64_t>();
}

Result<double> NumberOr(const Json& object, const char* key, double fallback, const std::string& where) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return fallback;
  if (!it->is_number()) return Status::Error(where + ": '" + key + "' must be a number");
  return it->get<double>();
}

Result<bool> BoolOr(const Json& object, const char* key, bool fallback, const std::string& where) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) return Status::Error(where + ": '" + key + "' must be true or false");
  return it->get<bool>();
}

Result<const Json*> SubConfig(const Json& config, const char* key, const std::string& label) {
  auto it = config.find(key);
  if (it == config.end() || !it->is_object()) return Status::Error(label + ": no " + key);
  return &*it;
}

PlannedTensor Planned(const StTensor& t, std::string name, bool keep_f32, bool add_one) {
  PlannedTensor p;
  p.name = std::move(name);
  p.ne.assign(t.shape.rbegin(), t.shape.rend());
  if (p.ne.empty()) p.ne.push_back(1);
  p.sources = {&t};
  p.keep_f32 = keep_f32 || p.ne.size() == 1;
  p.add_one = add_one;
  p.hf_name = t.name;
  return p;
}

Result<const StTensor*> NeedTensor(const SafetensorsCheckpoint& ck, const std::string& name,
                                   const std::vector<int64_t>& shape) {
  const StTensor* s = ck.Find(name);
  if (s == nullptr) return Status::Error("missing tensor '" + name + "'");
  if (s->shape != shape) {
    std::ostringstream want;
    want << "[";
    for (size_t i = 0; i < shape.size(); ++i) want << (i ? ", " : "") << shape[i];
    return Status::Error("tensor '" + name + "' has shape " + s->ShapeString() + ", expected " + want.str() + "]");
  }
  return s;
}

}  // namespace gemlet::mmproj
