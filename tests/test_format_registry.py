"""The sample-format registry: every format one module with the same interface, round-tripping
write -> decode; unknown names a one-line UsageError naming the choices."""

from __future__ import annotations

import io
import subprocess
import sys

import numpy as np
import pytest

from iobench import formats
from iobench.core.errors import EngineUnavailable, UsageError
from iobench.formats import registry


# jpeg is lossy and holds one sample per file: its round trip is in tests/test_replay.py
@pytest.mark.parametrize("name", [f for f in registry.FORMATS if f != "jpeg"])
def test_every_format_has_the_interface_and_round_trips(name):
    mod = registry.get_format(name)
    assert isinstance(mod.EXTENSION, str) and mod.EXTENSION and "." not in mod.EXTENSION
    assert mod.OVERHEAD_PER_FILE >= 0 and mod.OVERHEAD_PER_SAMPLE >= 0
    samples = [np.arange(n, dtype=np.uint8) for n in (1, 300, 4097)]
    keys = [formats.sample_key(3, j) for j in range(3)]
    buf = io.BytesIO()
    mod.write(buf, samples, keys)
    data = buf.getvalue()
    assert 0 <= len(data) - 4398 <= registry.overhead_bytes(name, 3)
    back = mod.decode(data, [1, 300, 4097])
    assert [b.tobytes() for b in back] == [s.tobytes() for s in samples]
    assert all(b.dtype == np.uint8 for b in back)


def test_the_lists_of_formats_come_from_the_registry():
    from iobench.spec.params import DATASET as PARAMS
    from iobench.spec.workload import PROFILE_PARAMS

    assert registry.FORMATS == ("raw", "npz", "parquet", "tar", "jpeg")
    assert PROFILE_PARAMS["format"].choices == registry.FORMATS
    assert PARAMS["format"].choices == registry.FORMATS
    assert formats.FORMATS == registry.FORMATS
    assert formats.EXTENSIONS == {
        "raw": "bin", "npz": "npz", "parquet": "parquet", "tar": "tar", "jpeg": "jpg",
    }  # fmt: skip


def test_an_unknown_format_is_one_line_naming_the_choices():
    with pytest.raises(UsageError) as e:
        registry.get_format("hdf5")
    assert e.value.one_line() == (
        "unknown sample format 'hdf5'; choose one of: raw, npz, parquet, tar, jpeg"
    )
    with pytest.raises(UsageError, match="unknown sample format 'csv'"):
        formats.write_sample_file(io.BytesIO(), "csv", [], [])


def test_a_format_whose_library_is_missing_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "iobench.formats.parquet", None)  # import fails
    with pytest.raises(EngineUnavailable) as e:
        registry.get_format("parquet")
    assert e.value.one_line().endswith("; install pyarrow (pip install pyarrow)")


def test_the_registry_is_import_light():
    """spec reads the format names without loading numpy or the writer/reader."""
    code = (
        "import sys, iobench.formats.registry, iobench.formats as f; "
        "assert f.FORMATS; "
        "print(sorted(m for m in ('numpy', 'iobench.formats.writer', 'iobench.formats.reader') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
