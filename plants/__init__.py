"""Simulated robots (plants), one module per system."""
