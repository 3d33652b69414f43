// The driver loader on a missing library, a library that is not a driver, and the fake driver of
// test/fake_cuda; CudaModule's error path (the fake runs no kernels).
#include <gtest/gtest.h>

#include <cstdlib>

#include "runtime/Error.h"
#include "runtime/cuda/CudaDriver.h"
#include "runtime/cuda/CudaModule.h"

using namespace kiln;
using namespace kiln::cuda;

TEST(CudaDriver, MissingLibraryIsAReasonNotAnError) {
  auto driver = CudaDriver::open("/nonexistent/libcuda.so.1");
  EXPECT_FALSE(driver->available());
  EXPECT_NE(driver->unavailableReason().find(
                "/nonexistent/libcuda.so.1 could not be loaded (kiln loads the CUDA driver at run "
                "time; no NVIDIA driver on this machine"),
            std::string::npos)
      << driver->unavailableReason();
}

TEST(CudaDriver, ALibraryWithoutTheEntryPointsIsRefused) {
  auto driver = CudaDriver::open("libm.so.6");
  EXPECT_FALSE(driver->available());
  EXPECT_EQ(driver->unavailableReason(),
            "libm.so.6 lacks the entry point cuInit (kiln needs a CUDA 12 or newer driver)");
}

TEST(CudaDriver, FakeDriverLoadsAndNamesErrors) {
  auto driver = CudaDriver::open(KILN_FAKE_CUDA_DRIVER);
  ASSERT_TRUE(driver->available()) << driver->unavailableReason();
  EXPECT_EQ(driver->deviceCount(), 1);
  EXPECT_EQ(driver->driverVersion(), 13000);
  EXPECT_EQ(driver->describe(2), "CUDA_ERROR_OUT_OF_MEMORY (out of memory)");
  try {
    driver->check(2, "cuMemAlloc");
    FAIL() << "check did not throw";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory)");
  }
}

TEST(CudaModule, LoadFailureNamesTheImage) {
  // The process's driver: the fake, chosen before anything in this process loaded one.
  setenv("KILN_CUDA_DRIVER", KILN_FAKE_CUDA_DRIVER, 1);
  ASSERT_TRUE(CudaDriver::get().available()) << CudaDriver::get().unavailableReason();
  try {
    CudaModule module(0, "garbage");
    FAIL() << "a fake driver loaded a module";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "cuModuleLoadData failed on cuda:0 (7-byte image): CUDA_ERROR_INVALID_IMAGE"),
              std::string::npos)
        << e.what();
  }
}
