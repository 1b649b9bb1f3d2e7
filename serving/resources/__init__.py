"""What the process holds and gives back: glibc's heap (arenas, trims), each loaded version's
memory, the bytes of large requests in flight (``--max_request_bytes_in_flight``), the drain
that admits, refuses and waits for calls as the server leaves, the TLS credentials of both ports
(``tls``: SSLConfig files, rotated without a restart) and the bearer tokens they accept
(``auth``: ``--auth_token_file``).

Imports only the vocabulary below it (observability, ``serving.errors``, ``serving.options``);
the lifecycle, batching and both front ends use it.
"""
