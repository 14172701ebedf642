"""The real-time loop executive: lifecycle, state/command interfaces, loop runner, timing statistics."""
