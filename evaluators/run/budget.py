"""What a run's judge calls cost (summed from its stored results), and the budget that stops a run before
it would cost more than its owner meant.

A call is billed at what the provider reported (prompt, cached prompt and completion tokens) at the run's
price for the model that answered (:mod:`evaluators.judge.prices`); a result the judge cache answered cost
nothing. The budget counts what was spent (this run's earlier sittings included: a resumed run goes on from
its stored results) plus every call in flight at its estimate (its prompt counted with the model's
tokenizer, ``VERDICT_TOKENS`` for the reply); a call that would take that past the budget is not sent, and
the run ends ``stopped`` with the reason ``budget``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from evaluators.judge.prices import VERDICT_TOKENS, Price, price_for
from evaluators.judge.tokens import tokenizer_for

STOPPED_BUDGET = "budget"  # the run's ``error`` when it ended "stopped" at its budget


@dataclass
class Tally:
    """Billed calls of one metric (or a whole run): tokens as the provider reported them, and USD."""

    calls: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    usd: float | None = 0.0
    batch_calls: int = 0

    def add(self, prompt: int, cached: int, completion: int, usd: float | None, batch: bool, calls: int = 1) -> None:
        self.calls += calls
        self.batch_calls += calls if batch else 0
        self.prompt_tokens += prompt
        self.cached_tokens += min(cached, prompt)
        self.completion_tokens += completion
        self.usd = None if usd is None or self.usd is None else self.usd + usd

    @property
    def cached_share(self) -> float | None:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else None


def tally_billing(groups: Iterable[tuple], price_of: Callable[[str | None], Price | None],
                  default_model: str | None) -> tuple[Tally, dict[str, Tally]]:
    """The run's billed calls summed, and per metric, from :meth:`Store.billing`'s groups (metric, model, batch,
    calls, prompt, cached, completion tokens); each group priced at its model's price (linear in the tokens)."""
    total, per = Tally(), {}
    for metric, model, batch, calls, pt, cached, ct in groups:
        price = price_of(model or default_model)
        usd = price.cost(pt, ct, cached, batch) if price is not None else None
        for t in (total, per.setdefault(metric, Tally())):
            t.add(pt, cached, ct, usd, batch, calls)
    return total, per


def spec_prices(spec: Any) -> Callable[[str | None], Price | None]:
    """model -> its price for a run: the run's own prices, else the operator's table (looked up once a model)."""
    seen: dict[str | None, Price | None] = {}

    def price_of(model: str | None) -> Price | None:
        if model not in seen:
            seen[model] = price_for(model, spec.prices)
        return seen[model]

    return price_of


@dataclass
class Budget:
    """The run's spending limit (USD): ``admit`` a call at its estimate before it leaves, ``settle`` it with
    what it cost once back. Single-threaded (the run's event loop)."""

    limit: float
    price: Price
    model: str | None
    batch: bool = False
    spent: float = 0.0  # what the run's answered calls cost, earlier sittings included
    in_flight: float = 0.0  # the estimates of calls sent and not yet back
    stopped: bool = False
    _tok: Any = field(default=None, repr=False)

    def estimate(self, messages: list[dict]) -> float:
        """A call's estimated cost: its prompt with the model's tokenizer, ``VERDICT_TOKENS`` for the reply."""
        if self._tok is None:
            self._tok = tokenizer_for(self.model)
        return self.price.cost(self._tok.count_messages(messages), VERDICT_TOKENS, batch=self.batch)

    def admit(self, estimate: float) -> bool:
        """Whether a call estimated at ``estimate`` may leave: what was spent, what is in flight and it stay
        within the limit. Once one may not, none do (the run stops; a resume with a higher limit goes on)."""
        if self.stopped or self.spent + self.in_flight + estimate > self.limit:
            self.stopped = True
            return False
        self.in_flight += estimate
        return True

    def settle(self, estimate: float, prompt: int | None, completion: int | None, cached: int | None) -> None:
        """A call admitted at ``estimate`` came back: its estimate leaves the in-flight sum, its cost (as the
        provider reported its tokens; the estimate when it reported none) joins what was spent."""
        self.in_flight = max(0.0, self.in_flight - estimate)
        if prompt is None and completion is None:
            return  # no answer (a failed call): not billed
        self.spent += self.price.cost(prompt or 0, completion or 0, cached or 0, self.batch)

    def reason(self) -> str:
        return (f"{STOPPED_BUDGET}: the next call would have taken the run past its budget of ${self.limit:.4f} "
                f"(spent ${self.spent:.4f}); resume with a higher --budget to go on")


def make_budget(spec: Any, spent_before: float) -> Budget | None:
    """The run's :class:`Budget`, or None without one (or with no judge)."""
    if spec.budget is None or spec.judge is None:
        return None
    price = price_for(spec.judge.model, spec.prices)
    if price is None:  # (refused when the run was prepared; a price table edited since leaves none)
        return None
    target_usd = float((spec.target or {}).get("usd") or 0.0)  # the budget covers the target's answers too
    return Budget(float(spec.budget), price, spec.judge.model, batch=spec.batch, spent=spent_before + target_usd)


class BudgetSection:
    """The runner's side of the budget (a mixin of :class:`evaluators.run.runner.Runner`): the budget made
    when the run starts, each queued call admitted before it leaves and settled when it is back."""

    _budget: Budget | None = None

    def _start_budget(self) -> None:
        spec = self.spec
        self._billed: dict[int, list] = {}  # task -> its replies, while it is judged (for settle)
        if spec.budget is None or spec.judge is None:
            return
        spent, _ = tally_billing(self.store.billing(self.run_id), spec_prices(spec), spec.judge.model)
        self._budget = make_budget(spec, spent.usd or 0.0)

    def _budget_admit(self, messages: list[dict]) -> float | None:
        """The call's estimate when it may leave (0.0 with no budget); None when the budget stops it."""
        if self._budget is None:
            return 0.0
        times = self.spec.repeat * max(1, len(self.spec.jurors()))  # every judgment the task may ask
        est = self._budget.estimate(messages) * times
        return est if self._budget.admit(est) else None

    def _budget_settle(self, task: Any, estimate: float) -> None:
        replies = self._billed.pop(id(task), [])
        if self._budget is None:
            return
        if not replies:
            self._budget.settle(estimate, None, None, None)
        for k, r in enumerate(replies):
            self._budget.settle(estimate if k == 0 else 0.0, r.prompt_tokens, r.completion_tokens, r.cached_tokens)

    def _bill(self, task: Any, reply: Any) -> None:
        if self._budget is not None:
            self._billed.setdefault(id(task), []).append(reply)

    def _budget_stopped(self) -> str | None:
        """The reason the run stopped at its budget, or None."""
        return self._budget.reason() if self._budget is not None and self._budget.stopped else None
