"""The gRPC front end: PredictionService and ModelService over grpcio, their handlers reading
the request bytes themselves (admission before decoding).

A thin transport over ``serving.inference.request_functions``; imports inference and what lies
below it, never the REST front end.
"""
