// The dispatcher's mode mechanism: a fallback on a mode key sees every op, redispatches below
// itself, and is switched by thread-local include/exclude guards.
#include <cstdint>
#include <gtest/gtest.h>

#include <thread>

#include "generated/Ops.h"
#include "runtime/Dispatcher.h"

using namespace kiln;

namespace {

thread_local std::vector<std::string> seenOps;

void recordingFallback(OpId op, DispatchKeySet remaining, Stack& stack) {
  seenOps.push_back(Dispatcher::instance().schema(op).qualifiedName());
  Dispatcher::instance().redispatch(op, remaining, stack);
}

} // namespace

TEST(Dispatcher, FallbackSeesOpsOnlyWhileIncluded) {
  Dispatcher::instance().registerFallback(DispatchKey::Tracing, recordingFallback);
  seenOps.clear();
  Tensor a = ops::ones({3});
  EXPECT_TRUE(seenOps.empty());
  {
    IncludeDispatchKeyGuard on(DispatchKey::Tracing);
    Tensor b = ops::add(a, a);
    EXPECT_FLOAT_EQ(b.data<float>()[0], 2.0f);
    {
      ExcludeDispatchKeyGuard off(DispatchKey::Tracing);
      ops::mul(a, a);
    }
  }
  ops::sub(a, a);
  ASSERT_EQ(seenOps.size(), 1u);
  EXPECT_EQ(seenOps[0], "add.Tensor");
}

TEST(Dispatcher, IncludeSetIsThreadLocal) {
  Dispatcher::instance().registerFallback(DispatchKey::Tracing, recordingFallback);
  IncludeDispatchKeyGuard on(DispatchKey::Tracing);
  size_t seenInOtherThread = 99;
  std::thread t([&] {
    seenOps.clear();
    ops::add(ops::ones({2}), ops::ones({2}));
    seenInOtherThread = seenOps.size();
  });
  t.join();
  EXPECT_EQ(seenInOtherThread, 0u);
}

TEST(Dispatcher, ModeKeyWithoutFallbackFallsThrough) {
  IncludeDispatchKeyGuard on(DispatchKey::Functionalize);
  Tensor c = ops::mul(ops::full({2}, Scalar(3.0)), ops::full({2}, Scalar(2.0)));
  EXPECT_FLOAT_EQ(c.data<float>()[1], 6.0f);
}

TEST(Dispatcher, FactoryOpsFollowTheirDeviceArgument) {
  Tensor m = ops::zeros({4, 2}, ScalarType::Int32, Device(DeviceType::Meta));
  EXPECT_TRUE(m.isMeta());
  EXPECT_EQ(m.dtype(), ScalarType::Int32);
}

TEST(Dispatcher, FindsOpsByName) {
  const Dispatcher& d = Dispatcher::instance();
  OpId add = d.find("add.Tensor");
  ASSERT_NE(add, OpId::NumOps);
  EXPECT_EQ(d.schema(add).args.size(), 3u);
  EXPECT_TRUE(d.schema(add).hasTag(kTagPointwise));
  EXPECT_EQ(d.find("no_such_op"), OpId::NumOps);
  EXPECT_GE(d.overloadsOf("div").size(), 2u);
}

TEST(Dispatcher, InplaceThroughFunctionalBumpsVersion) {
  Tensor a = ops::ones({2});
  uint32_t v = a.storage()->version();
  Tensor r = ops::add_(a, ops::ones({2}));
  EXPECT_TRUE(r.isSame(a));
  EXPECT_GT(a.storage()->version(), v);
  EXPECT_FLOAT_EQ(a.data<float>()[0], 2.0f);
}
