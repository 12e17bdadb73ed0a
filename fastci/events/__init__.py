"""The public event contract, in one import: every event model fastci moves and the codec.

Each model is defined beside the capability that owns it (``fastci/<capability>/events.py``) and
registered in ``SYSTEM`` (``fastci/topology.py``); this package hands every registered model on by
its class name, for producers and analysts, so a new event needs no line here. fastci's own code
imports from the defining modules.
"""

from fastci.core.codec import MAX_EVENT_BYTES, InvalidEvent, encode
from fastci.core.dead_letters import FieldError
from fastci.core.events import Event, derive_id
from fastci.inputs import Bundle, ChangedFile, ChangedFunction, FoldedStack
from fastci.topology import DEAD_LETTERS, INPUT_TOPICS, SYSTEM, TOPICS, decode, model_for

# Every topic's model (DeadLetter, CommitEvent, ResultEvent, Selection, TestPlan...), by class name.
MODELS: dict[str, type[Event]] = {model.__name__: model for model in SYSTEM.topics.values()}
globals().update(MODELS)

__all__ = [
    "DEAD_LETTERS",
    "INPUT_TOPICS",
    "MAX_EVENT_BYTES",
    "MODELS",
    "TOPICS",
    "Bundle",
    "ChangedFile",
    "ChangedFunction",
    "Event",
    "FieldError",
    "FoldedStack",
    "InvalidEvent",
    "decode",
    "derive_id",
    "encode",
    "model_for",
    *MODELS,
]
