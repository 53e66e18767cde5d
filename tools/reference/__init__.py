"""PyTorch reference (numerical oracle) for the dflash engine: safetensors I/O and a plain
HF-compatible transformer for Qwen3 / Qwen2 / Llama."""
