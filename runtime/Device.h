// Where a tensor's data lives: cpu, meta (metadata only, no data) or cuda:N.
#pragma once
#include <cstdint>
#include <string>

namespace kiln {

enum class DeviceType : uint8_t { CPU, Meta, CUDA };

struct Device {
  DeviceType type = DeviceType::CPU;
  int8_t index = -1; // -1: the current device of that type

  Device() = default;
  Device(DeviceType t, int8_t i = -1) : type(t), index(i) {}
  // "cpu", "meta", "cuda", "cuda:1"; throws on anything else.
  static Device parse(const std::string& text);

  bool isCpu() const { return type == DeviceType::CPU; }
  bool isMeta() const { return type == DeviceType::Meta; }
  bool isCuda() const { return type == DeviceType::CUDA; }
  std::string str() const;
  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
};

} // namespace kiln
