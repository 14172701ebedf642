"""Hardware-in-the-loop: emulated actuator firmware (run in its own process), the rigs and the ``rtctl-hil``
command; the HIL suite that drives them is in the repository's ``tests/hil/``."""
