"""Scripts run inside the TensorFlow oracle venvs; `wire_cases` is shared with our side."""
