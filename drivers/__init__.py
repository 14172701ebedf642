"""Hardware abstraction: actuator drivers (simulated, serial, CAN) selected by name from config."""
