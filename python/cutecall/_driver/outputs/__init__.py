"""The output placement stage: where a call's outputs sit among a
launcher's parameters when the call names none (``output_params=`` in JAX,
``outputs=`` in torch). ``pipeline.Launcher.bind`` asks it once, before
anything compiles (``stage.place``); it answers with one binding.

==================  ========================================================
module              job
==================  ========================================================
``stage``           the one entry point: traces placements in a bounded
                    loop, remembers the answer by spec key and what each
                    kernel writes; refuses what it cannot account for
``probes``          the placements one question tried and what each taught
                    (which to pass over, when to stop)
``placement``       the rule: outputs by position, else by rank; among the
                    parameters a trace saw written
``candidates``      the placements a call fits (argument kinds) and ranks
``writes``          what a trace writes, by launcher parameter
``mlir_writes``     which operands a traced MLIR module writes
``mlir_text``       the ops of an MLIR module printed in generic form
==================  ========================================================

Nothing is imported here: ``binding`` (below the compile) reads the rule
and its candidates, the stage (above it) the rest.
"""
