// Device parsing and printing.
#include "runtime/Device.h"

#include "runtime/Error.h"
#include <cstdint>

namespace kiln {

Device Device::parse(const std::string& text) {
  std::string kind = text;
  int index = -1;
  if (auto colon = text.find(':'); colon != std::string::npos) {
    kind = text.substr(0, colon);
    std::string num = text.substr(colon + 1);
    KILN_CHECK(!num.empty() && num.find_first_not_of("0123456789") == std::string::npos,
               "Invalid device string: '", text, "'");
    index = std::stoi(num);
  }
  if (kind == "cpu") return Device(DeviceType::CPU, int8_t(index));
  if (kind == "meta") return Device(DeviceType::Meta, int8_t(index));
  if (kind == "cuda") return Device(DeviceType::CUDA, int8_t(index));
  throw Error("Expected one of cpu, cuda, meta device type at start of device string: " + text);
}

std::string Device::str() const {
  const char* names[] = {"cpu", "meta", "cuda"};
  std::string s = names[static_cast<int>(type)];
  if (index >= 0) s += ":" + std::to_string(index);
  return s;
}

} // namespace kiln
