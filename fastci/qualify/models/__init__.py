"""The qualification set: one small real model per family a fleet serves."""

from fastci.qualify.models.base import Dataset, Family, Params
from fastci.qualify.models.lm import FAMILY as LM
from fastci.qualify.models.recsys import FAMILY as RECSYS
from fastci.qualify.models.speech import FAMILY as SPEECH
from fastci.qualify.models.vision import FAMILY as VISION

FAMILIES: dict[str, Family] = {f.name: f for f in (LM, VISION, SPEECH, RECSYS)}

__all__ = ["FAMILIES", "Dataset", "Family", "Params"]
