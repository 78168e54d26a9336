"""``SAGCGRPOTrainer``: TRL's ``GRPOTrainer`` with a group size G chosen before every step.

How and why it departs from TRL: docs/trainer.md, "Inside the trainer"; the TRL internals it
relies on: ``sagc.train.trl_contract``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader
from transformers import TrainerCallback, set_seed
from transformers.trainer_callback import PrinterCallback, ProgressCallback
from transformers.trainer_utils import rotate_checkpoints
from trl import GRPOConfig, GRPOTrainer

from sagc import metrics as M
from sagc.prompts import PromptStream
from sagc.train import distributed, metering, rollout
from sagc.train.checkpoint import read_state, write_state
from sagc.train.dynamic_sampling import FILTER_REWARD, keep_informative
from sagc.train.loss_passes import loss_in_passes
from sagc.train.presets import StepShapes
from sagc.train.records import StepInProgress, StepResult
from sagc.train.stops import Stops, split_stops
from sagc.vllm_support import require_vllm

log = logging.getLogger("sagc.train")


@dataclass(frozen=True, kw_only=True)
class SAGCTrainingArguments:
    """What the step needs beyond ``GRPOConfig``: the step ``layout`` at every G
    (``sagc.train.presets.step_shapes``), DAPO's filter and its refill rounds, and the stops
    (resolved, or strings the trainer splits by its tokenizer)."""

    layout: StepShapes
    dynamic_sampling: bool = False
    ds_max_rounds: int = 3
    stop: tuple[str, ...] | Stops = ()

    def __post_init__(self) -> None:
        if not isinstance(self.layout, StepShapes):
            raise TypeError(
                "sagc_args.layout must be the step layout (sagc.train.presets.step_shapes; a cell's "
                f"cfg.resolved.layout), got {type(self.layout).__name__}"
            )


class _StepBoundary(TrainerCallback):
    def __init__(self, trainer: SAGCGRPOTrainer) -> None:
        self.trainer = trainer

    def on_step_end(self, args, state, control, **kwargs):
        self.trainer._on_update_end(control)


class SAGCGRPOTrainer(GRPOTrainer):
    """GRPO/DAPO whose G comes from ``group_sizer`` (a ``sagc.controller.GroupSizer``) before
    every step. ``step_logger``: anything with ``log(row, step)``; ``prompt_stream``: default a
    ``PromptStream`` seeded with ``args.seed``. ``args.max_steps`` counts optimizer updates.
    """

    def __init__(
        self,
        model,
        reward_funcs,
        args: GRPOConfig,
        train_dataset,
        *,
        group_sizer,
        sagc_args: SAGCTrainingArguments,
        step_logger: Any = None,
        prompt_stream: PromptStream | None = None,
        processing_class=None,
        callbacks: list | None = None,
        **kwargs,
    ) -> None:
        # Everything below is checked before TRL loads any model.
        if args.use_vllm:
            require_vllm()
        if args.max_steps is None or args.max_steps <= 0:
            raise ValueError("SAGCGRPOTrainer needs args.max_steps > 0 (optimizer updates)")
        layout = sagc_args.layout
        ga, spg = args.gradient_accumulation_steps, args.steps_per_generation
        if (layout.steps_per_generation, layout.gradient_accumulation_steps) != (spg, ga):
            raise ValueError(
                f"sagc_args.layout splits a step into {layout.steps_per_generation} micro-batches "
                f"accumulated {layout.gradient_accumulation_steps} at a time; args say {spg} and {ga}"
            )
        self.updates_per_rollout = u = layout.updates_per_rollout
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
        if missing := sorted(set(self.group_sizes) - set(layout.shapes)):
            raise ValueError(f"sagc_args.layout has no step at G = {missing}, which the group sizer can choose")
        self.prompts_at = {g: layout.shapes[g].prompts for g in self.group_sizes}
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
            raise ValueError(
                f"dynamic sampling drops the groups whose correctness is all 0 or all 1 (DAPO), read "
                f"from the reward function {FILTER_REWARD!r}, which is not among the trainer's "
                f"reward functions {self.reward_func_names}: add the correctness reward"
            )
        self._filter_column = self.reward_func_names.index(FILTER_REWARD) if sagc_args.dynamic_sampling else None
        self._filter_values: torch.Tensor | None = None
        self._sleep_timer = rollout.sleep_mode_timer(self)  # vLLM sleep mode's wake and sleep
        if self.n_processes > 1 or (args.use_vllm and args.vllm_mode == "colocate"):
            # vLLM's worker setup reseeds torch's global RNG with TRL's engine seed (the same
            # for every cell seed): reseed, per rank with several processes.
            set_seed(args.seed if self.n_processes == 1 else _rank_seed(args.seed, self.rank))
        stops = sagc_args.stop
        self._stop_texts = self._stop_at_tokens(
            stops if isinstance(stops, Stops) else split_stops(self._tokenizer, stops)
        )
        if args.use_vllm:
            log.info("rollouts: vLLM, %s engine", args.vllm_mode)
        if prompt_stream is None:
            prompt_stream = PromptStream(len(train_dataset), seed=args.seed, shuffle=args.shuffle_dataset)
        if prompt_stream.n != len(train_dataset):
            raise ValueError(f"prompt_stream covers {prompt_stream.n} prompts, train_dataset has {len(train_dataset)}")
        self.prompt_stream = prompt_stream
        self.step_logger = step_logger
        self.steps: list[StepResult] = []
        self.clock = metering.StepClock()
        self._current: StepInProgress | None = None
        self._call = metering.CallTimes()
        self._update_loss = 0.0
        self.stop_signal: int | None = None
        self.preempted = False
        self.add_callback(_StepBoundary(self))
        # One line per step (_finish_step) instead of TRL's per-update printing.
        for cb in (PrinterCallback, ProgressCallback):
            self.remove_callback(cb)

    def _stop_at_tokens(self, stops: Stops) -> list[str]:
        """End generation at the stops that are special tokens as at EOS; return the stops
        left to match as text."""
        new = [i for i in stops.token_ids.values() if i not in self.eos_token_ids]
        if new:
            self.eos_token_ids = [*self.eos_token_ids, *new]
            if self.use_vllm:
                self.vllm_generation.generation_kwargs["stop_token_ids"] = list(self.eos_token_ids)
            else:
                self.generation_config.eos_token_id = list(self.eos_token_ids)
                self.generation_kwargs["eos_token_id"] = list(self.eos_token_ids)
        return list(stops.texts)

    @property
    def history(self) -> list[dict]:
        """done.json's per-step history."""
        return [s.history_entry() for s in self.steps]

    @property
    def step(self) -> int:
        """Finished steps (rollouts), restored on resume."""
        return self.state.global_step // self.updates_per_rollout

    # -- one step: G chosen, prompts drawn, TRL called, lengths observed -----------------

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
            scored = self._keep_informative(scored, rewards, correct, p, g)
        n_rows = int(scored["advantages"].shape[0])  # this rank's
        if n_rows * self.n_processes != p * g or n_rows % self.args.steps_per_generation:
            # TRL's split_tensor_dict would drop a remainder silently
            raise RuntimeError(
                f"step {cur.step}: {n_rows} rollouts on each of {self.n_processes} processes for P={p}, "
                f"G={g}, steps_per_generation={self.args.steps_per_generation}: refusing a split that "
                "would drop rows"
            )
        cur.n_prompts, cur.n_rollouts = p, p * g
        cur.train_padded_tokens = metering.train_padded_tokens(scored, p * g, self.args.num_iterations)
        cur.record = self.group_sizer.observe(cur.length_groups)
        cur.long_round = self.prompt_stream.round_long
        self.prompt_stream.observe(cur.prompt_ids, cur.length_groups)
        rollout.record_importance_sampling(self, scored)
        return scored

    def _draw_rows(self, n_prompts: int, group_size: int) -> list[dict]:
        """This rank's share of the round's rows (copies: TRL may write into a row)."""
        idx = self.prompt_stream.take(n_prompts)
        self._current.prompt_ids.extend(idx)
        rows = [dict(self.train_dataset[i]) for i in idx]
        return distributed.shard([dict(r) for r in rows for _ in range(group_size)], self.rank, self.n_processes)

    def _score_round(self, n_prompts: int, group_size: int) -> tuple[dict, torch.Tensor, torch.Tensor | None]:
        """One generation round: this rank's scored rows, every rank's total rewards and (with
        dynamic sampling) correctness rewards."""
        rows = self._draw_rows(n_prompts, group_size)
        n_before = len(self._current.rewards)
        self._filter_values = None
        scored = super()._generate_and_score_completions(rows)
        if len(self._current.rewards) != n_before + 1:
            raise RuntimeError("expected exactly one reward computation per generation round")
        return scored, self._current.rewards[-1], self._filter_values

    def _keep_informative(self, scored: dict, rewards: torch.Tensor, correct: torch.Tensor, p: int, g: int) -> dict:
        """DAPO's dynamic sampling over every rank's rows, gathered, so that every rank decides
        the same; each rank keeps its share."""
        cur, pad = self._current, self._tokenizer.pad_token_id

        def refill(n_prompts: int):
            gen_before, sync_before = cur.gen_seconds, cur.sync_seconds
            out, r, c = self._score_round(n_prompts, g)
            cur.ds_seconds += cur.gen_seconds - gen_before
            cur.refill_sync_seconds += cur.sync_seconds - sync_before
            return distributed.gather_scored(out, pad), r, c

        kept = keep_informative(
            (distributed.gather_scored(scored, pad), rewards, correct),
            p,
            g,
            max_rounds=self.sagc_args.ds_max_rounds,
            refill_unit=distributed.refill_unit(g, self.n_processes),
            refill=refill,
            pad_token_id=pad,
        )
        cur.ds_rounds, cur.ds_dropped = kept.rounds, kept.dropped
        cur.ds_filled, cur.ds_disagree = kept.filled, kept.disagree
        return scored if kept.batch is None else distributed.shard_scored(kept.batch)

    # -- inside TRL's round: what the step measures (sagc.train.metering) -------------------

    def _generate(self, prompts: list):
        self._call = metering.CallTimes()  # filled by _generate_single_turn
        t0 = time.perf_counter()
        result = super()._generate(prompts)
        dt = time.perf_counter() - t0
        cur = self._current
        if self.model.training and cur is not None:
            stop = {*self.eos_token_ids, self._tokenizer.pad_token_id}
            rows = distributed.gather_rows(metering.completion_rows(result[0], result[1], stop))
            metering.record_call(cur, rows, self.num_generations)
            self._call.add_to(cur, dt, sleep_mode=self._sleep_timer is not None)
        return result

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        # Here, not in _generate: TRL decodes, scores and tests truncation inside _generate.
        call = self._call
        call.sync = rollout.timed_weight_sync(self)
        timer = self._sleep_timer
        woken = timer.seconds if timer is not None else 0.0
        t0 = time.perf_counter()
        ids, logprobs = super()._generate_single_turn(
            prompt_ids, images, multimodal_fields, num_generations, has_tool_images
        )
        call.wake = timer.seconds - woken if timer is not None else 0.0
        call.gen = time.perf_counter() - t0 - call.wake
        rollout.record_kv_use(self, prompt_ids, ids)
        trimmed = rollout.trim_rollouts(self, ids, logprobs, self._stop_texts)
        if self.model.training and self._current is not None:
            # Wait for the slowest rank here, timed, not in TRL's first gather (post-processing).
            call.wait = distributed.wait_for_all()
        return trimmed

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

    # -- the loss passes (sagc.train.loss_passes) -------------------------------------------

    def _get_per_token_logps_and_entropies(
        self, model, input_ids, attention_mask, logits_to_keep, batch_size=None, **kwargs
    ):
        # The no-grad scoring passes run in chunks of the loss pass's rows.
        cap = self.sagc_args.layout.micro_batch_rows
        if batch_size is not None and cap is not None:
            batch_size = min(batch_size, cap)
        return super()._get_per_token_logps_and_entropies(
            model, input_ids, attention_mask, logits_to_keep, batch_size=batch_size, **kwargs
        )

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        cap = self.sagc_args.layout.micro_batch_rows
        if not self.model.training or cap is None or int(inputs["completion_ids"].shape[0]) <= cap:
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        parent = super().compute_loss
        return loss_in_passes(
            inputs,
            cap,
            self.loss_type,
            lambda chunk: parent(model, chunk, return_outputs, num_items_in_batch),
            self.accelerator,
            model,
        )

    def training_step(self, model, inputs, num_items_in_batch):
        self.clock.start()
        loss = super().training_step(model, inputs, num_items_in_batch)
        self._update_loss += float(loss.detach().float().item())
        return loss

    # -- step boundary: the step's record, logging, a requested stop -----------------------

    def request_stop(self, signum: int) -> None:
        """Ask the run to end after the running step (safe to call from a signal handler)."""
        self.stop_signal = signum

    def _on_update_end(self, control) -> None:
        cur = self._current
        if cur is None:
            return
        cur.update_losses.append(self._update_loss)
        self._update_loss = 0.0
        cur.trl_metrics.append(metering.update_means(self._metrics["train"]))
        if self.state.global_step % self.updates_per_rollout == 0:
            self._finish_step()
            last = self.state.global_step >= self.args.max_steps
            if distributed.any_rank(self.stop_signal is not None) and not last:
                log.warning(
                    "stop requested (signal %s): checkpointing step %d and ending the run", self.stop_signal, self.step
                )
                self.preempted = True
                control.should_save = True
                control.should_training_stop = True

    def _finish_step(self) -> None:
        result = metering.finish_step(self._current, self.clock, dynamic_sampling=self.sagc_args.dynamic_sampling)
        self.steps.append(result)
        row = result.row()
        say = log.info if self.accelerator.is_main_process else log.debug
        say(
            "step %d/%d G=%d prompts=%d straggler=%d ratio=%.2f rollout_s=%.2f step_s=%.2f reward=%.3f loss=%.4g",
            result.step,
            self.args.max_steps // self.updates_per_rollout,
            result.group_size,
            result.prompts,
            int(result.straggler),
            result.ratio,
            result.rollout_s,
            result.step_s,
            row[M.REWARD_MEAN],
            row[M.LOSS],
        )
        if self.step_logger is not None:
            self.step_logger.log(row, step=result.step)
        self._current = None

    # -- data: a ticket per micro-step; prompts come from the stream --------------------

    def get_train_dataloader(self):
        # One item per micro-step: they only drive TRL's loop, whose resume skips the consumed ones.
        tickets = [{"ticket": i} for i in range(self.args.max_steps * self.args.gradient_accumulation_steps)]
        return DataLoader(tickets, batch_size=1, shuffle=False, collate_fn=list)

    # -- checkpoints (sagc.train.checkpoint) ---------------------------------------------

    def sagc_state(self) -> dict:
        return {
            "step": self.step,
            "group_sizer": self.group_sizer.state_dict(),
            "prompt_stream": self.prompt_stream.state_dict(),
            "wallclock_s": self.clock.wallclock_s,
            "cpu_s": self.clock.cpu_s,
            "steps": [r.to_dict() for r in self.steps],
        }

    def load_sagc_state(self, state: dict) -> None:
        self.group_sizer.load_state_dict(state["group_sizer"])
        self.prompt_stream.load_state_dict(state["prompt_stream"])
        self.clock.wallclock_s = float(state["wallclock_s"])
        self.clock.cpu_s = float(state["cpu_s"])
        self.steps = [StepResult.from_dict(r) for r in state["steps"]]
        if self.step_logger is not None:
            # A killed offline run may not have flushed its rows: re-log them all.
            for r in self.steps:
                self.step_logger.log(r.row(), step=r.step)

    def _save_checkpoint(self, model, trial):
        if self._current is not None:
            raise RuntimeError("checkpoint requested inside a step: save_steps must fall on step boundaries")
        # Rotate old checkpoints only once this one is complete (sagc_state.json written).
        limit, self.args.save_total_limit = self.args.save_total_limit, None
        try:
            super()._save_checkpoint(model, trial)
        finally:
            self.args.save_total_limit = limit
        self.accelerator.wait_for_everyone()
        if self.args.should_save:
            run_dir = self._get_output_dir(trial=trial)
            write_state(Path(run_dir) / f"checkpoint-{self.state.global_step}", self.sagc_state())
            rotate_checkpoints(
                output_dir=run_dir,
                save_total_limit=limit,
                best_model_checkpoint=self.state.best_model_checkpoint,
                use_mtime=True,
            )

    def _load_optimizer_and_scheduler(self, checkpoint):
        super()._load_optimizer_and_scheduler(checkpoint)
        if checkpoint is not None:
            self.load_sagc_state(read_state(checkpoint))


def _rank_seed(seed: int, rank: int) -> int:
    """A sampling seed per (cell seed, rank)."""
    return int(np.random.SeedSequence([seed, rank]).generate_state(1)[0])


def _value(option) -> str:
    """The string of a TrainingArguments enum option (``IntervalStrategy.STEPS`` -> "steps")."""
    return str(getattr(option, "value", option))
