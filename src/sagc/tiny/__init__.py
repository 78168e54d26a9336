"""The embedded offline tiny world: task, tokenizer, tiny Qwen2/Llama base models (src/sagc/tiny/README.md)."""
