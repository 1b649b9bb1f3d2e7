"""The REST front end: TF Serving's HTTP/JSON API on ``--rest_api_port`` (aiohttp), its routes,
and JSON as TF Serving reads and writes it (rapidjson's grammar, tensors in row and columnar
form, tf.Example objects, large arrays of numbers read in slices).

A thin transport over ``serving.inference.request_functions``; imports inference and what lies
below it, never the gRPC front end.
"""
