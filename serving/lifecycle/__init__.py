"""The model lifecycle, platform-neutral (TF Serving's core/): the model config, the file-system
source of versions (local or object storage), the version policy, the manager that loads,
serves and unloads versions (with its memory budget), model status and readiness.

It loads whatever its load function returns: it knows nothing of SavedModels, Sessions or
requests (``serving.inference`` hands it the SavedModel loader). Imports resources,
observability and the vocabulary below them only.
"""
