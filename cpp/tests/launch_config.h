// A one-dimensional launch configuration, as a compiled launcher passes it to
// cutecall_launch_kex (launch_record_test.cc, launch_error_test.cc).
#ifndef CUTECALL_TESTS_LAUNCH_CONFIG_H_
#define CUTECALL_TESTS_LAUNCH_CONFIG_H_

#include <cstddef>
#include <cstdint>

#include "launch_record.h"

namespace cutecall_test {

inline cutecall::CudaLaunchConfig Config(uint32_t grid_x, uint32_t block_x,
                                         size_t smem) {
  cutecall::CudaLaunchConfig c{};
  c.grid[0] = grid_x;
  c.grid[1] = c.grid[2] = 1;
  c.block[0] = block_x;
  c.block[1] = c.block[2] = 1;
  c.dynamic_smem_bytes = smem;
  return c;
}

}  // namespace cutecall_test

#endif  // CUTECALL_TESTS_LAUNCH_CONFIG_H_
