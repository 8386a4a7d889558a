"""The forwarder-daemon stats format (`docs/forwarder-format.md`), fuzzed as service and
client files; what parses must render back to text that parses the same."""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from iolens.parse import iofwd
from tests.fuzz.harness import fuzz, only_input_errors, scratch
from tests.fuzz.mutate import inputs
from tests.fuzz.seeds import CASES, seeds

STATS = seeds(sorted((CASES / "collect" / "iofwd").rglob("stats")))
_DIR = scratch("iofwd")


@given(inputs(STATS), st.booleans())
@example(b"snapshot_time 1.5 secs.nsecs\nread_bytes 1 samples [bytes] 1 1 1\n", False)
@example(
    b"snapshot_time 1.5 secs.nsecs\nread_bytes 1 samples [bytes] 1 1 1\n"
    b"write_bytes 0 samples [bytes] 0 0 " + b"9" * 400 + b"\n",
    True,
)
@example(
    b"snapshot_time " + b"9" * 400 + b" secs.nsecs\nread_bytes 1 samples [bytes] 1 1 1\n", False
)
@fuzz(300)
def test_forwarder_stats(data: bytes, client: bool) -> None:
    path = _DIR / "stats"
    path.write_bytes(data)
    stats = only_input_errors(lambda: iofwd.parse_file(path, client=client), str(path))
    if stats is not None:
        again = iofwd.parse_stats(iofwd.render(stats), "rendered", client=client)
        assert again.read_bytes == stats.read_bytes and again.ops == stats.ops
