"""What the telemetry publisher feeds besides its own socket: an extra sink (the Foxglove server,
:class:`~rtctl.telemetry.foxglove.FoxgloveSink`), run by the publisher thread, never by the loop."""
from __future__ import annotations


class PublisherSink:
    """Takes what the publisher publishes, from the publisher thread; each method a no-op by default.

    A sink that raises is reported once and dropped; the publisher goes on. ``url``: where a client reaches
    the sink ("" for none), printed when the run starts.
    """

    url = ""

    def attach(self, loop) -> None:
        """In the loop's process, when the telemetry is attached to ``loop`` (before any sample): take what the
        sink needs of the loop (it may then be handed to the publisher process: keep it picklable)."""

    def open(self, telemetry) -> None:
        """Before the first sample: bind, and read the stream's layout from ``telemetry``."""

    def write(self, rows, first: int) -> None:
        """A batch of sample ``rows`` (the ring's layout), the first of them sample number ``first``."""

    def meta(self, meta: dict) -> None:
        """The stream's metadata (sent again every ``meta_period``)."""

    def event(self, event: dict) -> None:
        """One event (safety, control, telemetry)."""

    def close(self) -> None:
        """After the last sample: release what :meth:`open` took."""
