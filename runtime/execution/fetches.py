"""Fetch structures of ``Session.run``: flatten to unique graph elements, rebuild the results.

Accepted, as in TF: a Tensor, an Operation (fetched as None), a name (``"y:0"`` a tensor, ``"y"``
an operation), and lists, tuples, namedtuples and dicts (any Mapping type that can be rebuilt
from its items) of those, nested. Errors carry TF's texts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from runtime.graph.graph import Graph, Operation, Tensor


class FetchMapper:
    """Unique ``tensors`` and ``operations`` of a fetch structure; ``build`` rebuilds it."""

    def __init__(self, graph: Graph, fetches):
        self.tensors: list[Tensor] = []
        self.operations: list[Operation] = []
        self._index: dict[Tensor, int] = {}
        self._builder = self._map(graph, fetches)
        # Distinct tensors, in order: a list of the values is the result.
        self.flat = (
            type(fetches) is list
            and not self.operations
            and len(self.tensors) == len(fetches)
            and not any(isinstance(f, (list, tuple, Mapping)) for f in fetches)
        )
        if self.flat:
            self._builder = list

    def build(self, values: list) -> object:
        """The fetch structure with each tensor replaced by its value (``values`` follows
        ``tensors``) and each operation by None."""
        return self._builder(values)

    def _map(self, graph: Graph, fetch) -> Callable[[list], object]:
        if fetch is None:
            raise TypeError(f'Argument `fetch` = {fetch} has invalid type "NoneType". Cannot be None')
        if isinstance(fetch, (list, tuple)):
            parts = [self._map(graph, f) for f in fetch]
            if isinstance(fetch, tuple) and hasattr(fetch, "_fields"):
                return lambda values: type(fetch)(*(p(values) for p in parts))
            kind = type(fetch) if type(fetch) in (list, tuple) else list
            return lambda values: kind(p(values) for p in parts)
        if isinstance(fetch, Mapping):
            keys = list(fetch)
            parts = [self._map(graph, fetch[k]) for k in keys]
            kind = type(fetch)

            def build_mapping(values: list) -> Mapping:
                items = [(k, p(values)) for k, p in zip(keys, parts)]
                try:
                    return kind(items)
                except TypeError:  # e.g. defaultdict: copy, then fill
                    result = kind.__new__(kind)
                    result.__init__(getattr(fetch, "default_factory", None))
                    result.update(items)
                    return result

            return build_mapping
        element = _resolve(graph, fetch)
        if isinstance(element, Operation):
            if element not in self.operations:
                self.operations.append(element)
            return lambda values: None
        if element not in self._index:
            self._index[element] = len(self.tensors)
            self.tensors.append(element)
        position = self._index[element]
        return lambda values: values[position]


def _resolve(graph: Graph, fetch) -> Tensor | Operation:
    try:
        return graph.as_graph_element(fetch, allow_tensor=True, allow_operation=True)
    except TypeError as e:
        raise TypeError(
            f'Argument `fetch` = {fetch} has invalid type "{type(fetch).__name__}" must be a '
            f"string or Tensor. ({e})"
        ) from None
    except (ValueError, KeyError) as e:
        raise ValueError(f"Argument `fetch` = {fetch} cannot be interpreted as a Tensor. ({e})") from None
