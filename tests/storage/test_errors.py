"""obstore's exceptions read as the OSError kinds the retry policy and the one-line messages use
(uc_jupyter.storage.errors)."""

from __future__ import annotations

import pytest
from obstore.exceptions import GenericError, PermissionDeniedError

from uc_jupyter.storage.errors import StorageResponseError, as_os_error, first_line, picklable, refused_because

DUMP = '\n\nDebug source:\nGeneric {\n    store: "S3",\n}'


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (
            "Server returned non-2xx status code: 404 Not Found: <Error><Code>NoSuchKey</Code></Error>",
            FileNotFoundError,
        ),
        ("status code: 403 Forbidden: <Error><Code>AccessDenied</Code></Error>", PermissionError),
        ("status code: 503 Service Unavailable: <Error><Code>SlowDown</Code></Error>", StorageResponseError),
        ("error sending request for url (http://127.0.0.1:1/b/k)", ConnectionError),
        # The body cut short by a reset connection (as uc_jupyter.testing.s3_faults injects): retried, it
        # was a VolumeReadError at once before.
        ("HTTP error: request or response body error", ConnectionError),
        ("HTTP error: error decoding response body", ConnectionError),
        ("operation timed out", TimeoutError),
        # A multi-object delete answers 200 and names each key it refused.
        ("DeleteObjects request failed for key run/a: Access Denied (code: AccessDenied)", PermissionError),
        ("DeleteObjects request failed for key run/a: We encountered an error (code: InternalError)", OSError),
    ],
)
def test_each_answer_becomes_the_error_of_its_kind(text: str, kind: type[Exception]) -> None:
    error = as_os_error(GenericError(f"Generic S3 error: {text}{DUMP}"))
    assert type(error) is kind
    assert "Debug source" not in str(error)
    assert "\n" not in str(error)


def test_a_refusal_keeps_the_stores_own_words_and_says_what_to_check() -> None:
    error = as_os_error(PermissionDeniedError(f"status code: 403 Forbidden: <Message>Request expired</Message>{DUMP}"))
    assert isinstance(error, PermissionError)
    assert refused_because(error) == "403: Request expired"
    assert str(error).endswith("check the volume's credentials and their grants")


def test_errors_that_are_not_obstores_pass_through_unchanged() -> None:
    given = ValueError("a path object_store refuses")
    assert as_os_error(given) is given


def test_the_status_and_code_of_other_answers_are_kept_for_the_retry_policy() -> None:
    error = as_os_error(GenericError("status code: 500 Internal Server Error: <Error><Code>InternalError</Code>"))
    assert isinstance(error, StorageResponseError)
    assert (error.status, error.code) == (500, "InternalError")


def test_first_line_drops_the_debug_dump_and_joins_whitespace() -> None:
    assert first_line(GenericError(f"Generic  S3\terror: x{DUMP}")) == "Generic S3 error: x"


def test_an_error_that_cannot_be_pickled_travels_as_its_type_and_first_line() -> None:
    class Local(Exception):  # a class pickle cannot find by name
        pass

    sent = picklable(Local(f"broken{DUMP}"))
    assert type(sent) is OSError
    assert str(sent) == "Local: broken"
    kept = picklable(FileNotFoundError("gone"))
    assert type(kept) is FileNotFoundError and str(kept) == "gone"
