"""Output placement: where a call's outputs sit among a launcher's
parameters when the call names none (``output_params=`` in JAX,
``outputs=`` in torch).

==================  ========================================================
module              job
==================  ========================================================
``placement``       the rule: outputs by position, else by rank; among the
                    parameters a trace saw written
``writes``          what a trace writes, by launcher parameter; the
                    compile's trace hook
``probes``          the placements a launcher tried and what each taught it
``learn``           a launch object's outputs, learned from those writes
``mlir_writes``     which operands a traced MLIR module writes
``mlir_text``       the ops of an MLIR module printed in generic form
==================  ========================================================

Nothing is imported here: ``binding`` (below the compile) reads the rule,
the stage (above it) the rest.
"""
