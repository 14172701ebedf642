"""Hardware-in-the-loop: emulated actuator firmware (run in its own process) and the HIL suite."""
