"""What the server reports about itself: its metrics (TF Serving's names), the request log
(``--request_logging`` into TFRecord files) and TFRecord, the format both write and warmup reads,
the access log (``--access_log``: a JSON line per request) and tracing (OpenTelemetry spans,
configured by ``OTEL_*`` variables).

Imported by every part of ``serving``; imports none of them (runtime and apis only), so any
part may count what it does without pulling in the rest.
"""
