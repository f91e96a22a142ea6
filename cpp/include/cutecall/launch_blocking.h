// cutecall/launch_blocking.h — the blocking mode: every launch waits for
// its kernel, so a fault surfaces at the launch that caused it.
//
// Owns: the process-wide switch (CUTECALL_LAUNCH_BLOCKING=1 at first use,
// or SetLaunchBlocking) and the wait after a launch.
// Contract: off by default. When on, each launch synchronizes its stream
// (cuStreamSynchronize) and a CUDA error becomes an Internal error naming
// the kernel and the CUDA status, instead of surfacing later at an
// unrelated sync with no kernel named. A stream being captured into a CUDA
// graph is never synchronized (that would invalidate the capture): such
// launches are checked when the graph runs. Off, the launch path costs one
// relaxed atomic load.
#ifndef CUTECALL_LAUNCH_BLOCKING_H_
#define CUTECALL_LAUNCH_BLOCKING_H_

#include <string>

#include "cutecall/status.h"

namespace cutecall {

// Whether launches block (the environment is read once, on first use).
bool LaunchBlocking();

// Turns the blocking mode on or off for the process (overrides the
// environment).
void SetLaunchBlocking(bool on);

// Waits for `stream` and returns its CUDA status as an error naming
// `kernel` (Ok when the stream is being captured).
Status SyncAfterLaunch(void* stream, const std::string& kernel);

}  // namespace cutecall

#endif  // CUTECALL_LAUNCH_BLOCKING_H_
