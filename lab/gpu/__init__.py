"""A built wheel on a GPU machine (python -m lab.gpu), and the GPU-side tools."""
