"""The operator process: the control channel served outside the loop's process (:mod:`.process`, :mod:`.server`),
and the wiring of a config's operator surfaces (:mod:`.wiring`)."""
