"""Controllers and trajectory generators."""
