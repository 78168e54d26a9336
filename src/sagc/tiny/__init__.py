"""The embedded offline tiny world: task, tokenizer, tiny Qwen2/Llama base models.

Nothing here is downloaded: data, tokenizer and both base models are built from code and a
seed by ``python -m sagc.tiny {data,tokenizer,base-model,measure}`` (``cli.py``); the world
itself: src/sagc/tiny/README.md.
"""
