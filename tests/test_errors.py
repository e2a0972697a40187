"""The one error hierarchy's payloads are declared fields, set by the constructors: what a
failed phase measured (``partial``), the failed call's ``errno``, where a verification
failed, and the object a backend request failed on."""

from __future__ import annotations

import pickle

from iobench.core.errors import (
    EngineError,
    Interrupted,
    IobenchError,
    RequestError,
    StoreError,
    VerifyError,
)
from iobench.engines.fsspec import describe_error
from iobench.result.file import PhaseResult
from iobench.result.verify import _fail


def _phase() -> PhaseResult:
    return PhaseResult.from_dict({"name": "seq-read", "op": "read", "status": "partial"})


def test_every_error_has_a_partial_none_unless_given():
    for cls in (IobenchError, StoreError, EngineError, VerifyError):
        assert cls("x").partial is None
    res = _phase()
    assert EngineError("x", partial=res).partial is res
    assert Interrupted(partial=res).partial is res and Interrupted().message == "interrupted"


def test_engine_error_carries_the_failed_calls_errno():
    assert EngineError("x").errno is None
    err = EngineError("phase p: disk full", hint="free space", partial=_phase(), errno=28)
    assert (err.errno, err.hint, err.one_line()) == (
        28,
        "free space",
        "phase p: disk full; free space",
    )


def test_verify_error_names_the_block():
    err = _fail("/t/f0", 4096, 512, "crc32", "got 1, want 2")
    assert isinstance(err, VerifyError)
    assert (err.path, err.offset, err.kind) == ("/t/f0", 4096, "crc32")
    assert "at offset 4096 (512 byte block)" in err.message


def test_request_error_keeps_the_backends_error_and_its_object():
    cause = FileNotFoundError("nope")
    err = RequestError("bucket/run/f0", cause)
    assert isinstance(err, EngineError) and err.cause is cause and err.path == "bucket/run/f0"
    assert describe_error(err.cause, err.path) == "not found: bucket/run/f0"
    back = pickle.loads(pickle.dumps(err))
    assert (back.path, type(back.cause), back.message) == (err.path, FileNotFoundError, err.message)


def test_payloads_survive_pickling():
    err = pickle.loads(pickle.dumps(VerifyError("m", path="p", offset=3, kind="stamp")))
    assert (err.message, err.path, err.offset, err.kind) == ("m", "p", 3, "stamp")
    eng = pickle.loads(pickle.dumps(EngineError("m", hint="h", errno=5)))
    assert (eng.message, eng.hint, eng.errno) == ("m", "h", 5)
