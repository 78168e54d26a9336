"""lm-eval backends (HF on CPU, vLLM) that record every generation's exact length. HF gets the tokenizer
*object*: from a path, lm-eval's ``AutoTokenizer`` would swap a qwen2 folder's pre-tokenizer
(docs/library-notes.md, "Tokenizer swap")."""

from __future__ import annotations

from functools import partial
from pathlib import Path

from sagc.evaluate.config import EvalSettings
from sagc.evaluate.recorder import GenerationRecord, measure_generation
from sagc.tokenizers import load_tokenizer
from sagc.vllm_support import require_vllm  # noqa: F401 (the runner's import path)


def _eos_ids(model, tokenizer) -> list[int]:
    ids: set[int] = set()
    for source in (getattr(model, "generation_config", None), getattr(model, "config", None)):
        value = getattr(source, "eos_token_id", None)
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, (list, tuple)):
            ids.update(int(v) for v in value)
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    return sorted(ids)


def make_hf_lm(model_dir: Path, recorder, *, batch_size: int | str = 8, device: str = "cpu"):
    """An lm-eval HF model for ``model_dir`` that files every generation in ``recorder``."""
    from lm_eval.models.huggingface import HFLM
    from lm_eval.models.utils import postprocess_generated_text

    class RecordingHFLM(HFLM):
        """HFLM that measures each generated row before lm-eval decodes and cuts it."""

        def _model_generate(self, context, max_length, stop, **generation_kwargs):
            out = super()._model_generate(context, max_length, stop, **generation_kwargs)
            n_ctx = context.shape[1]
            budget = max_length - n_ctx
            eos = _eos_ids(self.model, self.tokenizer)
            pad = self.tokenizer.pad_token_id
            raw_decode = partial(self.tokenizer.decode, skip_special_tokens=False)
            for row in out[:, n_ctx:].tolist():
                record = measure_generation(
                    row, budget=budget, eos_ids=eos, pad_id=pad, stop_strings=stop, decode=raw_decode
                )
                # The exact string generate_until will return for this row (no think token).
                text = postprocess_generated_text(self.tok_decode(row), stop, None)
                recorder.add(text, record)
            return out

    model_dir = Path(model_dir)
    if not (model_dir / "config.json").is_file():
        raise FileNotFoundError(f"model folder {model_dir} has no config.json")
    tokenizer = load_tokenizer(model_dir)
    lm = RecordingHFLM(
        pretrained=str(model_dir),
        tokenizer=tokenizer,
        device=device,
        dtype="float32",
        batch_size=batch_size,  # an int, or lm-eval's "auto" / "auto:N"
        trust_remote_code=False,
    )
    return lm, tokenizer


def vllm_model_args(model_dir: Path, cfg: EvalSettings) -> str:
    """lm-eval's ``--model_args`` for ``--model vllm`` from the cell's vLLM keys; the folder's own tokenizer."""
    path = str(Path(model_dir))
    if "," in path or "=" in path:
        raise ValueError(f"model path {path!r} contains ',' or '=', which model_args cannot carry")
    parts = [
        f"pretrained={path}",
        f"tokenizer={path}",
        f"tensor_parallel_size={int(cfg.tensor_parallel_size)}",
        f"gpu_memory_utilization={float(cfg.gpu_memory_utilization)}",
        f"dtype={cfg.dtype}",
        f"seed={int(cfg.seed)}",
        "trust_remote_code=False",
    ]
    if cfg.max_model_len is not None:
        parts.append(f"max_model_len={int(cfg.max_model_len)}")
    return ",".join(parts)


def make_vllm_lm(model_args: str, recorder):
    """An lm-eval vLLM model for ``model_args`` that files every generation in ``recorder``."""
    from lm_eval.models.utils import postprocess_generated_text
    from lm_eval.models.vllm_causallms import VLLM

    class RecordingVLLM(VLLM):
        """VLLM that measures each output before lm-eval cuts it at the stop strings."""

        def _model_generate(self, requests, generate=False, sampling_params=None):
            outputs = super()._model_generate(requests, generate=generate, sampling_params=sampling_params)
            if not generate:
                return outputs
            params = sampling_params if isinstance(sampling_params, list) else [sampling_params] * len(outputs)
            for output, sp in zip(outputs, params, strict=True):
                completion = output.outputs[0]
                # The exact string generate_until will return for this output.
                text = postprocess_generated_text(completion.text, list(sp.stop or []), self.think_end_token)
                truncated = completion.finish_reason == "length"
                recorder.add(text, GenerationRecord(n_tokens=len(completion.token_ids), truncated=truncated))
            return outputs

    return RecordingVLLM.create_from_arg_string(model_args, {"batch_size": "auto"})


def shutdown_vllm(lm) -> None:
    """Stop a ``make_vllm_lm`` model's engine core: its processes outlive the evaluation otherwise
    (and a process that evaluated twice waits on them at exit)."""
    engine = getattr(getattr(lm, "model", None), "llm_engine", None)
    core = getattr(engine, "engine_core", None)
    if core is not None:
        core.shutdown()
