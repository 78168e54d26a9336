"""``SAGCGRPOTrainer``: TRL's ``GRPOTrainer`` with a group size G chosen before every step.

What changes against TRL 1.16 (and why; see docs/library-notes.md):

* **Step = one synchronous rollout.** Before a step's rollout the trainer asks its group
  sizer (``FixedGroupSize`` or ``SAGCController``) for G, draws the step's prompts from its
  own seeded ``PromptStream`` (P fixed, or P = budget / G), repeats each prompt G times,
  sets ``self.num_generations = G`` and hands the rows to TRL's own
  ``_generate_and_score_completions``: generation, old/ref log-probs, rewards and the
  group-relative advantages (``rewards.view(-1, G)``) are TRL's code, run with that G.
  A step feeds ``updates_per_rollout`` optimizer updates (TRL's ``steps_per_generation /
  gradient_accumulation_steps`` mini-batches, times ``num_iterations``); the trainer's
  ``step`` counts rollouts, TRL's ``global_step`` counts updates.
* **Lengths for the controller.** ``_generate`` is wrapped: the raw per-completion token
  counts (EOS-trimmed, truncated rows at the cap: the stragglers) and the generation time
  are recorded, grouped by prompt, and reported to the sizer with ``observe`` once the step's
  rollouts (all dynamic-sampling rounds) are done. ``completion_mask`` is not used: with
  ``mask_truncated_completions`` it is zero for exactly the truncated rows.
* **Loss passes of a fixed size** (``micro_batch_rows``): TRL splits a step into a fixed
  number of micro-batches, so their size grows with G. ``compute_loss`` runs a micro-batch
  larger than ``micro_batch_rows`` as passes of that many rows, each weighted as its share
  of the micro-batch's loss and back-propagated in turn (gradients reduced across ranks
  once, on the last: ``held_gradient_sync``), so every step trains in passes of the same size
  whatever its G and the gradient is the micro-batch's. Not under DeepSpeed ZeRO 2/3, whose
  ``backward`` steps the engine itself: the cell config refuses that combination. The
  no-grad scoring passes (old and reference log-probs) run in chunks of the same rows
  (TRL's chunk is ``per_device_train_batch_size``, a whole micro-batch at G_max), so the
  memory plan's one layout covers every pass of a step.
* **Dynamic sampling** (DAPO): groups whose correctness rewards are all equal (accuracy 0 or
  1) are dropped and refilled with fresh prompts for at most ``ds_max_rounds`` extra rounds
  (see dynamic_sampling.py).
  If the cap is hit, the batch is completed with dropped groups, their advantages set to
  zero (no policy gradient; the format and overlong terms alone would give them one), to
  keep exactly P x G rows; their count is in ``history``.
* **Times of a synchronous step** (``sagc.metrics``, ``time/*``): per generation round the
  slowest rank's, summed over rounds; generation alone in ``rollout_s``, the vLLM weight
  push, sleep mode's wake and sleep, the wait for the slowest rank and the CPU work around
  generation each apart.
* **No silent drops.** Every layout is checked at construction for every candidate G, and
  each step asserts its row count before TRL's ``split_tensor_dict`` (which would drop a
  remainder).
* **Deterministic cost.** Every generate call is recorded (``GenerateCall``: rows, longest
  completion, completion tokens, prompt padding) and summed per step into machine-independent
  costs (``sagc.metrics``, ``cost/*``): the decode steps of a synchronous decode, the padded
  tokens HF ``generate`` computes, and the padded tokens of the training passes. They are a
  function of the rollouts alone, so they are identical on every machine that draws the same
  rollouts, unlike wall-clock. Process CPU time is logged beside wall time: it does not grow
  when other jobs time-slice the same cores.
* **One record per step** (``sagc.train.records.StepResult``), written once when the
  step's last update ends: the W&B row through ``step_logger`` (names from
  ``sagc.metrics``, plus TRL's own per-update metrics averaged over the step under
  ``trl/``; TRL's ``report_to`` is expected to be "none"), done.json's history and the
  lengths trace are views of it.
* **Exact resume** (``sagc.train.checkpoint``): ``sagc_state.json`` in every checkpoint
  holds the sizer state (its RNG included), the prompt-stream position, the cumulative
  times and the step records (their rows are re-logged on resume: a killed offline run may
  not have flushed them); TRL restores weights, optimizer, scheduler and RNG.

The TRL methods overridden here and the private attributes used are listed, with the
reason for each, in ``sagc.train.trl_contract`` (checked against the installed TRL by the
tests).

* **Several processes** (``accelerate launch``, ``sagc.train.distributed``): every rank
  draws the same prompts and keeps its share of the step's rows; lengths, costs and the
  dynamic-sampling decisions are taken over all ranks' rows, gathered, so every rank's sizer
  picks the same G (checked each step) and the step is the one a single process would take.
  Only rank 0 logs and writes files.
* **Stop at a step boundary** (``request_stop``, called from a SIGTERM/SIGUSR1 handler):
  the step that is running finishes, a checkpoint is saved, and training ends with
  ``preempted`` set; a resumed run repeats no finished step.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset as TorchDataset
from transformers import TrainerCallback, set_seed
from transformers.trainer_callback import PrinterCallback, ProgressCallback
from transformers.trainer_utils import rotate_checkpoints
from trl import GRPOConfig, GRPOTrainer

from sagc import metrics as M
from sagc.prompts import PromptStream
from sagc.train import distributed, rollout
from sagc.train.checkpoint import read_state, write_state
from sagc.train.dynamic_sampling import FILTER_REWARD, filter_disagreement, informative_groups, merge_scored
from sagc.train.presets import StepShapes, lay_out, updates_per_rollout
from sagc.train.records import GenerateCall, StepInProgress, StepResult
from sagc.train.stops import Stops, split_stops
from sagc.vllm_support import require_vllm

log = logging.getLogger("sagc.train")



@dataclass(frozen=True)
class SAGCTrainingArguments:
    """What the step needs beyond ``GRPOConfig``.

    ``prompts_per_step``: P, fixed (the paper's default), or ``rollout_budget``: P = budget/G.
    ``dynamic_sampling`` / ``ds_max_rounds``: DAPO's filter, at most that many extra rounds.
    ``layout`` and a ``Stops`` ``stop``: the cell's resolved step layout and stops
    (``sagc.train.resolve``), read as they are; without them (a trainer built by hand) the
    trainer lays out the step and splits the stop strings itself.
    """

    prompts_per_step: int | None = 4
    rollout_budget: int | None = None
    dynamic_sampling: bool = False
    ds_max_rounds: int = 3
    # stops of the rollouts: special tokens end generation, text is trimmed (sagc.train.stops)
    stop: tuple[str, ...] | Stops = ()
    micro_batch_rows: int | None = None  # rows of one loss pass (None: TRL's micro-batch at once)
    layout: StepShapes | None = None

    def __post_init__(self) -> None:
        if (self.prompts_per_step is None) == (self.rollout_budget is None):
            raise ValueError("set exactly one of sagc_args.prompts_per_step and sagc_args.rollout_budget")


class _Tickets(TorchDataset):
    """The data loader's items: one per micro-step. Prompts come from the prompt stream;
    the loader only drives TRL's loop (and lets its resume skip consumed micro-steps)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict:
        return {"ticket": i}


def _identity(batch):
    return batch


class _StepBoundary(TrainerCallback):
    def __init__(self, trainer: "SAGCGRPOTrainer") -> None:
        self.trainer = trainer

    def on_step_end(self, args, state, control, **kwargs):
        self.trainer._on_update_end(control)


class SAGCGRPOTrainer(GRPOTrainer):
    """GRPO/DAPO with a per-step group size from ``group_sizer`` (see module docstring).

    Args beyond ``GRPOTrainer``'s: ``group_sizer`` (a ``sagc.controller.GroupSizer``),
    ``sagc_args`` (``SAGCTrainingArguments``), ``step_logger`` (anything with
    ``log(row, step)``, e.g. ``sagc.train.wandb_log.StepLogger``; optional),
    ``prompt_stream`` (default: a ``PromptStream`` seeded with ``args.seed``; e.g. a
    ``sagc.prompt_aware.schedule.TailBatchingStream``, told every step's lengths).
    ``args.max_steps`` counts optimizer updates: steps x ``updates_per_rollout``.
    """

    def __init__(
        self,
        model,
        reward_funcs,
        args: GRPOConfig,
        train_dataset,
        *,
        group_sizer,
        sagc_args: SAGCTrainingArguments | None = None,
        step_logger: Any = None,
        prompt_stream: PromptStream | None = None,
        processing_class=None,
        callbacks: list | None = None,
        **kwargs,
    ) -> None:
        sagc_args = sagc_args or SAGCTrainingArguments()
        # Everything below is checked before TRL loads any model.
        if args.use_vllm:
            require_vllm()
        if args.max_steps is None or args.max_steps <= 0:
            raise ValueError("SAGCGRPOTrainer needs args.max_steps > 0 (optimizer updates)")
        ga, spg = args.gradient_accumulation_steps, args.steps_per_generation
        if spg % ga:
            raise ValueError(f"steps_per_generation ({spg}) must be a multiple of gradient_accumulation_steps ({ga})")
        layout = sagc_args.layout
        if layout is not None and (layout.steps_per_generation, layout.gradient_accumulation_steps) != (spg, ga):
            raise ValueError(f"sagc_args.layout splits a step into {layout.steps_per_generation} micro-batches "
                             f"accumulated {layout.gradient_accumulation_steps} at a time; args say {spg} and {ga}")
        self.updates_per_rollout = (layout.updates_per_rollout if layout is not None
                                    else updates_per_rollout(spg, ga, args.num_iterations))
        u = self.updates_per_rollout
        if args.max_steps % u:
            raise ValueError(f"args.max_steps ({args.max_steps}) must be a multiple of the updates per step ({u})")
        if _value(args.save_strategy) == "steps" and args.save_steps and (args.save_steps % u):
            raise ValueError(
                f"args.save_steps ({args.save_steps}) must be a multiple of the updates per step ({u}): "
                "a checkpoint inside a step could not be resumed exactly"
            )
        self.group_sizer = group_sizer
        self.sagc_args = sagc_args
        self.group_sizes = tuple(sorted(int(g) for g in group_sizer.candidates))
        if layout is None:  # a trainer built by hand: the cell config's layout rule, here
            n = args.world_size
            layout_of = lay_out(self.group_sizes, sagc_args.prompts_per_step, sagc_args.rollout_budget, spg * n,
                                f"steps_per_generation = {spg}" if n == 1
                                else f"processes x steps_per_generation = {n} x {spg}", key="sagc_args")
        else:
            layout_of = layout.shapes
            if missing := sorted(set(self.group_sizes) - set(layout_of)):
                raise ValueError(f"sagc_args.layout has no step at G = {missing}, which the group sizer can choose")
        #: prompts of a step at each G the sizer can choose
        self.prompts_at = {g: layout_of[g].prompts for g in self.group_sizes}
        if args.logging_steps != 1 or _value(args.logging_strategy) != "steps":
            # TRL clears its metric buffers in log(); one log per update keeps them per-update.
            args.logging_strategy = "steps"
            args.logging_steps = 1
        if train_dataset is None or not hasattr(train_dataset, "__getitem__") or len(train_dataset) == 0:
            raise ValueError("SAGCGRPOTrainer needs a non-empty map-style train_dataset")
        if "prompt" not in train_dataset.column_names:
            raise ValueError(f"train_dataset has no 'prompt' column (columns: {train_dataset.column_names})")

        super().__init__(
            model=model,
            reward_funcs=reward_funcs,
            args=args,
            train_dataset=train_dataset,
            processing_class=processing_class,
            callbacks=callbacks,
            **kwargs,
        )
        self.rank, self.n_processes = distributed.world()
        if sagc_args.dynamic_sampling and FILTER_REWARD not in self.reward_func_names:
            raise ValueError(f"dynamic sampling drops the groups whose correctness is all 0 or all 1 (DAPO), read "
                             f"from the reward function {FILTER_REWARD!r}, which is not among the trainer's "
                             f"reward functions {self.reward_func_names}: add the correctness reward")
        #: the column of TRL's per-function rewards that DAPO's filter reads
        self._filter_column = (self.reward_func_names.index(FILTER_REWARD) if sagc_args.dynamic_sampling else None)
        self._filter_values: torch.Tensor | None = None
        self._sleep_timer = rollout.sleep_mode_timer(self)  # vLLM sleep mode's wake and sleep
        if self.n_processes > 1 or (args.use_vllm and args.vllm_mode == "colocate"):
            # TRL seeds every colocated engine with process_index // tp (0 for one process),
            # and vLLM's worker setup reseeds torch's global RNG with it; in colocate mode the
            # engine samples from that RNG, in this process. Reseed with the cell's seed, so
            # that two seeds are two independent samples (TRL's HF path already is); with
            # several processes each rank samples its rows from its own stream.
            set_seed(args.seed if self.n_processes == 1 else _rank_seed(args.seed, self.rank))
        stops = sagc_args.stop
        self._stop_texts = self._stop_at_tokens(
            stops if isinstance(stops, Stops) else split_stops(self._tokenizer, stops))
        if args.use_vllm:
            log.info("rollouts: vLLM, %s engine", args.vllm_mode)
        # The plain prompt stream, unless given (the entry point gives the policy's own,
        # GroupSizer.prompt_stream): the trainer calls take(k), observe(prompt ids, lengths)
        # and state_dict() / load_state_dict() on it.
        if prompt_stream is None:
            prompt_stream = PromptStream(len(train_dataset), seed=args.seed, shuffle=args.shuffle_dataset)
        if prompt_stream.n != len(train_dataset):
            raise ValueError(f"prompt_stream covers {prompt_stream.n} prompts, train_dataset has {len(train_dataset)}")
        self.prompt_stream = prompt_stream
        self.step_logger = step_logger
        # One record per finished step (sagc.train.records): done.json's history, the W&B
        # rows, the lengths trace and the checkpoint state are all views of it.
        self.steps: list[StepResult] = []
        self.wallclock_s = 0.0
        self.cpu_s = 0.0
        self._current: StepInProgress | None = None
        self._step_t0: float | None = None
        self._step_cpu0: float | None = None
        self._update_loss = 0.0
        self.stop_signal: int | None = None  # set by request_stop
        self.preempted = False  # training ended early at a step boundary, on request
        self.add_callback(_StepBoundary(self))
        # One concise line per step (below) instead of TRL's per-update dict printing.
        for cb in (PrinterCallback, ProgressCallback):
            self.remove_callback(cb)

    def _stop_at_tokens(self, stops: Stops) -> list[str]:
        """End generation at the stops that are special tokens (chat end tokens) as at EOS;
        return the stops left to match as text (``rollout.trim_rollouts``). A row that ends
        at such a token is finished: TRL's truncation test and DAPO's mask read
        ``eos_token_ids``."""
        new = [i for i in stops.token_ids.values() if i not in self.eos_token_ids]
        if new:
            self.eos_token_ids = [*self.eos_token_ids, *new]
            if self.use_vllm:
                self.vllm_generation.generation_kwargs["stop_token_ids"] = list(self.eos_token_ids)
            else:
                self.generation_config.eos_token_id = list(self.eos_token_ids)
                self.generation_kwargs["eos_token_id"] = list(self.eos_token_ids)
        return list(stops.texts)

    # -- data: a ticket per micro-step; prompts come from the stream --------------------

    def get_train_dataloader(self):
        n = self.args.max_steps * self.args.gradient_accumulation_steps
        return DataLoader(_Tickets(n), batch_size=1, shuffle=False, collate_fn=_identity)

    def _draw_rows(self, n_prompts: int, group_size: int) -> list[dict]:
        """This rank's share of the round's rows: every rank draws the same prompts."""
        idx = self.prompt_stream.take(n_prompts)
        self._current.prompt_ids.extend(idx)
        rows = [dict(self.train_dataset[i]) for i in idx]
        # Copies, not references: TRL may write extra fields into each row.
        return distributed.shard([dict(r) for r in rows for _ in range(group_size)], self.rank, self.n_processes)

    @property
    def history(self) -> list[dict]:
        """done.json's per-step history: a view of the step records."""
        return [s.history_entry() for s in self.steps]

    @property
    def step(self) -> int:
        """Finished steps (rollouts), restored on resume."""
        return self.state.global_step // self.updates_per_rollout

    # -- the rollout of one step -----------------------------------------------------------

    def training_step(self, model, inputs, num_items_in_batch):
        if self._step_t0 is None:
            self._step_t0 = time.perf_counter()  # first micro-step of a new step
            self._step_cpu0 = time.process_time()
        loss = super().training_step(model, inputs, num_items_in_batch)
        self._update_loss += float(loss.detach().float().item())
        return loss

    def _generate(self, prompts: list):
        # Set by _generate_single_turn: the weight sync to vLLM, the generation itself, sleep
        # mode's wake and sleep, the wait for the other ranks.
        self._sync_seconds = self._gen_seconds = self._wake_seconds = self._wait_seconds = 0.0
        t0 = time.perf_counter()
        result = super()._generate(prompts)
        dt = time.perf_counter() - t0
        cur = self._current
        if self.model.training and cur is not None:
            stop = {*self.eos_token_ids, self._tokenizer.pad_token_id}
            # Every rank's rows, in their global order (one list on one process).
            rows = distributed.gather_rows([(len(p), len(c), bool(c) and c[-1] not in stop)
                                            for p, c in zip(result[0], result[1], strict=True)])
            prompt_lengths = [r[0] for r in rows]
            lengths = [r[1] for r in rows]
            trunc = [r[2] for r in rows]
            g = self.num_generations
            if len(lengths) % g:
                raise RuntimeError(f"{len(lengths)} completions do not form groups of G={g}")
            cur.length_groups.extend(lengths[i : i + g] for i in range(0, len(lengths), g))
            cur.truncated.extend(trunc)
            cur.calls.append(GenerateCall.of_lengths(prompt_lengths, lengths))
            # Rollout time is generation alone: the weight sync to vLLM, sleep mode's wake and
            # sleep, the wait for the slowest rank and the CPU work around generation
            # (tokenizing, stop trimming, decoding) are logged apart. This round ends when its
            # slowest rank ends: its times are the slowest rank's, added to the step's.
            post = dt - self._gen_seconds - self._sync_seconds - self._wake_seconds - self._wait_seconds
            gen, sync, post, wait, wake = distributed.slowest(self._gen_seconds, self._sync_seconds, post,
                                                              self._wait_seconds, self._wake_seconds)
            cur.gen_seconds += gen
            cur.sync_seconds += sync
            cur.post_seconds += post
            cur.wait_seconds += wait
            if self._sleep_timer is not None:
                cur.wake_seconds = (cur.wake_seconds or 0.0) + wake
        return result

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        if self.model.training and self._current is not None:
            w = self.reward_weights.to(rewards_per_func.device)
            total = (rewards_per_func * w.unsqueeze(0)).nansum(dim=1)
            total[torch.isnan(rewards_per_func).all(dim=1)] = torch.nan
            self._current.rewards.append(total.detach().cpu())
            if self._filter_column is not None:  # every rank's rows: TRL gathered them
                self._filter_values = rewards_per_func[:, self._filter_column].detach().cpu()
        return rewards_per_func

    def _score_round(self, n_prompts: int, group_size: int) -> tuple[dict, torch.Tensor, torch.Tensor | None]:
        """One generation round: this rank's scored rows, and every rank's total rewards and
        correctness rewards (TRL gathers them to compute group advantages; the correctness
        ones only with dynamic sampling, whose filter reads them)."""
        rows = self._draw_rows(n_prompts, group_size)
        n_before = len(self._current.rewards)
        self._filter_values = None
        scored = super()._generate_and_score_completions(rows)
        if len(self._current.rewards) != n_before + 1:
            raise RuntimeError("expected exactly one reward computation per generation round")
        return scored, self._current.rewards[-1], self._filter_values

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        # Here, not in _generate: TRL decodes, scores and tests truncation inside _generate.
        self._sync_seconds = rollout.timed_weight_sync(self)
        timer = self._sleep_timer
        woken = timer.seconds if timer is not None else 0.0
        t0 = time.perf_counter()
        ids, logprobs = super()._generate_single_turn(prompt_ids, images, multimodal_fields, num_generations,
                                                      has_tool_images)
        self._wake_seconds = timer.seconds - woken if timer is not None else 0.0
        self._gen_seconds = time.perf_counter() - t0 - self._wake_seconds
        rollout.record_kv_use(self, prompt_ids, ids)  # vLLM: the call's KV need against the cache
        trimmed = rollout.trim_rollouts(self, ids, logprobs, self._stop_texts)
        if self.model.training and self._current is not None:
            # TRL's first gather (in _generate) is where a rank that is done waits for the
            # slowest one: wait here instead, timed, so the wait is not post-processing.
            self._wait_seconds = distributed.wait_for_all()
        return trimmed

    def _generate_and_score_completions(self, inputs):
        if not self.model.training:
            return super()._generate_and_score_completions(inputs)
        g = int(self.group_sizer.next_group_size())
        if g not in self.group_sizes:
            raise RuntimeError(f"group sizer returned G={g}, not one of its candidates {self.group_sizes}")
        p = self.prompts_at[g]
        distributed.agree(g, f"G of step {self.step + 1}")
        self.num_generations = g
        cur = self._current = StepInProgress(step=self.step + 1, group_size=g)

        scored, rewards, correct = self._score_round(p, g)
        if self.sagc_args.dynamic_sampling:
            scored = self._dynamic_sampling(scored, rewards, correct, p, g)
        n_rows = int(scored["advantages"].shape[0])  # this rank's
        if n_rows * self.n_processes != p * g or n_rows % self.args.steps_per_generation:
            raise RuntimeError(
                f"step {cur.step}: {n_rows} rollouts on each of {self.n_processes} processes for P={p}, "
                f"G={g}, steps_per_generation={self.args.steps_per_generation}: refusing a split that "
                "would drop rows"
            )
        cur.n_prompts, cur.n_rollouts = p, p * g
        # TRL trains on these padded tensors, num_iterations times (one process's widths:
        # the widest rank's).
        widths = distributed.slowest(scored["prompt_ids"].shape[1], scored["completion_ids"].shape[1])
        cur.train_padded_tokens = p * g * int(sum(widths)) * self.args.num_iterations
        cur.record = self.group_sizer.observe(cur.length_groups)
        cur.long_round = self.prompt_stream.round_long
        self.prompt_stream.observe(cur.prompt_ids, cur.length_groups)
        rollout.record_importance_sampling(self, scored)
        return scored

    def _dynamic_sampling(self, scored: dict, rewards: torch.Tensor, correct: torch.Tensor, p: int, g: int) -> dict:
        """Keep the informative groups of every round until P are kept; ``scored`` is this
        rank's rows, ``rewards`` and ``correct`` every rank's total and correctness rewards
        (the filter reads the latter). The selection runs on every rank's rows (gathered; the
        same on every rank) and each rank keeps its share of the result."""
        cur = self._current
        pad = self._tokenizer.pad_token_id
        whole = distributed.gather_scored(scored, pad)
        keep = informative_groups(correct, g)
        cur.ds_disagree = filter_disagreement(rewards, correct, g)
        parts, spare = [(whole, _rows(keep, g))], [(whole, _rows(~keep, g))]
        kept, cur.ds_dropped = int(keep.sum()), int((~keep).sum())
        unit = distributed.refill_unit(g, self.n_processes)
        while kept < p and cur.ds_rounds < self.sagc_args.ds_max_rounds:
            cur.ds_rounds += 1
            gen_before, sync_before = cur.gen_seconds, cur.sync_seconds
            need = p - kept
            out, r, c = self._score_round(-(-need // unit) * unit, g)
            cur.ds_seconds += cur.gen_seconds - gen_before
            cur.refill_sync_seconds += cur.sync_seconds - sync_before
            cur.ds_disagree += filter_disagreement(r, c, g)
            out = distributed.gather_scored(out, pad)
            informative = informative_groups(c, g)
            # A round rounded up to whole shards may hold more informative groups than needed.
            keep = informative & (torch.cumsum(informative.long(), 0) <= need)
            parts.append((out, _rows(keep, g)))
            spare.append((out, _rows(~informative, g)))
            kept += int(keep.sum())
            cur.ds_dropped += int((~informative).sum())
        if kept < p:
            # Cap reached: complete the batch with dropped groups so the step keeps P x G
            # rows and every split divides; most recent rounds first. Their advantages are
            # zeroed: a group of equal accuracy may still differ in its format or overlong
            # terms, and it was dropped for teaching nothing.
            need = p - kept
            for out, idx in reversed(spare):
                take = idx[: min(need, idx.numel() // g) * g]
                if take.numel():
                    parts.append(({**out, "advantages": torch.zeros_like(out["advantages"])}, take))
                    need -= take.numel() // g
                if need == 0:
                    break
            cur.ds_filled = p - kept
        if len(parts) == 1 or (cur.ds_rounds == 0 and cur.ds_filled == 0 and cur.ds_dropped == 0):
            return scored
        parts = [(o, i) for o, i in parts if i.numel()]
        return distributed.shard_scored(merge_scored(parts, pad_token_id=pad))

    # -- the loss pass ------------------------------------------------------------------

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep,
                                           batch_size=None, **kwargs):
        # TRL's scoring passes (no grad) ask for chunks of per_device_train_batch_size rows;
        # run them in chunks of the loss pass's rows. The loss pass itself asks for no chunks.
        cap = self.sagc_args.micro_batch_rows
        if batch_size is not None and cap is not None:
            batch_size = min(batch_size, cap)
        return super()._get_per_token_logps_and_entropies(model, input_ids, attention_mask, logits_to_keep,
                                                          batch_size=batch_size, **kwargs)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        rows = int(inputs["completion_ids"].shape[0])
        cap = self.sagc_args.micro_batch_rows
        if not self.model.training or cap is None or rows <= cap:
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        passes = [slice(i, min(i + cap, rows)) for i in range(0, rows, cap)]
        weights = _pass_weights(self.loss_type, inputs, passes)
        earlier = None
        for k, part in enumerate(passes):
            chunk = {key: v[part] if _per_row(v, rows) else v for key, v in inputs.items()}
            if k == len(passes) - 1:  # the Trainer back-propagates this one (and syncs)
                loss = super().compute_loss(model, chunk, return_outputs, num_items_in_batch) * weights[k]
                return loss + earlier
            with held_gradient_sync(self.accelerator, model):
                loss = super().compute_loss(model, chunk, return_outputs, num_items_in_batch) * weights[k]
                self.accelerator.backward(loss)
            earlier = loss.detach() if earlier is None else earlier + loss.detach()

    # -- step boundary: metrics, history, logging ---------------------------------------

    def request_stop(self, signum: int) -> None:
        """Ask the run to end after the running step (safe to call from a signal handler)."""
        self.stop_signal = signum

    def _on_update_end(self, control) -> None:
        cur = self._current
        if cur is None:
            return
        cur.update_losses.append(self._update_loss)
        self._update_loss = 0.0
        snap = {}
        for k, v in self._metrics["train"].items():
            vals = [x for x in v if isinstance(x, (int, float)) and not math.isnan(x)]
            if vals:
                snap[k] = float(np.mean(vals))
        cur.trl_metrics.append(snap)
        if self.state.global_step % self.updates_per_rollout == 0:
            self._finish_step()
            last = self.state.global_step >= self.args.max_steps
            # Every rank stops at the same step, when any one of them was asked to.
            if distributed.any_rank(self.stop_signal is not None) and not last:
                log.warning("stop requested (signal %s): checkpointing step %d and ending the run",
                            self.stop_signal, self.step)
                self.preempted = True
                control.should_save = True
                control.should_training_stop = True

    def _finish_step(self) -> None:
        cur = self._current
        # The step's wall time is the slowest rank's (a synchronous step waits for it; the
        # rollout's parts were taken per round, in _generate); CPU time is summed.
        (step_s,) = distributed.slowest(time.perf_counter() - self._step_t0)
        (cpu_s,) = distributed.total(time.process_time() - self._step_cpu0)
        # Each rank's loss is its rows' share of the step's loss: the step's is their mean.
        cur.update_losses = [x / self.n_processes for x in distributed.total(*cur.update_losses)]
        self.wallclock_s += step_s
        self.cpu_s += cpu_s
        result = cur.finish(step_s=step_s, cpu_s=cpu_s, wallclock_s=self.wallclock_s, cpu_total_s=self.cpu_s,
                            dynamic_sampling=self.sagc_args.dynamic_sampling)
        self.steps.append(result)
        row = result.row()
        say = log.info if self.accelerator.is_main_process else log.debug
        say("step %d/%d G=%d prompts=%d straggler=%d ratio=%.2f rollout_s=%.2f step_s=%.2f "
            "reward=%.3f loss=%.4g", result.step, self.args.max_steps // self.updates_per_rollout,
            result.group_size, result.prompts, int(result.straggler), result.ratio,
            result.rollout_s, step_s, row[M.REWARD_MEAN], row[M.LOSS])
        if self.step_logger is not None:
            self.step_logger.log(row, step=result.step)
        self._current = None
        self._step_t0 = self._step_cpu0 = None

    # -- checkpoints (sagc.train.checkpoint) ---------------------------------------------

    def sagc_state(self) -> dict:
        return {
            "step": self.step,
            "group_sizer": self.group_sizer.state_dict(),
            "prompt_stream": self.prompt_stream.state_dict(),
            "wallclock_s": self.wallclock_s,
            "cpu_s": self.cpu_s,
            "steps": [r.to_dict() for r in self.steps],
        }

    def load_sagc_state(self, state: dict) -> None:
        self.group_sizer.load_state_dict(state["group_sizer"])
        self.prompt_stream.load_state_dict(state["prompt_stream"])
        self.wallclock_s = float(state["wallclock_s"])
        self.cpu_s = float(state["cpu_s"])
        self.steps = [StepResult.from_dict(r) for r in state["steps"]]
        if self.step_logger is not None:
            # An offline run killed mid-way may not have flushed its rows (wandb-core buffers
            # them): the resumed segment re-logs every step up to the checkpoint, so it holds
            # the whole history by itself (segments merge by step, later wins).
            for r in self.steps:
                self.step_logger.log(r.row(), step=r.step)

    def _save_checkpoint(self, model, trial):
        if self._current is not None:
            raise RuntimeError("checkpoint requested inside a step: save_steps must fall on step boundaries")
        # TRL's save deletes the oldest checkpoints at its end; here that waits until this
        # one is complete, so a kill at any moment leaves a complete checkpoint (also with
        # save_total_limit 1).
        limit, self.args.save_total_limit = self.args.save_total_limit, None
        try:
            super()._save_checkpoint(model, trial)
        finally:
            self.args.save_total_limit = limit
        self.accelerator.wait_for_everyone()  # every rank's files first: the state marks it complete
        if self.args.should_save:
            run_dir = self._get_output_dir(trial=trial)
            write_state(Path(run_dir) / f"checkpoint-{self.state.global_step}", self.sagc_state())
            rotate_checkpoints(output_dir=run_dir, save_total_limit=limit,
                               best_model_checkpoint=self.state.best_model_checkpoint, use_mtime=True)

    def _load_optimizer_and_scheduler(self, checkpoint):
        super()._load_optimizer_and_scheduler(checkpoint)
        if checkpoint is not None:
            self.load_sagc_state(read_state(checkpoint))


#: TRL's loss types by how a micro-batch's loss is normalised: a mean over its rows, a mean
#: over its completion tokens, or a sum over a normaliser of the whole generation batch.
_ROW_MEAN_LOSSES = ("grpo", "sapo", "dr_grpo", "luspo")
_TOKEN_MEAN_LOSSES = ("bnpo",)
_GLOBAL_LOSSES = ("dapo", "cispo", "vespo")


@contextlib.contextmanager
def held_gradient_sync(accelerator, model):
    """Hold back the cross-rank gradient reduction of a loss pass that is not its micro-step's
    last. On a micro-step that does not end an accumulation (``sync_gradients`` false) the
    Trainer already holds it with its own ``no_sync``, and nesting another would undo that:
    accelerate's ``no_sync`` under FSDP2 sets gradient sync back to on at exit instead of
    restoring it, so the micro-step's last pass would reduce. Only on the micro-step that
    ends the accumulation (the Trainer's context is then empty) is ``no_sync`` entered here."""
    if not accelerator.sync_gradients:
        yield
        return
    with accelerator.no_sync(model):
        yield


def _pass_weights(loss_type: str, inputs: dict, passes: list[slice]) -> list[float]:
    """Each pass's share of its micro-batch's loss, so that the passes' losses sum to it."""
    if loss_type in _GLOBAL_LOSSES:
        return [1.0] * len(passes)
    if loss_type in _ROW_MEAN_LOSSES:
        rows = sum(p.stop - p.start for p in passes)
        return [(p.stop - p.start) / rows for p in passes]
    if loss_type in _TOKEN_MEAN_LOSSES:
        mask = inputs["completion_mask"]
        if "tool_mask" in inputs:
            mask = mask * inputs["tool_mask"]
        tokens = [float(mask[p].sum()) for p in passes]
        return [t / max(sum(tokens), 1.0) for t in tokens]
    raise ValueError(f"train.micro_batch_rows does not support loss_type {loss_type!r}")


def _per_row(value, rows: int) -> bool:
    return isinstance(value, torch.Tensor) and value.dim() > 0 and value.shape[0] == rows


def _rank_seed(seed: int, rank: int) -> int:
    """A sampling seed per (cell seed, rank), independent across both."""
    return int(np.random.SeedSequence([seed, rank]).generate_state(1)[0])


def _value(option) -> str:
    """The string of a TrainingArguments enum option (``IntervalStrategy.STEPS`` -> "steps")."""
    return str(getattr(option, "value", option))


def _rows(group_mask: torch.Tensor, g: int) -> torch.Tensor:
    """Row indices of the groups selected by ``group_mask`` (groups are G contiguous rows)."""
    groups = torch.nonzero(group_mask, as_tuple=False).flatten()
    return (groups.unsqueeze(1) * g + torch.arange(g)).flatten()
