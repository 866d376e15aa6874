"""The AWS region of a bucket that no option or variable names, asked of the S3 service (here a
loopback server answering as AWS does: a refusal or redirect carrying x-amz-bucket-region)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from uc_jupyter.storage.regions import bucket_region, region_needed


def test_a_buckets_region_is_asked_of_the_service_when_no_one_says_it() -> None:
    class Redirecting(BaseHTTPRequestHandler):  # what AWS answers an unsigned HEAD of a bucket
        def do_HEAD(self) -> None:  # http.server's name
            self.send_response(301 if self.path == "/far-away" else 403)
            self.send_header("x-amz-bucket-region", "ap-southeast-2" if self.path == "/far-away" else "eu-west-1")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Redirecting)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_port}"
        assert bucket_region("far-away", base=base) == "ap-southeast-2"
        assert bucket_region("private", base=base) == "eu-west-1"
    finally:
        server.shutdown()
        server.server_close()
    assert bucket_region("gone", base=base) is None  # no answer: object_store's default stays
    assert region_needed({}, {}) and not region_needed({"region": "x"}, {})
    assert not region_needed({}, {"AWS_DEFAULT_REGION": "x"}) and not region_needed({"endpoint": "http://h"}, {})
