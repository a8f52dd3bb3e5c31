"""What a lent GPU machine runs (python -m scripts.gpu), and the GPU-side tools."""
