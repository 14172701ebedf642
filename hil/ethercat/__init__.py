"""Emulated EtherCAT slaves for HIL: a line of software slave controllers on a raw socket (EtherType 0x88A4),
brought up and driven by a third-party master as real slaves are (:mod:`.emulator` runs it as a process)."""
