"""``runtime.session.Session``, where users and tests import it: the Session lives in
``runtime/execution/session.py`` beside the engine it drives."""

from runtime.execution.session import DeviceAttributes, Session, get_default_session

__all__ = ["DeviceAttributes", "Session", "get_default_session"]
