"""onyxia.cli.embeddings — sentence embeddings from a sentence-transformers directory's ONNX export.

    from onyxia.cli.embeddings import EmbeddingModel
    model = EmbeddingModel.from_pretrained("all-MiniLM-L6-v2")  # modules.json, 1_Pooling/, model.onnx, ...
    vectors = model.embed(["a question", "a document"])          # float32 [2, 384], unit rows

`directory` reads the pipeline from the directory's own files, `pooling` holds sentence-transformers' pooling
modes, `model` runs the encoder on the GPU (one plan for every batch shape) and pools on the host. Used by
`onyxia embed` and by `onyxia serve --embedding-model` (`POST /v1/embeddings`).
"""

from onyxia.cli.embeddings.directory import EmbeddingDirectory, read_embedding_directory
from onyxia.cli.embeddings.model import EmbeddingInputError, EmbeddingModel, Embeddings
from onyxia.cli.embeddings.pooling import POOLINGS, normalize, pool

__all__ = [
    "POOLINGS",
    "EmbeddingDirectory",
    "EmbeddingInputError",
    "EmbeddingModel",
    "Embeddings",
    "normalize",
    "pool",
    "read_embedding_directory",
]
