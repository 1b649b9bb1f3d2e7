"""ServerCore: the models this server serves (TF Serving's ``server_core.cc``).

It owns the ModelServerConfig (models, version policies, version labels), wires one
``FileSystemStoragePathSource`` per model to the ``AspiredVersionsManager``, waits for the
initial versions, and resolves a request's ``model_spec`` to a pinned ``Servable``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from runtime import errors
from runtime.footprint import Footprint
from serving.batching.bundle import Batching, create_batching
from serving.inference.bundles import saved_model_load_fn, warmup_fn
from serving.lifecycle import model_config
from serving.lifecycle.manager import (
    AspiredVersionsManager,
    LoadFn,
    StateListener,
    VersionState,
    status_string,
)
from serving.lifecycle.policy import swap_policies
from serving.lifecycle.servable import ManagerState, Servable, ServableId
from serving.lifecycle.source import FileSystemStoragePathSource, ServableToMonitor, VersionPolicy
from serving.options import schedulable_cpus
from serving.resources import memory

logger = logging.getLogger(__name__)


class ServerCore:
    """The models this server serves: config, sources, manager, version labels.

    ``pinned(model_spec)`` is the request paths' entry (``servable_handle`` the general one): it
    resolves ``name`` plus ``version`` / ``version_label`` / neither (latest) to a pinned
    ``Servable``. ``options`` (a ``ServerOptions``) is public so request handlers can read
    request-path flags such as ``enable_signature_method_name_check``. Thread-safe.
    """

    def __init__(self, options, load_fn: LoadFn | None = None):
        self.options = options
        # --enable_batching: one batch scheduler for every model; its threads start here.
        self.batching: Batching | None = create_batching(options) if load_fn is None else None
        self._manager = AspiredVersionsManager(
            load_fn or saved_model_load_fn(options, self.batching),
            warmup_fn=warmup_fn(options) if load_fn is None else None,
            num_load_threads=options.num_load_threads,
            max_num_load_retries=options.max_num_load_retries,
            load_retry_interval_seconds=max(options.load_retry_interval_micros, 0) / 1e6,
            swap_policy=swap_policies(options.aspired_version_policy),
            memory_budget_bytes=options.model_memory_budget_bytes,
            rss_fn=memory.rss_bytes,
        )
        self._config = model_config.ModelServerConfig()
        self._config_lock = threading.Lock()
        self._configured_names: tuple[str, ...] = ()
        self._config_listeners: list[Callable[[], None]] = []
        self._labels: dict[str, dict[str, int]] | None = None
        self._labels_lock = threading.Lock()
        self._source: FileSystemStoragePathSource | None = None

    @property
    def manager(self) -> AspiredVersionsManager:
        return self._manager

    @property
    def config(self):
        with self._config_lock:
            return model_config.ModelServerConfig.FromString(self._config.SerializeToString())

    # -- requests ---------------------------------------------------------------------------

    def servable_handle(self, model_spec, deadline: float | None = None) -> Servable:
        """The servable ``model_spec`` names, pinned while the handle is held. ``deadline``:
        the seconds a request may wait for a model that is not resident (memory budget)."""
        return self._manager.get_servable(*self._requested(model_spec), deadline)

    def pinned(self, model_spec, deadline: float | None = None) -> Servable:
        """``servable_handle`` for a ``with`` statement only, the request paths' (no handle
        is made per request; the block's end releases the pin, as ``unpin()`` does)."""
        name = model_spec.name
        if name and model_spec.WhichOneof("version_choice") is None:  # the common request
            return self._manager.pin(name, None, deadline)
        return self._manager.pin(*self._requested(model_spec), deadline)

    def _requested(self, model_spec) -> tuple[str, int | None]:
        """(name, version) of a ModelSpec; version None: the latest."""
        name = model_spec.name
        if not name:
            raise errors.InvalidArgumentError(None, None, "ModelSpec has no name specified.")
        choice = model_spec.WhichOneof("version_choice")
        if choice == "version":
            return name, model_spec.version.value
        if choice == "version_label":
            return name, self._version_for_label(name, model_spec.version_label)
        return name, None

    def _version_for_label(self, name: str, label: str) -> int:
        with self._labels_lock:
            if self._labels is None:
                raise errors.UnavailableError(None, None, f"Model labels does not init yet.{label}")
            version = self._labels.get(name, {}).get(label)
        if version is None:
            raise errors.InvalidArgumentError(None, None, f"Unrecognized servable version label: {label}")
        return version

    def model_status(self, name: str, version: int | None = None) -> list[VersionState]:
        """GetModelStatus's view: states of one or all versions, highest first."""
        states = self._manager.version_states(name)
        source_error = self._manager.source_error(name)
        if not states and source_error is not None:  # a fresh copy: a shared one piles up tracebacks
            raise errors.error_for_code(source_error.code, source_error.message)
        if version is not None:
            if version not in states:
                raise errors.NotFoundError(None, None, f"Could not find version {version} of model {name}")
            return [states[version]]
        if not states:
            raise errors.NotFoundError(None, None, f"Could not find any versions of model {name}")
        return list(states.values())

    def footprints(self) -> dict[tuple[str, int], Footprint]:
        """What each available version holds (``serving.resources.memory.model_footprint``)."""
        held = {}
        for servable in self._manager.loaded():
            if hasattr(servable.bundle, "session"):
                try:
                    held[(servable.name, servable.version)] = memory.model_footprint(servable)
                except Exception:  # noqa: BLE001 - a figure missing, never a failed page
                    logger.exception("Measuring servable version %s", servable.id)
        return held

    def memory_samples(self):
        """``(model, version, kind, bytes)`` for the metrics page."""
        for (name, version), held in sorted(self.footprints().items()):
            yield name, version, "arrays", held.arrays
            yield name, version, "onnxruntime", held.onnxruntime

    def model_names(self) -> list[str]:
        """Every model the manager has seen (available or not)."""
        return self._manager.model_names()

    def configured_model_names(self) -> tuple[str, ...]:
        """The models the current config asks for, in its order (available or not). Lock-free
        (a tuple replaced whole): state listeners call it while a reload holds the config."""
        return self._configured_names

    def has_available_version(self, name: str) -> bool:
        return bool(self._manager.available_versions(name))

    def add_state_listener(self, listener: StateListener) -> None:
        self._manager.add_state_listener(listener)

    def add_config_listener(self, listener: Callable[[], None]) -> None:
        """``listener()`` runs after every ``reload_config`` (applied or not), on its thread."""
        self._config_listeners.append(listener)

    # -- configuration ------------------------------------------------------------------------

    def reload_config(self, new_config) -> None:
        """Moves to ``new_config`` (TF Serving's ``ServerCore::ReloadConfig``); blocks until new
        models are available. Raises OpError with TF Serving's texts."""
        try:
            self._reload_config(new_config)
        finally:
            for listener in list(self._config_listeners):
                listener()

    def _reload_config(self, new_config) -> None:
        with self._config_lock:
            old = self._config
            old_kind, new_kind = old.WhichOneof("config"), new_config.WhichOneof("config")
            is_first, is_same = old_kind is None, old == new_config
            if not (is_first or is_same or old_kind == new_kind == "model_config_list"):
                msg = (
                    "Cannot transition to requested config. It is only legal to transition from one "
                    "ModelConfigList to another."
                )
                logger.error("%s", msg)
                raise errors.FailedPreconditionError(None, None, msg)
            if new_kind is None:
                logger.info("Taking no action for empty config.")
                return
            if new_kind != "model_config_list":
                raise errors.InvalidArgumentError(
                    None, None, "ModelServer does not yet support custom model config."
                )
            model_config.validate_model_config_list(
                new_config.model_config_list, old.model_config_list if old_kind else None
            )
            self._config = model_config.ModelServerConfig.FromString(new_config.SerializeToString())
            self._configured_names = tuple(m.name for m in self._config.model_config_list.config)
            self._update_labels()
            logger.info("Adding/updating models.")
            self._add_models(old, first_models=self._source is None)
            logger.info("Finished adding/updating models")
            logger.info("Finished reloading config")

    def _update_labels(self) -> None:
        def available(name: str, version: int) -> bool:
            return version in self._manager.available_versions(name)

        with self._labels_lock:
            self._labels = model_config.version_label_map(
                self._config,
                available,
                self._labels,
                self.options.allow_version_labels_for_unavailable_models,
            )

    def _add_models(self, old_config, first_models: bool) -> None:
        servables = []
        for model in self._config.model_config_list.config:
            logger.info(" (Re-)adding model: %s", model.name)
            policy = VersionPolicy.from_proto(model.model_version_policy)
            servables.append(ServableToMonitor(model.name, model.base_path, policy))
        names = {s.servable_name for s in servables}
        since = self._manager.current_seq()
        if first_models:
            self._manager.set_num_load_threads(4 * schedulable_cpus())  # TF: fast initial load
            self._source = FileSystemStoragePathSource(
                servables,
                self.options.file_system_poll_wait_seconds,
                self._manager.set_aspired_versions,
                self.options.file_system_settle_seconds,
                cache_dir=self.options.remote_model_cache_dir,
                storage_options=self.options.remote_storage_options,
                error_callback=self._manager.set_source_error,
            )
            self._source.start()
            try:
                self._await(names, since, "servable(s)")
            finally:
                self._manager.set_num_load_threads(self.options.num_load_threads)
        else:
            new_names = names - {m.name for m in old_config.model_config_list.config}
            self._source.update_config(servables)
            self._await(new_names, since, "model(s)")

    def _await(self, names: set[str], since: int, noun: str) -> None:
        reached = self._manager.wait_for_models(names, since)
        failed = {n: s for n, s in reached.items() if s.state is not ManagerState.AVAILABLE}
        for name in [n for n, s in failed.items() if s.version == 0 and self._manager.source_error(n)]:
            # An unreadable base path (object storage) holds up neither the other models nor the
            # server: the model reports the error (GetModelStatus, log) and is polled on.
            logger.error("Model %s is not available: %s", name, status_string(failed.pop(name).error))
        if failed:
            parts = "".join(
                f"{{{ServableId(n, s.version)}"
                + (f" due to error: {status_string(s.error)}" if s.error is not None else "")
                + "}, "
                for n, s in sorted(failed.items())
            )
            raise errors.UnknownError(
                None, None, f"{len(failed)} {noun} did not become available: {{{parts}}}"
            )

    def stop(self) -> None:
        if self._source is not None:
            self._source.stop()
        self._manager.stop()
        if self.batching is not None:
            self.batching.stop(0.0)  # what the server's shutdown left queued fails now
