import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from iobench.core.errors import UsageError
from iobench.core.units import (
    format_bytes,
    format_rate,
    format_size,
    parse_count,
    parse_duration,
    parse_percent,
    parse_rate,
    parse_size,
)


@pytest.mark.parametrize(
    "text,expected",
    [
        ("4k", 4096),
        ("4K", 4096),
        ("4KiB", 4096),
        ("4kib", 4096),
        ("4kb", 4096),  # lower-case b: binary, as fio's default kb_base
        ("4KB", 4000),
        ("1MB", 1_000_000),
        ("1MiB", 1 << 20),
        ("1.5GiB", 3 << 29),
        ("2g", 2 << 30),
        ("512", 512),
        (" 8 MiB ", 8 << 20),
        ("1TiB", 1 << 40),
        (4096, 4096),
    ],
)
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["12XB", "", "abc", "-1k", "1.2.3M", "k", "iB", "MiB", True, -5])
def test_parse_size_rejects(text):
    with pytest.raises(UsageError) as e:
        parse_size(text)
    assert "size" in e.value.message


@pytest.mark.parametrize(
    "text,expected",
    [
        ("500ms", 0.5),
        ("30s", 30),
        ("5m", 300),
        ("1h", 3600),
        ("2", 2),
        ("1.5s", 1.5),
        ("250us", 250e-6),
    ],
)
def test_parse_duration(text, expected):
    assert parse_duration(text) == pytest.approx(expected)


@pytest.mark.parametrize("text", ["5x", "", "-1s", "s", "1e999s"])
def test_parse_duration_rejects(text):
    with pytest.raises(UsageError):
        v = parse_duration(text)
        if not math.isfinite(v):
            raise UsageError("inf")


@pytest.mark.parametrize(
    "text,expected", [("10%", 0.1), ("90", 0.9), ("0.9", 0.9), (0.5, 0.5), ("100%", 1.0)]
)
def test_parse_percent(text, expected):
    assert parse_percent(text) == pytest.approx(expected)


@pytest.mark.parametrize("text", ["ten", "%", "-5%", "nan"])
def test_parse_percent_rejects(text):
    with pytest.raises(UsageError):
        parse_percent(text)


def test_parse_count_and_rate():
    assert parse_count("10k") == 10_000
    assert parse_count(3) == 3
    with pytest.raises(UsageError):
        parse_count("0")
    with pytest.raises(UsageError):
        parse_count("1.5")
    assert parse_rate("5GiB/s") == (5 << 30, "B/s")
    assert parse_rate("20k/s") == (20_000, "ops/s")
    assert parse_rate("20kops") == (20_000, "ops/s")


def test_format():
    assert format_bytes(1536) == "1.5 KiB"
    assert format_bytes(100) == "100 B"
    assert format_rate(100 << 20) == "100.0 MiB/s"
    assert format_rate(20 << 30) == "20.00 GiB/s"


def test_formatters_show_an_absent_figure_as_a_dash():
    """A result block's field that was not measured (None) renders as "-" in every
    formatter, as format_rate and format_seconds always did (mypy checks the callers)."""
    from iobench.checkpoint.rows import gib
    from iobench.core.units import format_seconds

    assert format_bytes(None) == format_rate(None) == format_seconds(None) == gib(None) == "-"


def test_format_size_is_exact_and_typed_back():
    assert [format_size(n) for n in (4096, 1536, 0, 3 << 30, 10**6, 976 << 10)] == [
        "4KiB", "1536", "0", "3GiB", "1000000", "976KiB",
    ]  # fmt: skip


@given(st.integers(min_value=0, max_value=1 << 52))
def test_format_size_roundtrip(n):
    assert parse_size(format_size(n)) == n


def test_decimal_and_binary_suffixes_are_not_fio_compat_mode():
    """iobench keeps IEC/SI: 1MB = 10**6, 1MiB = 2**20. fio 3.33's default (kb_base=1024)
    reads them the other way round (1MB = 1,048,576, 1MiB = 1,000,000), so the fio engine is
    only ever handed byte counts (tests/test_fio_engine.py)."""
    assert (parse_size("1MB"), parse_size("1MiB")) == (10**6, 1 << 20)
    assert (parse_size("4KB"), parse_size("4KiB"), parse_size("4k")) == (4000, 4096, 4096)


# -- properties ----------------------------------------------------------------------------

_SUFFIX = {
    "": 1,
    "k": 1024,
    "KiB": 1024,
    "m": 1 << 20,
    "MiB": 1 << 20,
    "KB": 1000,
    "MB": 10**6,
    "GiB": 1 << 30,
}


@given(st.integers(min_value=0, max_value=10**6), st.sampled_from(sorted(_SUFFIX)))
def test_size_roundtrip_property(n, suffix):
    assert parse_size(f"{n}{suffix}") == n * _SUFFIX[suffix]


@given(st.text(max_size=12))
def test_size_parser_never_crashes(text):
    try:
        v = parse_size(text)
    except UsageError as e:
        assert "\n" not in e.one_line()
    else:
        assert isinstance(v, int) and v >= 0


@given(st.text(max_size=12))
def test_duration_parser_never_crashes(text):
    try:
        v = parse_duration(text)
    except UsageError:
        pass
    else:
        assert v >= 0


@given(st.text(max_size=8))
def test_percent_parser_never_crashes(text):
    try:
        v = parse_percent(text)
    except UsageError:
        pass
    else:
        assert v >= 0
