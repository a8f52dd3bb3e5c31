"""A built wheel on a GPU machine (python -m scripts.gpu), and the GPU-side tools."""
