// launch_blocking.h — the blocking mode: every launch waits for
// its kernel, so a fault surfaces at the launch that caused it.
//
// Owns: the process-wide switch (CUTECALL_LAUNCH_BLOCKING=1 at first use,
// or SetLaunchBlocking) and the wait after a launch.
// Contract: off by default. When on, each launch synchronizes its stream
// (cuStreamSynchronize) and a CUDA error becomes an Internal error naming
// the kernel, the CUDA status and the launch's grid and block (where
// recorded: launch_record.h), instead of surfacing later at an
// unrelated sync with no kernel named. A stream being captured into a CUDA
// graph is never synchronized (that would invalidate the capture): such
// launches are checked when the graph runs. Off, the launch path costs one
// relaxed atomic load.
#ifndef CUTECALL_SRC_LAUNCH_BLOCKING_H_
#define CUTECALL_SRC_LAUNCH_BLOCKING_H_

#include <functional>
#include <string>

#include "cutecall/status.h"

namespace cutecall {

// Whether launches block (the environment is read once, on first use).
bool LaunchBlocking();

// Turns the blocking mode on or off for the process (overrides the
// environment).
void SetLaunchBlocking(bool on);

// Waits for `stream` and returns its CUDA status as an error naming
// `kernel` and, after "launch: ", what describe_launch() returns (called
// only on an error; e.g. DescribeLaunch's text). Ok when the stream is
// being captured.
Status SyncAfterLaunch(void* stream, const std::string& kernel,
                       const std::function<std::string()>& describe_launch);

}  // namespace cutecall

#endif  // CUTECALL_SRC_LAUNCH_BLOCKING_H_
