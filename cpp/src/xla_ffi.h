// xla_ffi.h — the XLA FFI handlers of cutecall's custom call.
//
// Owns: the handler symbols and the registered names. Names carry a version
// suffix and must never change meaning: compiled executables and jax.export
// artifacts name them. Wiring only: the stages live in call_state.h.
//
// Targets (platform "CUDA"):
//   cutecall_call_v1           instantiate (validates and loads the module,
//                              once per executable) and execute; execute is
//                              command-buffer (CUDA graph) compatible. No
//                              prepare stage: XLA would call it per execution.
//   cutecall_call_no_graph_v1  same stages; XLA never captures it in a graph
// State type: cutecall_call_state_v1
#ifndef CUTECALL_SRC_XLA_FFI_H_
#define CUTECALL_SRC_XLA_FFI_H_

#include "xla/ffi/api/c_api.h"

namespace cutecall::xla_ffi {

inline constexpr char kTarget[] = "cutecall_call_v1";
inline constexpr char kTargetNoGraph[] = "cutecall_call_no_graph_v1";
inline constexpr char kStateType[] = "cutecall_call_state_v1";

XLA_FFI_Handler* InstantiateHandler();
XLA_FFI_Handler* ExecuteHandler();         // command-buffer compatible
XLA_FFI_Handler* ExecuteNoGraphHandler();  // never captured in a graph

XLA_FFI_TypeId* StateTypeId();
const XLA_FFI_TypeInfo* StateTypeInfo();

}  // namespace cutecall::xla_ffi

#endif  // CUTECALL_SRC_XLA_FFI_H_
